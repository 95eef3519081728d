"""Machine models: FlexFlow's version-1 file, the JSON form, presets, malformed files."""

import pytest

from flexflow.scheduler import machine as M
from flexflow.scheduler.machine import MachineError

# FlexFlow's machine_config_example values (reference 8.5): 2 nodes x 2 sockets x 2 GPUs
FLEXFLOW_EXAMPLE = """\
# two nodes, two sockets each
num_nodes = 2
num_sockets_per_node = 2
num_cpus_per_socket = 10
num_gpus_per_socket = 2
membus_latency = 0.00003
membus_bandwidth = 4.26623
upi_latency = 0.0004
upi_bandwidth = 10.14039
nic_latency = 0.000507
nic_bandwidth = 10.9448431
nic_persocket = 0
pci_latency = 0.001
pci_bandwidth = 12.578
nvlink_latency = 0.001
nvlink_bandwidth = 18.52
intra_socket_gpu_fb_mem_to_gpu_fb_mem = nvlink
inter_socket_gpu_fb_mem_to_gpu_fb_mem = nvlink
inter_node_gpu_fb_mem_to_gpu_fb_mem = pci_to_host nic pci_to_dev
"""
MIB_PER_MS = 1024 * 1024  # FlexFlow reads "GB/s" as value x 1024 x 1024 bytes per ms


def route_time(route, nbytes):
    return sum(hop.time(nbytes) for hop in route)


def test_flexflow_file_topology_and_paths(tmp_path):
    path = tmp_path / "machine.txt"
    path.write_text(FLEXFLOW_EXAMPLE)
    machine = M.read(str(path), gpu_memory=8 << 30)
    assert machine.num_devices == 8 and machine.nodes == (0, 0, 0, 0, 1, 1, 1, 1)
    assert machine.memory(5) == 8 << 30
    n = 1 << 20
    nvlink = 0.001 + n / (18.52 * MIB_PER_MS)
    assert route_time(machine.route(0, 1), n) == pytest.approx(nvlink)  # same socket
    assert route_time(machine.route(0, 3), n) == pytest.approx(nvlink)  # other socket
    pci = 0.001 + n / (12.578 * MIB_PER_MS)
    nic = 0.000507 + n / (10.9448431 * MIB_PER_MS)  # out and in halves together
    assert route_time(machine.route(1, 6), n) == pytest.approx(2 * pci + nic)
    # one NIC per node each way: transfers leaving node 0 share its out half
    assert machine.route(0, 4)[1].resources == machine.route(3, 7)[1].resources
    assert machine.route(0, 4)[1].resources != machine.route(4, 0)[1].resources


@pytest.mark.parametrize("text, message", [
    ("num_nodes = 1\nnum_gpus = 2\n", r"line 2: unknown key 'num_gpus'"),
    ("num_nodes = two\n", r"line 1: num_nodes must be a number"),
    ("num_nodes 1\n", r"line 1: expected 'key = value'"),
    ("num_nodes = 1\nnum_sockets_per_node = 1\nnum_gpus_per_socket = 2\n",
     r"intra_socket_gpu_fb_mem_to_gpu_fb_mem is needed"),
    ("num_nodes = 1\nnum_sockets_per_node = 1\nnum_gpus_per_socket = 2\n"
     "intra_socket_gpu_fb_mem_to_gpu_fb_mem = nvlink\n", r"nvlink_latency / nvlink_bandwidth"),
    ("intra_socket_gpu_fb_mem_to_gpu_fb_mem = warp\n", r"must list components"),
    ("num_sockets_per_node = 1\n", r"num_nodes must be given"),
])
def test_malformed_flexflow_files_are_rejected(tmp_path, text, message):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(MachineError, match=message):
        M.read(str(path))


def test_json_round_trip(tmp_path):
    machine = M.preset("p100-4x4")
    machine.costs = {"P100": {"forward|Dense(...)|shapes": 1.25}}
    path = tmp_path / "m.json"
    M.save(machine, str(path))
    back = M.read(str(path))
    assert back.kinds == machine.kinds and back.routes == machine.routes
    assert back.host_routes == machine.host_routes and back.overheads == machine.overheads
    assert back.costs == machine.costs and back.nodes == machine.nodes


def test_json_without_all_links_is_rejected(tmp_path):
    data = M.preset("h100-8").to_json()
    data["links"] = data["links"][1:]
    path = tmp_path / "m.json"
    path.write_text(__import__("json").dumps(data))
    with pytest.raises(MachineError, match=r"no link between devices \[\(0, 1\)\]"):
        M.read(str(path))


def test_presets():
    p100 = M.preset("p100-4x4")
    assert p100.num_devices == 16 and len(set(p100.nodes)) == 4
    n = 1 << 30
    inside, across = route_time(p100.route(0, 1), n), route_time(p100.route(0, 4), n)
    assert inside == pytest.approx(0.001 + n / (20 * M.GB))       # NVLink, 20 GB/s
    assert across == pytest.approx(0.005 + n / (12.5 * M.GB))      # 100 Gb/s
    assert M.preset("k80-16x4").num_devices == 64
    assert M.preset("h100-8").num_devices == 8
    with pytest.raises(MachineError, match="unknown machine preset 'tpu'"):
        M.preset("tpu")


def test_analytic_kernel_time_is_a_roofline():
    kind = M.DeviceKind("x", 1 << 30, peak_flops=1e6, mem_bandwidth=1e3, kernel_overhead=0.5,
                        efficiency=0.5)
    assert kind.analytic(flops=1e6, nbytes=10) == pytest.approx(2.0 + 0.5)    # compute-bound
    assert kind.analytic(flops=10, nbytes=5e3) == pytest.approx(5.0 + 0.5)    # memory-bound
