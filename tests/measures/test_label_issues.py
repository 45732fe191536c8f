"""Label issues (aflite_core.measures.label_issues) on planted flips: found, group-aware,
exported, skipped with a reason when they cannot be computed."""

from __future__ import annotations

import csv
import io

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from aflite_core.errors import MeasureSkipped
from aflite_core.io._text_columns import str_codes
from aflite_core.measures import label_issues
from aflite_core.represent._text_models import pair_texts

WORDS = {"entailment": "surely", "neutral": "perhaps", "contradiction": "never"}


def planted(n: int = 900, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Pairs whose label is written in the hypothesis (a cue word), 10 % of labels flipped."""
    rng = np.random.default_rng(seed)
    labels = rng.choice(sorted(WORDS), n)
    nouns = ["dog", "cat", "man", "woman", "child", "bird", "car", "boat"]
    premises = [f"a {rng.choice(nouns)} is near the {rng.choice(nouns)} number {i // 3}"
                for i in range(n)]
    hypotheses = [f"the {rng.choice(nouns)} {WORDS[lab]} moves" for lab in labels]
    flipped = np.zeros(n, dtype=bool)
    flipped[rng.choice(n, n // 10, replace=False)] = True
    given = labels.copy()
    for i in np.flatnonzero(flipped):
        given[i] = rng.choice([c for c in sorted(WORDS) if c != labels[i]])
    frame = pd.DataFrame({"id": [f"r{i}" for i in range(n)], "premise": premises,
                          "hypothesis": hypotheses, "label": given})
    return frame, flipped


def test_planted_flips_are_ranked_first_and_flagged():
    frame, flipped = planted()
    classes, proba = label_issues.out_of_fold_probabilities(
        pair_texts(frame["premise"].tolist(), frame["hypothesis"].tolist()), frame["label"],
        groups=frame["premise"].to_numpy())
    table = label_issues.find_label_issues(frame["label"], classes, proba)
    codes = np.searchsorted(classes, frame["label"].to_numpy())
    # label quality is the out-of-fold probability of the given label
    np.testing.assert_allclose(table["label_quality"], proba[np.arange(len(frame)), codes])
    assert roc_auc_score(flipped, -table["label_quality"]) > 0.95
    flagged = table["is_label_issue"].to_numpy()
    assert flagged[flipped].mean() > 0.9 and flipped[flagged].mean() > 0.8
    # the suggested label of a flagged flip is the label it had before the flip
    truth = np.array([next(k for k, w in WORDS.items() if w in h)
                      for h in frame["hypothesis"]])
    hits = flagged & flipped
    assert (table["suggested_label"].to_numpy()[hits] == truth[hits]).mean() > 0.95


def test_a_row_is_never_scored_by_a_model_that_saw_its_group():
    """Each group's rows share a unique token and a label of their own: a model that trained
    on a group-mate would read the label off the token. Grouped folds cannot; plain ones do."""
    rng = np.random.default_rng(1)
    n_groups, size = 100, 8
    labels = np.repeat(rng.choice(["a", "b", "c"], n_groups), size)
    texts = [f"token{g} shared words here" for g in np.repeat(np.arange(n_groups), size)]
    groups = np.repeat(np.arange(n_groups), size)
    data = pair_texts(None, texts)
    right = {}
    for name, g in (("grouped", groups), ("plain", None)):
        classes, proba = label_issues.out_of_fold_probabilities(data, labels, groups=g)
        right[name] = float(np.mean(classes[proba.argmax(axis=1)] == labels))
    assert right["plain"] > 0.9
    assert right["grouped"] < 0.5  # chance is 1/3: nothing leaked from a group-mate


def test_summaries_count_flags_per_status_and_label_pair():
    table = pd.DataFrame({
        "row_id": ["a", "b", "c", "d", "e"],
        "status": ["retained", "retained", "removed", "retained", "removed"],
        "given_label": ["x", "y", "x", "x", "y"],
        "suggested_label": ["y", "y", "y", "y", "x"],
        "label_quality": [0.1, 0.9, 0.2, 0.3, 0.4],
        "is_label_issue": [True, False, True, True, False],
    })
    summary = label_issues.issue_summary(table).set_index("rows")
    assert summary.loc["retained", "label issues"] == 2
    assert summary.loc["retained", "share flagged"] == pytest.approx(2 / 3)
    assert summary.loc["all", "scored"] == 5
    assert summary.loc["all", "model agrees with the label"] == pytest.approx(1 / 5)
    pairs = label_issues.label_pairs(table)
    assert pairs.to_dict("records") == [{"given label": "x", "suggested label": "y",
                                         "label issues": 3, "retained": 2, "removed": 1}]


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory):
    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit

    frame, flipped = planted(n=600, seed=2)
    folder = tmp_path_factory.mktemp("label-issues")
    frame.to_csv(folder / "planted.csv", index=False)
    dataset = load_dataset(str(folder / "planted.csv"), premise="premise",
                           hypothesis="hypothesis", label="label", id="id")
    run = run_audit(dataset, AuditConfig(
        n_partitions=8, representation_params={"n_components": 16},
        measures=("label_issues",)), runs_root=folder / "runs")
    return run, frame, flipped


def test_a_run_writes_the_issues_and_exports_the_clean_and_the_flagged_rows(planted_run):
    from aflite_core.runs.exports import export_bytes
    from aflite_core.runs.folder import load_run

    path, frame, flipped = planted_run
    run = load_run(path)
    info = run.summary["measures"]["label_issues"]
    assert info["status"] == "ok" and info["grouped"] and info["n_rows_scored"] == len(frame)
    issues = run.read_parquet("label_issues.parquet")
    flips = dict(zip(frame["id"], flipped, strict=True))
    found = issues.loc[issues["is_label_issue"], "row_id"].map(flips)
    assert found.mean() > 0.8 and info["n_label_issues"] == len(found)
    status = run.scores.set_index("row_id")["status"]
    assert (issues.set_index("row_id")["status"] == status.reindex(issues["row_id"])).all()

    def exported(what: str) -> list[dict]:
        return list(csv.DictReader(io.StringIO(export_bytes(run, what).decode("utf-8"))))

    flagged_ids = set(issues.loc[issues["is_label_issue"], "row_id"])
    clean = exported("retained_clean")
    retained = set(status.index[status == "retained"])
    assert {r["row_id"] for r in clean} == retained - flagged_ids
    assert {r["status"] for r in clean} == {"retained"}
    flagged_rows = exported("flagged")
    assert {r["row_id"] for r in flagged_rows} == flagged_ids
    # the file for relabelling carries what flagged each row and the suggested label
    by_id = issues.set_index("row_id")
    for row in flagged_rows:
        truth = by_id.loc[row["row_id"]]
        assert row["is_label_issue"] == "True"
        assert row["suggested_label"] == truth["suggested_label"]
        assert abs(float(row["label_quality"]) - truth["label_quality"]) < 1e-12
    # Explore's columns: the label quality and the flag of every scored row
    from aflite_core.runs.views import rows_table

    table = rows_table(run)
    assert set(table[label_issues.ISSUE_COLUMN].dropna()) == {"flagged", "no"}
    assert (table[label_issues.ISSUE_COLUMN] == "flagged").sum() == len(flagged_ids)


def test_a_run_without_label_issues_refuses_their_exports(tmp_path):
    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit
    from aflite_core.runs.exports import export_bytes

    frame, _ = planted(n=300, seed=3)
    frame.to_csv(tmp_path / "p.csv", index=False)
    run = run_audit(load_dataset(str(tmp_path / "p.csv"), premise="premise",
                                 hypothesis="hypothesis", label="label"),
                    AuditConfig(n_partitions=4, representation_params={"n_components": 8},
                                measures=()), runs_root=tmp_path / "runs")
    with pytest.raises(ValueError, match="needs the label issues of the run"):
        export_bytes(run, "retained_clean")


@pytest.mark.parametrize("labels, reason", [
    (["a"] * 40, "single label"),
    (["a"] * 39 + ["b"], "fewer than the 2 cross-validation folds"),
])
def test_labels_that_cannot_be_cross_validated_skip_the_measure(labels, reason):
    class Context:
        y = np.array(labels, dtype=object)
        params: dict = {}
        groups = None
        random_state = 0  # no texts: the measure skips before it reads any

        def label_codes(self):
            return str_codes(self.y)

    with pytest.raises(MeasureSkipped, match=reason):
        label_issues.compute(Context())


def test_label_quality_averages_the_given_label_with_aflites_where_it_has_one():
    proba = np.array([[0.6, 0.3, 0.1], [1.0, 0.0, 0.0], [0.2, 0.5, 0.3]])
    out = label_issues.blended_quality(proba, np.array([0, 0, 2]),
                                       np.array([0.2, 0.4, np.nan]))
    np.testing.assert_allclose(out, [0.4, 0.7, 0.3])  # (0.6 + 0.2) / 2, (1 + 0.4) / 2, alone


def test_cleanlab_loads_without_its_datalab_and_datalab_still_works_afterwards():
    """The measure imports cleanlab without the Datalab its package loads eagerly (it pulls
    Hugging Face datasets: 0.25-0.3 s of every audit); a later use of Datalab in the same
    process still gets cleanlab's real class (or cleanlab's own placeholder when its extra
    dependencies are missing), as with a plain ``import cleanlab``."""
    import subprocess
    import sys

    code = (
        "import sys, importlib.util\n"
        "from aflite_core.measures.label_issues import _cleanlab\n"
        "issues, quality = _cleanlab()\n"
        "import numpy as np\n"
        "p = np.array([[0.9, 0.1], [0.2, 0.8], [0.9, 0.1], [0.1, 0.9]] * 5)\n"
        "y = np.array([0, 1, 1, 1] * 5)\n"
        "print(int(issues(y, p).sum()), bool(quality(y, p)[2] < quality(y, p)[0]))\n"
        "print('cleanlab.datalab.datalab' in sys.modules, 'datasets' in sys.modules)\n"
        "import cleanlab\n"
        "expected = cleanlab._datalab_import_factory()\n"
        "print(cleanlab.Datalab is expected or type(cleanlab.Datalab) is type(expected))\n"
        "print(isinstance(cleanlab.Datalab, type) == (importlib.util.find_spec('datasets')"
        " is not None))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert out[0] == "5 True"  # the flipped rows are flagged and ranked low
    assert out[1] == "False False"  # neither Datalab nor datasets loaded by the measure
    assert out[2] == "True"  # then cleanlab.Datalab resolves as cleanlab itself resolves it
    assert out[3] == "True"
