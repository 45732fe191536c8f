"""``python -m aflite_core ood RUN_DIR CHALLENGE [CHALLENGE ...]``: out-of-distribution check.

Trains the chosen text model on the run's retained rows and on random subsets of the same
size and label counts, scores each on every challenge file (accuracy, and balanced accuracy
where a challenge set is skewed), prints the table, and adds ``ood.json`` to the run folder
(the Report page and ``report.html`` show it).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from aflite_core.commands._input import load_input
from aflite_core.represent import pair_texts


def _label_map(text: str) -> dict[str, str]:
    """``"neutral=non-entailment,contradiction=non-entailment"`` -> a dict."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        source, sep, target = part.partition("=")
        if not sep or not source.strip() or not target.strip():
            raise argparse.ArgumentTypeError(
                f"expected TRAIN_LABEL=CHALLENGE_LABEL pairs separated by commas, got {part!r}")
        out[source.strip()] = target.strip()
    return out


def register(subparsers: Any) -> None:
    """Add the ``ood`` command."""
    p = subparsers.add_parser(
        "ood", help="retained vs label-matched random training data, scored on challenge sets",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run folder")
    p.add_argument("challenges", nargs="+", metavar="CHALLENGE",
                   help="challenge files (premise/hypothesis/label columns are guessed)")
    p.add_argument("--model", choices=("full_input", "hypothesis_only"), default="full_input",
                   help="text model trained on each subset (default full_input)")
    p.add_argument("--draws", type=int, default=5, metavar="N",
                   help="random subsets of the retained size (default 5)")
    p.add_argument("--map-labels", type=_label_map, default=None, metavar="A=B,...",
                   help="map training labels to the challenge set's, e.g. "
                        "neutral=non-entailment,contradiction=non-entailment")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed")
    p.set_defaults(func=run, premise=None, hypothesis=None, label=None, split=None, id=None,
                   format=None, encoding=None, max_bytes=1 << 30)


def run(args: argparse.Namespace) -> int:
    """Evaluate, print the summary, add ``ood.json`` to the run."""
    from aflite_core.measures import dataset_challenge, evaluate_ood  # lazy: +502 ms to import
    from aflite_core.report import add_measure  # lazy: +1214 ms to import
    from aflite_core.runs import load_run  # lazy: +932 ms to import

    run_ = load_run(args.run_dir)
    status = run_.scores["status"].astype(str).to_numpy()
    filtered = np.isin(status, ["retained", "removed"])
    frame = run_.frame[filtered]
    columns = run_.columns
    premises = (frame[columns["premise"]].astype(str).tolist()
                if columns.get("premise") else None)
    texts = pair_texts(premises, frame[columns["hypothesis"]].astype(str).tolist())
    labels = run_.scores["label"].astype(str).to_numpy()[filtered]
    challenges = [dataset_challenge(load_input(path, args, what="CHALLENGE"))
                  for path in args.challenges]
    result = evaluate_ood(texts, labels, status[filtered] == "retained", challenges,
                          model=args.model, n_draws=args.draws, label_map=args.map_labels,
                          random_state=args.seed)
    add_measure(run_.path, "ood", documents={"ood.json": result.to_dict()},
                info={"params": result.params})
    for row in result.summary.to_dict("records"):
        print(f"{row['challenge']}: n={row['n']:,} ({row['metric']}; majority rate "
              f"{row['majority_rate']:.3f}, chance {row['chance']:.3f}) retained "
              f"{row['retained']:.3f} vs random {row['random_mean']:.3f} ± "
              f"{row['random_std']:.3f} ({row['n_draws']} draws): "
              f"{100 * row['difference']:+.1f} pp")
    print(f"added ood.json to {run_.path}", file=sys.stderr)
    return 0
