"""How the Audit page names the values of the run parameters (display names only).

Labels, help, bounds, choices and defaults come from the core's declaration
(:mod:`aflite_core.parameters`, scaled by :func:`aflite_core.config.suggest_config`), so the
dashboard, its automatic audit of the sample, the CLI and the Python API start from the same
run. Measure names and options come from the measure registry.
"""

from __future__ import annotations

#: One-line help of the form's widgets that are not run parameters (those take theirs from
#: :data:`aflite_core.parameters.PARAMETERS`).
HELP = {
    "measures": "Extra measures computed after AFLite (each adds time; all are optional).",
    "encoder_model": "A local model folder, a model that ships inside an installed package "
                     "(e.g. all-MiniLM-L6-v2 from requirements-encoders-pretrained.txt), or a "
                     "Hugging Face name (which may download it).",
}

#: Human names of the representations.
REPRESENTATION_NAMES = {
    "tfidf_svd": "TF-IDF + SVD (built in, fast)",
    "warmup": "Warm-up model (the paper's recipe)",
    "precomputed": "Uploaded embeddings (.npy / .npz / .parquet)",
    "static": "Static embeddings, model2vec format (optional extra, fast)",
    "sentence_transformers": "Sentence-transformers model (optional extra)",
}

#: Display names of the encoders' pair combinations (u = premise, v = hypothesis).
COMBINE_NAMES = {
    "interaction": "[u, v, |u−v|, u·v] (pairs; default)",
    "concat": "[u, v] concatenated",
    "hypothesis": "hypothesis only (v)",
}

#: Display names of the filters.
FILTER_NAMES = {
    "aflite": "AFLite (Le Bras et al. 2020)",
    "z": "Z-filter on hypothesis words (Gardner et al. 2021)",
}

#: Display names of the split policies.
SPLIT_POLICY_NAMES = {
    "auto": "automatic (train split only when there is one)",
    "train_only": "filter the train split; keep and score dev/test",
    "joint": "filter every split together",
    "per_split": "filter each split on its own",
}

#: Display names of the values of the choice parameters, by parameter name.
NAMES = {
    "representation": REPRESENTATION_NAMES,
    "combine": COMBINE_NAMES,
    "filter": FILTER_NAMES,
    "split_policy": SPLIT_POLICY_NAMES,
    "instance": {"auto": "automatic (a question for multiple-choice data)",
                 "row": "a row (each choice on its own)",
                 "question": "a question (kept or removed whole)"},
    "strategy": {"greedy_slicing": "greedy slicing (the paper)",
                 "slice_sampling": "slice sampling", "greedy": "greedy (one row per round)"},
    "until": {"threshold": "no word over the threshold", "target_size": "the target size"},
    "group_partitions": {"auto": "automatic (whole groups when none is large)",
                         "on": "whole groups", "off": "rows (the paper)"},
}
