"""AFLite parameters as the Audit page words them: one-line help and display names.

The defaults themselves come from the core, :func:`aflite_core.config.suggest_config`
(size-scaled; the table is in ``aflite_core/config.py``), so the dashboard, its automatic
audit of the sample, the CLI and the Python API start from the same run. Measure names and
options come from the measure registry.
"""

from __future__ import annotations

#: One-line explanation of each parameter (shown as widget help).
HELP = {
    "target_size": "How many rows AFLite keeps at most; it never goes below this size.",
    "n_partitions": "m: random train/held-out splits per round; more gives steadier scores.",
    "train_size": "t: rows each split trains on; the rest of the current set is held out.",
    "slice_size": "k: at most this many of the most predictable rows are removed per round.",
    "tau": "Only rows predicted right at least this share of the time can be removed.",
    "strategy": "greedy slicing = the paper's AFLite; slice sampling draws k by predictability.",
    "random_state": "Seed of every random choice; same data + parameters + seed = same result.",
    "representation": "Features Φ the linear models see (AFLite needs a fixed representation).",
    "n_components": "Dimension of Φ (TF-IDF reduced by SVD, or the warm-up model's hidden layer).",
    "warmup_fraction": "Share of rows used to train the warm-up model; they are not filtered.",
    "group_partitions": "Each partition trains on whole groups (a premise's hypotheses, "
                        "linked texts), so no row is scored by a model that saw its group.",
    "split_policy": "Filter the train split only and keep dev/test (scored by models of the "
                    "retained train rows), filter every row together (the paper), or each "
                    "split on its own.",
    "measures": "Extra measures computed after AFLite (each adds time; all are optional).",
    "filter": "AFLite removes the rows linear models on Φ predict best; the Z-filter removes "
              "rows until no hypothesis word's label distribution differs significantly "
              "from the data's (|z| under the Bonferroni threshold) or the target size is "
              "reached. m, t, k, τ and the strategy are AFLite's only.",
    "encoder_model": "A local model folder, a model that ships inside an installed package "
                     "(e.g. all-MiniLM-L6-v2 from requirements-encoders-pretrained.txt), or a "
                     "Hugging Face name (which may download it).",
    "combine": "How the premise (u) and hypothesis (v) embeddings make one row of Φ; each "
               "side is embedded once and cached, so switching costs no re-embedding.",
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
