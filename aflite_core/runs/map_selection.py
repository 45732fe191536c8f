"""The rows inside a box or lasso drawn on the map, from every row of the run, not a sample.

The dashboard draws at most a sample of a large map, but a selection must mean "every row in
this region": the polygon of the Plotly selection event (data coordinates) is tested here
against the map coordinates of all rows (``projection.parquet``). Notebooks call the same
function as ``load_run(path).rows_in_polygon(xs, ys)``.

**Rule.** Even-odd (crossing number): a point is inside when a ray from it towards +x crosses
the polygon's edges an odd number of times, so a self-intersecting lasso's doubly wound parts
are outside, as a drawing program fills them. The polygon is closed (the last vertex joins the
first). **Boundary**: an edge counts as crossed when one end is strictly above the point and
the other is at or below it, and the crossing lies strictly to the right of the point; so a
point on a left or bottom edge is inside and one on a right or top edge is outside (the usual
half-open convention: two polygons that share an edge never both hold a point on it). A box
is the polygon of its four corners under the same rule.

Cost: one numba kernel (cached on disk, :mod:`aflite_core.numba_cache`) over the rows inside
the polygon's bounding box; ``benchmarks/bench_selection.py`` measures it at 1M rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from aflite_core.numba_cache import jit

__all__ = ["points_in_polygon", "points_in_shapes", "rows_in_polygon", "shape_polygon"]


def _inside(px: np.ndarray, py: np.ndarray, xs: np.ndarray, ys: np.ndarray,
            out: np.ndarray) -> None:
    n_vertices = xs.shape[0]
    for p in range(px.shape[0]):
        x = px[p]
        y = py[p]
        crossed = False
        j = n_vertices - 1
        for i in range(n_vertices):
            yi = ys[i]
            yj = ys[j]
            if (yi > y) != (yj > y):
                at = xs[i] + (y - yi) * (xs[j] - xs[i]) / (yj - yi)
                if x < at:
                    crossed = not crossed
            j = i
        out[p] = crossed


_inside = jit(_inside)


def _polygon(xs: Any, ys: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validated float64 vertex arrays."""
    try:
        xs = np.asarray(xs, dtype=np.float64).ravel()
        ys = np.asarray(ys, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise ValueError("polygon: expected numbers for xs and ys") from None
    if xs.shape != ys.shape:
        raise ValueError(f"polygon: xs and ys must have the same length; got {len(xs)} and "
                         f"{len(ys)}")
    if len(xs) >= 2 and xs[0] == xs[-1] and ys[0] == ys[-1]:
        xs, ys = xs[:-1], ys[:-1]  # a closed path repeats its first vertex
    if len(xs) < 3:
        raise ValueError(f"polygon: expected at least 3 vertices, got {len(xs)}")
    if not (np.isfinite(xs).all() and np.isfinite(ys).all()):
        raise ValueError("polygon: vertices must be finite numbers; found NaN or infinite "
                         "coordinates")
    return np.ascontiguousarray(xs), np.ascontiguousarray(ys)


def points_in_polygon(px: np.ndarray, py: np.ndarray, xs: Any, ys: Any) -> np.ndarray:
    """Boolean mask of the points (``px``, ``py``) inside the polygon (``xs``, ``ys``).

    Parameters
    ----------
    px, py : np.ndarray
        The points' coordinates (same length).
    xs, ys : array-like
        The polygon's vertices in order (at least 3, finite; closed implicitly).

    Returns
    -------
    np.ndarray of bool
        Even-odd rule, half-open boundary (module docstring).

    Raises
    ------
    ValueError
        Fewer than 3 vertices, NaN or infinite vertices, or lengths that differ.
    """
    xs, ys = _polygon(xs, ys)
    px = np.asarray(px, dtype=np.float64)
    py = np.asarray(py, dtype=np.float64)
    if px.shape != py.shape or px.ndim != 1:
        raise ValueError(f"points: expected two 1-D arrays of one length; got shapes "
                         f"{px.shape} and {py.shape}")
    mask = np.zeros(len(px), dtype=bool)
    near = np.flatnonzero((px >= xs.min()) & (px <= xs.max())
                          & (py >= ys.min()) & (py <= ys.max()))
    if len(near):
        out = np.zeros(len(near), dtype=np.bool_)
        _inside(np.ascontiguousarray(px[near]), np.ascontiguousarray(py[near]), xs, ys, out)
        mask[near] = out
    return mask


def shape_polygon(shape: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The polygon of one Plotly selection shape: a box (``x: [x0, x1]``, ``y: [y0, y1]``)
    becomes its four corners, a lasso (``x``, ``y`` lists of three or more) is itself."""
    xs = list(shape.get("x") or [])
    ys = list(shape.get("y") or [])
    if len(xs) == 2 and len(ys) == 2:
        (x0, x1), (y0, y1) = sorted(xs), sorted(ys)
        return np.array([x0, x1, x1, x0], float), np.array([y0, y0, y1, y1], float)
    return _polygon(xs, ys)


def points_in_shapes(px: np.ndarray, py: np.ndarray,
                     shapes: Iterable[Mapping[str, Any]]) -> np.ndarray:
    """Points inside any of several selection shapes (boxes and lassos; shift-drawn ones add
    up), as :func:`points_in_polygon` decides for each."""
    mask = np.zeros(len(px), dtype=bool)
    for shape in shapes:
        xs, ys = shape_polygon(shape)
        mask |= points_in_polygon(px, py, xs, ys)
    return mask


def rows_in_polygon(run, xs: Any, ys: Any) -> np.ndarray:
    """Row ids of every row of ``run`` whose map point lies inside the polygon.

    Raises
    ------
    ValueError
        If the run has no map, or the polygon is not one (see :func:`points_in_polygon`).
    """
    px, py, ids = map_points(run)
    return ids[points_in_polygon(px, py, xs, ys)]


def map_points(run) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x, y (float64) and row ids of every row of the run's map.

    Raises
    ------
    ValueError
        If the run has no map (the projection measure was not run).
    """
    projection = run.projection
    if projection is None or projection.empty:
        raise ValueError(f"run {run.name}: no 2-D map to select on (the projection measure "
                         "was not run)")
    return (projection["x"].to_numpy(dtype=np.float64),
            projection["y"].to_numpy(dtype=np.float64), projection["row_id"].to_numpy())
