# Copied unchanged from ../shared/bench/aflite_reference.py (the AFLite speed yardstick);
# only this header was added. Used by benchmarks/bench_aflite.py.
# ruff: noqa: E501
"""Straightforward AFLite (Algorithm 1 of Le Bras et al., ICML 2020), written from the paper.

A slow, obviously-correct yardstick for the project's own AFLite: one scikit-learn
LogisticRegression per random partition, predictability = share of correct
out-of-sample predictions, greedy removal of the top-k with score >= tau.
"""
import argparse
import json
import time

import numpy as np
from sklearn.linear_model import LogisticRegression


def aflite(X, y, n_target, m=64, t=None, k=500, tau=0.75, seed=0, max_iter=100):
    rng = np.random.default_rng(seed)
    keep = np.arange(len(y))
    history = []
    while len(keep) > n_target:
        S = keep
        correct = np.zeros(len(S))
        count = np.zeros(len(S))
        tt = t if t is not None else len(S) // 2
        for _ in range(m):
            perm = rng.permutation(len(S))
            tr, te = perm[:tt], perm[tt:]
            clf = LogisticRegression(max_iter=max_iter)
            clf.fit(X[S[tr]], y[S[tr]])
            pred = clf.predict(X[S[te]])
            correct[te] += pred == y[S[te]]
            count[te] += 1
        score = np.where(count > 0, correct / np.maximum(count, 1), 0.0)
        order = np.argsort(-score, kind="stable")
        cand = order[score[order] >= tau][: min(k, len(S) - n_target)]
        history.append({"size": int(len(S)), "removed": int(len(cand)), "mean_score": float(score.mean())})
        keep = np.delete(S, cand)
        if len(cand) < k:
            break
    return keep, history


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("features")  # .npy
    ap.add_argument("labels")  # .npy
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--t", type=int, default=None)
    ap.add_argument("--k", type=int, default=500)
    ap.add_argument("--tau", type=float, default=0.75)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    X = np.load(a.features)
    y = np.load(a.labels)
    t0 = time.perf_counter()
    keep, hist = aflite(X, y, a.n, a.m, a.t, a.k, a.tau, a.seed)
    dt = time.perf_counter() - t0
    if a.out:
        np.save(a.out, keep)
    print(json.dumps({"kept": int(len(keep)), "iterations": len(hist), "seconds": round(dt, 2)}))
