"""AFLite on a Dask cluster gives the same result as the local backend."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import aflite_core.filter._backends as backends_module
from aflite_core.filter._aflite import AFLite
from aflite_core.filter.synthetic import make_planted

distributed = pytest.importorskip("distributed")


@pytest.fixture
def two_groups(monkeypatch):
    """6000 rows in blocks of 4096 rows; one block per group, so one Dask task per block."""
    monkeypatch.setattr(backends_module, "_GROUP_BLOCKS", 1)
    return make_planted(6000, 24, random_state=4)


def _params(**extra):
    return {"target_size": 0.5, "n_partitions": 16, "random_state": 7, **extra}


def _assert_same(a: AFLite, b: AFLite) -> None:
    np.testing.assert_array_equal(a.keep_mask_, b.keep_mask_)
    np.testing.assert_array_equal(a.removal_round_, b.removal_round_)
    np.testing.assert_array_equal(a.predictability_, b.predictability_)
    assert a.history_["removed"].tolist() == b.history_["removed"].tolist()
    assert a.stop_reason_ == b.stop_reason_


def test_dask_client_gives_the_local_mask(cluster, two_groups):
    X, y, biased = two_groups
    _, client = cluster
    local = AFLite(**_params()).fit(X, y)
    dask = AFLite(**_params(backend="dask", scheduler=client)).fit(X, y)
    _assert_same(local, dask)
    assert local.n_rounds_ > 3  # several rounds, with compactions of the working copies
    assert 1 - dask.keep_mask_[biased].mean() > 0.8
    # both workers got a block group and nothing is left behind on the cluster
    assert len(client.scheduler_info()["workers"]) == 2
    deadline = time.monotonic() + 10
    while client.who_has() and time.monotonic() < deadline:  # releases are asynchronous
        time.sleep(0.05)
    assert not client.who_has()


def test_dask_scheduler_address_and_slice_sampling(cluster, two_groups):
    X, y, _ = two_groups
    cluster_obj, _ = cluster
    params = _params(strategy="slice_sampling", train_size=2000)
    local = AFLite(**params).fit(X, y)
    dask = AFLite(**params, backend="dask", scheduler=cluster_obj.scheduler_address).fit(X, y)
    _assert_same(local, dask)


def test_local_process_cluster_from_scheduler_string():
    X, y, _ = make_planted(3000, 16, random_state=1)
    local = AFLite(**_params()).fit(X, y)
    dask = AFLite(**_params(backend="dask", scheduler="local:2")).fit(X, y)
    _assert_same(local, dask)


def test_importing_aflite_core_does_not_import_dask():
    code = ("import sys, aflite_core.filter._aflite; "
            "print('distributed' in sys.modules, 'dask' in sys.modules)")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=root)
    assert out.stdout.split() == ["False", "False"]


def test_a_run_says_where_each_stage_ran(cluster, tmp_path):
    """summary.json's engines: AFLite on the scheduler, the other stages here (so far); the
    stage tables of the Report page and the HTML report say where each ran."""
    import json

    import pandas as pd

    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit

    rng = np.random.default_rng(0)
    words = np.array(["red", "blue", "cat", "dog", "sun", "rain", "big", "old"])
    labels = rng.choice(["yes", "no"], 600)
    frame = pd.DataFrame({"hypothesis": [f"{lab}cue " + " ".join(rng.choice(words, 4))
                                         for lab in labels], "label": labels})
    dataset = load_dataset(frame, name="engines")
    fast = {"representation_params": {"n_components": 8}, "n_partitions": 8,
            "target_size": 0.8, "measures": ("label_shift",), "report": False}
    cluster_obj, _ = cluster
    on_dask = run_audit(dataset, AuditConfig(**fast, backend="dask",
                                             scheduler=cluster_obj.scheduler_address),
                        runs_root=tmp_path / "dask")
    here = run_audit(dataset, AuditConfig(**fast), runs_root=tmp_path / "local")
    engines = json.loads((on_dask / "summary.json").read_text())["engines"]
    assert engines == {"read": "local", "representation": "dask", "aflite": "dask",
                       "write": "local", "label_shift": "local"}
    local = json.loads((here / "summary.json").read_text())["engines"]
    assert local == {**engines, "representation": "local", "aflite": "local"}
    # the Report page's and the HTML report's stage table say it too
    from aflite_core.report.html import _section_provenance
    from aflite_core.runs.folder import load_run
    from aflite_core.runs.views import stage_table

    table = stage_table(load_run(on_dask)).set_index("stage")["ran on"]
    assert table["aflite"] == "dask" and table["label_shift"] == "local"
    assert table["total (wall)"] == ""
    html = _section_provenance(load_run(on_dask))
    assert "Stages: seconds, and where each ran" in html
    assert '<td class="text">aflite</td><td class="num">' in html
    assert '<td class="text">dask</td>' in html


def test_the_cli_on_local_2_gives_the_local_run(snli_dir, tmp_path, monkeypatch):
    """Issue 27 item 3: 20,000 SNLI rows audited with --scheduler local:2 (a LocalCluster of
    two worker processes) and without: the same statuses, predictabilities and cue table
    (locally from all rows at once, on Dask by map-reduce over row chunks), Φ built over two
    row partitions, one on each worker."""
    import json

    import pandas as pd

    import aflite_core.represent._partitioned_svd as partitioned_module
    from aflite_core.cli import main

    monkeypatch.setattr(partitioned_module, "PARTITION_ROWS", 16_384)
    # as two Parquet shards: with --scheduler each is read by a task on the workers
    data = tmp_path / "snli_shards"
    data.mkdir()
    frame = pd.read_csv(snli_dir / "snli_train_sample.csv", keep_default_na=False)
    for i, part in enumerate((frame.iloc[:12_000], frame.iloc[12_000:])):
        part.to_parquet(data / f"part-{i}.parquet", index=False)
    import aflite_core.io._streamed_load as streamed_load

    moved = []
    load = streamed_load.load_to_disk

    def recorded(*args, **kwargs):
        dataset = load(*args, **kwargs)
        moved.append((kwargs["path"], dataset.loaded_by))
        return dataset

    monkeypatch.setattr(streamed_load, "load_to_disk", recorded)
    runs = {}
    for name, extra in (("local", []), ("dask", ["--scheduler", "local:2"])):
        out = tmp_path / name
        assert main(["run", str(data), "--out", str(out), "--quiet", "--measures", "cues",
                     "--no-report", *extra]) == 0
        runs[name] = out
    engines = json.loads((runs["dask"] / "summary.json").read_text())["engines"]
    # the cue table by map-reduce: 20,000 rows on 2 workers are 4 chunks of 5,000
    assert engines["aflite"] == "dask" and engines["cues"] == "dask"
    assert engines["representation"] == "dask" and engines["read"] == "dask"
    assert json.loads((runs["local"] / "summary.json").read_text())["engines"]["read"] == "local"
    summary = json.loads((runs["dask"] / "summary.json").read_text())
    assert summary["representation"]["params"]["partitions"] == 2
    a, b = (pd.read_parquet(runs[k] / "scores.parquet") for k in ("local", "dask"))
    assert len(a) == 20_000
    assert a["status"].tolist() == b["status"].tolist()
    np.testing.assert_allclose(a["predictability"], b["predictability"], atol=1e-6)
    cues_a, cues_b = (pd.read_parquet(runs[k] / "cues.parquet") for k in ("local", "dask"))
    pd.testing.assert_frame_equal(cues_a, cues_b)
    # with a scheduler the texts were read from a file beside the runs, written at load a
    # shard at a time (streamed: never both shards' texts on the driver) as the run's
    # dataset.parquet, then linked into the run: the same file, and nothing left beside
    assert len(moved) == 1 and moved[0][0].parent.parent == tmp_path  # the dask run's
    assert moved[0][1] == "streamed"
    a, b = ((runs[k] / "dataset.parquet").read_bytes() for k in ("local", "dask"))
    assert a == b
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_the_measures_fold_fits_run_on_the_cluster_with_the_local_figures(cluster, snli_dir,
                                                                         tmp_path):
    """Issue 27 item 2 (baselines and PVI: folds as tasks; KNN: query x training blocks): with
    a scheduler, the fold fits of the baselines, PVI and the label issues and KNN's searches
    are tasks on the cluster's workers, and every figure is the one of the local run (bit for
    bit but for float32 roundings); summary.json says where each ran."""
    import json

    import pandas as pd

    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit

    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False).iloc[:3000]
    dataset = load_dataset(frame, name="folds")
    fast = {"representation_params": {"n_components": 16}, "n_partitions": 8,
            "measures": ("knn", "projection", "baselines", "label_issues", "pvi",
                         "label_shift"), "report": False,
            # the map fitted on 1,000 rows: the other 2,000 are placed (on the workers)
            "measure_params": {"projection": {"sample_size": 1000}}}
    cluster_obj, client = cluster
    sent = []
    submit = distributed.Client.submit

    def counting(self, fn, *args, **kwargs):
        sent.append(getattr(fn, "__name__", ""))
        return submit(self, fn, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(distributed.Client, "submit", counting)
        on_dask = run_audit(dataset, AuditConfig(**fast, backend="dask",
                                                 scheduler=cluster_obj.scheduler_address),
                            runs_root=tmp_path / "dask")
    here = run_audit(dataset, AuditConfig(**fast), runs_root=tmp_path / "local")
    summary = json.loads((on_dask / "summary.json").read_text())
    # both maps polished: on the cluster from the chunks' codes that came back with them
    assert summary["measures"]["projection"]["polished"] is True
    assert json.loads((here / "summary.json").read_text())["measures"]["projection"][
        "polished"] is True
    assert summary["engines"] == {"read": "local", "representation": "dask", "aflite": "dask",
                                  "write": "local", "knn": "dask", "projection": "dask",
                                  "baselines": "dask", "label_issues": "dask", "pvi": "dask",
                                  "label_shift": "local"}
    # PVI's and the label issues' folds, the baselines' (2 sets at least), KNN's sets, a chunk
    # of the map's placed rows; the label issues' features made by a task on a worker
    assert sent.count("_fit_task") >= 2 + 2 + 2 * 2 + 3 + 1
    assert sent.count("_pair_evaluator") == 1
    for name in ("scores.parquet", "pvi.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(on_dask / name),
                                      pd.read_parquet(here / name), check_exact=True)
    # KNN's float32 similarity products round in the last bit with the arrays' alignment
    # after pickling and the BLAS thread count: the same within 1e-6
    pd.testing.assert_frame_equal(pd.read_parquet(on_dask / "knn.parquet"),
                                  pd.read_parquet(here / "knn.parquet"), check_exact=False,
                                  rtol=1e-6, atol=1e-6)
    # label_quality averages the fold models' probability (the same bits) with AFLite's
    # float32 data-map confidence, which two workers' block groups can round in the last bit
    issues = [pd.read_parquet(path / "label_issues.parquet") for path in (on_dask, here)]
    pd.testing.assert_frame_equal(issues[0].drop(columns="label_quality"),
                                  issues[1].drop(columns="label_quality"), check_exact=True)
    np.testing.assert_allclose(issues[0]["label_quality"], issues[1]["label_quality"],
                               rtol=0, atol=1e-6)

    # the map's placed rows: their neighbours' float32 similarities may round differently
    # on a worker (a near tie then picks another neighbour); here every row lands the same
    maps = [pd.read_parquet(path / "projection.parquet") for path in (on_dask, here)]
    same = (maps[0][["x", "y"]].to_numpy() == maps[1][["x", "y"]].to_numpy()).all(axis=1)
    assert same.mean() >= 0.99 and (maps[0]["region"] == maps[1]["region"]).mean() >= 0.99

    def figures(path: Path) -> dict:
        doc = json.loads((path / "baselines.json").read_text())
        doc.pop("seconds", None)
        return doc

    assert figures(on_dask) == figures(here)
    assert json.loads((here / "summary.json").read_text())["engines"]["baselines"] == "local"


def test_shards_read_on_the_workers_are_the_shards_read_here(cluster, snli_dir, tmp_path):
    """``map_shards`` (the CLI's ``--scheduler``): one task per shard on the workers, the same
    table (rows, order, content hash, row locations); a shard's own error is raised as it is;
    workers that cannot open the files leave the reading to the driver, with a warning."""
    import pandas as pd

    from aflite_core.commands._input import ShardsOnCluster
    from aflite_core.io.datasets import DatasetError, load_dataset

    _, client = cluster
    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False).head(3000)
    for i in range(3):
        frame.iloc[i::3].to_parquet(tmp_path / f"part-{i}.parquet", index=False)
    here = load_dataset(tmp_path)
    there = load_dataset(tmp_path, map_shards=ShardsOnCluster(client))
    assert (here.read_by, there.read_by) == ("local", "dask")
    pd.testing.assert_frame_equal(there.frame, here.frame, check_exact=True)
    assert there.content_hash == here.content_hash
    assert there.report.warnings == here.report.warnings

    def unseen(read, paths):  # workers that do not share the driver's disk: elsewhere there
        return [read(path.parent / "elsewhere" / path.name) for path in paths]

    fallback = load_dataset(tmp_path, map_shards=unseen)
    assert fallback.read_by == "local"
    pd.testing.assert_frame_equal(fallback.frame, here.frame, check_exact=True)
    assert any("the shards were read here: the cluster's workers could not open them" in w
               for w in fallback.report.warnings)
    frame.iloc[:10].rename(columns={"label": "gold"}).to_parquet(tmp_path / "part-3.parquet",
                                                                 index=False)
    with pytest.raises(DatasetError, match="shard 'part-3.parquet' has other columns"):
        load_dataset(tmp_path, map_shards=ShardsOnCluster(client))


def test_the_streamed_load_reads_the_shards_on_the_workers_one_at_a_time(cluster, snli_dir,
                                                                         tmp_path):
    """``ShardsOnCluster.stream``: the shards read by tasks on the workers, taken in order,
    a few ahead; the streamed load from them is the whole load from the driver (the texts
    file byte for byte); workers that cannot open the files leave the reading here."""
    import pandas as pd

    from aflite_core.commands._input import ShardsOnCluster
    from aflite_core.io._streamed_load import load_to_disk
    from aflite_core.io.datasets import load_dataset

    _, client = cluster
    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False).head(3000)
    data = tmp_path / "data"
    data.mkdir()
    for i in range(5):
        frame.iloc[i * 600:(i + 1) * 600].to_parquet(data / f"part-{i}.parquet", index=False)
    shards = ShardsOnCluster(client)
    tables = shards.stream(lambda path: pd.read_parquet(path), sorted(data.iterdir()), ahead=2)
    assert pd.concat(list(tables), ignore_index=True).equals(
        pd.read_parquet(data).reset_index(drop=True))
    there = load_to_disk(data, tmp_path / "a.parquet", map_shards=shards)
    here = load_dataset(data).with_texts_on_disk(tmp_path / "b.parquet")
    assert (there.read_by, there.loaded_by) == ("dask", "streamed")
    pd.testing.assert_frame_equal(there.frame, here.frame, check_exact=True)
    assert there.report.to_dict() == here.report.to_dict()
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()

    class Unseen(ShardsOnCluster):  # workers that do not share the driver's disk
        def stream(self, read, paths, **kwargs):
            return super().stream(read, [p.parent / "elsewhere" / p.name for p in paths])

    fallback = load_to_disk(data, tmp_path / "c.parquet", map_shards=Unseen(client))
    assert (fallback.read_by, fallback.loaded_by) == ("local", "streamed")
    assert any("the shards were read here: the cluster's workers could not open them" in w
               for w in fallback.report.warnings)
    pd.testing.assert_frame_equal(fallback.frame, here.frame, check_exact=True)

    # one file: a TSV file's parts and a Parquet file's row groups parsed on the workers
    import aflite_core.io._line_parts as line_parts

    tsv, parquet = tmp_path / "one.tsv", tmp_path / "one.parquet"
    frame.to_csv(tsv, sep="\t", index=False)
    frame.to_parquet(parquet, index=False, row_group_size=500)
    for one in (tsv, parquet):
        line_parts.PART_BYTES, was = 64 << 10, line_parts.PART_BYTES
        try:
            there = load_to_disk(one, tmp_path / "d.parquet", map_shards=shards)
        finally:
            line_parts.PART_BYTES = was
        here = load_dataset(one).with_texts_on_disk(tmp_path / "e.parquet")
        assert (there.read_by, there.loaded_by) == ("dask", "streamed"), one.name
        pd.testing.assert_frame_equal(there.frame, here.frame, check_exact=True)
        assert there.report.to_dict() == here.report.to_dict()
        assert (tmp_path / "d.parquet").read_bytes() == (tmp_path / "e.parquet").read_bytes()


def test_an_audit_config_with_a_client_is_written_with_its_address(cluster):
    """``AuditConfig(scheduler=Client)`` (the Python way to audit on an existing cluster):
    ``summary.json``'s configuration names the scheduler's address (a client cannot be
    copied into it)."""
    import json

    from aflite_core.pipeline import AuditConfig

    local, client = cluster
    data = AuditConfig(backend="dask", scheduler=client, measures=("cues",)).to_dict()
    assert data["scheduler"] == local.scheduler_address
    assert json.loads(json.dumps(data))["backend"] == "dask"
    assert AuditConfig(backend="dask", scheduler="local:2").to_dict()["scheduler"] == "local:2"


def test_the_audits_client_keeps_no_task_inputs_alive_after_their_tasks(cluster):
    """Dask keeps the last messages of a stream for debugging (1,000 by default), and a kept
    message holds its tasks' arguments: the audit's client keeps 16, so the inputs of
    finished tasks are freed on the driver."""
    import gc
    import weakref

    from aflite_core.filter._scheduler import MESSAGE_LOG_LENGTH, connect

    local, _ = cluster
    client, owned = connect(local.scheduler_address, 1)
    try:
        assert client.scheduler_comm.recent_message_log.maxlen == MESSAGE_LOG_LENGTH
        alive = []
        for i in range(60):  # one task (one message) at a time, as a measure's passes go
            x = np.full(20_000, i, dtype=np.uint8)
            alive.append(weakref.ref(x))
            assert client.submit(np.sum, x, pure=False).result() == 20_000 * i
            del x
        gc.collect()
        assert sum(ref() is not None for ref in alive) <= 16  # all 60 with Dask's default
    finally:
        for obj in reversed(owned):
            obj.close()


def test_the_label_issues_features_made_on_a_worker_and_when_it_is_lost(cluster, snli_dir,
                                                                        monkeypatch):
    """The label issues' full-input folds on a cluster: the texts sent to a worker once, the
    folds' features made there by a task and read there by every fold: the probabilities of
    the local folds, bit for bit. When the features are lost with their worker (their future
    cancelled here, as Dask reports it), the folds are fitted again from features made here:
    the same probabilities."""
    import pandas as pd

    from aflite_core.measures import label_issues
    from aflite_core.represent._fold_pool import on_dask
    from aflite_core.represent._pair_inputs import pair_texts

    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False).iloc[:2000]
    texts = pair_texts(frame["premise"].tolist(), frame["hypothesis"].tolist())
    labels = frame["label"].to_numpy()
    options = {"n_splits": 2, "groups": frame["premise"].to_numpy(), "random_state": 0}
    classes, here = label_issues.out_of_fold_probabilities(texts, labels, **options)
    _, client = cluster
    sent = []
    submit = distributed.Client.submit
    monkeypatch.setattr(distributed.Client, "submit", lambda self, fn, *a, **k: sent.append(
        getattr(fn, "__name__", "")) or submit(self, fn, *a, **k))
    with on_dask(client) as fits:
        there_classes, there = label_issues.out_of_fold_probabilities(texts, labels, **options)
    assert sent.count("_pair_evaluator") == 1 and fits.tasks == 2
    np.testing.assert_array_equal(there_classes, classes)
    np.testing.assert_array_equal(there, here)
    map_folds = label_issues.map_folds
    lost = []

    def losing(fit, folds, *, resident, **kwargs):
        if type(resident).__name__ == "Future":  # on the worker: lost before the folds ran
            client.cancel([resident])
            lost.append(1)
        return map_folds(fit, folds, resident=resident, **kwargs)

    monkeypatch.setattr(label_issues, "map_folds", losing)
    with on_dask(client):
        _, again = label_issues.out_of_fold_probabilities(texts, labels, **options)
    assert lost == [1]
    np.testing.assert_array_equal(again, here)



def test_a_group_cut_into_shares_sums_bit_for_bit_as_one_task(cluster):
    """Issue 63 item 2: a block group is cut into shares spread over the workers (a group of
    64 blocks was one task, so at 100k rows one worker did all of AFLite); its class sums are
    folded share after share in block order, so they equal the local backend's bit for bit,
    where a sum of the shares' own sums would not."""
    from aflite_core.filter._backends import RowBlocks, _DaskBackend, _LocalBackend

    _, client = cluster
    X, y, _ = make_planted(9000, 24, classes=3, random_state=5)
    X[:1024] *= 1e12  # the first block's sums swamp the others' last bits
    blocks = RowBlocks(y.astype(np.int64), 3, 1024)  # 9 blocks, one group
    shares = backends_module.split_groups(blocks.groups, 2)
    assert [(g, len(b), w) for g, b, w in shares] == [(0, 4, 0), (0, 5, 1)]
    shift = np.zeros(24, dtype=np.float32)  # not centred: the first block stays large
    rng = np.random.default_rng(0)
    train_w = [rng.random((16, len(r))) < 0.5 for r in blocks.rows]
    local = _LocalBackend(X, shift, blocks, 2)
    dask = _DaskBackend(X, shift, blocks, client, 2)
    try:
        assert len(set(dask._holders)) == 2  # both workers hold shares
        (a,), (b,) = local.group_class_sums(blocks.bounds, train_w), \
            dask.group_class_sums(blocks.bounds, train_w)
        assert a.dtype == b.dtype == np.float64 and np.array_equal(a, b)
        stats_a, stats_b = local.group_row_stats()[0], dask.group_row_stats()[0]
        assert stats_a[0] == stats_b[0] == 9000
        assert all(np.array_equal(p, q) for p, q in zip(stats_a[1:], stats_b[1:], strict=True))
        # the removed rows' features, taken from the workers' copies later, are X's rows
        positions = [np.flatnonzero(rng.random(len(r)) < 0.1) for r in blocks.rows]
        later = dask.features(positions)
        assert np.array_equal(later.result(), local.features(positions))
        # the association matters: the shares' own sums, added, differ in the last bits
        parts = [backends_module.partition_class_sums(local._wc[i], blocks.bounds[i],
                                                      train_w[i]) for i in range(9)]
        in_order = backends_module._sum_in_order
        by_share = in_order(parts[:4]) + in_order(parts[4:])
        assert not np.array_equal(by_share, a)
    finally:
        local.close()
        dask.close()


def test_the_local_cluster_workers_allocate_without_mmap_churn():
    """Issue 63 item 2: the workers of a ``local:N`` cluster get glibc's mmap threshold of
    WORKER_ENVIRON (Dask's nanny sets MALLOC_TRIM_THRESHOLD_, which pins the mmap threshold at
    128 KiB: AFLite's per-block temporaries were mmapped and faulted in every time)."""
    import os

    from aflite_core.filter._scheduler import connect

    client, owned = connect("local:1", 1)
    try:
        seen = client.run(lambda: (os.environ.get("MALLOC_MMAP_THRESHOLD_"),
                                   os.environ.get("MALLOC_TRIM_THRESHOLD_")))
        assert list(seen.values()) == [(str(32 << 20), "65536")]
    finally:
        for obj in reversed(owned):
            obj.close()
