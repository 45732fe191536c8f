"""The cue annotations' on-disk cache: an entry reads back as written; one that cannot be read
is a miss (recomputed), never a failure of the measure."""

from __future__ import annotations

import numpy as np

from aflite_core.cues import _annotation_cache as annotation_cache
from aflite_core.cues._annotation_cache import cache_key, cache_load, cache_save


def test_an_entry_reads_back_and_an_unreadable_one_is_a_miss(tmp_path, monkeypatch):
    key = cache_key("tense", "abc")
    arrays = {"codes": np.arange(5, dtype=np.int32), "text": np.frombuffer(b"a\nb", np.uint8)}
    cache_save(tmp_path, key, arrays)
    loaded = cache_load(tmp_path, key)
    assert set(loaded) == set(arrays)
    assert all(np.array_equal(loaded[k], arrays[k]) for k in arrays)
    assert cache_load(tmp_path, cache_key("tense", "other")) is None  # not there

    def racing(*args, **kwargs):  # what CPython 3.11 raised on a Dask worker (gh-106905)
        raise SystemError("AST constructor recursion depth mismatch (before=78, after=69)")

    monkeypatch.setattr(annotation_cache.np, "load", racing)
    assert cache_load(tmp_path, key) is None
    monkeypatch.undo()
    (tmp_path / f"{key}.npz").write_bytes(b"PK\x03\x04 truncated")
    assert cache_load(tmp_path, key) is None


def test_tags_cached_says_whether_an_extraction_would_tag(real_data, tmp_path):
    """``tags_cached`` (the progress plan's question) is True exactly when extracting the same
    families from the same texts reads the tags from the cache folder: not before the first
    extraction, after it; not for other texts or another side; always when no tagged family
    is asked for; never with the cache off."""
    import pandas as pd

    from aflite_core.cues import extract_features, tags_cached

    frame = pd.read_csv(real_data / "snli" / "snli_dev.csv", keep_default_na=False, nrows=60)
    hyps, prems = list(frame["hypothesis"]), list(frame["premise"])
    folder = tmp_path / "cache"
    assert not tags_cached(hyps, prems, cache_dir=folder)
    assert tags_cached(hyps, prems, features=["word", "negation"], cache_dir=folder)
    extract_features(hyps, prems, features=["tense"], cache_dir=folder, n_jobs=1)
    assert tags_cached(hyps, prems, cache_dir=folder)  # one entry holds tense, ner and typo
    assert tags_cached(hyps, None, features=["ner", "word"], cache_dir=folder)
    assert not tags_cached(hyps[:-1], prems, cache_dir=folder)  # other texts
    assert not tags_cached(hyps, prems, text="both", cache_dir=folder)  # premises untagged
    assert not tags_cached(hyps, prems, cache=False, cache_dir=folder)
    extract_features(hyps, prems, features=["typo"], text="both", cache_dir=folder, n_jobs=1)
    assert tags_cached(hyps, prems, text="both", cache_dir=folder)
