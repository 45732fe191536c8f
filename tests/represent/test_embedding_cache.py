"""The embedding cache never serves wrong vectors: an entry records the model, its rows and
dimension and a checksum, and an entry from another model, with flipped bits, empty,
truncated or without its record is ignored and recomputed."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from aflite_core.represent import _embedding_cache as embedding_cache

TEXTS = ["a cat sleeps", "a dog runs", "nobody is here", "two men talk"]


def _embedder(scale: float):
    calls = []

    def embed(texts):
        calls.append(list(texts))
        return np.array([[scale * len(t), scale * t.count("a"), scale] for t in texts],
                        dtype=np.float32)

    return embed, calls


def _fill(tmp_path, model_id="m1", scale=1.0):
    embed, calls = _embedder(scale)
    X, info = embedding_cache.cached_embed(embed, model_id, TEXTS, cache_dir=tmp_path)
    assert info["cache"] == "miss"
    return X, embedding_cache.cache_path(tmp_path, model_id, TEXTS)


def _flip_a_bit(path):
    data = bytearray(path.read_bytes())
    data[-5] ^= 0x01  # inside the values, after the .npy header
    path.write_bytes(bytes(data))


def _truncate(path):
    path.write_bytes(path.read_bytes()[:-7])


def _empty(path):
    path.write_bytes(b"")


def _no_record(path):
    path.with_suffix(".json").unlink()


@pytest.mark.parametrize("damage", [_flip_a_bit, _truncate, _empty, _no_record])
def test_a_damaged_entry_is_recomputed(tmp_path, damage):
    X, path = _fill(tmp_path)
    damage(path)
    embed, calls = _embedder(1.0)
    Y, info = embedding_cache.cached_embed(embed, "m1", TEXTS, cache_dir=tmp_path)
    assert info["cache"] == "miss" and len(calls) == 1  # recomputed, not served
    np.testing.assert_array_equal(Y, X)
    _, info = embedding_cache.cached_embed(embed, "m1", TEXTS, cache_dir=tmp_path)
    assert info["cache"] == "hit"  # and written again, sound


def test_an_entry_of_another_model_is_never_served(tmp_path):
    X1, path1 = _fill(tmp_path / "a", "model-one", scale=1.0)
    X2, path2 = _fill(tmp_path / "b", "model-two", scale=2.0)
    # another model's file (and its record) put where model-one's entry belongs
    shutil.copy(path2, path1)
    shutil.copy(path2.with_suffix(".json"), path1.with_suffix(".json"))
    embed, calls = _embedder(1.0)
    Y, info = embedding_cache.cached_embed(embed, "model-one", TEXTS, cache_dir=tmp_path / "a")
    assert info["cache"] == "miss" and calls
    np.testing.assert_array_equal(Y, X1)
    # a record edited to claim the model does not pass the checksum of the old values...
    shutil.copy(path2, path1)
    record = json.loads(path1.with_suffix(".json").read_text())
    path1.with_suffix(".json").write_text(json.dumps({**record, "blake2b": "0" * 64}))
    Y, info = embedding_cache.cached_embed(embed, "model-one", TEXTS, cache_dir=tmp_path / "a")
    assert info["cache"] == "miss"
    np.testing.assert_array_equal(Y, X1)
