"""A box or lasso on the map selects from every row: even-odd rule, half-open boundary, checked
by hand, against convex hulls, and through load_run(path).rows_in_polygon."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.spatial import ConvexHull, Delaunay

from aflite_core.runs import map_selection
from aflite_core.runs.map_selection import points_in_polygon, points_in_shapes, shape_polygon

SQUARE = ([0, 2, 2, 0], [0, 0, 2, 2])


def test_a_square_by_hand_with_its_boundary_rule():
    px = np.array([1.0, 3.0, -1.0, 0.0, 2.0, 1.0, 1.0, 0.0])
    py = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 2.0, 0.0])
    #              in   right left  left  right bottom top   corner (left & bottom)
    expected = [True, False, False, True, False, True, False, True]
    assert points_in_polygon(px, py, *SQUARE).tolist() == expected


def test_a_self_intersecting_lasso_follows_the_even_odd_rule():
    angles = np.pi / 2 + np.arange(5) * 4 * np.pi / 5  # a pentagram, drawn in one stroke
    xs, ys = np.cos(angles), np.sin(angles)
    centre_and_tip = points_in_polygon(np.array([0.0, 0.0]), np.array([0.0, 0.8]), xs, ys)
    assert centre_and_tip.tolist() == [False, True]  # the doubly wound centre is outside


def test_random_points_agree_with_a_convex_hull():
    rng = np.random.default_rng(0)
    hull_points = rng.normal(size=(30, 2))
    hull = ConvexHull(hull_points)
    xs, ys = hull_points[hull.vertices].T
    px, py = rng.uniform(-3, 3, size=(2, 200_000))
    got = points_in_polygon(px, py, xs, ys)
    expected = Delaunay(hull_points[hull.vertices]).find_simplex(np.column_stack([px, py])) >= 0
    differ = np.flatnonzero(got != expected)
    assert len(differ) == 0, (px[differ], py[differ])
    assert 0 < got.sum() < len(px)


def test_shapes_boxes_closed_paths_and_unions():
    xs, ys = shape_polygon({"x": [2, 0], "y": [0, 2]})  # a box, corners in any order
    assert xs.tolist() == [0, 2, 2, 0] and ys.tolist() == [0, 0, 2, 2]
    closed = ([0, 2, 2, 0, 0], [0, 0, 2, 2, 0])  # a path that repeats its first vertex
    px, py = np.array([1.0, 5.0, 1.0]), np.array([1.0, 5.0, 5.0])
    assert points_in_polygon(px, py, *closed).tolist() == [True, False, False]
    union = points_in_shapes(px, py, [{"x": [0, 2], "y": [0, 2]},
                                      {"x": [4, 6, 6, 4], "y": [4, 4, 6, 6]}])
    assert union.tolist() == [True, True, False]
    assert not points_in_shapes(px, py, []).any()


@pytest.mark.parametrize(("xs", "ys", "message"), [
    ([0, 1], [0, 1], "at least 3 vertices, got 2"),
    ([0, 1, float("nan")], [0, 1, 2], "finite"),
    ([0, 1, 2], [0, 1], "same length"),
    (["a", "b", "c"], [0, 1, 2], "expected numbers"),
])
def test_a_polygon_that_is_not_one_is_refused(xs, ys, message):
    with pytest.raises(ValueError, match=message):
        points_in_polygon(np.zeros(3), np.zeros(3), xs, ys)


def test_rows_in_polygon_of_a_run_and_a_run_without_a_map(tmp_path):
    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit
    from aflite_core.runs.folder import load_run

    rng = np.random.default_rng(3)
    n = 600
    frame = pd.DataFrame({"premise": [f"p {i % 40} said" for i in range(n)],
                          "hypothesis": [" ".join(rng.choice(list("abcdefgh"), 4)) + " x"
                                         for _ in range(n)],
                          "label": rng.choice(["yes", "no"], n)})
    frame.to_csv(tmp_path / "rows.csv", index=False)
    dataset = load_dataset(tmp_path / "rows.csv")
    config = AuditConfig(n_partitions=8, representation_params={"n_components": 8},
                         measures=("projection",))
    run = load_run(run_audit(dataset, config, runs_root=tmp_path / "runs"))
    projection = pd.read_parquet(run.path / "projection.parquet")
    x, y = projection["x"].to_numpy(), projection["y"].to_numpy()
    xs = [np.quantile(x, 0.2), np.quantile(x, 0.8), np.median(x)]
    ys = [np.quantile(y, 0.2), np.quantile(y, 0.3), np.quantile(y, 0.9)]
    ids = run.rows_in_polygon(xs, ys)
    inside = Delaunay(np.column_stack([xs, ys])).find_simplex(np.column_stack([x, y])) >= 0
    assert sorted(ids.tolist()) == sorted(projection["row_id"][inside].tolist())
    assert 0 < len(ids) < n
    with pytest.raises(ValueError, match="at least 3 vertices"):
        run.rows_in_polygon([0, 1], [0, 1])
    bare = load_run(run_audit(dataset, AuditConfig(n_partitions=8, measures=("cues",),
                                                   representation_params={"n_components": 8}),
                              runs_root=tmp_path / "bare"))
    with pytest.raises(ValueError, match="no 2-D map to select on"):
        bare.rows_in_polygon(xs, ys)
    with pytest.raises(ValueError, match="no 2-D map"):
        map_selection.map_points(bare)


def test_charts_read_the_shapes_of_a_selection_event():
    from ui import charts

    event = {"selection": {"points": [], "box": [{"xref": "x", "yref": "y", "x": [0, 1],
                                                  "y": [2, 3]}],
                           "lasso": [{"xref": "x", "yref": "y", "x": [0, 1, 2],
                                      "y": [0, 1, 0]}]}}
    assert charts.selection_shapes(event) == [
        {"xref": "x", "yref": "y", "x": [0, 1], "y": [2, 3]},
        {"xref": "x", "yref": "y", "x": [0, 1, 2], "y": [0, 1, 0]}]
    assert charts.selection_shapes(None) == []


def test_the_density_layer_counts_every_row_of_the_map():
    from types import SimpleNamespace

    from aflite_core.runs.views import map_density
    from ui import charts

    rng = np.random.default_rng(0)
    projection = pd.DataFrame({"row_id": np.arange(50_000), "x": rng.normal(size=50_000),
                               "y": rng.normal(size=50_000)})
    counts, xs, ys = map_density(SimpleNamespace(projection=projection))
    assert counts.sum() == 50_000 and counts.shape == (len(ys), len(xs))
    assert len(xs) == 136 and len(ys) == 90  # about four rows a cell, 3:2
    assert map_density(SimpleNamespace(projection=None)) is None
    points = projection.head(100).assign(status="retained")
    fig = charts.add_density(charts.projection_scatter(points, color="status"),
                             (counts, xs, ys), total=50_000)
    # one legend entry names it; the image itself is a layout image beneath the points
    assert fig.data[0].name == "all 50,000 rows (density)" and fig.data[0].hoverinfo == "skip"
    (image,) = fig.layout.images
    assert image.layer == "below" and (image.xref, image.yref) == ("x", "y")
    dx, dy = xs[1] - xs[0], ys[1] - ys[0]
    assert image.x == pytest.approx(xs[0] - dx / 2) and image.sizex == pytest.approx(dx * 136)
    assert image.y == pytest.approx(ys[-1] + dy / 2) and image.sizey == pytest.approx(dy * 90)
    rgba = _decoded(image.source)
    assert rgba.shape == (90, 136, 4)
    alpha = rgba[::-1, :, 3]  # image rows run top-down; counts' rows bottom-up
    assert (alpha[counts == 0] == 0).all() and (alpha[counts > 0] > 0).all()
    # more rows, darker and more opaque: alpha never decreases with the count
    order = np.argsort(counts[counts > 0], kind="stable")
    assert (np.diff(alpha[counts > 0][order].astype(int)) >= 0).all()
    assert alpha.max() == round(255 * 0.75) and alpha[counts > 0].min() == round(255 * 0.10)


def _decoded(uri: str) -> np.ndarray:
    import base64
    import io

    from PIL import Image

    head, _, data = uri.partition(",")
    assert head == "data:image/png;base64"
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGBA"))


@pytest.mark.parametrize("row_ids", [np.arange(100, 140), [f"r{i}" for i in range(40)]])
def test_map_points_carry_their_row_ids_compactly_and_selections_read_them(row_ids):
    from ui import charts

    rng = np.random.default_rng(2)
    points = pd.DataFrame({"row_id": row_ids, "x": rng.normal(size=40),
                           "y": rng.normal(size=40), "predictability": rng.uniform(size=40),
                           "status": ["retained", "removed"] * 20})
    fig = charts.projection_scatter(points, color="status")
    by_name = {trace.name: trace for trace in fig.data}
    assert list(by_name["removed"].customdata) == list(points["row_id"][1::2])
    assert "%{fullData.name}" in by_name["removed"].hovertemplate
    payload = fig.to_json()
    integer = isinstance(row_ids, np.ndarray)
    # integer ids travel as one typed array per trace, not a JSON string per point
    assert ('"customdata":{"dtype":"i' in payload) == integer
    # what a box selection sends back: the points' customdata, as Plotly gives it
    picked = [{"customdata": (int(v) if integer else v)} for v in row_ids[:3]]
    assert charts.selected_row_ids({"selection": {"points": picked}}) == [
        str(v) for v in row_ids[:3]]
    continuous = charts.projection_scatter(points, color="predictability", continuous=True)
    (trace,) = continuous.data
    assert list(trace.customdata) == list(points["row_id"])
    assert np.allclose(trace.marker.color, points["predictability"], atol=1e-6)
    assert "%{marker.color:.3f}" in trace.hovertemplate


def test_a_zoomed_window_is_drawn_again_from_every_row_in_it():
    from types import SimpleNamespace

    from aflite_core.runs.views import map_density, map_points

    rng = np.random.default_rng(1)
    n = 20_000
    projection = pd.DataFrame({"row_id": np.arange(n), "x": rng.uniform(0, 10, n),
                               "y": rng.uniform(0, 10, n)})
    scores = pd.DataFrame({"row_id": np.arange(n), "status": "retained",
                           "predictability": 0.5, "label": "a"})
    run = SimpleNamespace(projection=projection, scores=scores)
    window = (2.0, 4.0, 5.0, 6.0)
    inside = projection["x"].between(2, 4) & projection["y"].between(5, 6)
    points, total = map_points(run, max_points=100_000, window=window)
    assert total == inside.sum() and sorted(points["row_id"]) == sorted(
        projection["row_id"][inside])
    sampled, total_again = map_points(run, max_points=50, window=window)
    assert total_again == total and len(sampled) == 50
    assert sampled["x"].between(2, 4).all() and sampled["y"].between(5, 6).all()
    counts, xs, ys = map_density(run, window=window)
    assert counts.sum() == inside.sum() and xs.min() > 2 and xs.max() < 4
    with pytest.raises(ValueError, match="window: expected finite"):
        map_points(run, max_points=10, window=(4.0, 2.0, 0.0, 1.0))
