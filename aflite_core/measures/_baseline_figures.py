"""How far a baseline's "bias removed beyond size" can be read: the headline figures of a run's
``baselines.json`` in headline order, each with its verdict (ok, overstated, not meaningful),
its caveats, and its ± (the spread over the control's draws and the retained accuracy's
sampling error, in quadrature). The Report, the HTML report, Compare and the card read them
here (re-exported by :mod:`aflite_core.measures.baselines`)."""

from __future__ import annotations

import numpy as np

__all__ = ["BASELINE_LABELS", "BELOW_MAJORITY_MARGIN", "HEADLINE_ORDER", "SEES_FILTER_FEATURES",
           "UNCERTAINTY_NOTE", "VERDICTS", "figure_verdict", "format_figure",
           "headline_figures", "sampling_error_pp"]

#: An accuracy this far below its majority rate gets a warning.
BELOW_MAJORITY_MARGIN = 0.01
#: How a reader knows each baseline, and whether it reads Φ, the features AFLite filtered on
#: (its drop then largely measures AFLite's own objective, not bias another model would see).
BASELINE_LABELS = {"hypothesis_only": "hypothesis-only n-grams",
                   "full_input": "premise + hypothesis n-grams",
                   "linear_probe": "linear probe on Φ"}
SEES_FILTER_FEATURES = {"hypothesis_only": False, "full_input": False, "linear_probe": True}
#: Headline order: models whose features AFLite did not see lead.
HEADLINE_ORDER = ("hypothesis_only", "full_input", "linear_probe")
#: Verdicts of a "bias removed beyond size" figure (:func:`figure_verdict`).
VERDICTS = ("ok", "overstated", "not meaningful")


def _below(part: dict) -> tuple[str, float, float] | None:
    """``(reference name, accuracy, reference)`` when ``part``'s accuracy is below its
    majority-class rate or chance (by more than the margin), the higher reference first."""
    acc = part.get("accuracy")
    if not isinstance(acc, (int, float)):
        return None
    refs = [(name, float(part[key])) for name, key in
            (("majority-class rate", "majority_accuracy"), ("chance", "chance"))
            if isinstance(part.get(key), (int, float))]
    refs.sort(key=lambda r: -r[1])
    for name, ref in refs:
        if acc < ref - BELOW_MAJORITY_MARGIN:
            return name, float(acc), ref
    return None


def figure_verdict(name: str, block: dict) -> dict:
    """How far one baseline's "bias removed beyond size" can be read, with its caveats.

    Parameters
    ----------
    name : str
        The baseline (``hypothesis_only``, ``full_input``, ``linear_probe``).
    block : dict
        Its result in ``baselines.json`` (:func:`compare_subsets`).

    Returns
    -------
    dict
        ``baseline``, ``label`` (as a reader knows it), ``sees_filter_features`` (it reads
        Φ), ``value_pp``, ``spread_pp``, ``verdict`` (one of :data:`VERDICTS`), ``capped_pp``
        (for ``overstated``: random minus the retained rows' majority rate, the most the
        drop can say about bias) and ``caveats`` (sentences, empty when there is none).

    Notes
    -----
    * ``not meaningful``: on the full rows or the random control the model scores below its
      majority-class rate or chance, so it finds no usable signal in this input even before
      filtering; a difference between two such accuracies measures noise.
    * ``overstated``: only the retained rows fall below majority or chance. A model that
      learned nothing would score the majority rate; below it, AFLite has selected rows that
      linear models get wrong, and that selection, not removed bias, makes up the rest of the
      drop.
    * A probe on Φ (``sees_filter_features``) is trained on the features AFLite filtered on,
      so its drop largely measures AFLite's own objective: it is labelled as such and never
      leads the headline.
    """
    value = block.get("bias_removed_beyond_size_pp")
    if not isinstance(value, (int, float)) and isinstance(
            block.get("bias_removed_beyond_size"), (int, float)):
        value = 100 * float(block["bias_removed_beyond_size"])
    label = BASELINE_LABELS.get(name, name)
    sees = bool(SEES_FILTER_FEATURES.get(name, False))
    caveats: list[str] = []
    verdict = "ok"
    capped = None
    untrained = [(subset, below) for subset in ("full", "random")
                 if (below := _below(block.get(subset) or {})) is not None]
    retained = _below(block.get("retained") or {})
    if untrained:
        verdict = "not meaningful"
        subset, (ref_name, acc, ref) = untrained[0]
        caveats.append(f"Not meaningful: {label} scores {acc:.1%} on the {subset} rows, below "
                       f"the {ref_name} ({ref:.1%}); it finds no usable signal in this input "
                       "even before filtering, so the difference measures noise.")
    elif retained is not None:
        verdict = "overstated"
        ref_name, acc, ref = retained
        rnd = (block.get("random") or {}).get("accuracy")
        majority = (block.get("retained") or {}).get("majority_accuracy")
        if isinstance(rnd, (int, float)) and isinstance(majority, (int, float)):
            capped = 100 * (float(rnd) - max(float(majority), acc))
        caveats.append(
            f"Overstated: on the retained rows {label} scores {acc:.1%}, below the {ref_name} "
            f"({ref:.1%}). A model that learned nothing would score the majority rate; the "
            "rest of the drop comes from AFLite selecting rows linear models get wrong"
            + (f". Capped at the majority rate the figure is {capped:+.1f} pp." if capped
               is not None else "."))
    if sees:
        caveats.append(f"The {label} is trained on the representation AFLite filtered on: "
                       "its drop largely measures AFLite's own objective; read the models "
                       "whose features AFLite did not see first.")
    spread = block.get("bias_removed_std_pp")
    sampling = sampling_error_pp(block.get("retained") or {})
    parts = [float(x) for x in (spread, sampling)
             if isinstance(x, (int, float)) and np.isfinite(x)]
    return {"baseline": name, "label": label, "sees_filter_features": sees,
            "value_pp": float(value) if isinstance(value, (int, float)) else None,
            "spread_pp": spread, "sampling_pp": sampling,
            "uncertainty_pp": float(np.sqrt(sum(x * x for x in parts))) if parts else None,
            "verdict": verdict, "capped_pp": capped, "caveats": caveats}


#: What the ± of a headline figure holds (:func:`format_figure`), said wherever it is shown.
UNCERTAINTY_NOTE = ("± combines the spread over the random control's draws with the retained "
                    "accuracy's own sampling error (sqrt(p(1 - p)/n) over its n held-out "
                    "rows), added in quadrature")


def sampling_error_pp(part: dict) -> float | None:
    """The standard error of an accuracy ``p`` measured on ``n`` rows, in percentage points:
    ``100 sqrt(p (1 - p) / n)`` (None without both)."""
    acc, n = part.get("accuracy"), part.get("n_rows")
    if not isinstance(acc, (int, float)) or not isinstance(n, (int, float)) or n <= 0:
        return None
    return float(100 * np.sqrt(max(float(acc) * (1 - float(acc)), 0.0) / float(n)))


def headline_figures(data: dict | None) -> list[dict]:
    """The "bias removed beyond size" figures of a run's ``baselines.json``, in headline
    order (models whose features AFLite did not see first), each with its verdict and
    caveats (:func:`figure_verdict`). Empty for a run without baselines."""
    if not isinstance(data, dict):
        return []
    names = [n for n in HEADLINE_ORDER if isinstance(data.get(n), dict)]
    names += [n for n, b in data.items() if n not in names and isinstance(b, dict)
              and "bias_removed_beyond_size" in b]
    return [figure_verdict(n, data[n]) for n in names
            if "bias_removed_beyond_size" in data[n]]


def format_figure(figure: dict) -> str:
    """A headline figure as text: ``+3.9 pp ± 1.2``, marked when it is not to be read as
    is (``(overstated)``, ``(not meaningful)``); the ± is :data:`UNCERTAINTY_NOTE`'s."""
    value = figure.get("value_pp")
    if value is None:
        return "–"
    spread = figure.get("uncertainty_pp", figure.get("spread_pp"))
    text = f"{value:+.1f} pp" + (f" ± {spread:.1f}" if isinstance(spread, (int, float))
                                  and np.isfinite(spread) else "")
    if figure.get("verdict") not in (None, "ok"):
        text += f" ({figure['verdict']})"
    return text
