"""The HA (master/slave replication) wire format of RocketMQ 4.x: frame layouts and record boundaries.

One TCP connection per slave, to the master's `haListenPort`; two one-way streams on it:

* slave -> master: 8-byte big-endian commit-log offset, "I hold everything before this". Sent once
  on connect (where to start), after every transfer the slave stored, and at least every
  `haSendHeartbeatInterval` ms (RocketMQ's `HAClient.reportSlaveMaxOffset`).
* master -> slave: a 12-byte header (8-byte physical offset of the body, 4-byte body size) and the
  body: commit-log bytes exactly as stored — records, end-of-file blanks and the zeros after a
  blank — at most `haTransferBatchSize` per transfer (`HAConnection.WriteSocketService`). A header
  with body size 0 is a heartbeat, sent when nothing else was for `haSendHeartbeatInterval` ms.

A transfer may end inside a record; the slave stores whole records only (`whole_records`) and keeps
the rest for the next transfer, so what it stores and reports always ends on a record boundary.

rocketlite's one extension: a master that will not serve a slave sends one header with offset -1
(`REFUSED_OFFSET`) and the UTF-8 reason as body, then closes. That happens when the slave's log
cannot be a prefix of the master's (`broker/ha/master.py` `transfer_start`): the slave is ahead,
its offset is older than the master's oldest segment, or the master has no record starting at it.
A Java slave reads the refusal as an offset mismatch and reconnects; a rocketlite slave stops
serving (see `broker/ha/slave.py`). In controller mode a slave opens with `HANDSHAKE_MARK` and its
broker id (two 8-byte reports) before its offset; an `asyncLearner` opens with `LEARNER_HANDSHAKE_MARK`
instead (RocketMQ's AutoSwitch handshake carries it as its isAsyncLearner flag): it is streamed the
log like any slave but never joins the SyncStateSet.

Sans-IO: the layouts and `whole_records` only; the sockets are in `broker/ha/`.
"""

from __future__ import annotations

import struct
from typing import Final

from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.formats.record import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    INT,
    LONG,
    MESSAGE_MAGIC_CODE,
    SIZE_MAGIC,
    SYSFLAG_POS,
    layout_for,
)

REPORT: Final = struct.Struct(">q")  # slave -> master: max offset held
HEADER: Final = struct.Struct(">qi")  # master -> slave: physical offset, body size
REFUSED_OFFSET: Final = -1
# Controller mode: a slave's first report is this mark, then its replica id (brokerId), then its
# offset, so the master knows which SyncStateSet member each connection is. A 4.x master reads
# the mark as a negative offset and refuses the slave, saying so.
HANDSHAKE_MARK: Final = -2
LEARNER_HANDSHAKE_MARK: Final = -3  # the same, from a replica with asyncLearner=true
MAX_BODY_SIZE: Final = 64 * 1024 * 1024  # no sane transfer is larger (haTransferBatchSize bound)


class RefusedError(ProtocolError):
    """The master refused this slave: its log diverged from the master's."""


def whole_records(buf: bytes | bytearray | memoryview, start: int, file_size: int) -> tuple[int, int]:
    """How many leading bytes of `buf` (commit-log bytes from offset `start`) are whole records.

    Returns (length, STORETIMESTAMP of the last whole message, 0 if none). An end-of-file blank
    counts as whole once the rest of its segment (the blank and its zeros) is in `buf`. Raises
    `ProtocolError` on bytes that are neither a record nor a blank: the stream is not a commit log.
    """
    n = len(buf)
    pos = 0
    last_msg = -1
    unpack = SIZE_MAGIC.unpack_from
    while n - pos >= END_FILE_MIN_BLANK_LENGTH:
        seg_left = file_size - (start + pos) % file_size
        size, magic = unpack(buf, pos)
        if magic == MESSAGE_MAGIC_CODE and 0 < size <= seg_left - END_FILE_MIN_BLANK_LENGTH:
            if n - pos < size:
                break
            last_msg = pos
            pos += size
        elif magic == BLANK_MAGIC_CODE and size == seg_left:
            if n - pos < seg_left:
                break
            pos += seg_left
        else:
            raise ProtocolError(
                f"replicated bytes at offset {start + pos} are not a record "
                f"(size {size}, magic {magic & 0xFFFFFFFF:#010x})"
            )
    stamp = 0
    if last_msg >= 0:
        sys_flag = INT.unpack_from(buf, last_msg + SYSFLAG_POS)[0]
        stamp = LONG.unpack_from(buf, last_msg + layout_for(sys_flag).store_timestamp_pos)[0]
    return pos, stamp
