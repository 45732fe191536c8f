"""CSV exports encoded by tasks on a Dask cluster's workers (issue 27 item 2, "exports per
partition"): each chunk of rows is a task, the bytes are written in order on the driver, and
the file is the local export's byte for byte."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest
from planted import run_from_dataset, statuses_for

from aflite_core.io.datasets import load_dataset
from aflite_core.runs.exports import export_run

distributed = pytest.importorskip("distributed")


@pytest.fixture
def planted_run(tmp_path):
    """3,000 rows whose cells start with formula characters, hold quotes, commas, CR/LF and
    non-ASCII text, some empty; a status each."""
    rng = np.random.default_rng(7)
    pieces = np.array(["=SUM(A1)", "+1", "-x", "@me", 'say "hi", twice', "line\r\nbreak",
                       "naïve café", "", "plain text"], dtype=object)
    n = 3000
    frame = pd.DataFrame({"premise": rng.choice(pieces, n),
                          "hypothesis": [f"h{i} {p}" for i, p in enumerate(rng.choice(pieces, n))],
                          "label": rng.choice(["entailment", "neutral", "contradiction"], n),
                          "score": rng.random(n)})
    data = tmp_path / "planted.csv"
    frame.to_csv(data, index=False)
    dataset = load_dataset(data)
    return run_from_dataset(tmp_path, dataset, statuses_for(n, seed=3))


def test_chunks_encoded_on_the_workers_give_the_local_file(cluster, planted_run, tmp_path):
    from aflite_core.represent._fold_pool import stream_ordered

    _, client = cluster
    sent = []
    submit = distributed.Client.submit

    def counting(self, fn, *args, **kwargs):
        sent.append(fn)
        return submit(self, fn, *args, **kwargs)

    for what, sanitize in (("all", True), ("retained", False), ("scores", True)):
        here, there = tmp_path / f"{what}-here.csv", tmp_path / f"{what}-there.csv"
        local = export_run(planted_run, what, here, sanitize=sanitize, chunk_rows=400)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(distributed.Client, "submit", counting)
            remote = export_run(planted_run, what, there, sanitize=sanitize, chunk_rows=400,
                                map_chunks=functools.partial(stream_ordered, client))
        assert here.read_bytes() == there.read_bytes() and remote.n_rows == local.n_rows
        assert local.n_rows > 400  # several chunks, so several tasks
    assert len(sent) >= 3 * 2


def test_the_cli_export_on_a_local_cluster(planted_run, tmp_path, capsys):
    from aflite_core.cli import main

    here, there = tmp_path / "here.csv", tmp_path / "there.csv"
    assert main(["export", str(planted_run), "--what", "all", "--out", str(here)]) == 0
    assert main(["export", str(planted_run), "--what", "all", "--out", str(there),
                 "--scheduler", "local:2"]) == 0
    assert here.read_bytes() == there.read_bytes()
    capsys.readouterr()
    assert main(["export", str(planted_run), "--what", "all", "--out", str(tmp_path / "x.csv"),
                 "--scheduler", "local:99999"]) != 0
    assert "'local:99999' asks for 99,999 local workers; at most" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()
