"""Panels of the Data page: sample, upload with column mapping, synthetic demo, report."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import streamlit as st

from aflite_core.io import NO_COLUMN
from ui import cache, components, current, state

#: Formula / rules text of the Data page explainer.
RULES = r"""
* **Column roles** are guessed from the names (SNLI/MNLI names such as `sentence1`,
  `sentence2`, `gold_label`, `pairID` included) and can be changed below. Without a premise
  column the data is single-text.
* **Row ids** are the 0-based position of each row in the file, unless an id column is chosen
  (its values must then be unique).
* **Excluded rows**: label `-` (no gold label), empty label, or empty/whitespace-only text.
  They stay in every export with status `excluded`.
* **Multiple-choice expansion**: a question with choices $c_1..c_k$ and answer $a$ becomes
  $k$ rows (context, $c_j$) with label `right` if $j=a$ else `wrong`; row id
  `"{question}:{j}"`.
* **Duplicates**: `exact` = same premise+hypothesis text as an earlier row; `normalised` =
  same after case-folding and dropping punctuation.
"""

#: File types the uploader accepts (compressed forms included).
UPLOAD_TYPES = ["csv", "tsv", "txt", "jsonl", "ndjson", "json", "parquet", "pq", "gz"]
NONE = "(none)"
AUTOMATIC = "(automatic)"
#: Encodings offered for text uploads ("" = automatic).
ENCODINGS = {"": "Automatic", "utf-8": "UTF-8", "latin-1": "Latin-1 (ISO-8859-1)",
             "cp1252": "Windows-1252", "utf-16": "UTF-16"}


#: The layouts the Data page reads.
LAYOUTS = {
    "rows": "One row per example",
    "wide": "Multiple choice: one row per question",
    "per_choice": "Multiple choice: one row per choice",
}
LAYOUT_HELP = (
    "One row per example: NLI pairs or single texts with a label (a per-choice multiple-"
    "choice file is recognised when a question column groups rows with exactly one correct "
    "choice each; the validation report says so). One row per question: the choices are "
    "columns and an answer column names the right one; each question becomes one row per "
    "choice. One row per choice: a question column groups the rows and the label says "
    "whether each choice is correct (ARCT's files). A question is kept or removed whole."
)


def _index(options: list[str], value: str | None) -> int | None:
    return options.index(value) if value in options else None


def sample_panel(load_sample: Callable[[], str | None]) -> None:
    """Describe the bundled sample and (re)load it on request."""
    path = state.sample_path()
    st.markdown(
        "A few thousand sentence pairs of the **Stanford Natural Language Inference** corpus "
        "(Bowman et al., 2015; licence CC BY-SA 4.0, see `assets/README.md`), with a "
        "`split` column (`train` / `dev`). It is small enough to audit in seconds."
    )
    if not path.is_file():
        components.empty_state(f"The bundled sample is missing ({path}). Upload a file instead.")
        return
    if state.get(state.DATASET_ORIGIN) == "sample" and state.get_dataset() is not None:
        st.success("The bundled sample is loaded.", icon=":material/check_circle:")
        job = state.get(state.JOB)
        target = "app_pages/audit.py"
        if job is not None and job.running:
            label = "Its audit is running now: follow it on the Audit page"
        elif state.get_run_path() is not None:
            target, label = ("app_pages/explore.py",
                             "Its audit is open: see what was removed on the Explore page")
        else:
            label = "Next: audit it with one click on the Audit page"
        st.page_link(target, label=label, icon=":material/play_arrow:")
        return
    if st.button("Load the bundled sample", type="primary", key=state.key("data", "load_sample")):
        problem = load_sample()
        if problem:
            components.show_error(problem)
        else:
            st.rerun()


def upload_panel(page: str) -> None:
    """File uploader, column mapping with guessed defaults, and the Load button."""
    limit = st.get_option("server.maxUploadSize")
    st.caption(f"CSV, TSV, JSON Lines, JSON records or Parquet, optionally gzip-compressed "
               f"(.gz); up to {limit} MB.")
    left, right = st.columns([4, 1])
    uploaded = left.file_uploader("Dataset file", type=UPLOAD_TYPES,
                                  key=state.key(page, "file"))
    encoding = right.selectbox(
        "Encoding", list(ENCODINGS), format_func=ENCODINGS.get, key=state.key(page, "encoding"),
        help="Text files only. Automatic = UTF-8, or UTF-16/32 announced by a byte-order mark.")
    encoding = encoding or None
    if uploaded is None:
        return
    data = uploaded.getvalue()
    sha = cache.upload_digest(uploaded)
    try:
        columns, preview = cache.read_columns(data, uploaded.name, encoding=encoding, key=sha)
    except MemoryError:  # ArrowMemoryError too: the file, not the server, is the problem
        components.show_error(OUT_OF_MEMORY.format(name=uploaded.name))
        return
    except (ValueError, OSError) as exc:
        hint = "Check the file and upload it again."
        if "decode" in str(exc) or "encoding" in str(exc):
            hint = ("Pick the file's encoding under **Encoding** above (e.g. Latin-1) and it "
                    "is read again.")
        components.show_error(str(exc), hint=hint)
        return
    file_key = sha[:12] + (encoding or "")
    mapping_form(page, uploaded.name, columns, preview, file_key, encoding=encoding,
                 load=lambda mapping: cache.load_upload(data, uploaded.name, key=sha,
                                                        **mapping),
                 origin="upload")


#: The one notice of an input that needs more memory than the server has to read.
OUT_OF_MEMORY = ("{name}: reading it needs more memory than this server has; nothing was "
                 "loaded. Its cells may be very large: check the file, or audit it from the "
                 "command line (python -m aflite_core run), which refuses cells over "
                 "--max-line-bytes.")


def path_panel(page: str) -> None:
    """A path on this server (a file, a folder of shards, a glob, a ``datasets`` folder),
    the same column mapping, and the Load button: for data too big to upload."""
    st.caption("A dataset file, a folder of Parquet / CSV / JSON Lines shards, a glob such as "
               "`data/train-*.parquet`, or a Hugging Face `datasets` folder (`save_to_disk`; "
               "a DatasetDict's keys become the split column), read by this server "
               f"(up to {cache.MAX_PATH_BYTES >> 30} GB).")
    path = st.text_input("Path on this server", key=state.key(page, "server_path"),
                         placeholder="/data/snli/train.parquet").strip()
    if not path:
        return
    try:
        stamp = cache.path_stamp(path)
        columns, preview = cache.read_path_columns(path, stamp)
    except MemoryError:
        components.show_error(OUT_OF_MEMORY.format(name=Path(path).name))
        return
    except (ValueError, OSError) as exc:
        components.show_error(str(exc), hint="Check the path: it is read on the machine that "
                                             "runs the dashboard.")
        return
    mapping_form(page, path, columns, preview, stamp[:12], encoding=None,
                 load=lambda mapping: cache.load_server_path(path, stamp, **mapping),
                 origin="path")


def mapping_form(page: str, label: str, columns: list[str], preview: pd.DataFrame,
                 file_key: str, *, encoding: str | None, load: Callable[[dict], object],
                 origin: str) -> None:
    """The column mapping of a read table (roles guessed from the names) and the Load
    button; ``load(mapping)`` returns the dataset, which becomes the session's."""
    guess = cache.guess_roles(columns)
    with st.expander(f"Columns of {components.md_escape(label)} (first rows)",
                     expanded=False):
        st.dataframe(preview, hide_index=True, column_config=components.column_config(preview))

    def wkey(name: str) -> str:
        return state.key(page, f"{name}:{file_key}")

    layout = st.radio("Layout", list(LAYOUTS), format_func=LAYOUTS.get, key=wkey("layout"),
                      horizontal=True, help=LAYOUT_HELP)
    multiple_choice = layout == "wide"
    options = [NONE, *columns]
    mapping: dict[str, object] = {}
    left, right = st.columns(2)
    if layout == "per_choice":
        mapping["question"] = left.selectbox(
            "Question column (groups a question's rows)", columns, index=None,
            key=wkey("question"), placeholder="Choose a column")
    if multiple_choice:
        mapping["premise"] = left.selectbox("Context column (optional)", options,
                                            index=_index(options, guess["premise"]) or 0,
                                            key=wkey("context"))
        mapping["choices"] = left.multiselect("Choice columns", columns, key=wkey("choices"))
        mapping["answer"] = right.selectbox(
            "Answer column (index, letter or the right choice's text)", columns, index=None,
            key=wkey("answer"), placeholder="Choose a column")
    else:
        mapping["hypothesis"] = left.selectbox(
            "Text / hypothesis column", columns, index=_index(columns, guess["hypothesis"]),
            key=wkey("hypothesis"), placeholder="Choose a column")
        mapping["premise"] = left.selectbox(
            "Premise column (optional)", options, index=_index(options, guess["premise"]) or 0,
            key=wkey("premise"))
        mapping["label"] = right.selectbox(
            "Label column" if layout == "rows" else "Correct? column (correct/incorrect, "
            "1/0, true/false)", columns, index=_index(columns, guess["label"]),
            key=wkey("label"), placeholder="Choose a column")
    mapping["split"] = right.selectbox("Split column (optional)", options,
                                       index=_index(options, guess["split"]) or 0,
                                       key=wkey("split"))
    mapping["id"] = right.selectbox(
        "Id column (optional; otherwise row ids are positions)", options, index=0,
        key=wkey("id"), help="The column must hold unique values.")
    mapping["group"] = right.selectbox(
        "Group column", [AUTOMATIC, *options], index=0, key=wkey("group"),
        help="Rows with equal values stay on one side of every train/test split. Automatic: "
             "the question for multiple choice, the premise when premises repeat (SNLI).")
    # "(none)" is an explicit "no such column" (NO_COLUMN), never guessed again; only the id
    # has no guess, so its "(none)" is simply absent
    mapping = {k: (None if v == AUTOMATIC or (v == NONE and k == "id")
                   else NO_COLUMN if v == NONE else v) for k, v in mapping.items()}
    mapping["encoding"] = encoding

    complete = bool(mapping.get("choices") and mapping.get("answer")) if multiple_choice else (
        bool(mapping.get("hypothesis") and mapping.get("label"))
        and (layout != "per_choice" or bool(mapping.get("question"))))
    auto_key = state.key(page, "auto_loaded")
    clicked = st.button("Load with this mapping", type="primary", key=wkey("load"))
    first_time = state.get(auto_key) != file_key and complete and layout == "rows"
    if not (clicked or first_time):
        return
    state.put(auto_key, file_key)
    if not complete:
        components.show_error("Choose the columns first: " + {
            "wide": "the choice columns and the answer column.",
            "per_choice": "the question column, the choice text column and the correct? "
                          "column.",
        }.get(layout, "the text column and the label column."))
        return
    try:
        dataset = load(mapping)
    except MemoryError:
        components.show_error(OUT_OF_MEMORY.format(name=label))
        return
    except (ValueError, OSError) as exc:
        components.show_error(str(exc))
        return
    current.use_dataset(dataset, origin=origin)
    st.rerun()


def synthetic_panel(page: str) -> None:
    """Generate the paper's biased circles and load them with their features."""
    st.markdown(
        "The AFLite paper's synthetic experiment: two concentric circles (a task a linear "
        "model cannot solve) with planted, linearly separable **bias features** added to most "
        "rows. AFLite should remove the biased rows first, leaving the hard circles."
    )
    left, right = st.columns(2)
    n = left.select_slider("Rows", options=[1000, 2000, 4000, 8000], value=2000,
                           key=state.key(page, "synthetic_n"))
    seed = right.number_input("Seed", min_value=0, value=0, step=1,
                              key=state.key(page, "synthetic_seed"))
    if st.button("Generate and load the demo", type="primary",
                 key=state.key(page, "synthetic_go")):
        try:
            dataset, features = cache.synthetic_demo(int(n), int(seed), state.session_dir())
        except (ValueError, OSError) as exc:
            components.show_error(str(exc))
            return
        current.use_dataset(dataset, origin="synthetic", embeddings=str(features))
        state.notify("Synthetic demo loaded: audit it on the Audit page with its features "
                     "(pre-selected).")
        st.rerun()
    if state.get(state.DATASET_ORIGIN) == "synthetic":
        st.success("The synthetic demo is loaded; its features are used on the Audit page.",
                   icon=":material/check_circle:")


def validation_report(dataset, page: str) -> None:
    """Rows read / included / excluded, labels, duplicates, text lengths, preview."""
    report = dataset.report
    st.subheader("Validation report")
    st.caption(f"{components.md_escape(dataset.name)} · {report.format or 'file'}"
               + (f" · {report.encoding}" if report.encoding else "")
               + f" · SHA-256 {dataset.content_hash[:12]}…")
    excluded = sum(report.excluded.values())
    items = [("Rows read", f"{report.n_read:,}", None),
             ("Included", f"{report.n_included:,}", None),
             ("Excluded", f"{excluded:,}", None),
             ("Labels", f"{len(report.label_counts):,}", None)]
    if report.n_questions:
        items.append(("Questions expanded", f"{report.n_questions:,}", None))
    components.metric_row(items)
    for warning in report.warnings:
        st.warning(components.md_escape(warning), icon=":material/warning:")

    left, right = st.columns(2)
    with left:
        # each label's share as a bar in its row: the first page draws no Plotly figure, whose
        # script (3.5 MB) held the page's first paint back by 0.5 s in a fresh browser
        st.markdown("**Label distribution** (included rows)")
        counts = list(report.label_counts.values())
        total = max(sum(counts), 1)
        st.dataframe(pd.DataFrame({"label": list(report.label_counts), "rows": counts,
                                   "share": [100.0 * c / total for c in counts]}),
                     hide_index=True, height=min(35 * (len(report.label_counts) + 1) + 3, 300),
                     column_config={"share": st.column_config.ProgressColumn(
                         "share", format="%.1f %%", min_value=0.0, max_value=100.0)})
    with right:
        st.markdown("**Excluded rows by reason**")
        if report.excluded:
            st.dataframe(pd.DataFrame({"reason": list(report.excluded),
                                       "rows": list(report.excluded.values())}),
                         hide_index=True)
        else:
            st.caption("No row was excluded.")
        st.markdown("**Duplicates** (included rows)")
        if report.duplicates:
            st.dataframe(pd.DataFrame({"kind": list(report.duplicates),
                                       "rows": list(report.duplicates.values())}),
                         hide_index=True)
        st.markdown("**Text length** (characters)")
        if report.text_lengths:
            st.dataframe(pd.DataFrame(report.text_lengths).T.rename_axis("column"))
        mapping = {k: v for k, v in dataset.columns.to_dict().items() if v}
        st.markdown("**Column roles**")
        st.dataframe(pd.DataFrame({"role": list(mapping), "column": list(mapping.values())}),
                     hide_index=True)
        if report.suggested_id:
            suggested = components.md_escape(repr(report.suggested_id))
            st.caption(f"An id column with unique values was found: {suggested}. "
                       "Row ids are positions; choose it as the id column on upload to use it.")

    st.markdown("**Rows**")
    only_excluded = st.toggle("Only excluded rows", key=state.key(page, "only_excluded"),
                              disabled=excluded == 0)
    frame = dataset.frame
    reasons = dataset.exclusion.rename("excluded because")
    if only_excluded:
        keep = reasons.to_numpy() != ""
        frame, reasons = frame[keep], reasons[keep]
    table = components.with_row_id(pd.concat([reasons, frame], axis=1))
    components.paged_table(table, page_key=state.key(page, "rows_page"), page_size=25)
    st.page_link("app_pages/audit.py", label="Next: audit this dataset",
                 icon=":material/arrow_forward:")
