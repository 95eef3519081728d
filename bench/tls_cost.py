"""What TLS costs per iteration on the 2-worker cluster `-ll:gpu 2` starts: TLS with its throwaway
certificate (the default) against plain TCP (`--plain-cluster`).

The tiny MLP of bench/orchestration.py (kernels of microseconds, so that the messages dominate) is
trained on each cluster, iteration by iteration (`train_step`: one graph per iteration) and with
`fit` on data loaders (windows of iterations), in alternating rounds; the cost of TLS is the
difference of the medians (ms per iteration).

    python bench/tls_cost.py [--rounds 5] [--steps 200]
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from command_line import command_line  # noqa: E402
from host_load import StealMeter, describe  # noqa: E402
from orchestration import BATCH, FIT_FLAGS, fit_ms, mlp, step_loop_ms  # noqa: E402

CLUSTERS = {"tls": ["-ll:gpu", "2"], "plain tcp": ["-ll:gpu", "2", "--plain-cluster"]}
WAYS = {"train_step": step_loop_ms, "fit": fit_ms}


def main():
    args = command_line(__doc__, rounds=5, steps=200)
    steal = StealMeter()
    print(f"{os.cpu_count()} cores; tiny MLP, batch {BATCH}; {args.rounds} rounds of "
          f"{args.steps} iterations; {describe(steal.read())} at start")
    models = {(cluster, way): mlp(argv + (FIT_FLAGS if way == "fit" else []))
              for cluster, argv in CLUSTERS.items() for way in WAYS}
    times: dict[tuple[str, str], list[float]] = {key: [] for key in models}
    order = list(models)
    for r in range(args.rounds):
        for cluster, way in order[r % len(order):] + order[:r % len(order)]:
            times[cluster, way].append(WAYS[way](*models[cluster, way], args.steps))
    print(f"after timing: {describe(steal.read())}")
    for way in WAYS:
        medians = {cluster: statistics.median(times[cluster, way]) for cluster in CLUSTERS}
        print(f"{way:>10}: " + ", ".join(f"{cluster} {ms:6.2f}" for cluster, ms in medians.items())
              + f" ms/iteration (medians of {args.rounds}); TLS costs "
              f"{medians['tls'] - medians['plain tcp']:+.2f} ms/iteration")


if __name__ == "__main__":
    main()
