"""The `checkpoint` file: when the commit log, the consume queues and the index were last flushed.

Byte layout (RocketMQ 4.x `StoreCheckpoint`, one 4096-byte page, big-endian)::

    off size field
      0   8  physicMsgTimestamp   store time of the last commit-log record known flushed
      8   8  logicsMsgTimestamp   store time of the last record whose CQ units are flushed
     16   8  indexMsgTimestamp    store time of the last record whose index entries are flushed
     24 4072 zero

Abnormal recovery starts from the commit-log segment whose first record is older than
`min(physic, logics) - 3 s` (index folded in when `messageIndexSafe`). The file is rewritten in place
with one pwrite + fdatasync: the three longs sit in one sector, so the write is atomic in practice,
and a torn checkpoint only makes recovery start earlier.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

CHECKPOINT = struct.Struct(
    ">"
    "q"  # physicMsgTimestamp
    "q"  # logicsMsgTimestamp
    "q"  # indexMsgTimestamp
)
CHECKPOINT_FILE_SIZE = 4096
RECOVERY_SAFETY_MS = 3000


class StoreCheckpoint:
    """Holds the three timestamps in memory; `flush` writes them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        exists = path.exists()
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if exists:
            data = os.pread(self._fd, CHECKPOINT.size, 0)
            if len(data) == CHECKPOINT.size:
                (
                    self.physic_msg_timestamp,
                    self.logics_msg_timestamp,
                    self.index_msg_timestamp,
                ) = CHECKPOINT.unpack(data)
        if os.fstat(self._fd).st_size < CHECKPOINT_FILE_SIZE:
            os.ftruncate(self._fd, CHECKPOINT_FILE_SIZE)

    def min_timestamp(self, *, index_safe: bool = False) -> int:
        """The time before which everything is known flushed, less a safety margin."""
        ts = min(self.physic_msg_timestamp, self.logics_msg_timestamp)
        if index_safe:
            ts = min(ts, self.index_msg_timestamp)
        return max(ts - RECOVERY_SAFETY_MS, 0)

    def flush(self) -> None:
        os.pwrite(
            self._fd,
            CHECKPOINT.pack(self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp),
            0,
        )
        os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            self.flush()
            os.close(self._fd)
            self._fd = -1
