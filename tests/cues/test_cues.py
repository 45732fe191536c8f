"""Cue statistics: hand-computed toy tables, planted cues, real SNLI artifacts, the CLI."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy.spatial.distance import jensenshannon as scipy_js

from aflite_core import cli
from aflite_core.cues import statistics as cues
from aflite_core.cues.linguistic import FeatureMatrix, extract_features
from aflite_core.cues.statistics import (
    FORMULAS,
    cue_statistics,
    cue_table,
    cue_tables,
    cueness,
    dataset_inputs,
    jensen_shannon,
    label_counts,
    lmi,
    mse_counts,
    mse_proportions,
    pmi,
    split_label_counts,
    z_statistic,
    z_threshold,
)
from aflite_core.io.datasets import load_dataset
from aflite_core.splits import Split, holdout_split, resolve_split

# ------------------------------------------------------------------ formulas, by hand


def test_mse_both_forms_by_hand():
    counts = np.array([[6, 2, 0], [1, 1, 1]])
    # mean count 8/3: ((10/3)^2 + (2/3)^2 + (8/3)^2) / 3 = 168/27
    assert mse_counts(counts) == pytest.approx([168 / 27, 0.0])
    # shares (3/4, 1/4, 0) around 1/3: ((5/12)^2 + (1/12)^2 + (4/12)^2) / 3 = 42/432
    assert mse_proportions(counts) == pytest.approx([42 / 432, 0.0])


def test_jsd_natural_log_and_matches_scipy_squared():
    assert jensen_shannon(np.array([[1, 0]]), np.array([[0, 1]]))[0] == pytest.approx(math.log(2))
    assert jensen_shannon(np.array([[3, 1, 1]]), np.array([[3, 1, 1]]))[0] == pytest.approx(0.0)
    rng = np.random.default_rng(0)
    p = rng.integers(0, 50, size=(20, 3))
    q = rng.integers(1, 50, size=(20, 3))
    p[0] = [5, 0, 0]  # zero cells
    expected = [scipy_js(a, b) ** 2 for a, b in zip(p, q, strict=True)]  # natural log
    assert jensen_shannon(p, q) == pytest.approx(expected, abs=1e-12)


def test_cueness_is_mse_over_exp_jsd():
    tr = np.array([[6, 2, 0]])
    te = np.array([[2, 2, 0]])
    # P = (3/4, 1/4, 0), Q = (1/2, 1/2, 0), M = (5/8, 3/8, 0)
    jsd = 0.5 * (0.75 * math.log(0.75 / 0.625) + 0.25 * math.log(0.25 / 0.375)) + 0.5 * (
        0.5 * math.log(0.5 / 0.625) + 0.5 * math.log(0.5 / 0.375))
    assert jensen_shannon(tr, te)[0] == pytest.approx(jsd)
    assert cueness(mse_counts(tr), jensen_shannon(tr, te))[0] == pytest.approx(
        (168 / 27) / math.exp(jsd))


def test_pmi_add_k_by_hand():
    counts = np.array([[3, 1]])
    totals = np.array([5, 5])
    # p(l|f) = (3 + 1) / (4 + 2) = 2/3, p(l) = 1/2
    assert pmi(counts, totals, smoothing=1)[0] == pytest.approx(
        [math.log((2 / 3) / 0.5), math.log((1 / 3) / 0.5)])
    # no smoothing: log((3/4) / (1/2))
    assert pmi(counts, totals, smoothing=0)[0, 0] == pytest.approx(math.log(1.5))
    # heavy smoothing pulls p(l|f) to uniform: PMI -> log((1/2)/(1/2)) = 0
    assert abs(pmi(counts, totals, smoothing=1e9)[0, 0]) < 1e-6


def test_lmi_by_hand():
    counts = np.array([[3, 1], [0, 2]])
    totals = np.array([5, 5])  # N = 10
    out = lmi(counts, totals)
    assert out[0, 0] == pytest.approx(0.3 * math.log(0.75 / 0.5))
    assert out[0, 1] == pytest.approx(0.1 * math.log(0.25 / 0.5))
    assert out[1, 0] == 0.0  # zero count -> 0, not NaN
    assert out[1, 1] == pytest.approx(0.2 * math.log(1.0 / 0.5))


def test_z_statistic_and_bonferroni_threshold_by_hand():
    counts = np.array([[8, 1, 1]])
    p0 = 1 / 3
    expected = (0.8 - p0) / math.sqrt(p0 * (1 - p0) / 10)
    assert z_statistic(counts)[0, 0] == pytest.approx(expected)
    assert z_statistic(counts)[0, 1] == pytest.approx((0.1 - p0) / math.sqrt(p0 * (1 - p0) / 10))
    assert z_threshold(100, alpha=0.01) == pytest.approx(3.7190164854556804)
    assert z_threshold(1, alpha=0.05) == pytest.approx(1.6448536269514722)
    with pytest.raises(ValueError, match="alpha"):
        z_threshold(10, alpha=1.5)


def test_label_counts_is_one_sparse_product_matching_dense_counts():
    rng = np.random.default_rng(1)
    X = sp.random(200, 30, density=0.1, format="csr", random_state=2)
    X.data[:] = 1
    codes = rng.integers(0, 3, size=200)
    rows = rng.random(200) < 0.6
    dense = X.toarray().astype(bool)
    expected = np.array([[np.sum(dense[rows, f] & (codes[rows] == lab)) for lab in range(3)]
                         for f in range(30)])
    assert np.array_equal(label_counts(X, codes, 3, rows), expected)
    test_rows = ~rows & (rng.random(200) < 0.5)
    train_counts, test_counts = split_label_counts(
        X, codes, 3, Split(rows, test_rows, "column", ""))
    assert np.array_equal(train_counts, expected)
    assert np.array_equal(test_counts, label_counts(X, codes, 3, test_rows))


def test_every_statistic_has_a_formula_with_source():
    for name in ("mse", "mse_proportion", "jsd", "cueness", "cueness_proportion", "pmi", "lmi",
                 "z", "z_threshold", "accuracy_delta", "distribution_test"):
        entry = FORMULAS[name]
        assert entry["latex"] and entry["text"] and entry["source"]


# ------------------------------------------------------------------ split


def test_split_column_values_any_case():
    labels = np.array(["a", "b"] * 5)
    s = resolve_split(["TRAIN"] * 6 + ["TEST"] * 2 + ["TRIAL"] * 2, labels)
    assert s.source == "column"
    assert s.train.sum() == 6 and s.test.sum() == 4
    assert "TEST, TRIAL" in s.description
    s2 = resolve_split(["train"] * 6 + ["validation"] * 2 + ["other"] * 2, labels)
    assert s2.test.sum() == 2 and not (s2.train | s2.test)[-2:].any()
    assert "left out" in s2.description


def test_holdout_is_stratified_seeded_and_said():
    labels = np.array(["x"] * 500 + ["y"] * 300 + ["z"] * 200)
    s = resolve_split(["train"] * 1000, labels, test_size=0.2, random_state=3)
    assert s.source == "holdout" and "hold-out" in s.description
    for lab, n in (("x", 500), ("y", 300), ("z", 200)):
        assert s.test[labels == lab].sum() == round(0.2 * n)
    again = resolve_split(["train"] * 1000, labels, test_size=0.2, random_state=3)
    other = holdout_split(labels, test_size=0.2, random_state=4)
    assert np.array_equal(s.test, again.test)
    assert not np.array_equal(s.test, other.test)
    assert not (s.train & s.test).any() and (s.train | s.test).all()
    assert resolve_split(None, labels).source == "holdout"


# ------------------------------------------------------------------ planted cue


def _planted(n: int = 600, seed: int = 0):
    """Texts with a planted cue word 'zebra' that gives label A away in train and test."""
    rng = np.random.default_rng(seed)
    labels = rng.choice(np.array(["A", "B", "C"]), size=n)
    filler = ["man", "dog", "park", "runs", "walks", "near", "red", "ball", "big", "small"]
    texts = []
    for lab in labels:
        words = list(rng.choice(filler, size=4))
        if lab == "A" and rng.random() < 0.5:
            words.append("zebra")
        texts.append("The " + " ".join(words) + ".")
    split = np.where(np.arange(n) % 3 == 0, "test", "train")
    return texts, labels, split


def test_planted_cue_ranks_first_and_is_significant():
    texts, labels, split = _planted()
    fm = extract_features(texts, features=["word"], cache=False)
    table = cue_statistics(fm, labels, resolve_split(split, labels), min_count=5,
                           sort_by="cueness_proportion")
    top = table.iloc[0]
    assert top["feature"] == "zebra" and top["majority_label"] == "A"
    assert top["majority_share"] == 1.0
    assert top["z_label"] == "A" and top["pmi_label"] == "A" and top["lmi_label"] == "A"
    assert bool(top["z_significant"])
    assert top["train_A"] == top["n_train"] and top["test_B"] == 0
    # filler words are not significant cues
    assert not table.loc[table["feature"] == "dog", "z_significant"].iloc[0]
    assert table.attrs["split_source"] == "column"
    assert table.attrs["labels"] == ["A", "B", "C"]


def test_min_count_needs_support_in_train_and_in_test():
    texts = ["alpha beta"] * 6 + ["alpha gamma"] * 6 + ["alpha"] * 6
    labels = np.array(["p", "q"] * 9)
    split = np.array(["train"] * 12 + ["test"] * 6)  # gamma only in train
    fm = extract_features(texts, features=["word"], cache=False)
    table = cue_statistics(fm, labels, resolve_split(split, labels), min_count=5)
    assert set(table["feature"]) == {"alpha"}  # beta, gamma: no test support
    assert table.attrs["n_tests"] == 2  # 1 feature x 2 labels


def test_output_layout_and_parquet_roundtrip(tmp_path):
    texts, labels, split = _planted()
    fm = extract_features(texts, features=["word", "negation"], cache=False)
    table = cue_statistics(fm, labels, resolve_split(split, labels))
    expected = ["feature_type", "feature", "n_train", "n_test", "train_A", "train_B", "train_C",
                "test_A", "test_B", "test_C", "majority_label", "majority_share", "mse",
                "mse_proportion", "jsd", "cueness", "cueness_proportion", "mse_shrunk",
                "cueness_shrunk", "pmi_label", "pmi",
                "lmi_label", "lmi", "z_label", "z", "z_significant", "pmi_A", "pmi_B", "pmi_C",
                "lmi_A", "lmi_B", "lmi_C", "z_A", "z_B", "z_C"]
    assert list(table.columns) == expected
    assert (np.diff(table["cueness_shrunk"].to_numpy()) <= 0).all()  # the default ranking
    for column in table.columns:
        if table[column].dtype == object:
            assert all(isinstance(v, str) for v in table[column])
    path = tmp_path / "cues.parquet"
    table.to_parquet(path, index=False)
    back = pd.read_parquet(path)
    pd.testing.assert_frame_equal(back, table, check_dtype=False)


def test_validation_names_the_argument():
    fm = FeatureMatrix(sp.csr_matrix((3, 0), dtype=np.int8), np.empty(0, object),
                       np.empty(0, object))
    s = Split(np.array([True, True, False]), np.array([False, False, True]), "column", "")
    with pytest.raises(ValueError, match="min_count"):
        cue_statistics(fm, ["a", "b", "a"], s, min_count=0)
    with pytest.raises(ValueError, match="sort_by"):
        cue_statistics(fm, ["a", "b", "a"], s, sort_by="nope")
    with pytest.raises(ValueError, match="labels/split"):
        cue_statistics(fm, ["a", "b"], s)
    assert len(cue_statistics(fm, ["a", "b", "a"], s)) == 0


# ------------------------------------------------------------------ real SNLI


@pytest.fixture(scope="module")
def snli(snli_dir):
    train = load_dataset(snli_dir / "snli_train_sample.csv")
    dev = load_dataset(snli_dir / "snli_dev.csv")
    return train, dev


@pytest.fixture(scope="module")
def snli_words(snli, tmp_path_factory):
    train, dev = snli
    return cue_table(train, test=dev, features=["word"],
                     cache_dir=tmp_path_factory.mktemp("cache"))


def _rank(table: pd.DataFrame, key: str, word: str, label: str | None = None) -> int:
    sub = table if label is None else table[table["majority_label"] == label]
    ordered = sub.sort_values(key, ascending=False)["feature"].tolist()
    return ordered.index(word)


@pytest.mark.parametrize("label,words", [
    ("contradiction", ["nobody", "sleeping", "no", "cat"]),
    ("entailment", ["outdoors", "outside"]),
])
def test_snli_artifacts_top_word_cues_and_pmi(snli_words, label, words):
    table = snli_words
    assert table.attrs["split_source"] == "file"
    assert "snli_dev.csv" in table.attrs["split"]
    for word in words:
        row = table[table["feature"] == word].iloc[0]
        assert row["majority_label"] == label
        assert row["pmi_label"] == label and row["z_label"] == label
        assert bool(row["z_significant"])
        # near the top of the word cues for this label, by both cueness forms
        assert _rank(table, "cueness", word, label) < 20
        assert _rank(table, "cueness_proportion", word, label) < 25
        # and near the top of the PMI list of the label
        assert _rank(table, f"pmi_{label}", word) < 10


def test_cue_tables_full_and_retained_scopes(snli, tmp_path):
    train, _ = snli
    small = train.subset(train.row_ids()[:3000])
    retained = small.row_ids()[::2]
    table = cue_tables(small, {"full": None, "retained": retained}, features=["word"],
                       cache_dir=tmp_path, random_state=0)
    assert list(table.columns[:3]) == ["scope", "feature_type", "feature"]
    assert set(table["scope"]) == {"full", "retained"}
    full = table[table["scope"] == "full"].set_index("feature")
    kept = table[table["scope"] == "retained"].set_index("feature")
    common = full.index.intersection(kept.index)
    assert len(common) > 20
    # retained rows are a subset: every count can only shrink
    assert (kept.loc[common, "n_train"] <= full.loc[common, "n_train"]).all()
    assert (kept.loc[common, "n_test"] <= full.loc[common, "n_test"]).all()
    scopes = table.attrs["scopes"]
    assert scopes["retained"]["n_train_examples"] + scopes["retained"]["n_test_examples"] == \
        len(retained)
    assert "hold-out" in scopes["full"]["split"]
    table.to_parquet(tmp_path / "cues.parquet", index=False)


def test_grouped_holdout_keeps_each_premise_on_one_side(snli, tmp_path):
    """SNLI dev has no train rows, so the cue table holds out a seeded 20%; grouped by premise,
    no premise has pairs on both sides (without groups, most do)."""
    _, dev = snli
    premises = np.asarray(dev.premises(), dtype=object)

    def straddling(split) -> int:
        sides = pd.DataFrame({"premise": premises, "test": split.test})
        return int((sides.groupby("premise")["test"].nunique() > 1).sum())

    plain = dataset_inputs(dev, random_state=0).split
    grouped = dataset_inputs(dev, groups=premises, random_state=0).split
    assert plain.source == grouped.source == "holdout"
    assert straddling(plain) > 100 and straddling(grouped) == 0
    assert abs(grouped.test.mean() - 0.2) < 0.01
    scoped = cue_tables(dev, {"full": None, "retained": dev.row_ids()[::2]}, groups=premises,
                        features=["word"], cache_dir=tmp_path)
    assert scoped.attrs["scopes"]["full"]["n_test_examples"] == int(grouped.test.sum())
    assert "grouped" in scoped.attrs["scopes"]["full"]["split"]


# ------------------------------------------------------------------ CLI


def test_cli_cues_prints_split_and_writes_csv(snli_dir, tmp_path, capsys):
    out = tmp_path / "cues.csv"
    rc = cli.main(["cues", str(snli_dir / "snli_dev.csv"), "--features", "word,negation",
                   "--top", "5", "--out", str(out), "--cache-dir", str(tmp_path / "c")])
    text = capsys.readouterr().out
    assert rc == 0
    assert "test rows: seeded stratified hold-out" in text
    assert "negation:" in text
    written = pd.read_csv(out)
    assert {"feature_type", "feature", "cueness", "pmi", "z"} <= set(written.columns)
    assert written["cueness_shrunk"].is_monotonic_decreasing  # the default ranking


def test_cli_cues_second_file_and_bad_options(snli_dir, tmp_path, capsys):
    dev = str(snli_dir / "snli_dev.csv")
    test = str(snli_dir / "snli_test.csv")
    rc = cli.main(["cues", dev, "--test", test, "--features", "word", "--top", "3",
                   "--no-cache"])
    assert rc == 0
    assert "second file" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        cli.main(["cues", dev, "--features", "words"])
    assert info.value.code == 2
    assert cli.main(["cues", str(tmp_path / "missing.csv")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_cues_module_exports_formulas_for_the_dashboard():
    assert set(cues.FORMULAS) >= {"mse", "jsd", "cueness", "pmi", "lmi", "z"}


def test_cues_cli_shares_the_input_guards(tmp_path, capsys):
    """``cues`` refuses an input past --max-bytes and reads --encoding, like ``run``."""
    from aflite_core.cli import main

    rows = "premise,hypothesis,label\n" + "".join(
        f"Un café {i},Le garçon {i} dort,{'yes' if i % 2 else 'no'}\n" for i in range(40))
    latin = tmp_path / "latin.csv"
    latin.write_bytes(rows.encode("latin-1"))
    assert main(["cues", str(latin), "--features", "word", "--max-bytes", "100"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "--max-bytes" in err and "Traceback" not in err
    assert main(["cues", str(latin), "--features", "word", "--top", "0"]) == 2
    assert "--encoding 'latin-1'" in capsys.readouterr().err
    assert main(["cues", str(latin), "--features", "word", "--top", "0", "--no-cache",
                 "--encoding", "latin-1", "--min-count", "1"]) == 0



def test_shrunk_shares_by_hand():
    from aflite_core.cues.statistics import mse_shrunk, shrunk_shares

    counts = np.array([[10, 0], [0, 0]])
    prior = np.array([30, 10])  # 3:1
    shares = shrunk_shares(counts, prior, strength=10)
    assert shares[0] == pytest.approx([(10 + 7.5) / 20, 2.5 / 20])
    assert shares[1] == pytest.approx([0.75, 0.25])  # no rows: the prior itself
    assert mse_shrunk(counts, prior, strength=10)[0] == pytest.approx(
        ((17.5 / 20 - 0.5) ** 2 + (2.5 / 20 - 0.5) ** 2) / 2)


def test_cues_below_support_after_filtering_are_listed_with_their_count(snli_dir):
    """A cue of the full data that falls below the minimum support in the retained rows says
    so, with its count, instead of being missing (shown as 0 / None before)."""
    from aflite_core.io.datasets import load_dataset
    from aflite_core.measures.cues import before_after

    ds = load_dataset(snli_dir / "snli_dev.csv", group="")
    ids = ds.row_ids()
    hyps = ds.hypotheses()
    # drop most rows that contain "nobody": 4 of them stay, below min_count 5
    nobody = [i for i, h in zip(ids, hyps, strict=True) if "nobody" in h.lower().split()]
    kept = set(ids) - set(nobody[4:])
    table = cue_tables(ds, {"full": None, "retained": sorted(kept)}, features=["word"],
                       cache=False)
    retained = table[table["scope"] == "retained"]
    row = retained[retained["feature"] == "nobody"].iloc[0]
    assert not row["supported"] and np.isnan(row["cueness_shrunk"])
    assert row["n_train"] + row["n_test"] <= 4
    assert retained["supported"].sum() > 100  # the supported cues are all still there
    ba = before_after(table).set_index("feature")
    assert ba.loc["nobody", "after"] == f"below minimum support (n = {int(row['n_train'])})"
    assert np.isnan(ba.loc["nobody", "cueness after"])
    assert ba.loc["the", "after"] == ""


def test_default_ranking_puts_known_snli_artifacts_first_and_stopwords_out(snli_dir):
    """On the SNLI train sample vs dev: nobody, sleeping, no, cat (contradiction) and
    outdoors, outside (entailment) rank in the top 15 of the default ordering, and the, a,
    to do not (ICQ's count form opened with the, to, for, a, people)."""
    from aflite_core.io.datasets import load_dataset

    train = load_dataset(snli_dir / "snli_train_sample.csv")
    dev = load_dataset(snli_dir / "snli_dev.csv")
    table = cue_table(train, test=dev, features=["word"], cache=False)
    top = table["feature"].head(15).tolist()  # the table comes in its default order
    assert {"nobody", "sleeping", "no", "cat", "outdoors", "outside"} <= set(top), top
    assert not {"the", "a", "to"} & set(top), top
    majority = table.set_index("feature")["majority_label"]
    assert majority["nobody"] == "contradiction" and majority["outdoors"] == "entailment"
    count_form = table.sort_values("cueness", ascending=False)["feature"].head(5).tolist()
    assert {"the", "to"} <= set(count_form)  # why the count form is not the default


def test_cli_probes_a_predictions_file_on_every_chosen_family(snli_dir, tmp_path, capsys):
    """--probe file:PATH reads (row_id, prediction) from a separate file; the probe covers
    the families of --features, not only words."""
    from aflite_core.io.datasets import load_dataset

    dev = load_dataset(snli_dir / "snli_dev.csv")
    labels = dev.labels()
    predictions = np.where([" not " in h for h in dev.hypotheses()],
                           "entailment", labels)  # a model fooled by negation
    path = tmp_path / "preds.csv"
    pd.DataFrame({"row_id": dev.row_ids(), "prediction": predictions}).to_csv(path,
                                                                              index=False)
    out = tmp_path / "probe.csv"
    rc = cli.main(["cues", str(snli_dir / "snli_dev.csv"), "--features", "word,negation",
                   "--top", "3", "--no-cache", "--probe", f"file:{path}",
                   "--probe-out", str(out)])
    assert rc == 0
    table = pd.read_csv(out)
    assert set(table["feature_type"]) == {"word", "negation"}
    negation = table[table["feature_type"] == "negation"].set_index("feature")
    assert (negation["acc_with"] < negation["acc_without"]).any()
    assert cli.main(["cues", str(snli_dir / "snli_dev.csv"), "--features", "word",
                     "--no-cache", "--probe", f"file:{tmp_path / 'none.csv'}"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_predictions_by_row_id_names_what_is_missing(snli_dir):
    from aflite_core.cues.probing import predictions_by_row_id
    from aflite_core.io.datasets import load_dataset

    dev = load_dataset(snli_dir / "snli_dev.csv")
    ids = dev.row_ids()
    mapped = predictions_by_row_id(dev, pd.DataFrame({"ID": ids[:10], "pred": ["x"] * 10}))
    assert mapped[:10] == ["x"] * 10 and set(mapped[10:]) == {""}
    with pytest.raises(ValueError, match="expected a row id column"):
        predictions_by_row_id(dev, pd.DataFrame({"a": [1], "b": [2]}))
    with pytest.raises(ValueError, match="none of its row ids"):
        predictions_by_row_id(dev, pd.DataFrame({"row_id": ["zz"], "prediction": ["x"]}))
