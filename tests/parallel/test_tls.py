"""Clusters on shared networks: a `dask scheduler` / `dask worker` cluster over TLS (certificates
of a throwaway CA made here) trains to the in-process run's numbers through `--scheduler tls://...`
and our `--tls-*` flags or Dask's config; clients without the cluster's certificates are refused,
and TLS settings that cannot work are named before any connection is tried."""

import datetime
import io
import ipaddress
from pathlib import Path

import dask
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from distributed import Client
from distributed.comm.core import CommClosedError
from distributed.security import Security

from flexflow.scheduler import cluster as cluster_module
from flexflow.scheduler.security import TLSFiles, TLSSettingsError, client_security

from .cluster import loopback_cluster
from .models import MODELS
from .test_strategy_invariance import assert_same_run, reference, train

# the client settings of Dask's config, cleared so that only what a test sets counts
NO_TLS_CONFIG = {"distributed.comm.tls.ca-file": None, "distributed.comm.tls.client.cert": None,
                 "distributed.comm.tls.client.key": None}


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(path: Path, pem: bytes) -> str:
    path.write_bytes(pem)
    return str(path)


def make_certificates(folder: Path, name: str) -> TLSFiles:
    """A CA called `name` and one certificate it signs for 127.0.0.1, shared by the scheduler,
    the workers and the client (as the commands of docs/clusters.md do)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    valid = dict(not_valid_before=now - datetime.timedelta(minutes=5),
                 not_valid_after=now + datetime.timedelta(days=1))
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder(subject_name=_name(f"{name} CA"), issuer_name=_name(f"{name} CA"),
                                  public_key=ca_key.public_key(),
                                  serial_number=x509.random_serial_number(), **valid)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder(subject_name=_name(f"{name} node"), issuer_name=ca.subject,
                                    public_key=key.public_key(),
                                    serial_number=x509.random_serial_number(), **valid)
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    folder.mkdir()
    return TLSFiles(
        _write(folder / "ca.pem", ca.public_bytes(serialization.Encoding.PEM)),
        _write(folder / "node.pem", cert.public_bytes(serialization.Encoding.PEM)),
        _write(folder / "node-key.pem", key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption())))


def tls_flags(files: TLSFiles) -> list[str]:
    return ["--tls-ca-file", files.ca_file, "--tls-cert", files.cert, "--tls-key", files.key]


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    """The cluster's files, and those of a stranger's CA."""
    folder = tmp_path_factory.mktemp("tls")
    return make_certificates(folder / "cluster", "cluster"), make_certificates(folder / "other",
                                                                                "other")


@pytest.fixture(scope="module")
def tls_address(certificates):
    with loopback_cluster(workers=2, tls=certificates[0]) as address:
        yield address
        cluster_module.disconnect(address)


def test_training_over_tls_gives_the_in_process_numbers(tls_address, certificates):
    assert tls_address.startswith("tls://")
    argv = ["--scheduler", tls_address, "-ll:gpu", "2", *tls_flags(certificates[0])]
    with dask.config.set(NO_TLS_CONFIG):
        run = train(MODELS["mlp"], argv, "parameter", 2)
    assert_same_run(run, reference("mlp"))


def test_dask_config_gives_the_client_its_certificates(tls_address, certificates):
    """What DASK_DISTRIBUTED__COMM__TLS__... variables or Dask's config files set."""
    files = certificates[0]
    cluster_module.disconnect(tls_address)  # a new client, made from the config alone
    with dask.config.set({"distributed.comm.tls.ca-file": files.ca_file,
                          "distributed.comm.tls.client.cert": files.cert,
                          "distributed.comm.tls.client.key": files.key}):
        cluster = cluster_module.connect(tls_address, 2)
    assert len(cluster.workers) == 2
    assert all(worker.startswith("tls://") for worker in cluster.workers)
    assert cluster.client.run(lambda: 1) == dict.fromkeys(cluster.workers, 1)


@pytest.mark.parametrize("who, message", [("a plain tcp:// client", None),
                                          ("a client of another CA", "certificate does not match")])
def test_clients_without_the_cluster_s_certificates_are_refused(tls_address, certificates, who,
                                                                message):
    if who == "a plain tcp:// client":
        address, security = tls_address.replace("tls://", "tcp://"), None
    else:
        other = certificates[1]
        address, security = tls_address, Security(tls_ca_file=other.ca_file,
                                                   tls_client_cert=other.cert,
                                                   tls_client_key=other.key,
                                                   require_encryption=True)
    with dask.config.set({**NO_TLS_CONFIG, "distributed.comm.timeouts.connect": "5s"}):
        with pytest.raises(CommClosedError, match=message):
            Client(address, security=security, set_as_default=False, timeout="5s")


def _other_key(certificates) -> TLSFiles:
    """The cluster's certificate with the key of another certificate."""
    cluster, other = certificates
    return TLSFiles(cluster.ca_file, cluster.cert, other.key)


@pytest.mark.parametrize("address, files, message", [
    ("tls://127.0.0.1:1", lambda c: TLSFiles(),
     r"CA certificate and client certificate are not set: give --tls-ca-file FILE --tls-cert "
     r"FILE .*DASK_DISTRIBUTED__COMM__TLS__CA_FILE and DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT"),
    ("tls://127.0.0.1:1", lambda c: TLSFiles(c[0].ca_file, c[0].cert),
     r"client key is not set: give --tls-key FILE .*distributed\.comm\.tls\.client\.key"),
    ("tls://127.0.0.1:1", lambda c: TLSFiles(c[0].ca_file, "/no/such/cert.pem", c[0].key),
     r"TLS client certificate '/no/such/cert.pem' \(--tls-cert\) is not a file"),
    ("tls://127.0.0.1:1", _other_key, r"could not be loaded \(--tls-ca-file=.*--tls-key="),
    ("tcp://127.0.0.1:1", lambda c: c[0], r"--tls-ca-file, --tls-cert, --tls-key are for a "
                                          r"tls:// scheduler address, but the scheduler address "
                                          r"is 'tcp://127.0.0.1:1'"),
])
def test_tls_settings_that_cannot_work_are_named(certificates, address, files, message):
    with dask.config.set(NO_TLS_CONFIG):
        with pytest.raises(TLSSettingsError, match=message):
            client_security(address, files(certificates))


def test_tls_files_without_a_scheduler_are_refused_at_compile(certificates):
    with pytest.raises(TLSSettingsError, match="--tls-cert is for a tls:// scheduler address, "
                                               "but none is given"):
        train(MODELS["mlp"], ["--tls-cert", certificates[0].cert])


def test_local_cluster_uses_tls_when_dask_requires_encryption():
    """(What `-ll:gpu N` starts; training on it is the tls:// run above.)"""
    with dask.config.set({"distributed.comm.require-encryption": True}):
        cluster = cluster_module.start_local(2, stream=io.StringIO())
    assert cluster.client.scheduler.address.startswith("tls://")
    assert len(cluster.workers) == 2
    assert all(worker.startswith("tls://") for worker in cluster.workers)
    assert cluster.client.run(lambda: 1) == dict.fromkeys(cluster.workers, 1)
