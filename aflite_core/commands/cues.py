"""``python -m aflite_core cues DATA``: which features give the label away.

Prints where the test rows come from (split column, ``--test`` file or a seeded
hold-out), how each feature family was computed (and which are unavailable, with the
command that fixes it), then the top cues by cueness with PMI and z side by side.
``--out`` writes the whole table (CSV, spreadsheet-safe, or Parquet by suffix).
``--probe`` runs ICQ's accuracy test for a model: a built-in baseline or a column of
predictions in the test rows.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from aflite_core.commands._input import add_input_arguments, load_input
from aflite_core.cues import (
    DEFAULT_SORT,
    FAMILIES,
    SORT_KEYS,
    cue_table,
    dataset_inputs,
    extract_features,
    predictions_by_row_id,
    probe_model,
)

#: Columns shown on the terminal.
SHOWN = ("feature_type", "feature", "n_train", "n_test", "majority_label", "majority_share",
         "cueness_shrunk", "cueness", "cueness_proportion", "pmi_label", "pmi", "z_label", "z")


def parse_features(text: str) -> tuple[str, ...]:
    """Comma-separated feature families, or ``all``."""
    names = tuple(n.strip().lower() for n in text.split(",") if n.strip())
    if names == ("all",):
        return FAMILIES
    bad = [n for n in names if n not in FAMILIES]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"unknown feature famil{'y' if len(bad) == 1 else 'ies'} {', '.join(bad) or '(none)'}"
            f"; choose from {','.join(FAMILIES)} or all"
        )
    return names


def parse_probe(text: str) -> tuple[str, str]:
    """``hypothesis-only`` | ``full-input`` | ``column:NAME`` | ``file:PATH``."""
    key = text.strip().lower().replace("-", "_")
    if key in ("hypothesis_only", "full_input"):
        return "baseline", key
    for kind in ("column", "file"):
        if text.startswith(f"{kind}:") and text[len(kind) + 1:]:
            return kind, text[len(kind) + 1:]
    raise argparse.ArgumentTypeError(
        f"expected hypothesis-only, full-input, column:NAME or file:PATH, got {text!r}"
    )


def register(subparsers: Any) -> None:
    """Add the ``cues`` command."""
    p = subparsers.add_parser(
        "cues",
        help="lexical cue statistics (ICQ cueness, PMI, LMI, z) and model probing",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("data", metavar="DATA",
                   help="dataset file (CSV, TSV, JSONL, JSON, Parquet, .gz)")
    p.add_argument("--test", metavar="TEST", help="second file used as the test rows")
    p.add_argument("--features", type=parse_features, default=FAMILIES, metavar="LIST",
                   help=f"comma-separated families (default all: {','.join(FAMILIES)})")
    p.add_argument("--min-count", type=int, default=5, metavar="N",
                   help="minimum support in train and in test (default 5)")
    p.add_argument("--top", type=int, default=30, metavar="N",
                   help="rows to print (default 30; 0 prints none)")
    p.add_argument("--out", metavar="FILE", help="write the full table (.csv or .parquet)")
    p.add_argument("--text", choices=("hypothesis", "premise", "both"), default="hypothesis",
                   help="text the features read (overlap always reads both)")
    p.add_argument("--lemma", action="store_true", help="word features on WordNet lemmas")
    p.add_argument("--sentiment-lexicon", choices=("opinion", "vader"), default="opinion")
    p.add_argument("--sort-by", choices=SORT_KEYS, default=DEFAULT_SORT,
                   help=f"ranking (default {DEFAULT_SORT}: ICQ's cueness on label shares "
                        "shrunk towards the label prior; docs/cues.md says why)")
    p.add_argument("--pmi-smoothing", type=float, default=100.0, metavar="K",
                   help="add-k smoothing of PMI (default 100, as Gururangan et al. 2018)")
    p.add_argument("--alpha", type=float, default=0.01,
                   help="significance level of the z test, Bonferroni-corrected (0.01)")
    p.add_argument("--test-size", type=float, default=0.2, metavar="F",
                   help="hold-out share when there is no split column nor --test (0.2)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="hold-out seed (0)")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="worker processes for POS tagging (default: all cores)")
    p.add_argument("--cache-dir", metavar="DIR",
                   help="annotation cache (default ~/.cache/aflite-audit)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    p.add_argument("--probe", type=parse_probe, metavar="MODEL",
                   help="accuracy test for hypothesis-only | full-input (built-in "
                        "baselines) | column:NAME (predictions in the test rows) | "
                        "file:PATH (a table with row_id and prediction columns)")
    p.add_argument("--probe-out", metavar="FILE",
                   help="write the probing table (.csv or .parquet)")
    add_input_arguments(p, ("premise", "hypothesis", "label", "split"),
                        title="columns (guessed when omitted; SNLI/MNLI names are recognised)")
    p.set_defaults(func=run)


def _write(frame, out: str) -> None:
    path = Path(out)
    if path.suffix.lower() == ".parquet":
        frame.to_parquet(path, index=False)
        return
    if path.suffix.lower() not in (".csv", ""):
        raise ValueError(f"--out: expected a .csv or .parquet file name, got {out!r}")
    from aflite_core.runs import neutralize_frame  # lazy: +278 ms to import

    neutralize_frame(frame).to_csv(path, index=False)


def run(args: argparse.Namespace) -> int:
    """Compute and print the cue table (and the probing table with ``--probe``)."""
    if args.min_count < 1:
        raise ValueError(f"--min-count: expected an integer >= 1, got {args.min_count}")
    if args.top < 0:
        raise ValueError(f"--top: expected an integer >= 0, got {args.top}")
    dataset = load_input(args.data, args, what="DATA")
    test = load_input(args.test, args, what="--test") if args.test else None
    inputs = dataset_inputs(dataset, test, test_size=args.test_size, random_state=args.seed)
    annotations = extract_features(
        inputs.hypotheses, inputs.premises, features=args.features, text=args.text,
        min_count=args.min_count, lemma=args.lemma, sentiment_lexicon=args.sentiment_lexicon,
        cache=not args.no_cache, cache_dir=args.cache_dir, n_jobs=args.jobs,
    )
    table = cue_table(
        dataset, test=test, min_count=args.min_count, pmi_smoothing=args.pmi_smoothing,
        alpha=args.alpha, sort_by=args.sort_by, test_size=args.test_size,
        random_state=args.seed, annotations=annotations,
    )
    n_data = int(inputs.in_dataset.sum())
    extra = f" + {test.name} ({len(inputs.labels) - n_data} rows)" if test is not None else ""
    print(f"data: {dataset.name} ({n_data} rows){extra}; labels "
          f"{', '.join(table.attrs['labels'])}")
    print(f"test rows: {table.attrs['split']}")
    for family, method in annotations.methods.items():
        print(f"{family}: {method}")
    for reason in annotations.unavailable.values():
        print(f"warning: {reason}", file=sys.stderr)
    print(f"{len(table)} features occur >= {args.min_count} times in train and in test; "
          f"z threshold {table.attrs['z_threshold']:.2f} (alpha {args.alpha}, Bonferroni over "
          f"{table.attrs['n_tests']} tests)")
    if args.top and len(table):
        with pd.option_context("display.width", 200, "display.max_columns", 20,
                               "display.float_format", "{:.4g}".format):
            print(table.loc[: args.top - 1, list(SHOWN)].to_string(index=False))
    if args.out:
        _write(table, args.out)
        print(f"wrote {len(table)} rows to {args.out}")
    if args.probe:
        _probe(args, dataset, test, annotations, pd)
    return 0


def _probe(args, dataset, test, annotations, pd) -> None:
    kind, value = args.probe
    predictions = value if kind == "column" else None
    if kind == "file":
        from aflite_core.io import read_table  # lazy: +28 ms to import

        if not Path(value).is_file():
            raise FileNotFoundError(f"--probe file:{value}: no such file")
        table = read_table(value).frame
        predictions = predictions_by_row_id(test if test is not None else dataset, table,
                                            name=value)
    result = probe_model(
        dataset, predictions,
        baseline=value if kind == "baseline" else "hypothesis_only", test=test,
        features=args.features, min_count=args.min_count, test_size=args.test_size,
        random_state=args.seed, annotations=annotations,
    )
    print(f"\nmodel probing: {result.model}; test accuracy {result.overall_accuracy:.3f}")
    shown = ["feature_type", "feature", "majority_label", "n_with", "acc_with", "acc_without",
             "delta", "distribution_jsd"]
    if args.top and len(result.accuracy):
        with pd.option_context("display.width", 200, "display.float_format",
                               "{:.3f}".format):
            print(result.accuracy.loc[: args.top - 1, shown].to_string(index=False))
    if args.probe_out:
        _write(result.accuracy, args.probe_out)
        print(f"wrote {len(result.accuracy)} rows to {args.probe_out}")
