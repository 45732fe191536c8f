"""Panels of the Audit page: parameters, the Run button, live progress, previous runs."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from aflite_core import parameters, pipeline
from aflite_core.config import FILTERS, estimate_rounds, suggest_config
from aflite_core.filter import filter_units
from aflite_core.measures import registry
from ui import cache, components, jobs, state
from ui.audit import params

PAGE = "audit"

SUMMARY = (
    "AFLite trains many simple linear models on random parts of the data and removes the "
    "examples they predict right most often when those examples are held out. What remains "
    "is the part of the data that shortcuts in the features cannot solve, so a model's score "
    "on it says more about real understanding."
)
FORMULA = r"""
In each round, $m$ random partitions of the current set $S$ train a linear model on $t$ rows
and predict the held-out rest. The **predictability** of an example $i$ is

$$
p(i) = \frac{\#\{\,j : i \text{ held out in partition } j,\ f_j(x_i) = y_i\,\}}
            {\#\{\,j : i \text{ held out in partition } j\,\}}
$$

Up to $k$ examples with the highest $p(i)$ among those with $p(i) \ge \tau$ leave $S$; AFLite
stops when $|S|$ reaches the target size (never going below it) or when fewer than $k$
examples score at least $\tau$. An example never held out in a round gets no score that round.

Source: Le Bras et al., *Adversarial Filters of Dataset Biases*, ICML 2020, Algorithm 1.
"""

#: Progress stage names: the pipeline's own stages, then one per registered measure.
STAGES = {
    "start": "starting",
    "queued": "waiting for a free audit worker",
    "representation": "building the representation",
    "aflite": "filtering",
    **{m.name: m.label for m in registry.measures()},
    "report": "HTML report",
    "write": "writing the run folder",
}


def stage_label(stage: str) -> str:
    """A progress stage as a reader knows it (``knn`` -> ``KNN distances ...``)."""
    return STAGES.get(stage, stage.replace("_", " "))


def _wkey(name: str, dataset: Any) -> str:
    return state.key(PAGE, f"{name}:{dataset.content_hash[:10]}")


def _size(value: float) -> int | float:
    """A number input's value as AFLite expects it: fraction if < 1, rows otherwise."""
    return float(value) if value < 1 else int(round(value))


def parameter_form(dataset: Any) -> tuple[Any | None, dict]:
    """Draw the parameter widgets; return ``(AuditConfig or None, extras)``.

    Every widget starts at :func:`aflite_core.config.suggest_config` for the dataset's
    included rows, the defaults the CLI and the Python API use too. ``extras`` holds
    ``name`` (run name) and ``force`` (recompute an identical run).
    """
    st.subheader("Parameters")
    # what the form depends on, read once per rerun (question_ids builds a column of text)
    multiple_choice = dataset.report.n_questions is not None
    units = _unit_widgets(dataset, multiple_choice, dataset.splits() is not None)
    n = filter_units(dataset, **units)
    what = "questions" if multiple_choice and units["instance"] != "row" else "rows"
    defaults = suggest_config(n, **units)
    st.caption(f"Defaults are scaled to the {n:,} {what} the filter sees (they change with "
               "the split policy); the table of defaults is in docs/architecture.md.")
    representation, rep_params, ready = _representation_widgets(dataset, defaults)
    aflite = {**_aflite_widgets(dataset, n, defaults, multiple_choice), **units}
    measures, measure_params = _measure_widgets(dataset, n, defaults)
    target_rows = pipeline.resolve_size("target_size", aflite["target_size"], max(n, 1))
    aflite["target_size"] = target_rows
    rounds = estimate_rounds(n, target_rows, aflite.get("slice_size", 1))
    if aflite["filter"] == "z":
        st.caption(f"The Z-filter keeps at least {aflite['target_size']:,} of {n:,} rows "
                   f"({aflite['target_size'] / n:.0%}); it stops earlier once no word's |z| "
                   "passes the threshold.")
    else:
        st.caption(f"At most {rounds:,} rounds of {aflite['n_partitions']} models each; "
                   f"AFLite keeps at least {aflite['target_size']:,} of {n:,} rows "
                   f"({aflite['target_size'] / n:.0%}).")
    force = st.checkbox("Recompute even if an identical run exists",
                        key=_wkey("force", dataset))
    if not ready:
        return None, {}
    name = aflite.pop("name")
    config = pipeline.AuditConfig(
        representation=representation,
        representation_params={k_: v for k_, v in rep_params.items() if v not in (None, "")},
        measures=tuple(measures),
        measure_params=measure_params,
        **aflite,
    )
    return config, {"name": name.strip() or None, "force": force}


def _representation_widgets(dataset: Any, defaults: Any) -> tuple[str, dict, bool]:
    """Φ and its options; return ``(representation, params, ready)``."""
    embeddings = state.get(state.EMBEDDINGS)
    rep_options = list(pipeline.REPRESENTATIONS)
    default_rep = "precomputed" if embeddings else defaults.representation
    representation = _widget(st, "representation", default_rep, _wkey("representation", dataset),
                             options=rep_options)
    rep_params: dict[str, Any] = {}
    ready = True
    if representation in ("tfidf_svd", "warmup"):
        rep_params["n_components"] = _widget(
            st, "n_components", defaults.representation_params.get(
                "n_components", parameters.get("n_components").default),
            _wkey("n_components", dataset), step=16)
    if representation == "warmup":
        rep_params["warmup_fraction"] = _widget(st, "warmup_fraction",
                                                parameters.get("warmup_fraction").default,
                                                _wkey("warmup_fraction", dataset))
    if representation == "precomputed":
        ready = _embeddings_input(dataset, embeddings, rep_params)
    if representation in ("static", "sentence_transformers"):
        ready = _encoder_widgets(dataset, representation, rep_params)
    return representation, rep_params, ready


def _encoder_widgets(dataset: Any, family: str, rep_params: dict) -> bool:
    """Model, pair combination and the time estimate of a text encoder; return ready."""
    from aflite_core.represent import encoders  # lazy: +10 ms to import

    packaged = [m.name for m in encoders.PACKAGED_MODELS.values()
                if m.family == family and m.folder() is not None]
    c1, c2 = st.columns([3, 2])
    rep_params["model"] = c1.text_input(
        "Model: local folder or name", value=packaged[0] if packaged else "",
        key=_wkey(f"model:{family}", dataset), help=params.HELP["encoder_model"],
        placeholder="e.g. /models/potion-base-8M" if family == "static"
        else "e.g. all-MiniLM-L6-v2").strip()
    if dataset.premises() is not None:
        rep_params["combine"] = _widget(c2, "combine", encoders.DEFAULT_COMBINE,
                                        _wkey("combine", dataset))
    if importlib.util.find_spec(encoders._MODULE[family]) is None:
        components.show_error(f"The {family.replace('_', '-')} extra is not installed.",
                              hint=f"Install it with `{encoders.INSTALL[family]}` (or `pip "
                                   "install -r requirements-encoders.txt`, see "
                                   "docs/representations.md), or pick another representation.")
        return False
    if not rep_params["model"]:
        st.caption("Give a model folder or name (a name that is not local may download it).")
        return False
    distinct = _distinct_texts(dataset, rep_params.get("combine"))
    seconds = encoders.estimate_seconds(family, rep_params["model"], distinct)
    st.caption(f"Embedding {distinct:,} distinct texts: about {_duration(seconds)} on a 2-core "
               "laptop (measured by benchmarks/bench_representations.py); embeddings are "
               "cached, so a later run on the same texts and model starts at once.")
    return True


_DISTINCT: dict[tuple, int] = {}


def _distinct_texts(dataset: Any, combine: str | None) -> int:
    """Distinct hypotheses (plus distinct premises unless hypothesis-only) of the dataset."""
    key = (dataset.content_hash, combine == "hypothesis")
    if key not in _DISTINCT:
        n = len(set(dataset.hypotheses()))
        premises = dataset.premises()
        if premises is not None and combine != "hypothesis":
            n += len(set(premises))
        _DISTINCT[key] = n
    return _DISTINCT[key]


def _duration(seconds: float) -> str:
    if seconds < 1:
        return "under a second"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _widget(where: Any, name: str, default: Any, key: str, *, options: list | None = None,
            label: str | None = None, maximum: float | None = None, step: Any = None) -> Any:
    """The widget of the declared run parameter ``name`` (:mod:`aflite_core.parameters`)."""
    return option_widget(where, parameters.get(name), default, key, options=options,
                         label=label, maximum=maximum, step=step)


def option_widget(where: Any, p: Any, default: Any, key: str, *, options: list | None = None,
                  label: str | None = None, maximum: float | None = None,
                  step: Any = None) -> Any:
    """The widget of a declared option (:class:`aflite_core.schema.Option`: a run parameter
    or a measure's option): its label, help, bounds or choices, starting at ``default``;
    return its value. The one renderer of the form, as ``run``'s flags have one maker."""
    label = label or p.label
    if p.kind == "choice":
        choices = list(options if options is not None else p.choices)
        return where.selectbox(label, choices, index=choices.index(default), key=key,
                               format_func=lambda v: params.NAMES.get(p.name, {}).get(v, v),
                               help=p.help)
    if p.kind == "bool":
        return bool(where.checkbox(label, value=bool(default), key=key, help=p.help))
    if p.kind in ("ints", "strs"):  # a list, written as the CLI writes it
        text = where.text_input(label, ",".join(map(str, default)), key=key,
                                help=f"{p.help} Comma-separated.")
        try:
            return p.parse(text)
        except ValueError as exc:
            where.error(f"{label}: {exc}; using {','.join(map(str, default))}")
            return tuple(default)
    high = p.maximum if maximum is None else maximum
    if p.kind == "int":
        return int(where.number_input(label, min_value=int(p.minimum), max_value=int(high),
                                      value=int(default), step=step or 1, key=key,
                                      help=p.help))
    if p.kind == "size":
        return _size(where.number_input(label, min_value=0.01, max_value=float(high or 1e12),
                                        value=float(default), format="%g", key=key,
                                        step=float(step or (0.05 if float(default) < 1 else 100)),
                                        help=p.help))
    if p.open_bounds:  # a level in (0, 1): a number input that cannot reach the bounds
        return float(where.number_input(label, min_value=1e-6, max_value=float(high) - 1e-6,
                                        value=float(default), format="%g", key=key,
                                        step=0.005, help=p.help))
    return float(where.slider(label, float(p.minimum), float(high), float(default), 0.01,
                              key=key, help=p.help))


def _unit_widgets(dataset: Any, multiple_choice: bool, has_splits: bool) -> dict:
    """What the filter works on: the split policy (data with splits) and the instance
    (multiple-choice data); the size-scaled defaults follow them, as in the CLI."""
    out = {"split_policy": parameters.get("split_policy").default,
           "instance": parameters.get("instance").default}
    if not has_splits and not multiple_choice:
        return out
    c1, c2 = st.columns(2)
    if has_splits:
        out["split_policy"] = _widget(c1, "split_policy", out["split_policy"],
                                      _wkey("split_policy", dataset))
    if multiple_choice:
        out["instance"] = _widget(c2, "instance", out["instance"], _wkey("instance", dataset))
    return out


def _aflite_widgets(dataset: Any, n: int, defaults: Any, multiple_choice: bool) -> dict:
    """The filter's parameters and the run name, keyed as :class:`AuditConfig` fields.

    Widget keys carry ``n``: when the split policy changes the rows the filter sees, the
    size-scaled widgets start again at the new defaults."""
    filters = list(FILTERS) if not multiple_choice else ["aflite"]
    chosen_filter = _widget(st, "filter", defaults.filter, _wkey("filter", dataset),
                            options=filters)
    top = max(n - 1, 1)
    c1, c2, c3, c4 = st.columns(4)
    target = _widget(c1, "target_size", defaults.target_size, _wkey(f"target:{n}", dataset),
                     maximum=top, step=max(1, n // 100))
    out: dict[str, Any] = {"target_size": int(target) if target >= 1 else target,
                           "filter": chosen_filter}
    if chosen_filter == "z":
        out["filter_params"] = {
            "alpha": _widget(c2, "alpha", parameters.get("alpha").default,
                             _wkey("z_alpha", dataset)),
            "until": _widget(c3, "until", parameters.get("until").default,
                             _wkey("z_until", dataset)),
            "min_count": _widget(c4, "min_count", parameters.get("min_count").default,
                                 _wkey("z_min_count", dataset)),
        }
        c1, c2, c3, c4 = st.columns(4)
    else:
        strategy = _widget(c1, "strategy", defaults.strategy, _wkey("strategy", dataset))
        out["strategy"] = strategy
        out["n_partitions"] = _widget(c2, "n_partitions", defaults.n_partitions,
                                      _wkey(f"m:{n}", dataset))
        out["train_size"] = _widget(c3, "train_size", defaults.train_size,
                                    _wkey(f"t:{n}", dataset))
        if strategy == "greedy":
            c4.number_input(parameters.get("slice_size").label, value=1, disabled=True,
                            key=_wkey("k_greedy", dataset),
                            help="The greedy strategy removes one row per round.")
            out["slice_size"] = 1
        else:
            out["slice_size"] = _widget(c4, "slice_size", defaults.slice_size,
                                        _wkey(f"k:{n}", dataset), maximum=top)
        c1, c2, c3, c4 = st.columns(4)
        out["tau"] = _widget(c1, "tau", defaults.tau, _wkey("tau", dataset))
    out["random_state"] = _widget(c2, "random_state", defaults.random_state,
                                  _wkey("seed", dataset))
    out["name"] = c3.text_input("Run name (optional)", key=_wkey("name", dataset),
                                help="Default: data name + parameters + time. Unsafe "
                                     "characters are replaced.")
    if dataset.groups() is not None and not multiple_choice and chosen_filter == "aflite":
        out["group_partitions"] = _widget(st, "group_partitions", defaults.group_partitions,
                                          _wkey("group_partitions", dataset))
    return out


def _measure_widgets(dataset: Any, n: int, defaults: Any) -> tuple[list[str], dict]:
    """Which measures run, and each chosen measure's declared options."""
    labels = {mm.name: mm.label for mm in registry.measures() if not mm.inputs}
    default_measures = [mm for mm in defaults.measures if mm in labels]
    if state.get(state.DATASET_ORIGIN) == "synthetic":  # no text: word cues say nothing
        default_measures = [mm for mm in default_measures if mm not in ("cues", "baselines")]
    measures = st.multiselect(
        "Measures after AFLite", list(labels), default=default_measures,
        format_func=lambda mm: labels.get(mm, mm), help=params.HELP["measures"],
        key=_wkey("measures", dataset))
    needs_files = [mm for mm in registry.measures() if mm.inputs]
    if needs_files:
        st.caption("Also available from the command line, with files of your own: "
                   + "; ".join(f"{mm.label} (`python -m aflite_core {mm.name} RUN FILE...`)"
                               for mm in needs_files) + ".")
    return measures, _measure_options(dataset, measures, n, defaults.measure_params)


def _measure_options(dataset: Any, measures: list[str], n: int,
                     start: dict | None = None) -> dict:
    """The options each chosen measure declares in the registry, as widgets."""
    out: dict[str, dict] = {}
    chosen = [mm for mm in registry.measures() if mm.name in measures]
    for measure in chosen:  # the options the form does not offer keep their start values
        values = {**measure.defaults(n), **(start or {}).get(measure.name, {})}
        out[measure.name] = {o.name: values[o.name] for o in measure.options if not o.form}
    options = [(mm, o) for mm in chosen for o in mm.options if o.form]
    columns = st.columns(4) if options else []
    for i, (measure, option) in enumerate(options):
        default = {**measure.defaults(n), **(start or {}).get(measure.name, {})}[option.name]
        out[measure.name][option.name] = option_widget(
            columns[i % 4], option, default, _wkey(f"{measure.name}:{option.name}", dataset))
    return {name: values for name, values in out.items() if values}


def _embeddings_input(dataset: Any, embeddings: str | None, rep_params: dict) -> bool:
    if embeddings and Path(embeddings).is_file():
        name = components.md_escape(Path(embeddings).name)
        st.caption(f"Using the features that came with this dataset ({name}).")
        rep_params["path"] = embeddings
        return True
    upload = st.file_uploader(
        "Embeddings file: one row per dataset row (or per audited row), in file order, or "
        "with a row_id column", type=["npy", "npz", "parquet"],
        key=_wkey("embeddings", dataset),
        help="Read with allow_pickle=False: object arrays are refused, never unpickled.")
    if upload is None:
        st.caption("Upload the embeddings to continue.")
        return False
    # keep the user's file name (errors quote it) inside a folder named by the content hash
    safe_name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(upload.name).name).lstrip(".") or "x"
    folder = state.session_dir() / f"embeddings-{cache.upload_digest(upload)[:16]}"
    folder.mkdir(exist_ok=True)
    target = folder / safe_name
    if not target.exists():
        target.write_bytes(upload.getvalue())
    rep_params["path"] = str(target)
    return True


def start_run(dataset: Any, config: Any, *, name: str | None, force: bool) -> None:
    """Validate, reuse an identical finished run, or start the background job."""
    try:
        config.validate()
    except (ValueError, TypeError) as exc:
        components.show_error(str(exc))
        return
    root = state.runs_root()
    if not force:
        found = cache.find_matching_run(root, dataset.content_hash, config.to_dict())
        if found is not None:
            state.set_run_path(found)
            state.notify(f"This data was already audited with these parameters: opened "
                         f"{components.md_escape(found.name)} (no recomputation).",
                         icon=":material/recycling:")
            st.rerun()
    job = jobs.start_audit(dataset, config, runs_root=root, name=name,
                           job_dir=state.session_dir())
    state.put(state.JOB, job)
    st.rerun()


def _progress_text(snap: dict) -> str:
    parts = []
    if "round" in snap:
        parts.append(f"round {snap['round']}")
    if "size" in snap:
        parts.append(f"size {int(snap['size']):,}")
    if "removed_total" in snap:
        parts.append(f"removed {int(snap['removed_total']):,} so far")
    parts.append(f"ETA {components.fmt_seconds(snap.get('eta'))}")
    return " · ".join(parts)


@st.fragment(run_every=0.5)
def live_progress() -> None:
    """Progress of this session's running audit, refreshed twice a second, with Cancel."""
    job = state.get(state.JOB)
    if job is None:
        return
    if not job.running:
        st.rerun()  # the whole app: the finished run is opened by ui.session
        return
    snap = job.snapshot()
    stage = stage_label(snap.get("stage", ""))
    # not a ``with`` block: leaving it would mark the status "complete" on every refresh
    status = st.status(f"Auditing {components.md_escape(job.dataset_name)}: {stage}",
                       state="running", expanded=True)
    with status.container():
        st.progress(snap["fraction"], text=_progress_text(snap))
        components.metric_row([
            ("Round", snap.get("round", "—"), None),
            ("Current size", f"{int(snap['size']):,}" if "size" in snap else "—", None),
            ("Removed so far",
             f"{int(snap['removed_total']):,}" if "removed_total" in snap else "—", None),
            ("Elapsed", components.fmt_seconds(snap["elapsed"]), None),
        ])
        st.caption(components.md_escape(snap.get("message", "")))
        if snap.get("beside"):
            side = snap["beside"]
            st.caption(f"Beside it: {stage_label(side['stage'])}, "
                       f"{components.md_escape(side['message'])}")
        if job.cancel_requested:
            st.caption("Cancelling at the next checkpoint…")
        st.button("Cancel", icon=":material/cancel:", on_click=job.cancel,
                  disabled=job.cancel_requested, key=state.key(PAGE, f"cancel:{job.id}"))


def last_job_outcome() -> None:
    """What happened to this session's last audit (finished, cancelled, failed)."""
    job = state.get(state.JOB)
    if job is None or job.running:
        return
    snap = job.snapshot()
    if job.state == jobs.DONE and job.result is not None:
        st.success(f"Last audit finished in {components.fmt_seconds(snap['elapsed'])}: "
                   f"{job.result.name}", icon=":material/check_circle:")
        c1, c2, c3 = st.columns(3)
        c1.page_link("app_pages/explore.py", label="Explore the rows", icon=":material/search:")
        c2.page_link("app_pages/cues.py", label="See the cues", icon=":material/key:")
        c3.page_link("app_pages/report.py", label="Read the report", icon=":material/summarize:")
    elif job.state == jobs.CANCELLED:
        st.info(job.error or "The audit was cancelled.", icon=":material/cancel:")
    else:
        components.show_error(f"The audit failed: {job.error}",
                              hint="Change the parameters (or the data) and run it again.")


def previous_runs() -> None:
    """Complete runs in the runs root, newest first, each reopenable."""
    root = state.runs_root()
    st.subheader("Previous runs")
    runs = cache.list_runs(root)
    if not runs:
        st.caption(f"No run in the runs folder {components.md_escape(state.runs_root_label())} "
                   "yet.")
        return
    current = state.get_run_path()
    table = pd.DataFrame([{
        "open": "●" if current and Path(r.path).resolve() == current.resolve() else "",
        "run": r.name,
        "state": r.status,
        "created (UTC)": r.created.replace("T", " ")[:19],
        "input": r.input_name,
        "rows": r.sizes.get("input"),
        "retained": r.sizes.get("retained"),
        "removed": r.sizes.get("removed"),
        "size on disk (MB)": round(r.disk_bytes / 1e6, 1),
    } for r in runs])
    st.dataframe(table, hide_index=True, height=min(38 * (len(table) + 1), 300))
    names = [r.name for r in runs]
    c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
    choice = c1.selectbox("Run to open", names, key=state.key(PAGE, "open_choice"))
    if c2.button("Open", key=state.key(PAGE, "open"), icon=":material/folder_open:"):
        path = Path(root) / choice
        try:
            cache.open_run(path)
        except (ValueError, OSError) as exc:
            components.show_error(str(exc))
            return
        state.set_run_path(path)
        state.notify(f"Opened {components.md_escape(choice)}.")
        st.rerun()
    st.caption(f"Runs folder: {components.md_escape(state.runs_root_label())} (set "
               "AFLITE_RUNS_DIR to change it).")
