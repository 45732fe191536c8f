"""An audit on a scheduler that requires TLS (issue 27, item 5: "TLS").

A ``LocalCluster`` listening on ``tls://`` with a self-signed certificate (made here with
``cryptography``, a test dependency), encryption required: the CLI audits the bundled sample
through it, with the client's certificate given the way docs/scaling.md says (Dask's
configuration), and gets the local run's statuses, predictabilities and cue table. Without
the certificate, or with the TLS scheduler given as ``tcp://``, the CLI says what is wrong
within seconds.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aflite_core.cli import main

SAMPLE = str(Path(__file__).resolve().parent.parent / "aflite_core" / "data" / "snli_sample.csv")
SAMPLE_ARGS = ["--quiet", "--measures", "cues", "--no-report", "--target-size", "0.8",
               "--partitions", "8"]


def _self_signed(folder):
    """A CA certificate for 127.0.0.1 that signs itself, and its key (PEM files)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "aflite-test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False)
        .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption()))
    return str(cert_path), str(key_path)


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    from distributed import LocalCluster
    from distributed.security import Security

    cert, key = _self_signed(tmp_path_factory.mktemp("tls"))
    security = Security(tls_ca_file=cert, tls_client_cert=cert, tls_client_key=key,
                        tls_scheduler_cert=cert, tls_scheduler_key=key, tls_worker_cert=cert,
                        tls_worker_key=key, require_encryption=True)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, protocol="tls://",
                      host="127.0.0.1", security=security,
                      dashboard_address=None) as cluster:
        yield cluster, cert, key


def _client_config(cert: str, key: str) -> dict:
    return {"distributed.comm.tls.ca-file": cert, "distributed.comm.tls.client.cert": cert,
            "distributed.comm.tls.client.key": key}


def test_an_audit_on_a_tls_scheduler_gives_the_local_run(tls_cluster, tmp_path):
    import dask

    cluster, cert, key = tls_cluster
    address = cluster.scheduler_address
    assert address.startswith("tls://")
    assert main(["run", SAMPLE, "--out", str(tmp_path / "local"), *SAMPLE_ARGS]) == 0
    with dask.config.set(_client_config(cert, key)):
        assert main(["run", SAMPLE, "--out", str(tmp_path / "tls"), *SAMPLE_ARGS,
                     "--scheduler", address]) == 0
    engines = json.loads((tmp_path / "tls" / "summary.json").read_text())["engines"]
    assert engines["aflite"] == "dask" and engines["cues"] == "dask"
    a, b = (pd.read_parquet(tmp_path / k / "scores.parquet") for k in ("local", "tls"))
    assert a["status"].tolist() == b["status"].tolist()
    np.testing.assert_allclose(a["predictability"], b["predictability"], atol=1e-6)
    cues_a, cues_b = (pd.read_parquet(tmp_path / k / "cues.parquet") for k in ("local", "tls"))
    pd.testing.assert_frame_equal(cues_a, cues_b)


def test_a_tls_scheduler_without_the_clients_certificate_is_a_clear_error(tls_cluster,
                                                                           tmp_path, capsys):
    cluster, _, _ = tls_cluster
    code = main(["run", SAMPLE, "--out", str(tmp_path / "r"),
                 *SAMPLE_ARGS, "--scheduler", cluster.scheduler_address])
    assert code != 0
    err = capsys.readouterr().err
    assert "TLS" in err and "distributed.comm.tls" in err
    assert not (tmp_path / "r").exists()


def test_a_tls_scheduler_given_as_tcp_is_named(tls_cluster, tmp_path, capsys):
    import dask

    cluster, _, _ = tls_cluster
    port = cluster.scheduler_address.rsplit(":", 1)[1]
    # a TLS scheduler waits for the client to speak: the probe's timeout fires (Dask's
    # connect timeout, 1 s here, as it is shorter than the probe's 5 s)
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        code = main(["run", SAMPLE, "--out", str(tmp_path / "r"),
                     *SAMPLE_ARGS, "--scheduler", f"tcp://127.0.0.1:{port}"])
    assert code != 0
    assert "tls://" in capsys.readouterr().err
