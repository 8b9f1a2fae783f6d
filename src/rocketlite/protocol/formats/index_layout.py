"""One RocketMQ 4.x index file (`IndexFile.java`, `IndexHeader.java`): a hash index from message
keys to commit-log offsets.

Byte layout (all big-endian)::

    offset                      size              content
    0                           40                IndexHeader
      @0   long  beginTimestamp   store time of the first entry (ms)
      @8   long  endTimestamp     store time of the last entry (ms)
      @16  long  beginPhyOffset   commit-log offset of the first entry
      @24  long  endPhyOffset     commit-log offset of the last entry
      @32  int   hashSlotCount    slots used so far (incremented when an empty slot is first used)
      @36  int   indexCount       next entry number; starts at 1 (entry 0 is never used, 0 = "none")
    40                          slotNum * 4       hash slots: int, newest entry number for the slot
    40 + slotNum*4              indexNum * 20     entries
      @0   int   keyHash          index_key_hash(key) = abs(String.hashCode), 0 if still negative
      @4   long  phyOffset        commit-log offset of the message
      @12  int   timeDiff         (storeTimestamp - beginTimestamp) // 1000, clamped to 0..INT_MAX
      @16  int   prevIndex        the slot's previous value: the hash chain (0 ends it)

Slot position = 40 + (keyHash % slotNum) * 4; entry position = 40 + slotNum*4 + number*20. A slot
(or prevIndex) value <= 0 or > indexCount counts as empty. Only the hash is stored, so lookups may
return false positives; callers re-check the message's keys.
"""

from __future__ import annotations

import struct
from typing import Final

import numpy as np

HEADER: Final = struct.Struct(
    ">"
    "q"  # beginTimestamp
    "q"  # endTimestamp
    "q"  # beginPhyOffset
    "q"  # endPhyOffset
    "i"  # hashSlotCount
    "i"  # indexCount
)
ENTRY: Final = struct.Struct(
    ">"
    "i"  # keyHash
    "q"  # phyOffset
    "i"  # timeDiff
    "i"  # prevIndex
)
SLOT: Final = struct.Struct(">i")
assert HEADER.size == 40
assert ENTRY.size == 20
assert SLOT.size == 4

HEADER_SIZE: Final = HEADER.size
ENTRY_SIZE: Final = ENTRY.size
SLOT_SIZE: Final = SLOT.size
INVALID_INDEX: Final = 0
INT_MAX: Final = 0x7FFF_FFFF

# One entry as a numpy record, for batch writes.
ENTRY_DTYPE: Final = np.dtype(
    [("key_hash", ">i4"), ("phy_offset", ">i8"), ("time_diff", ">i4"), ("prev_index", ">i4")]
)
assert ENTRY_DTYPE.itemsize == ENTRY_SIZE


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    """Bytes in an index file: 40 + slots*4 + entries*20 (420,000,040 with the defaults)."""
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + index_num * ENTRY_SIZE
