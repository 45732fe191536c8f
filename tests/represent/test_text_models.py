"""The one builder of text models: input texts, the three kinds, their shared settings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from aflite_core.represent._text_models import (
    KINDS,
    MIN_DF,
    PAIR_SEPARATOR,
    TextFeatures,
    pair_text,
    pair_texts,
    single_blas_thread,
    split_pairs,
    text_model,
)


def test_one_pair_joining_rule():
    text = pair_text("A dog runs.", "An animal moves.")
    assert text == "A dog runs." + PAIR_SEPARATOR + "An animal moves."
    assert split_pairs([text, "Just a hypothesis."]) == (
        ["A dog runs.", ""], ["An animal moves.", "Just a hypothesis."])
    # the separator cannot sneak in from the data; None reads as ""
    sneaky = pair_text("a" + PAIR_SEPARATOR + "b", None)
    assert split_pairs([sneaky]) == (["a b"], [""])
    assert pair_texts(None, ["x", None]) == ["x", ""]
    assert pair_texts(["p"], ["h"]) == [pair_text("p", "h")]
    with pytest.raises(ValueError, match="premises"):
        pair_texts(["p"], ["h1", "h2"])
    with pytest.raises(TypeError, match="texts"):
        split_pairs("not a list")


def test_kinds_share_steps_solver_and_validation():
    for kind in KINDS:
        model = text_model(kind, C=0.5, random_state=3)
        assert [name for name, _ in model.steps] == ["features", "model"]
        lr = model.named_steps["model"]
        solver = "lbfgs" if kind == "probe" else "newton-cg"  # see text_models.SOLVERS
        assert (lr.solver, lr.C, lr.max_iter, lr.random_state) == (solver, 0.5, 1000, 3)
        assert clone(model).get_params()["model__C"] == 0.5
    with pytest.raises(ValueError, match="kind"):
        text_model("bert")
    with pytest.raises(ValueError, match="C"):
        text_model("probe", C=0)


def test_tokens_are_the_cue_tokens_and_min_df_is_two():
    texts = ["The dog doesn't run.", "A dog doesn't sleep.", "Nobody sleeps here."]
    features = TextFeatures().fit(texts)
    vocabulary = set(features.vectorizer_.vocabulary_)
    # word_tokens of the cue features: lower-cased, "n't" split off, punctuation dropped;
    # words of a single text (min_df = 2) are not features
    assert MIN_DF == 2
    assert {"dog", "n't", "does", "does n't", "dog does"} <= vocabulary
    assert not vocabulary & {"the", "run", "nobody", ".", "doesn't"}


def test_hypothesis_only_ignores_the_premise():
    rng = np.random.default_rng(0)
    words = np.array(["man", "dog", "park", "red", "ball", "sleeps", "runs", "cat"])
    hyps = [" ".join(rng.choice(words, 4)) for _ in range(200)]
    prems = [" ".join(rng.choice(words, 6)) for _ in range(200)]
    y = rng.integers(0, 3, 200)
    on_pairs = text_model("hypothesis_only").fit(pair_texts(prems, hyps), y)
    on_hyps = text_model("hypothesis_only").fit(hyps, y)
    np.testing.assert_array_equal(on_pairs.predict(pair_texts(prems, hyps)),
                                  on_hyps.predict(hyps))


def test_full_input_learns_what_only_the_pair_says():
    """Planted: the label is 'entailment' exactly when every hypothesis word is in the premise.
    The hypothesis alone cannot tell; the full-input model can."""
    rng = np.random.default_rng(1)
    vocab = np.array([f"w{i}" for i in range(40)])
    prems, hyps, y = [], [], []
    for i in range(1200):
        premise = rng.choice(vocab, 8, replace=False)
        if i % 2:
            hypothesis = rng.choice(premise, 3, replace=False)
        else:
            hypothesis = np.r_[rng.choice(premise, 2, replace=False),
                               rng.choice(np.setdiff1d(vocab, premise), 1)]
        prems.append(" ".join(premise))
        hyps.append(" ".join(rng.permutation(hypothesis)))
        y.append("entailment" if i % 2 else "neutral")
    texts, y = pair_texts(prems, hyps), np.array(y)
    accuracy = {}
    for kind in ("hypothesis_only", "full_input"):
        with single_blas_thread():
            model = text_model(kind).fit(texts[:800], y[:800])
        accuracy[kind] = float(np.mean(model.predict(texts[800:]) == y[800:]))
    assert accuracy["hypothesis_only"] < 0.6
    assert accuracy["full_input"] > 0.95
    features = text_model("full_input").named_steps["features"].fit(texts[:800])
    assert len(features.get_feature_names_out()) == features.transform(texts[:5]).shape[1]


def test_probe_reads_dense_features():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 5)) * 100
    y = (X[:, 0] > 0).astype(int)
    model = text_model("probe").fit(X[:200], y[:200])
    assert np.mean(model.predict(X[200:]) == y[200:]) > 0.9


def test_full_input_beats_hypothesis_only_on_snli(snli_dir):
    frame = pd.read_csv(snli_dir / "snli_train_sample.csv", keep_default_na=False).iloc[:6000]
    texts = pair_texts(frame["premise"].tolist(), frame["hypothesis"].tolist())
    y = frame["label"].to_numpy()
    accuracy = {}
    for kind in ("hypothesis_only", "full_input"):
        with single_blas_thread():
            model = text_model(kind).fit(texts[:4000], y[:4000])
        accuracy[kind] = float(np.mean(model.predict(texts[4000:]) == y[4000:]))
    assert 0.45 < accuracy["hypothesis_only"] < accuracy["full_input"]
