"""One schema (issue 61, item 2): every run parameter and every measure option is an
``Option`` (``aflite_core/schema.py``), checked when the config is made, with one message
from Python, the CLI and a saved job; the size-dependent default is one function."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from aflite_core import schema
from aflite_core.cli import main
from aflite_core.config import AuditConfig, suggest_config
from aflite_core.measures import registry
from aflite_core.parameters import PARAMETERS


def test_kinds_are_read_from_the_declaration_and_values_parse_as_the_cli_writes_them():
    ks = schema.Option("ks", "k", (1, 5, 10))
    assert ks.kind == "ints" and ks.parse("1, 5,50") == (1, 5, 50)
    assert schema.Option("m", "m", "a", choices=("a", "b")).kind == "choice"
    assert schema.Option("t", "t", 0.5, minimum=0.0, maximum=1.0).parse("0.25") == 0.25
    assert schema.Option("n", "n", lambda n: n // 2, minimum=1).kind == "int"
    switch = schema.Option("b", "b", False)
    assert switch.kind == "bool" and switch.parse("yes") is True
    with pytest.raises(ValueError, match="give its kind"):
        schema.Option("x", "x", None)
    with pytest.raises(ValueError, match="expected a whole number, got 'five'"):
        schema.Option("n", "n", 3).parse("five")


@pytest.mark.parametrize(("params", "message"), [
    ({"projection": {"method": "tsne"}},
     r"measure_params\['projection'\]\['method'\]: expected one of \('umap', 'pca'\), "
     r"got 'tsne'"),
    ({"knn": {"max_queries": 5}},
     r"measure_params\['knn'\]\['max_queries'\]: expected an int in \[100, 1000000\], got 5"),
    ({"knn": {"k": [1, 5]}},
     r"measure_params\['knn'\]: unknown option\(s\) \['k'\]; expected some of "
     r"\['aflite_seeds', 'ks', 'max_queries', 'n_random_draws'\]"),
    ({"knn": {"ks": [0, 5]}}, r"measure_params\['knn'\]\['ks'\]: expected whole numbers"),
    ({"cues": {"min_count": 3}}, r"measure_params\['cues'\]: unknown option\(s\) "
                                 r"\['min_count'\]; it takes no options"),
    ({"projektion": {}}, r"measure_params: unknown measure\(s\) \['projektion'\]"),
])
def test_a_bad_measure_option_is_refused_when_the_config_is_made(params, message):
    """Before any data is read: the constructor itself refuses it, and so does a saved job
    (the dashboard's worker reads its config back with the same constructor)."""
    with pytest.raises(ValueError, match=message):
        AuditConfig(measure_params=params)
    with pytest.raises(ValueError, match=message):
        AuditConfig(**json.loads(json.dumps({"measure_params": params})))


def test_the_size_rule_is_one_function_that_suggest_config_and_the_measures_share():
    """``Option.value_for`` is the size rule: ``Measure.defaults``, ``suggest_config`` and
    what a measure reads (``check_params`` with the rows) give the same values at every
    size, and a scaled option does change with the size."""
    changed = set()
    for n in (150, 9_000, 100_000, 100_001, 2_000_000):
        config = suggest_config(n, measures=registry.names())
        for measure in registry.measures():
            expected = {o.name: o.value_for(n) for o in measure.options}
            assert measure.defaults(n) == expected
            assert measure.check_params({}, n_rows=n) == {
                k: tuple(v) if isinstance(v, list) else v for k, v in expected.items()}
            if expected:
                assert config.measure_params[measure.name] == expected, measure.name
            changed |= {(measure.name, o.name) for o in measure.options
                        if o.value_for(n) != o.value_for(150)}
    assert {("pvi", "n_splits"), ("slices", "min_support"),
            ("slices", "n_clusters")} <= changed


def test_every_declared_option_has_one_kind_a_label_and_help():
    for option in (*PARAMETERS, *(o for m in registry.measures() for o in m.options)):
        assert option.kind in schema.KINDS and option.label and option.help, option.name
        if option.default is not None and not option.scaled:
            assert option.check(option.default) == (
                tuple(option.default) if option.kind in ("ints", "strs") else option.default)


def _tiny(tmp_path):
    rng = np.random.default_rng(0)
    words = ["cat", "dog", "man", "woman", "car", "tree", "sleeps", "runs", "eats", "sits"]
    rows = [{"premise": " ".join(rng.choice(words, 6)), "hypothesis": " ".join(rng.choice(
        words, 4)) + (" not" if i % 3 == 0 else ""), "label": ["yes", "no", "maybe"][i % 3]}
        for i in range(300)]
    path = tmp_path / "tiny.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_the_new_flags_reach_the_map_and_the_knn_measure(tmp_path):
    """``--projection-n-neighbors``, ``--projection-min-dist`` and ``--knn-ks`` exist and
    are what the measures use."""
    out = tmp_path / "run"
    assert main(["run", str(_tiny(tmp_path)), "--out", str(out), "--partitions", "4",
                 "--n-components", "8", "--measures", "projection,knn", "--no-report", "-q",
                 "--projection-n-neighbors", "7", "--projection-min-dist", "0.3",
                 "--knn-ks", "1,3", "--knn-n-random-draws", "1"]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    used = summary["measures"]["projection"]["params"]
    assert used["n_neighbors"] == 7 and used["min_dist"] == 0.3
    assert summary["parameters"]["measure_params"]["knn"]["ks"] == [1, 3]
    knn = pd.read_parquet(out / "knn.parquet")
    assert set(knn["k"]) == {1, 3}
