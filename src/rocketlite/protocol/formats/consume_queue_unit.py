"""The consume-queue unit: 20 bytes that point from a queue offset to a commit-log record.

RocketMQ 4.x `ConsumeQueue.CQ_STORE_UNIT_SIZE`. All big-endian::

    off  size  field
      0     8  commitLogOffset   long: where the record starts in the commit log
      8     4  size              int: the record's TOTALSIZE
     12     8  tagsCode          long: hash of the TAGS property (delay queues: delivery time)

A unit is valid while commitLogOffset >= 0 and size > 0; an all-zero unit ends the data. The
padding unit (0, 0x7FFFFFFF, 0) points at no record: it fills the units before the first real
one when a queue starts in the middle of a file.

The store writes these units (`store/consume_queue.py`) and the Spark store reader reads them
straight from the files (`spark/store_source.py`); both take the layout from here.
"""

from __future__ import annotations

import struct
from typing import Final

import numpy as np

CQ_UNIT: Final = struct.Struct(
    ">"
    "q"  # commitLogOffset
    "i"  # size
    "q"  # tagsCode
)
UNIT_SIZE: Final = CQ_UNIT.size
PADDING_SIZE: Final = 0x7FFF_FFFF  # Integer.MAX_VALUE
PADDING_UNIT: Final = (0, PADDING_SIZE, 0)
PADDING_BYTES: Final = CQ_UNIT.pack(*PADDING_UNIT)
CQ_DTYPE: Final = np.dtype([("phy", ">i8"), ("size", ">i4"), ("tags", ">i8")])
"""One unit as a numpy record, for reading and writing whole runs of units at once."""
assert UNIT_SIZE == CQ_DTYPE.itemsize == 20

Unit = tuple[int, int, int]


def is_padding(unit: Unit) -> bool:
    """True for the filler unit that points at no record."""
    return unit[0] == 0 and unit[1] == PADDING_SIZE
