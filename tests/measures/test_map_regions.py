"""Named regions of the map: planted topics become named regions, every row is assigned,
the numbering is seeded, and the slices say where they concentrate."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from aflite_core.measures import map_regions
from aflite_core.measures.map_regions import describe_regions, distinctive_words, find_regions
from aflite_core.measures.projection import project

TOPICS = {"guitar": "guitar music", "soccer": "soccer ball", "cooking": "onion kitchen"}


def planted_topics(n_per_topic: int = 600, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """Hypotheses about three planted topics: the topic's two words and three words drawn from
    a pool of 300 made-up words the topics share (so only the topic ties rows together)."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    pool = ["".join(rng.choice(letters, size=6)) for _ in range(300)]
    texts, topic = [], []
    for t, words in enumerate(TOPICS.values()):
        for _ in range(n_per_topic):
            noise = " ".join(rng.choice(pool, size=3, replace=False))
            texts.append(f"{noise} {words}")
            topic.append(t)
    return texts, np.asarray(topic)


def tfidf_phi(texts: list[str]) -> np.ndarray:
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    M = TfidfVectorizer().fit_transform(texts)
    return TruncatedSVD(n_components=24, random_state=0).fit_transform(M).astype(np.float32)


@pytest.fixture(scope="module")
def planted_map():
    texts, topic = planted_topics()
    frame = project(tfidf_phi(texts), random_state=0)
    return texts, topic, frame[["x", "y"]].to_numpy()


def test_three_planted_topics_land_in_three_regions_named_by_their_words(planted_map):
    texts, topic, coords = planted_map
    region = find_regions(coords, random_state=0)
    assert region.dtype == np.int32 and region.shape == (len(texts),)
    table = describe_regions(region, coords, texts=texts, labels=np.array(list("abc"))[topic],
                             status=np.where(np.arange(len(texts)) % 4, "retained", "removed"))
    homes = []
    for t, words in enumerate(TOPICS.values()):
        inside = region[(topic == t) & (region >= 0)]
        home = int(np.bincount(inside).argmax())
        homes.append(home)
        # the region holding most of the topic's rows holds little else and is named by it
        held = topic[region == home]
        assert (held == t).mean() >= 0.9
        row = table.set_index("region").loc[home]
        # the two planted words lead (equally distinctive), the shared noise words follow
        assert set(row["top_words"].split(", ")[:2]) == set(words.split()), row["top_words"]
        assert all(w in row["name"] for w in words.split())
        # its label mix, as shares per label, differs from the data's: skewed toward its label
        assert row[f"share:{'abc'[t]}"] >= 0.9 and row["label_skewed"]
        assert row["over_label"] == "abc"[t] and row["label_p"] < 0.05
        assert row["name_in"] >= 0.5 and row["name_out"] <= 0.15
    assert len(set(homes)) == 3
    # every region is described once, sizes add up to the rows in regions
    assert sorted(table["region"]) == sorted(set(region[region >= 0].tolist()))
    assert table["rows"].sum() == (region >= 0).sum()
    assert list(table["rows"]) == sorted(table["rows"], reverse=True)  # numbered by size
    assert np.allclose(table["share_removed"], [
        (np.arange(len(texts))[region == r] % 4 == 0).mean() for r in table["region"]])


def test_regions_are_seeded_and_every_row_is_assigned_beyond_the_sample(planted_map):
    _, topic, coords = planted_map
    a = find_regions(coords, random_state=1, sample_size=400)
    b = find_regions(coords, random_state=1, sample_size=400)
    np.testing.assert_array_equal(a, b)
    # rows outside the 400 clustered ones take their nearest sampled point's region, so the
    # two topics still fall apart
    homes = []
    for t in (0, 1, 2):
        inside = a[(topic == t) & (a >= 0)]
        home = np.bincount(inside).argmax()
        assert (inside == home).sum() > 0.9 * (topic == t).sum()
        homes.append(home)
    assert len(set(homes)) == 3


def test_distinctive_words_prefers_what_sets_a_region_apart():
    texts = ["the cat sat", "the cat ran", "a cat slept", "the dog sat", "the dog ran",
             "a dog barked"]
    words = distinctive_words(texts, np.array([0, 0, 0, 1, 1, 1]), n_words=2)
    assert words[0][0] == "cat" and words[1][0] == "dog"
    # stop words and noise rows never name a region
    assert "the" not in words[0] + words[1]
    assert distinctive_words(texts, np.full(6, -1)) == {}


def test_degenerate_maps_give_no_region_and_bad_input_is_refused():
    assert (find_regions(np.zeros((500, 2))) == -1).all()        # one point
    assert (find_regions(np.random.default_rng(0).normal(size=(10, 2))) == -1).all()  # tiny
    with pytest.raises(ValueError, match="coords: expected shape"):
        find_regions(np.zeros((10, 3)))
    with pytest.raises(ValueError, match="finite"):
        find_regions(np.full((40, 2), np.nan))
    table = describe_regions(np.full(5, -1), np.zeros((5, 2)), texts=["x"] * 5,
                             labels=np.array(["a"] * 5), status=np.array(["retained"] * 5))
    assert table.empty and list(table.columns) == list(map_regions.REGION_COLUMNS)
    with pytest.raises(ValueError, match="texts: expected 5"):
        describe_regions(np.zeros(5, int), np.zeros((5, 2)), texts=["x"],
                         labels=np.array(["a"] * 5), status=np.array(["retained"] * 5))


@pytest.mark.parametrize("order", [[0, 1, 2, 3, 4, 5], [5, 3, 1, 0, 4, 2]],
                         ids=["rows in input order", "rows in another order"])
def test_slice_regions_reads_where_a_stored_slice_concentrates(order):
    class Run:
        name = "planted"
        projection = pd.DataFrame({"row_id": [10, 11, 12, 13, 14, 15],
                                   "x": 0.0, "y": 0.0, "region": [0, 0, 0, 1, 1, -1]}
                                  ).iloc[order]
        scores = pd.DataFrame({"row_id": [10, 11, 12, 13, 14, 15]})

        def read_parquet(self, name):
            assert name == map_regions.FILE
            return pd.DataFrame({"region": [0, 1], "name": ["cat · sat", "dog · ran"]})

        def parquet_columns(self, name):
            return list(self.projection.columns)

        def table_columns(self, name, columns):
            return self.projection[columns]

        def score_columns(self, columns):
            return self.scores[columns]

    def packed(rows):
        bits = np.zeros(6, dtype=bool)
        bits[rows] = True
        return np.packbits(bits, bitorder="little").tobytes()

    members = pd.DataFrame({"slice_id": ["word=cat", "word=x"],
                            "members": [packed([0, 1, 2, 3]), packed([5])]})
    out = map_regions.slice_regions(Run(), members)
    first = out.iloc[0]
    assert first["slice_id"] == "word=cat" and first["top_region"] == 0
    assert first["top_region_share"] == pytest.approx(0.75)
    assert first["regions"] == "75% in 0 cat · sat; 25% in 1 dog · ran"
    assert out.iloc[1]["regions"] == "" and out.iloc[1]["top_region"] == -1


# --------------------------------------------------------------------------- in a run


@pytest.fixture(scope="module")
def regions_run(tmp_path_factory):
    """A default-map audit of the first 1,500 SNLI dev rows (tests/data copy)."""
    from pathlib import Path

    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit
    from aflite_core.runs.folder import load_run

    rows = pd.read_csv(Path(__file__).parents[1] / "data" / "snli" / "snli_dev.csv",
                       keep_default_na=False).head(1500)
    path = tmp_path_factory.mktemp("data") / "snli_1500.csv"
    rows.to_csv(path, index=False)
    config = AuditConfig(representation_params={"n_components": 32}, n_partitions=8,
                         measures=("slices", "projection"))
    run = run_audit(load_dataset(path), config, runs_root=tmp_path_factory.mktemp("runs"))
    return load_run(run)


def test_a_run_writes_its_regions_and_every_row_its_region(regions_run):
    run = regions_run
    projection = run.projection
    regions = run.read_parquet(map_regions.FILE)
    assert set(projection["region"].unique()) == set(regions["region"]) | {-1}
    assert (projection["method"] == "umap").all()
    info = run.summary["measures"]["projection"]
    assert info["status"] == "ok" and info["method"] == "umap"
    assert info["regions"] == len(regions) >= 3
    assert info["rows_in_regions"] == int((projection["region"] >= 0).sum())
    # a region's counts are those of its rows
    scores = run.scores.set_index("row_id")
    first = regions.iloc[0]
    ids = map_regions.region_rows(run, int(first["region"]))
    assert len(ids) == first["rows"]
    status = scores.loc[ids, "status"]
    assert first["removed"] == (status == "removed").sum()
    assert first["share_removed"] == pytest.approx(
        (status == "removed").sum() / status.isin(["retained", "removed"]).sum())
    with pytest.raises(ValueError, match="region: expected one of"):
        map_regions.region_rows(run, 999)
    # the slices table says where the stored slices concentrate
    from aflite_core.measures import registry

    (table,) = registry.get("slices").before_after(run).values()
    assert "regions" in table and table["regions"].str.contains(r"% in \d").any()
    # the measure draws the map with its named regions (the HTML report and the Report page)
    (fig,) = registry.get("projection").draw(run)
    names = [t for t in fig.data if t.name.startswith("regions")][0]
    assert len(names.x) == len(regions)
    assert "regions" in (run.path / "report.html").read_text(encoding="utf-8")


def test_a_degenerate_phi_records_its_fallback_in_the_summary(tmp_path):
    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit
    from aflite_core.runs.folder import load_run

    rng = np.random.default_rng(0)
    n = 300
    frame = pd.DataFrame({"premise": [f"premise {i}" for i in range(n)],
                          "hypothesis": [f"hypothesis {i}" for i in range(n)],
                          "label": rng.choice(["a", "b"], n)})
    frame.to_csv(tmp_path / "rank1.csv", index=False)
    np.save(tmp_path / "emb.npy", (rng.normal(size=(n, 1)) * rng.normal(size=(1, 8)))
            .astype(np.float32))  # rank one: every row on one line
    config = AuditConfig(representation="precomputed",
                         representation_params={"path": str(tmp_path / "emb.npy")},
                         n_partitions=8, measures=("projection",))
    run = load_run(run_audit(load_dataset(tmp_path / "rank1.csv"), config,
                             runs_root=tmp_path / "runs"))
    info = run.summary["measures"]["projection"]
    assert info["status"] == "ok" and info["fallback"] == "pca"
    assert info["reason"].startswith("only 2 distinct rows in Φ")
    assert (run.projection["method"] == "pca").all()


def test_a_click_on_a_region_name_selects_the_region_and_a_drawn_box_does_not():
    from ui import charts

    click = {"selection": {"points": [{"customdata": ["region:3", "guitar · music"]}],
                           "box": [], "lasso": []}}
    assert charts.clicked_region(click) == 3
    assert charts.selected_row_ids(click) == []          # a name is not a row
    box = {"selection": {"points": [{"customdata": ["region:3", "x"]},
                                    {"customdata": ["r7", "removed"]}],
                         "box": [{"x": [0, 1], "y": [0, 1]}], "lasso": []}}
    assert charts.clicked_region(box) is None
    assert charts.selected_row_ids(box) == ["r7"]
    assert charts.clicked_region(None) is None
    assert charts.clicked_region({"selection": {"points": [{"customdata": ["r1", "a"]}]}}) \
        is None


def test_region_diamonds_use_webgl_only_on_a_webgl_map():
    """A small map is SVG; its diamonds must be SVG too, or the page would start a WebGL
    context for a handful of points. On a WebGL map they are WebGL, or they would lie beneath
    the points."""
    from ui import charts

    regions = pd.DataFrame({"region": [0, 1], "name": ["dog · park", "guitar · music"],
                            "x": [0.0, 1.0], "y": [0.0, 1.0], "rows": [10, 12],
                            "share_removed": [0.5, 0.1], "over_label": ["a", ""],
                            "top_words": ["dog park", "guitar music"]})
    for n, expected in ((50, "scatter"), (charts.SVG_MAX_POINTS + 1, "scattergl")):
        points = pd.DataFrame({"row_id": range(n), "x": np.linspace(0, 1, n),
                               "y": np.linspace(1, 0, n), "status": "retained"})
        fig = charts.add_regions(charts.projection_scatter(points, color="status"), regions)
        assert [t.type for t in fig.data] == [expected, expected]
        assert list(fig.data[-1].customdata[:, 0]) == ["region:0", "region:1"]


def test_regions_from_categoricals_are_the_regions_from_strings(planted_map):
    """Labels and statuses given as categoricals (the measure's, from the scores' codes) and
    a float32 map describe the regions exactly as strings and float64 coordinates do."""
    texts, topic, coords = planted_map
    region = find_regions(coords, random_state=0)
    labels = np.where(topic > 0, "neutral", np.where(np.arange(len(texts)) % 3, "entailment",
                                                     "contradiction"))
    status = np.array(["retained", "removed", "warmup", "retained"], dtype=object)[
        np.arange(len(texts)) % 4]
    expected = describe_regions(region, coords.astype(np.float64), texts=texts, labels=labels,
                                status=status)
    got = describe_regions(region, coords.astype(np.float32), texts=texts,
                           labels=pd.Categorical(labels), status=pd.Categorical(status))
    pd.testing.assert_frame_equal(got, expected)
    assert expected["removed"].sum() > 0 and expected["filtered"].sum() < (region >= 0).sum()
    # unsorted categories (not the measure's) are read as the strings they hold
    shuffled = pd.Categorical(labels, categories=["neutral", "entailment", "contradiction"])
    pd.testing.assert_frame_equal(describe_regions(region, coords, texts=texts,
                                                   labels=shuffled, status=status), expected)


def _blobs(centres, sizes, spread, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(c, spread, size=(n, 2)) for c, n in
                           zip(centres, sizes, strict=True)])


def test_no_region_holds_more_than_the_cap_a_bulk_with_parts_is_split():
    """A dense bulk of 70 % of the map made of four close clusters, beside two small
    islands: HDBSCAN's first answer is one region of 70 %; the regions found are parts of
    it, none over 40 % of the rows."""
    bulk = _blobs([(0, 0), (1.2, 0), (0, 1.2), (1.2, 1.2)], [700, 700, 700, 700], 0.25)
    islands = _blobs([(9, 9), (-9, 9)], [600, 600], 0.3, seed=1)
    coords = np.concatenate([bulk, islands])
    region = find_regions(coords, random_state=0)
    shares = np.bincount(region[region >= 0]) / len(coords)
    assert shares.max() <= map_regions.MAX_REGION_SHARE, shares
    assert len(shares) >= 5
    # the islands are still regions of their own, and the bulk's rows are in several
    assert len(set(region[:2800][region[:2800] >= 0].tolist())) >= 2
    assert len(set(region[2800:3400].tolist()) - {-1}) == 1


def test_a_map_without_density_structure_never_gets_a_region_that_is_its_bulk():
    """A uniform square and one Gaussian blob: whatever HDBSCAN finds in their fluctuations,
    no region holds over 40 % of the rows (the map has no distinct regions, or small
    parts); a map too small or of one point has none, without an HDBSCAN error."""
    coords = np.random.default_rng(0).uniform(size=(3000, 2))
    region = find_regions(coords, random_state=0)
    shares = np.bincount(region[region >= 0]) / len(coords) if (region >= 0).any() else [0]
    assert (region == -1).all() or max(shares) <= map_regions.MAX_REGION_SHARE
    one_blob = np.random.default_rng(1).normal(size=(3000, 2))
    region = find_regions(one_blob, random_state=0)
    shares = np.bincount(region[region >= 0]) / len(one_blob) if (region >= 0).any() else [0]
    assert (region == -1).all() or max(shares) <= map_regions.MAX_REGION_SHARE
    # fewer than 30 rows, or identical rows: no region, no HDBSCAN error
    assert (find_regions(np.random.default_rng(2).normal(size=(29, 2))) == -1).all()
    assert (find_regions(np.ones((5000, 2))) == -1).all()


def test_a_region_is_label_skewed_only_when_its_mix_differs_from_the_datas():
    """Three equal regions: one holds only "a", two hold the data's other labels in the same
    mix as each other. The test (Bonferroni over the regions) calls the first skewed toward
    "a"; a region whose mix is close to the data's is not called by its largest label."""
    rng = np.random.default_rng(0)
    region = np.repeat([0, 1, 2], 900)
    labels = np.concatenate([np.full(900, "a"), rng.choice(["a", "b", "c"], 1800,
                                                           p=[1 / 3, 1 / 3, 1 / 3])])
    codes, names = np.unique(labels, return_inverse=True)[1], np.array(["a", "b", "c"])
    mix = map_regions.label_mix(codes, names, region, np.array([0, 1, 2]))
    assert list(mix.columns[:3]) == ["share:a", "share:b", "share:c"]
    assert mix.loc[0, "label_skewed"] and mix.loc[0, "over_label"] == "a"
    # regions 1 and 2 lack the "a" rows region 0 took: skewed away from "a", toward b or c
    assert mix.loc[1, "over_label"] in ("b", "c")
    same = np.concatenate([rng.choice(["a", "b", "c"], 2700, p=[0.5, 0.3, 0.2])])
    codes = np.unique(same, return_inverse=True)[1]
    mixed = map_regions.label_mix(codes, names, region, np.array([0, 1, 2]))
    assert not mixed["label_skewed"].any() and (mixed["over_label"] == "").all()
    assert (mixed["label_p"] > 0.05).all()


def test_a_name_is_made_of_words_most_of_its_texts_hold_and_few_others_do():
    texts = (["cat sits on a mat"] * 6 + ["cat runs", "dog sits", "a bird"] +
             ["dog barks loudly"] * 5 + ["bird sings", "fish swims", "a dog"] +
             ["tree", "rock", "sky", "cloud sits", "rain", "sun"])
    region = np.array([0] * 9 + [1] * 8 + [2] * 6)
    named = map_regions.name_words(texts, region)
    assert named[0][0][0] == "cat" and named[1][0][0] == "dog"
    words, inside, outside = named[0]
    assert inside >= 0.5 and outside <= 0.15
    assert named[2][0] == []  # no word in half its texts: the region is not named by words
    table = describe_regions(region, np.zeros((len(texts), 2)), texts=texts,
                             labels=np.array(["x"] * len(texts)),
                             status=np.array(["retained"] * len(texts)))
    assert table.set_index("region").loc[2, "name"] == "region 2"


def test_a_table_stored_before_the_shares_were_columns_reads_as_todays():
    old = pd.DataFrame({"region": [0, 1], "name": ["a", "b"], "rows": [5, 4],
                        "share_of_rows": [0.5, 0.4], "filtered": [5, 4], "removed": [1, 2],
                        "share_removed": [0.2, 0.5],
                        "label_shares": [json.dumps({"yes": 0.8, "no": 0.2}),
                                         json.dumps({"no": 1.0})],
                        "top_label": ["yes", "no"], "top_words": ["a", "b"],
                        "x": [0.0, 1.0], "y": [0.0, 1.0]})
    table = map_regions.region_table(old)
    assert "label_shares" not in table and "top_label" not in table
    assert list(table["share:no"]) == [0.2, 1.0] and list(table["share:yes"]) == [0.8, 0.0]
    assert table["label_p"].isna().all() and not table["label_skewed"].any()
    assert map_regions.region_table(None).empty


def test_a_click_on_a_point_drawn_over_a_diamond_selects_the_region():
    """A data point drawn over a ◇ may take the click; within the ◇'s reach it is the
    region's click, further away it is a row's."""
    from ui import charts

    regions = pd.DataFrame({"region": [4, 7], "x": [0.0, 10.0], "y": [0.0, 10.0]})
    reach = (0.15, 0.15)
    on_top = {"selection": {"points": [{"customdata": ["r1", "retained"], "x": 0.1,
                                        "y": -0.05}], "box": [], "lasso": []}}
    assert charts.clicked_region(on_top, regions, reach) == 4
    away = {"selection": {"points": [{"customdata": ["r2", "retained"], "x": 5.0,
                                      "y": 5.0}], "box": [], "lasso": []}}
    assert charts.clicked_region(away, regions, reach) is None
    assert charts.clicked_region(on_top) is None  # without the regions: a row, as before
    fig = charts.projection_scatter(pd.DataFrame({"row_id": range(3), "x": [0.0, 5.0, 10.0],
                                                  "y": [0.0, 5.0, 10.0],
                                                  "status": "retained"}), color="status")
    assert charts.diamond_reach(fig) == pytest.approx((0.15, 0.15))


def test_explore_says_when_the_map_has_no_distinct_regions(runs_root, tmp_path):
    """A map whose rows are all one point (one pair repeated with two labels) has no distinct
    regions: summary.json and Explore say so, and no region is named."""
    from apptest_support import assert_clean, goto, new_app, open_run, texts

    from aflite_core.io import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit
    from aflite_core.runs import load_run

    rows = [{"premise": "a man walks", "hypothesis": "a person is outside",
             "label": "yes" if i % 2 else "no"} for i in range(400)]
    data = tmp_path / "same.csv"
    pd.DataFrame(rows).to_csv(data, index=False)
    path = run_audit(load_dataset(data, group=""), AuditConfig(
        target_size=300, n_partitions=4, report=False, measures=("projection",),
        measure_params={"projection": {"method": "pca"}}), runs_root=tmp_path / "runs")
    info = load_run(path).summary["measures"]["projection"]
    assert info["regions"] == 0 and info["regions_note"].startswith(map_regions.NO_REGIONS)
    at = new_app().run()
    open_run(at, path)
    at = goto(at, "explore")
    assert_clean(at)
    assert f"The map has {map_regions.NO_REGIONS}" in texts(at)
