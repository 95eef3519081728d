"""The cluster `-ll:gpu N` starts for itself: over TLS with a throwaway certificate (a client of
another process, plain or with a certificate of its own, is refused), listening on loopback only,
plain with `--plain-cluster`, and with bounded histories; a model's programs share one Dask
span."""

import io
import os

import dask
import psutil
import pytest
from dask.utils import key_split
from distributed import Client
from distributed.comm.core import CommClosedError
from distributed.security import Security

from flexflow.config import FlagError
from flexflow.core import FFConfig
from flexflow.deployment import start_cluster
from flexflow.scheduler import cluster as cluster_module
from flexflow.scheduler.history import BOUNDED_HISTORY
from flexflow.scheduler.security import TLSSettingsError

from ..launcher.scripts import fake_gpus
from .models import MODELS
from .test_strategy_invariance import compiled, fit


def listening() -> set[tuple[str, int]]:
    """The listening sockets of this process and of all its descendants."""
    me = psutil.Process()
    sockets = set()
    for process in [me, *me.children(recursive=True)]:
        try:
            sockets |= {(c.laddr.ip, c.laddr.port) for c in process.net_connections("inet")
                        if c.status == psutil.CONN_LISTEN}
        except psutil.NoSuchProcess:  # ended meanwhile
            pass
    return sockets


@pytest.fixture(params=["cpu", "gpu"], scope="module")
def fresh_cluster(request):
    """A new `-ll:gpu 2` cluster of the kind `param` names (the GPU one: dask_cuda's
    LocalCUDACluster faked on CPUs), and the sockets it opened."""
    before = listening()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cluster_module, "_STARTED", {})
        if request.param == "gpu":
            fake_gpus.install(patch, cluster_module, 2)
        cluster = cluster_module.start_local(2, stream=io.StringIO())
    yield cluster, listening() - before
    cluster.close()


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1].split("/")[0])


def test_nothing_a_local_cluster_starts_listens_beyond_loopback(fresh_cluster):
    cluster, sockets = fresh_cluster
    info = cluster.client.scheduler_info(n_workers=-1)
    reported = [cluster.client.scheduler.address, cluster.client.dashboard_link,
                *info["workers"], *(worker["nanny"] for worker in info["workers"].values())]
    assert len(reported) == 6  # the scheduler, its dashboard, two workers and their nannies
    assert {_port(address) for address in reported} <= {port for _, port in sockets}
    assert {ip for ip, _ in sockets} == {"127.0.0.1"}, sockets


def test_a_local_cluster_drops_a_silent_worker_within_seconds(fresh_cluster):
    """Dask's default worker-ttl is 5 minutes; a stalled worker must be dropped sooner."""
    cluster, _ = fresh_cluster
    ttl = cluster.client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.worker_ttl)
    assert ttl == pytest.approx(10.0)


@pytest.mark.parametrize("who", ["a plain client", "a client with another certificate"])
def test_a_local_cluster_refuses_other_processes_clients(fresh_cluster, who):
    cluster, _ = fresh_cluster
    address = cluster.client.scheduler.address
    assert address.startswith("tls://")
    if who == "a plain client":
        address, security = address.replace("tls://", "tcp://"), None
    else:
        security = Security.temporary()
    with dask.config.set({"distributed.comm.timeouts.connect": "5s"}):
        with pytest.raises((CommClosedError, OSError)):
            Client(address, security=security, set_as_default=False, timeout="5s")
    assert cluster.client.run(os.getpid).keys() == set(cluster.workers)  # ours still works


def test_the_certificate_s_files_are_private_and_removed_with_the_cluster(monkeypatch):
    monkeypatch.setattr(cluster_module, "_STARTED", {})
    cluster = cluster_module.start_local(2, stream=io.StringIO())
    folder = cluster.owned.folder
    assert os.stat(folder).st_mode & 0o777 == 0o700
    for name in ("ca.pem", "cert.pem", "key.pem"):
        assert os.stat(folder / name).st_mode & 0o777 == 0o600
    command_lines = [" ".join(psutil.Process(pid).cmdline()) for pid in
                     (p.pid for p in psutil.Process().children(recursive=True))]
    assert not any("PRIVATE KEY" in line for line in command_lines)
    cluster.close()
    assert not folder.exists()


def test_plain_cluster_flag_starts_a_plain_tcp_cluster(monkeypatch):
    monkeypatch.setattr(cluster_module, "_STARTED", {})
    cluster = start_cluster(FFConfig(argv=["-ll:gpu", "2", "--plain-cluster"]))
    try:
        assert cluster.client.scheduler.address.startswith("tcp://")
        assert all(worker.startswith("tcp://") for worker in cluster.workers)
    finally:
        cluster.close()


def test_plain_cluster_cannot_override_required_encryption():
    with dask.config.set({"distributed.comm.require-encryption": True}):
        with pytest.raises(TLSSettingsError, match="--plain-cluster"):
            cluster_module.start_local(2, stream=io.StringIO(), plain=True)


def test_plain_cluster_is_refused_with_a_scheduler_address():
    with pytest.raises(FlagError, match="--plain-cluster is for the cluster -ll:gpu N starts"):
        start_cluster(FFConfig(argv=["--scheduler", "tcp://127.0.0.1:1", "--plain-cluster"]))


def test_the_local_cluster_s_processes_keep_bounded_histories():
    cluster = cluster_module.start_local(2, stream=io.StringIO())

    def scheduler_bounds(dask_scheduler):
        return (dask.config.get("distributed.admin.low-level-log-length"),
                dask_scheduler.computations.maxlen)

    def worker_bounds(dask_worker):
        return (dask.config.get("distributed.admin.low-level-log-length"),
                dask_worker.batched_stream.recent_message_log.maxlen)

    history = BOUNDED_HISTORY["distributed.diagnostics.computations.max-history"]
    logs = BOUNDED_HISTORY["distributed.admin.low-level-log-length"]
    assert cluster.client.run_on_scheduler(scheduler_bounds) == (logs, history)
    assert cluster.client.run(worker_bounds) == dict.fromkeys(cluster.workers, (logs, logs))


@pytest.mark.parametrize("profiled", [False, True])
def test_the_workers_profile_only_for_a_performance_report(monkeypatch, profiled):
    monkeypatch.setattr(cluster_module, "_STARTED", {})
    cluster = cluster_module.start_local(2, stream=io.StringIO(), profiled=profiled)
    try:
        found = cluster.client.run(lambda dask_worker: "profile" in dask_worker.periodic_callbacks)
        assert found == dict.fromkeys(cluster.workers, profiled)
    finally:
        cluster.close()


def test_a_model_s_programs_share_one_span(monkeypatch):
    """(Dask would start a new span for each graph submitted after the cluster was idle, which
    the scheduler keeps for ever, and each worker its metrics.) On a new cluster, where no other
    model has run programs of the same names."""
    monkeypatch.setattr(cluster_module, "_STARTED", {})
    ff, inputs = compiled(MODELS["mlp"], ["-ll:gpu", "2"])
    try:
        fit(ff, inputs)  # one graph per iteration, each after the last has finished
        executor = ff.compiled.executor
        programs = {key_split(steps[0].group.name) for per_device in executor._programs.values()
                    for steps in per_device.values()}

        def span_ids(dask_worker):
            return {key[1] for key in dask_worker.digests_total
                    if isinstance(key, tuple) and key[0] == "execute" and key[2] in programs}

        found = executor.client.run(span_ids)
        assert found == dict.fromkeys(executor.workers, {executor._span["ids"][-1]})
    finally:
        ff.compiled.cluster.close()
