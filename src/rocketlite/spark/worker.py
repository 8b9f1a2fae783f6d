"""What every task of ours does first in a Spark Python worker.

Spark reuses a Python worker for task after task (`spark.python.worker.reuse`, the default). Two
things of that long-lived process cost our tasks more than their own work, and both are settled
here, once per task (cheap when already done):

* **Full collections.** The daemon runs `gc.collect()` after every task, before the worker takes
  the next one. A full collection walks every object the cyclic collector tracks: in a worker
  holding PySpark, pyarrow, numpy and rocketlite that is 60k+ objects and 15-40 ms, on the
  critical path of each task (measured: eight queue tasks of a 500k-row read spent ~0.3 µs a
  row, a quarter of the worker's CPU, in those collections). The objects alive when a task
  starts are modules, classes and caches that live as long as the process, so moving them out of
  the collector's reach (`gc.freeze`) loses nothing: reference counting still frees everything
  that is not in a cycle, and the collections after each task only walk what that task created.
* **Fresh pages for every batch.** A batch's column buffers (a few MiB, `records.decode_batch`)
  and the pull bodies it is decoded from are freed together when the batch has gone to the JVM.
  glibc then hands the top of the heap back to the kernel (its trim threshold follows the
  largest block freed, a few MiB), so the next batch page-faults every page in again: measured,
  two thirds of the decode's time (0.25 -> 0.08 µs a record). Raising the mmap and trim
  thresholds (`mallopt`, as `MALLOC_TRIM_THRESHOLD_` would at start) keeps those pages in the
  process for the next batch; a worker then holds its largest batch's memory, a few tens of MiB.
  Elsewhere than glibc there is no `mallopt`, and nothing is done.
"""

from __future__ import annotations

import ctypes
import functools
import gc
from typing import Final

_M_TRIM_THRESHOLD: Final = -1
_M_MMAP_THRESHOLD: Final = -3
_KEEP_BYTES: Final = 256 << 20  # freed memory the heap keeps before giving pages back
_MMAP_BYTES: Final = 64 << 20  # blocks at least this large still get their own mapping


def task_started() -> None:
    """Settle the worker for one of our tasks (see the module docstring)."""
    gc.freeze()
    _keep_freed_pages()


@functools.cache
def _keep_freed_pages() -> bool:
    """Whether glibc's thresholds were raised (once per process)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_BYTES)) and bool(mallopt(_M_TRIM_THRESHOLD, _KEEP_BYTES))
