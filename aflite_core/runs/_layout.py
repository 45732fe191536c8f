"""The names of a run folder's files and row statuses (see ``docs/run-format.md``).

Measures declare their own files in the measure registry; the names here are the ones
every run has.
"""

from __future__ import annotations

#: Version of the folder layout written by this version; readers accept <= this.
FORMAT_VERSION = 1

SUMMARY_FILE = "summary.json"
SCORES_FILE = "scores.parquet"
DATASET_FILE = "dataset.parquet"
CUES_FILE = "cues.parquet"
KNN_FILE = "knn.parquet"
KNN_EXAMPLES_FILE = "knn_examples.parquet"
PROJECTION_FILE = "projection.parquet"
BASELINES_FILE = "baselines.json"
DUPLICATES_FILE = "duplicates.json"
INOCULATION_FILE = "inoculation.json"
REPORT_FILE = "report.html"

#: Row statuses, in the order used in tables and exports. ``unfiltered``: kept, not filtered
#: (a dev/test row when AFLite filtered the training split only: scored, never removable).
STATUSES = ("retained", "removed", "unfiltered", "warmup", "excluded")
#: How a reader sees each status (tables, charts, metrics).
STATUS_NAMES = {"retained": "retained", "removed": "removed",
                "unfiltered": "kept, not filtered", "warmup": "warm-up",
                "excluded": "excluded"}
#: Per-status CSV of the original rows (written when the status is non-empty).
ROW_CSV_FILES = {status: f"{status}.csv" for status in STATUSES}
#: Columns every ``scores.parquet`` must have (``label`` is optional for old folders).
SCORES_COLUMNS = ("row_id", "status", "predictability", "removal_round")
