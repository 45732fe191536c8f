"""The components of rows linked by a shared premise or hypothesis (``linked_components``)."""

from __future__ import annotations

import numpy as np
import pytest

from aflite_core.io._linked_groups import linked_components, linked_text_groups


def _reference(premises: np.ndarray | None, hypotheses: np.ndarray) -> np.ndarray:
    """Union-find over the rows, components numbered in order of their first row."""
    n = len(hypotheses)
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    first_of: dict[tuple, int] = {}
    for i in range(n):
        keys = [("h", int(hypotheses[i]))]
        if premises is not None and premises[i] >= 0:
            keys.append(("p", int(premises[i])))
        for key in keys:
            if key in first_of:
                parent[root(i)] = root(first_of[key])
            else:
                first_of[key] = i
    numbers: dict[int, int] = {}
    return np.array([numbers.setdefault(root(i), len(numbers)) for i in range(n)],
                    dtype=np.int32)


@pytest.mark.parametrize("seed", range(4))
def test_components_equal_a_union_find_of_the_rows(seed):
    rng = np.random.default_rng(seed)
    for _ in range(300):
        n = int(rng.integers(0, 50))
        hypotheses = rng.integers(0, int(rng.integers(1, 40)), n)
        premises = None if rng.random() < 0.2 else rng.integers(-1, int(rng.integers(1, 40)), n)
        got = linked_components(premises, hypotheses)
        assert got.dtype == np.int32
        assert np.array_equal(got, _reference(premises, hypotheses))


def test_a_chain_of_shared_texts_is_one_group_and_numbering_follows_first_rows():
    # rows 0-1 share a premise, 1-2 a hypothesis, 2-3 a premise: one group; 4 alone; 5 with 4
    premises = np.array([0, 0, 1, 1, 2, 3])
    hypotheses = np.array([0, 1, 1, 2, 3, 3])
    assert linked_components(premises, hypotheses).tolist() == [0, 0, 0, 0, 1, 1]
    # a missing premise (-1) links nothing; the rows are numbered from the first row on
    assert linked_components(np.array([-1, -1, 5]), np.array([7, 3, 7])).tolist() == [0, 1, 0]
    assert linked_text_groups(["a", "b", "b"], ["x", "y", "z"]).tolist() == ["0", "1", "1"]
    assert linked_components(None, np.zeros(0, dtype=np.int64)).tolist() == []
