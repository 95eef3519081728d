"""Models, machines and objectives for the search tests, built without a cluster."""

from __future__ import annotations

from flexflow.core import FFConfig, FFModel, LossType, SGDOptimizer
from flexflow.scheduler.machine import GB, DeviceKind, Hop, MachineModel, Overheads, cluster
from flexflow.scheduler.taskgraph import Task, TaskKey


def task(name: str, device: int, action, deps=(), phase: str = "forward") -> Task:
    """A hand-made task named `name`, depending on the tasks named `deps`."""
    def key(n):
        return n if isinstance(n, TaskKey) else TaskKey(n, phase, 0, "forward")
    return Task(key(name), device, phase, action, tuple(key(d) for d in deps))


def compiled(build, batch: int, argv=("--in-process",)):
    """A model built by `build(ff)` and compiled in this process; returns (ffmodel, objective)."""
    ff = FFModel(FFConfig(argv=list(argv), batch_size=batch))
    build(ff)
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.01, momentum=0.9),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    return ff, ff.objective


def small_machine(devices: int = 4, nodes: int = 2, cores: int | None = 1,
                  overheads: Overheads = Overheads(task=0.3, action=0.01, hop=1.5,
                                                   iteration=2.0)) -> MachineModel:
    """`devices` over `nodes`, a slow shared link between nodes, compute slots shared per node
    (`cores`), analytic kernel costs: every rule of the simulator has something to do."""
    kind = DeviceKind("toy", 64 << 20, 2e6, 5 * GB, 0.05, 1.0)

    def link(s, d, sn, dn):
        if sn == dn:
            return (Hop((f"pair{s}-{d}",), 0.05, 2 * GB),)
        return (Hop((f"out{sn}",), 0.2, 0.5 * GB), Hop((f"in{dn}",), 0.1, 1 * GB))

    def host(d, node):
        return (Hop(("client",), 0.1, 1 * GB),)
    machine = cluster("toy", kind, nodes, devices // nodes, link, host, overheads)
    machine.cores_per_node = cores
    return machine


TWO_GPUS_FILE = """# two GPUs on one socket (FlexFlow's machine-model file format)
num_nodes = 1
num_sockets_per_node = 1
num_cpus_per_socket = 2
num_gpus_per_socket = 2
nvlink_latency = 0.001
nvlink_bandwidth = 18.52
pci_latency = 0.001
pci_bandwidth = 12.578
intra_socket_gpu_fb_mem_to_gpu_fb_mem = nvlink
"""
