"""What Dask keeps of past work, bounded for long runs.

A run submits a graph per window of iterations for as long as it trains, and Dask keeps some of
each: the scheduler the last `distributed.diagnostics.computations.max-history` computations, and
every process the last `distributed.admin.low-level-log-length` messages of each of its batched
streams (each message to a worker with the task it runs, each of the client's with its graph: a
window's inline batches), plus its transition and event logs. Clusters this package starts run
with the shorter bounds of `BOUNDED_HISTORY`, and so does our client of any cluster.

Dask also gives each graph submitted after the cluster was idle a new "default" span, which the
scheduler keeps for ever and whose metrics each worker keeps per span id for ever. The programs of
one model are all annotated with one span of its own (`model_span`), on any cluster.
"""

from __future__ import annotations

import uuid

BOUNDED_HISTORY = {
    "distributed.admin.low-level-log-length": 100,
    "distributed.diagnostics.computations.max-history": 10,
}


def model_span(model_id: str) -> dict:
    """The `span` annotation of every task of the model `model_id`."""
    return {"name": (f"flexflow-{model_id}",), "ids": (f"flexflow-{model_id}-{uuid.uuid4()}",)}
