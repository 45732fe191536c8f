"""AFLite's partitions draw whole groups by default when the data has (small) groups.

A held-out row whose group-mate trained the partition is scored by memorisation: on data
built like FEVER-Symmetric (every claim twice, with opposite labels) the models then predict
the twin's label, so the held-out predictions fall below chance, and the data map and the
label quality inherit it. ``group_partitions="auto"`` (the default) draws whole groups there.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aflite_core.filter._policy import plan_filter
from aflite_core.io.datasets import load_dataset
from aflite_core.pipeline import AUTO_GROUP_MAX_SHARE, AuditConfig, partition_groups, run_audit
from aflite_core.runs.folder import load_run


def _twins(path, n_claims: int = 400, seed: int = 0):
    """Every claim (4 random words) twice, with opposite labels, each with its own premise."""
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(3000)])
    rows = []
    for _ in range(n_claims):
        claim, first = " ".join(rng.choice(vocab[:1500], 4)), int(rng.integers(2))
        for j in range(2):
            rows.append({"premise": " ".join(rng.choice(vocab[1500:], 6)),
                         "hypothesis": claim, "label": ["yes", "no"][(first + j) % 2]})
    pd.DataFrame(rows).to_csv(path, index=False)
    return load_dataset(str(path))


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    return _twins(tmp_path_factory.mktemp("twins") / "twins.csv")


def _resolve(dataset, **changes):
    config = AuditConfig(**changes).validate()
    filterable = np.ones(dataset.report.n_included, dtype=bool)
    return partition_groups(dataset, config, filterable, plan_filter(dataset))


def test_auto_draws_whole_groups_where_the_data_has_small_ones(twins):
    groups, why = _resolve(twins)
    assert groups is not None and why.startswith("whole groups (rows linked")
    assert len(np.unique(groups)) == 400  # a claim's two rows
    assert _resolve(twins, group_partitions="off")[0] is None
    assert _resolve(twins, group_partitions=False)[0] is None  # the old switch still works
    assert _resolve(twins, group_partitions=True)[0] is not None


def test_auto_draws_rows_without_groups_or_with_a_large_group(tmp_path):
    twins = _twins(tmp_path / "twins.csv", n_claims=60)
    ungrouped = load_dataset(str(tmp_path / "twins.csv"), group="")
    groups, why = _resolve(ungrouped)
    assert groups is None and why == "rows (the data has no groups)"
    with pytest.raises(ValueError, match="group_partitions: the dataset has no groups"):
        _resolve(ungrouped, group_partitions="on")
    # a group column whose largest group holds 30 % of the rows: above AUTO_GROUP_MAX_SHARE
    frame = pd.read_csv(tmp_path / "twins.csv")
    frame["topic"] = np.where(np.arange(len(frame)) < 0.3 * len(frame), "big",
                              np.arange(len(frame)).astype(str))
    frame.to_csv(tmp_path / "large.csv", index=False)
    large = load_dataset(str(tmp_path / "large.csv"), group="topic")
    groups, why = _resolve(large)
    assert large.groups() is not None and groups is None
    assert f"more than {AUTO_GROUP_MAX_SHARE:.0%}" in why
    assert _resolve(large, group_partitions="on")[0] is not None
    assert _resolve(twins, filter="z")[0] is None  # the Z-filter has no partitions
    with pytest.raises(ValueError, match="group_partitions: expected one of"):
        AuditConfig(group_partitions="yes").validate()


def test_grouped_partitions_keep_memorised_twins_from_scoring_below_chance(twins, tmp_path):
    """Planted memorisation: ungrouped, a row's twin (same claim, other label) trains most
    partitions that hold the row out, so its held-out correctness falls well below the 50 %
    chance of two balanced labels; grouped (the default here) it stays near chance, in the
    data map's correctness and confidence too."""
    runs = {}
    for choice in ("auto", "off"):
        config = AuditConfig(group_partitions=choice, measures=("datamap",),
                             report=False)
        runs[choice] = load_run(run_audit(twins, config, runs_root=tmp_path / choice))
    auto, off = runs["auto"], runs["off"]
    assert auto.summary["aflite"]["grouped_partitions"] is True
    assert off.summary["aflite"]["grouped_partitions"] is False
    dm_auto, dm_off = (r.read_parquet("datamap.parquet") for r in (auto, off))
    assert dm_off["correctness"].mean() < 0.40  # memorised: 0.33 when written
    assert 0.43 < dm_auto["correctness"].mean() < 0.57  # chance: 0.47 when written
    assert dm_auto["confidence"].mean() > dm_off["confidence"].mean() + 0.07


def test_ungrouped_partitions_on_grouped_data_are_said_and_kept_out_of_label_quality(
        twins, tmp_path):
    """With group_partitions='off' on grouped data the data map warns, and label quality is
    the full-input model's alone (its grouped folds), not blended with AFLite's leaky
    probabilities; with grouped partitions the two are blended."""
    from aflite_core.measures.datamap import UNGROUPED
    from aflite_core.measures.label_issues import UNGROUPED_DATAMAP
    from aflite_core.report.html import build_report, esc

    infos = {}
    for choice in ("on", "off"):
        config = AuditConfig(group_partitions=choice, measures=("datamap", "label_issues"),
                             report=False)
        run = load_run(run_audit(twins, config, runs_root=tmp_path / choice))
        infos[choice] = run.summary["measures"]
        if choice == "off":
            assert esc(UNGROUPED) in build_report(run, include_plotlyjs=False)
    on, off = infos["on"], infos["off"]
    assert on["datamap"]["warnings"] == [] and on["datamap"]["grouped"] is True
    assert off["datamap"]["warnings"] == [UNGROUPED] and off["datamap"]["grouped"] is False
    assert on["label_issues"]["aflite_blended"] == 800
    assert off["label_issues"]["aflite_blended"] == 0
    assert UNGROUPED_DATAMAP in off["label_issues"]["warnings"]
    assert UNGROUPED_DATAMAP not in on["label_issues"]["warnings"]


@pytest.mark.parametrize(("flags", "expected"), [((), "auto"),
                                                  (("--group-partitions",), "on"),
                                                  (("--group-partitions", "off"), "off"),
                                                  (("--group-partitions", "auto"), "auto")])
def test_the_cli_flag_takes_a_choice_and_alone_still_means_on(flags, expected):
    from aflite_core.cli import build_parser
    from aflite_core.commands.run import audit_config

    args = build_parser().parse_args(["run", "data.csv", "--out", "r", *flags])
    assert audit_config(args, 10_000).validate().group_partitions == expected


def test_the_cli_refuses_another_value():
    from aflite_core.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "data.csv", "--out", "r", "--group-partitions", "yes"])


def test_what_the_partitions_drew_is_said_with_the_filter_description(twins, tmp_path):
    from aflite_core.runs.views import filter_description

    config = AuditConfig(measures=(), report=False)
    run = load_run(run_audit(twins, config, runs_root=tmp_path))
    assert run.summary["aflite"]["partition_groups"].startswith("whole groups")
    assert filter_description(run).endswith(
        "Each partition trained on whole groups (rows linked by a shared premise or "
        "hypothesis).")
    z = load_run(run_audit(twins, AuditConfig(filter="z", measures=(), report=False),
                           runs_root=tmp_path / "z"))
    assert z.summary["aflite"]["partition_groups"] == ""
    assert "partition" not in (filter_description(z) or "")


def test_group_codes_name_the_same_groups_as_groups(twins, tmp_path):
    """``group_codes`` (what the partitions count) and ``groups`` (the strings every split
    reads) put the same rows together, for linked texts and for a group column whose values
    mix 1 and "1" (one group, as the labels' rule makes it)."""
    frame = pd.DataFrame({"premise": ["a b", "c d", "e f", "g h"],
                          "hypothesis": ["x", "y", "z", "w"], "label": ["p", "q", "p", "q"],
                          "topic": [1, "1", 2.5, None]})
    column = load_dataset(frame, name="topics", group="topic")
    for dataset in (twins, column):
        codes, names = dataset.group_codes(), dataset.groups()
        assert codes.dtype == np.int64 and len(codes) == len(names)
        pairs = set(zip(codes.tolist(), names.tolist(), strict=True))
        assert len(pairs) == len(set(codes.tolist())) == len(set(names.tolist()))
    assert column.group_codes()[0] == column.group_codes()[1]
    assert load_dataset(frame, name="none", group="").group_codes() is None
