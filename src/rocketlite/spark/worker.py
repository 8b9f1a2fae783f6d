"""What every task of ours does first in a Spark Python worker.

Spark reuses a Python worker for task after task (`spark.python.worker.reuse`, the default), and
its daemon runs a full `gc.collect()` after every task, before the worker takes the next one. A
full collection walks every object the cyclic collector tracks: in a worker holding PySpark,
pyarrow, numpy and rocketlite that is 60k+ objects and 15-40 ms, on the critical path of each
task (measured: eight queue tasks of a 500k-row read spent ~0.3 µs a row, a quarter of the
worker's CPU, in those collections). The objects alive when a task starts are modules, classes
and caches that live as long as the process, so moving them out of the collector's reach
(`gc.freeze`) loses nothing: reference counting still frees everything that is not in a cycle,
and the collections after each task only walk what that task created.
"""

from __future__ import annotations

import gc


def task_started() -> None:
    """Take the objects alive now out of later full collections (see the module docstring)."""
    gc.freeze()
