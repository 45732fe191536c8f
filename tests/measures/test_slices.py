"""The "why removed" slices: statistics by hand, planted artifacts found first, run folder."""

from __future__ import annotations

import io
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from planted import planted_frame

from aflite_core.io.datasets import load_dataset
from aflite_core.measures import _slices_fold as slices_fold
from aflite_core.measures import registry, slices
from aflite_core.measures.registry import MeasureContext
from aflite_core.measures.slices import SliceFeatures, find_slices
from aflite_core.pipeline import AuditConfig, run_audit
from aflite_core.runs.exports import export_bytes
from aflite_core.runs.folder import load_run


def features(columns: dict[str, np.ndarray], family: str = "word") -> SliceFeatures:
    X = sp.csc_matrix(np.column_stack(list(columns.values())).astype(np.int8))
    names = np.asarray(list(columns), dtype=object)
    return SliceFeatures(X, np.full(len(names), family, dtype=object), names, names)


# ----------------------------------------------------------------------------- by hand


def test_z_and_wilson_interval_by_hand():
    # 20 rows, 6 removed; slice "a" = rows 0-9 with 5 removed, the other rows 1 removed of 10
    removed = np.zeros(20, dtype=bool)
    removed[[0, 1, 2, 3, 4, 15]] = True
    a = np.arange(20) < 10
    b = np.isin(np.arange(20), [10, 11, 12, 13, 14, 15, 16, 17])
    found = find_slices(features({"a": a, "b": b}), removed, min_support=5, pair_top=0,
                        row_ids=np.arange(100, 120))
    row = found.table.set_index("slice_id").loc["word=a"]
    assert (row["size"], row["removed"]) == (10, 5)
    assert row["removal_rate"] == 0.5 and row["base_rate"] == pytest.approx(0.3)
    # two-proportion z: (5/10 - 1/10) / sqrt(0.3 * 0.7 * (1/10 + 1/10))
    assert row["z"] == pytest.approx(0.4 / math.sqrt(0.21 * 0.2))
    # Wilson 95 %: (p + z²/2n ± z sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n), p = 0.5, n = 10
    z = 1.959963984540054
    centre = (0.5 + z * z / 20) / (1 + z * z / 10)
    half = z / (1 + z * z / 10) * math.sqrt(0.025 + z * z / 400)
    assert row["ci_low"] == pytest.approx(centre - half)
    assert row["ci_high"] == pytest.approx(centre + half)
    assert (round(row["ci_low"], 3), round(row["ci_high"], 3)) == (0.237, 0.763)
    assert row["share_of_removed"] == pytest.approx(5 / 6)
    # examples are removed rows of the slice (it is removed more than the base rate), by id
    examples = [int(x) for x in row["examples"].split(", ")]
    assert len(examples) == 5 and set(examples) == {100, 101, 102, 103, 104}
    # b: 1 removed of 8, against 5 of 12
    b_row = found.table.set_index("slice_id").loc["word=b"]
    assert b_row["z"] == pytest.approx((1 / 8 - 5 / 12) / math.sqrt(0.21 * (1 / 8 + 1 / 12)))
    assert list(found.table["slice_id"]) == ["word=a", "word=b"]  # ranked by |z|
    assert found.table["rank"].tolist() == [1, 2]
    assert [m.tolist() for m in found.members] == [list(range(10)), list(range(10, 18))]


def test_removal_z_is_zero_when_undefined():
    assert slices.removal_z(np.array([0]), np.array([5]), 0, 10)[0] == 0.0  # none removed
    assert slices.removal_z(np.array([5]), np.array([10]), 5, 10)[0] == 0.0  # every row
    lo, hi = slices.wilson_interval(np.array([0, 10]), np.array([10, 10]))
    assert lo[0] == 0.0 and hi[1] == pytest.approx(1.0) and 0 < hi[0] < 0.35 < 0.65 < lo[1] < 1


def test_same_and_complementary_rows_are_listed_once():
    rng = np.random.default_rng(0)
    removed = rng.random(200) < 0.3
    a = removed | (rng.random(200) < 0.1)
    found = find_slices(
        features({"a": a, "a_again": a.copy(), "not_a": ~a, "noise": rng.random(200) < 0.5}),
        removed, min_support=10, pair_top=0)
    table = found.table.set_index("slice_id")
    assert "word=a_again" not in table.index and "word=not_a" not in table.index
    assert table.loc["word=a", "same_rows"] == "word=a_again, not word=not_a"
    assert table.loc["word=a", "z"] > 0  # the side removed more often is the one kept


def test_nearly_the_same_rows_fold_under_the_strongest_slice():
    # one planted artifact under three names: the word, a typo flag that also fires on a
    # few other rows, and a flag missing a few of its rows; an unrelated cue stays apart
    rng = np.random.default_rng(1)
    n = 2000
    word = rng.random(n) < 0.1
    removed = word | (rng.random(n) < 0.2)
    typo = word | (rng.random(n) < 0.01)
    partial = word & (rng.random(n) < 0.9)
    other = rng.random(n) < 0.3
    found = find_slices(features({"planted": word, "typo": typo, "partial": partial,
                                  "other": other}), removed, min_support=10, pair_top=0)
    table = found.table.set_index("slice_id")
    strongest = found.table.iloc[0]["slice_id"]
    assert strongest in {"word=planted", "word=typo", "word=partial"}
    folded = table.loc[strongest, "folded"]
    names = {"word=planted", "word=typo", "word=partial"} - {strongest}
    assert all(f"{name} (" in folded for name in names), folded
    assert not names & set(table.index)          # folded slices leave the ranking
    assert "word=other" in table.index and table.loc["word=other", "folded"] == ""
    assert list(found.table["rank"]) == list(range(1, len(found.table) + 1))
    # the stored rows follow the ranking after folding
    assert np.array_equal(found.members[0], np.flatnonzero(
        {"word=planted": word, "word=typo": typo, "word=partial": partial}[strongest]))


def test_fold_similar_by_hand():
    a = np.arange(100)
    b = np.arange(5, 100)          # Jaccard 0.95 with a
    c = np.arange(50, 150)         # Jaccard 50 / 150 with a
    kept, folded = slices_fold.fold_similar([a, b, c], ["a", "b", "c"], threshold=0.8)
    assert kept == [0, 2] and folded == ["b (0.95)", ""]
    assert slices_fold.fold_similar([a, b, c], ["a", "b", "c"], threshold=0.99)[0] == [0, 1, 2]


def test_a_pair_is_kept_only_when_it_adds_to_both_cues():
    # "not" is removed only with label c (an interaction); "w1" is a subset of a strong cue
    rng = np.random.default_rng(1)
    n = 3000
    label_c = rng.random(n) < 1 / 3
    has_not = rng.random(n) < 0.3
    strong = rng.random(n) < 0.2
    w1 = rng.random(n) < 0.5
    removed = np.where(has_not & label_c, rng.random(n) < 0.9,
                       np.where(strong, rng.random(n) < 0.8, rng.random(n) < 0.2))
    feats = SliceFeatures.stack([features({"not": has_not, "strong": strong, "w1": w1}),
                                 features({"c": label_c, "other": ~label_c}, "label")], n)
    table = find_slices(feats, removed, min_support=20, pair_top=10).table
    pairs = table[table["kind"] == "pair"].set_index("slice_id")
    assert "word=not & label=c" in pairs.index
    assert pairs.loc["word=not & label=c", "z_within_parts"] >= slices.PAIR_MIN_Z
    assert "word=strong & word=w1" not in pairs.index  # nothing beyond "strong" itself
    assert table.iloc[0]["slice_id"] in ("word=strong", "word=not & label=c")


def test_length_bins_and_best_cut():
    lengths = np.array([3, 4, 5, 6, 7, 8, 9, 10, 20, 22] * 10)
    bins = slices.length_features(lengths, n_bins=5)
    assert list(bins.value) == ["hypothesis <=4 words", "hypothesis 5-6 words",
                                "hypothesis 7-8 words", "hypothesis 9-10 words",
                                "hypothesis >=20 words"]
    assert np.asarray(bins.X.sum(axis=0)).ravel().tolist() == [20] * 5
    assert (np.asarray(bins.X.sum(axis=1)).ravel() == 1).all()  # every row in one bin
    removed = lengths >= 20
    cut = slices.length_thresholds(lengths, removed, min_support=5)
    assert list(cut.value) == ["hypothesis >=20 words (best cut)"]
    assert (cut.X.toarray().ravel() == 1).tolist() == removed.tolist()


def test_bad_arguments_are_refused():
    f = features({"a": np.ones(4, dtype=bool)})
    with pytest.raises(ValueError, match="removed: expected 4 values"):
        find_slices(f, np.zeros(3, dtype=bool))
    with pytest.raises(ValueError, match="min_support: expected an int >= 1"):
        find_slices(f, np.zeros(4, dtype=bool), min_support=0)
    assert find_slices(f, np.zeros(4, dtype=bool), min_support=1).table.empty


# ----------------------------------------------------------------------------- planted data


def word_artifact(frame: pd.DataFrame) -> np.ndarray:
    return frame["hypothesis"].str.contains("cueyes").to_numpy()


def length_artifact(frame: pd.DataFrame) -> np.ndarray:
    return (frame["hypothesis"].str.split().str.len() >= 16).to_numpy()


def _is_length_slice(slice_id: str, long_rows: np.ndarray, members: np.ndarray) -> bool:
    """A length slice made mostly of the long rows."""
    return slice_id.startswith("length=hypothesis") and long_rows[members].mean() > 0.6


def _context(frame: pd.DataFrame, keep: np.ndarray, **params) -> MeasureContext:
    dataset = load_dataset(frame, name="planted", group="")
    n = len(frame)
    X = np.random.default_rng(3).standard_normal((n, 16)).astype(np.float32)
    rep = SimpleNamespace(X=X, row_ids=dataset.row_ids(), warmup_mask=np.zeros(n, dtype=bool))
    return MeasureContext(dataset=dataset, representation=rep,
                          filterable=np.ones(n, dtype=bool),
                          labels=np.asarray(dataset.labels(), dtype=object), keep=keep,
                          scores=pd.DataFrame(), retained_ids=np.empty(0), random_state=0,
                          params=params)


def test_planted_removal_mask_both_artifacts_in_the_top_3():
    frame = planted_frame()
    word, long = word_artifact(frame), length_artifact(frame)
    rng = np.random.default_rng(5)
    removed = np.where(word | long, rng.random(len(frame)) < 0.85, rng.random(len(frame)) < 0.25)
    result = slices.compute(_context(frame, ~removed))
    table = result.tables[slices.FILE]
    members = result.tables[slices.MEMBERS_FILE]
    top = table.head(3)
    assert "word=cueyes" in top["slice_id"].tolist(), top
    bitmaps = [np.unpackbits(np.frombuffer(b, dtype=np.uint8), count=len(frame),
                             bitorder="little").astype(bool) for b in members["members"]]
    assert any(_is_length_slice(s, long, m) for s, m in zip(top["slice_id"], bitmaps[:3],
                                                              strict=True)), top
    # the stored rows are the slice's rows
    cue = table.index[table["slice_id"] == "word=cueyes"][0]
    assert (bitmaps[cue] == word).all()
    assert table.loc[cue, "size"] == word.sum()
    assert table.loc[cue, "removed"] == (word & removed).sum()
    assert "typo=typo" in table.loc[cue, "same_rows"]  # a made-up word is also a typo
    assert (np.abs(table["z"]).diff().dropna() <= 1e-9).all()  # ranked by |z|
    kinds = set(table["kind"])
    assert {"cue", "cluster"} <= kinds
    assert {"label", "length", "word"} <= set(table["family"])


def test_rows_of_a_split_aflite_never_touched_are_left_out():
    frame = planted_frame(600)
    frame.loc[frame.index % 3 == 0, "split"] = "test"
    rng = np.random.default_rng(2)
    removed = (frame["split"] == "train").to_numpy() & (rng.random(600) < 0.4)
    result = slices.compute(_context(frame, ~removed, n_clusters=0))
    table = result.tables[slices.FILE]
    label = table[table["family"] == "label"].iloc[0]  # the other label is its complement
    train = (frame["split"] == "train").to_numpy()
    assert label["size"] == (train & (frame["label"] == label["slice_id"][6:])).sum() == 200
    assert label["same_rows"].startswith("not label=")
    assert label["base_rate"] == pytest.approx(removed.sum() / train.sum())


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory):
    """A real audit (AFLite on TF-IDF + SVD) of the planted rows, cues then slices."""
    frame = planted_frame()
    config = AuditConfig(representation_params={"n_components": 32}, n_partitions=32,
                         target_size=0.6, measures=("cues", "slices"))
    path = run_audit(load_dataset(frame, name="planted"), config,
                     runs_root=tmp_path_factory.mktemp("runs"))
    return frame, load_run(path)


def test_aflite_run_ranks_both_planted_artifacts_in_the_top_3(planted_run):
    frame, run = planted_run
    assert run.measures["slices"]["status"] == "ok", run.measures["slices"]
    table = run.read_parquet(slices.FILE)
    top = table.head(3)
    assert "word=cueyes" in top["slice_id"].tolist(), top
    long = length_artifact(frame)
    masks = [slices.member_mask(run, s) for s in top["slice_id"]]
    planted = [i for i, (s, m) in enumerate(zip(top["slice_id"], masks, strict=True))
               if s == "word=cueyes" or _is_length_slice(s, long, m)]
    assert any(_is_length_slice(s, long, m) for s, m in zip(top["slice_id"], masks,
                                                              strict=True)), top
    # both artifacts are over-removed (a short-length bin, their complement, may rank third
    # with z < 0: it is under-removed because the long rows went)
    assert (top["z"].iloc[planted] > 0).all(), top


def test_run_folder_round_trip(planted_run):
    frame, run = planted_run
    measure = registry.get("slices")
    assert measure is slices.MEASURE and measure.default
    assert run.measure_states()["slices"] == "ok"
    (title, table), = measure.before_after(run).items()
    assert "slices" in title.lower() and list(table.columns) == list(slices.COLUMNS)
    stored = run.read_parquet(slices.MEMBERS_FILE)
    assert stored["slice_id"].tolist() == table["slice_id"].head(len(stored)).tolist()
    # every stored slice's mask has its size, its removed count and only filtered rows
    status = run.scores["status"].astype(str).to_numpy()
    for row in table.head(len(stored)).itertuples():
        mask = slices.member_mask(run, row.slice_id)
        assert mask.sum() == row.size
        assert (status[mask] == "removed").sum() == row.removed
        assert np.isin(status[mask], ["retained", "removed"]).all()
    # examples are row ids of the slice
    first = table.iloc[0]
    mask = slices.member_mask(run, first["slice_id"])
    ids = set(run.scores["row_id"].to_numpy()[mask].astype(str))
    assert set(first["examples"].split(", ")) <= ids
    with pytest.raises(LookupError, match="not among the stored slices"):
        slices.member_mask(run, "word=no-such-word")
    exported = pd.read_csv(io.BytesIO(export_bytes(run, "slices", format="csv")))
    assert len(exported) == len(table) and "removal_rate" in exported.columns
    html = (run.path / "report.html").read_text(encoding="utf-8")
    section = html[html.index('<section id="slices">'):]
    section = section[:section.index("</section>")]
    assert "cueyes" in section and "removal_rate" in section


def test_word_counts_match_re2_non_space_runs():
    import pyarrow as pa
    import pyarrow.compute as pc

    rng = np.random.default_rng(4)
    alphabet = list("ab \t\n\r\f\vé中 x")
    texts = ["".join(rng.choice(alphabet, size=rng.integers(0, 12))) for _ in range(3000)]
    texts += ["", " ", "a", " a ", "ü ü", "don't stop"]
    expected = pc.count_substring_regex(pa.array(texts), r"\S+").to_numpy(zero_copy_only=False)
    assert slices.word_counts(texts).tolist() == expected.tolist()
    assert slices.word_counts([]).tolist() == []


def test_word_counts_in_blocks_are_the_counts_at_once(monkeypatch):
    """Blocks of texts bound the byte-wise temporaries; a text's count is its own."""
    from aflite_core.measures import _slices_features

    texts = ["a b", "", " c  d e ", "f"] * 250
    whole = _slices_features.word_counts(texts)
    monkeypatch.setattr(_slices_features, "WORD_COUNT_BLOCK", 7)
    assert _slices_features.word_counts(iter(texts)).tolist() == whole.tolist()
    assert whole[:4].tolist() == [2, 0, 3, 1]


def test_label_codes_are_numpys_unique_of_the_labels_as_str():
    from aflite_core.measures.slices import label_codes

    rng = np.random.default_rng(0)
    labels = rng.choice(np.array(["neutral", "contradiction", "entailment", "Ä", "10", "9",
                                  2, float("nan")], dtype=object), size=500)
    values, codes = label_codes(labels)
    expected_values, expected_codes = np.unique(labels.astype(str), return_inverse=True)
    assert values.tolist() == expected_values.tolist()
    assert np.array_equal(codes, expected_codes)
