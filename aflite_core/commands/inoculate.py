"""``python -m aflite_core inoculate ORIGINAL CHALLENGE --out DIR``: inoculation curves.

Trains a model on a seeded training share of ORIGINAL, adds n challenge examples from a seeded
training share of CHALLENGE for n in --sizes (nested subsamples), with the fine-tuning strength
chosen per n on held-out challenge dev rows, evaluates each model on the held-out test shares of
both files (seeded hold-outs, stratified by label; balanced accuracy on a label-skewed
challenge set) and classifies the outcome from the whole curve (Liu, Schwartz & Smith, NAACL
2019): 1 dataset weakness, 2 model weakness, 3 distribution difference (0: no gap).
Writes DIR/inoculation.json (parameters, curves, chosen strengths, outcome),
DIR/inoculation_curves.csv (one row per size and repeat) and DIR/inoculation_summary.csv (one
row per size).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from aflite_core.commands._input import add_input_arguments, load_input
from aflite_core.measures import (
    ANCHORS,
    CHALLENGE_WEIGHTS,
    DEV_FRACTION,
    MODELS,
    MODES,
    SIZES,
    OutcomeThresholds,
    inoculate,
)
from aflite_core.represent import pair_texts
from aflite_core.splits import holdout_mask


def parse_sizes(text: str) -> tuple[int, ...]:
    """Comma-separated non-negative integers, e.g. ``0,5,10,50``."""
    try:
        sizes = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers such as 0,5,10,50, got {text!r}") from None
    if not sizes or min(sizes) < 0:
        raise argparse.ArgumentTypeError(f"expected non-negative integers, got {text!r}")
    return sizes


def parse_strengths(text: str) -> tuple[float, ...]:
    """Comma-separated positive numbers, e.g. ``0.1,1,10``."""
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers such as 0.1,1,10, got {text!r}") from None
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"expected positive numbers, got {text!r}")
    return values


def register(subparsers: Any) -> None:
    """Add the ``inoculate`` command."""
    p = subparsers.add_parser(
        "inoculate",
        help="inoculation by fine-tuning: is a challenge set a dataset or a model weakness?",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("original", metavar="ORIGINAL", help="original dataset file")
    p.add_argument("challenge", metavar="CHALLENGE",
                   help="challenge dataset file (same columns and labels)")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created)")
    p.add_argument("--model", choices=MODELS, default="tfidf_lr",
                   help="tfidf_lr (default) or linear_phi (needs --phi-original/--phi-challenge)")
    p.add_argument("--input", choices=("pair", "hypothesis"), default=None,
                   help="tfidf_lr input: the premise-hypothesis pair, i.e. the full-input "
                        "model (default when both files have premises), or the hypothesis "
                        "alone (the hypothesis-only model)")
    p.add_argument("--mode", choices=MODES, default="finetune",
                   help="finetune: continue from the original weights (default); retrain: "
                        "fit on original + challenge examples")
    p.add_argument("--sizes", type=parse_sizes, default=SIZES, metavar="LIST",
                   help=f"challenge examples per step (default {','.join(map(str, SIZES))})")
    p.add_argument("--repeats", type=int, default=3, metavar="N",
                   help="nested subsample sequences averaged (default 3)")
    p.add_argument("--strengths", type=parse_strengths, default=None, metavar="LIST",
                   help="grid the strength is chosen from per n on the challenge dev rows: "
                        "finetune anchors (pull towards the original weights; default "
                        f"{','.join(map(str, ANCHORS))}) or retrain challenge weights (default "
                        f"{','.join(map(str, CHALLENGE_WEIGHTS))}); one value fixes it")
    p.add_argument("--dev-fraction", type=float, default=DEV_FRACTION, metavar="F",
                   help="share of each training share held out to choose the strength "
                        f"(default {DEV_FRACTION})")
    p.add_argument("--test-fraction", type=float, default=0.2, metavar="F",
                   help="held-out share of each file (default 0.2)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (0)")
    p.add_argument("--phi-original", metavar="FILE",
                   help="linear_phi: embeddings of ORIGINAL (.npy/.npz/.parquet)")
    p.add_argument("--phi-challenge", metavar="FILE",
                   help="linear_phi: embeddings of CHALLENGE, same dimension")
    t = OutcomeThresholds()
    g = p.add_argument_group("outcome thresholds (see docs/measures.md)")
    g.add_argument("--min-gap", type=float, default=t.min_gap)
    g.add_argument("--closed-fraction", type=float, default=t.closed_fraction)
    g.add_argument("--min-challenge-gain", type=float, default=t.min_challenge_gain)
    g.add_argument("--max-original-drop", type=float, default=t.max_original_drop)
    add_input_arguments(p, ("premise", "hypothesis", "label"),
                        title="columns (guessed when omitted; the same for both files)")
    p.set_defaults(func=run)


def _inputs(dataset, args: argparse.Namespace, phi_path: str | None, use_pair: bool):
    if args.model == "linear_phi":
        from aflite_core.represent import build_representation  # lazy: +189 ms to import

        return build_representation(dataset, "precomputed", path=phi_path).X

    premises = dataset.premises() if use_pair else None
    return np.array(pair_texts(premises, dataset.hypotheses()), dtype=object)


def _split(labels, test_fraction: float, seed: int):
    """Training and held-out positions of one file: a seeded hold-out stratified by label."""
    if len(labels) < 2:
        raise ValueError(f"a file needs at least 2 included rows to split; got {len(labels)}")
    held = holdout_mask(labels, test_size=test_fraction, random_state=seed, clamp=True)
    return np.flatnonzero(~held), np.flatnonzero(held)


def run(args: argparse.Namespace) -> int:
    """Run the inoculation experiment and write its results."""
    if not 0.0 < args.test_fraction < 1.0:
        raise ValueError(f"--test-fraction: expected a number in (0, 1), got {args.test_fraction}")
    if args.model == "linear_phi" and not (args.phi_original and args.phi_challenge):
        raise ValueError("--model linear_phi needs --phi-original FILE and --phi-challenge FILE")
    thresholds = OutcomeThresholds(min_gap=args.min_gap, closed_fraction=args.closed_fraction,
                                   min_challenge_gain=args.min_challenge_gain,
                                   max_original_drop=args.max_original_drop)
    original = load_input(args.original, args, what="ORIGINAL")
    challenge = load_input(args.challenge, args, what="CHALLENGE")
    both_pairs = original.premises() is not None and challenge.premises() is not None
    if args.input == "pair" and not both_pairs:
        raise ValueError("--input pair: both files need a premise column")
    use_pair = both_pairs if args.input is None else args.input == "pair"
    X_o = _inputs(original, args, args.phi_original, use_pair)
    X_c = _inputs(challenge, args, args.phi_challenge, use_pair)
    y_o, y_c = original.labels(), challenge.labels()
    o_tr, o_te = _split(y_o, args.test_fraction, args.seed)
    c_tr, c_te = _split(y_c, args.test_fraction, args.seed + 1)

    def progress(info: dict) -> None:
        print(f"[{info['fraction']:4.0%}] {info['message']}", flush=True)

    result = inoculate((X_o[o_tr], y_o[o_tr]), (X_o[o_te], y_o[o_te]),
                       (X_c[c_tr], y_c[c_tr]), (X_c[c_te], y_c[c_te]),
                       model=args.model, sizes=args.sizes, mode=args.mode,
                       n_repeats=args.repeats, strengths=args.strengths,
                       dev_fraction=args.dev_fraction, thresholds=thresholds,
                       random_state=args.seed, callback=progress)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    payload = result.to_dict()
    payload["params"].update(original=original.name, challenge=challenge.name,
                             input="pair" if use_pair else "hypothesis",
                             test_fraction=args.test_fraction)
    (out / "inoculation.json").write_text(json.dumps(payload, indent=2), encoding="utf-8")
    result.curves.to_csv(out / "inoculation_curves.csv", index=False)
    result.summary.to_csv(out / "inoculation_summary.csv", index=False)
    print(result.summary.to_string(index=False, float_format="{:.3f}".format))
    print(f"challenge metric: {result.challenge_metric} (majority label "
          f"{result.majority_rate:.3f}, chance {result.chance:.3f})")
    print(f"outcome {result.outcome} ({result.outcome_label}): {result.explanation}")
    print(f"wrote inoculation.json, inoculation_curves.csv, inoculation_summary.csv to {out}")
    return 0
