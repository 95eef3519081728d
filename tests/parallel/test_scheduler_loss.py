"""A run's scheduler is an address that must answer as a Dask scheduler, and then may be lost:
an address where no Dask scheduler answers (a web server, nothing at all) is refused within
cluster.CONNECT_S naming it; a scheduler killed while a window's results are gathered ends the
run with ClusterLost naming the scheduler, after the training state is saved."""

from __future__ import annotations

import http.server
import os
import signal
import socket
import threading
import time

import pytest

from flexflow.recovery import ClusterLost
from flexflow.scheduler import cluster as cluster_module
from flexflow.scheduler import distributed as distributed_module

from .cluster import loopback_cluster
from .faults import strike_in
from .test_worker_loss import build_and_fit


@pytest.fixture
def web_server():
    """The address of a web server on loopback (it takes connections, and speaks HTTP)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"tcp://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def unused_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


@pytest.mark.parametrize("server", ["web", "none"])
def test_an_address_where_no_dask_scheduler_answers_is_refused_in_time(monkeypatch, server,
                                                                          request):
    monkeypatch.setattr(cluster_module, "CONNECT_S", 2.0)
    address = request.getfixturevalue("web_server") if server == "web" else unused_address()
    started = time.monotonic()
    with pytest.raises(cluster_module.SchedulerNotFound,
                       match=f"no Dask scheduler answered at {address} within 2 s"):
        cluster_module.connect(address, 1)
    assert time.monotonic() - started < 2.0 + 3.0
    assert ("address", address) not in cluster_module._STARTED


@pytest.mark.parametrize("after", [0.0, 0.02, 0.1])
def test_a_scheduler_lost_while_results_are_gathered_ends_the_run_with_its_state_saved(
        monkeypatch, capsys, tmp_path, after):
    monkeypatch.chdir(tmp_path)
    with loopback_cluster(workers=2) as address:
        try:
            cluster = cluster_module.connect(address, 2)
            scheduler = cluster.client.run_on_scheduler(os.getpid)
            # (the second of the fit's seven gathers: 0.1 s into it the run still has windows
            # to gather, however fast the host)
            strike_in(monkeypatch, distributed_module, "watched_gather", (scheduler,),
                      signal.SIGKILL, call=2, after=after)
            with pytest.raises(ClusterLost, match=f"the Dask scheduler {address} was lost "
                                                  f"during .*was saved to flexflow-recovery-"):
                build_and_fit(["--scheduler", address, "-ll:gpu", "2"], capsys)
        finally:
            cluster_module.disconnect(address)
    assert len(list(tmp_path.glob("flexflow-recovery-*.npz"))) == 1
    assert "no Dask worker remains" not in capsys.readouterr().err
