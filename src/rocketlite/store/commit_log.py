"""The commit log: one append-only log of stored message records for all topics.

Byte layout: consecutive segments of `mapedFileSizeCommitLog` bytes under `commitlog/`, each named by
its 20-digit start offset, holding records as `protocol.record` describes them back to back. When a
record (plus the 8 bytes a later blank needs) does not fit in what is left of a segment, the rest
of the segment is marked by an end-of-file blank (`int remaining, int 0xCBD43194`) and the record
goes to the start of the next segment. A batch is never split across segments.

Appends are serialised by one lock; encoding of everything position-independent happens before
taking it. Records are encoded here directly, with the header structs of `protocol.record`: the
same bytes as its `prepare_record` + `pack_head` (the reference, and still the path of a message
over a limit, which reports the limit) without their per-message objects. The class owns no
threads: flushing, committing and dispatching are services that call into it.
"""

from __future__ import annotations

import functools
import logging
import struct
import threading
import zlib
from dataclasses import dataclass
from typing import Final

from rocketlite.clock import Clock
from rocketlite.protocol.errors import SegmentCreateError
from rocketlite.protocol.message import HostAddress, MessageSysFlag
from rocketlite.protocol.record import (
    END_FILE_MIN_BLANK_LENGTH,
    INT,
    LONG,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    PHYSICAL_OFFSET_POS,
    QUEUE_OFFSET_POS,
    SHORT,
    SYSFLAG_POS,
    MessageInner,
    PreparedRecord,
    RecordTooLargeError,
    blank_record,
    layout_for,
    pack_head,
    prepare_record,
)
from rocketlite.store.config import StoreConfig
from rocketlite.store.mapped_file import MappedFile
from rocketlite.store.mapped_file_queue import Allocator, MappedFileQueue, direct_allocator
from rocketlite.store.status import AppendMessageStatus

log = logging.getLogger("rocketlite.store.commit_log")

# Record encoding (`CommitLog.append`, `_encode_batch`): per host-family bits of SYSFLAG, the header
# struct, the fixed part of the record size, and where STORETIMESTAMP sits, all from `layout_for`.
_HOST_V6_BITS: Final = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_LAYOUTS_BY_HOST_BITS: Final = {
    bits: (layout_for(bits).head, layout_for(bits).fixed_size, layout_for(bits).store_timestamp_pos)
    for bits in (0, MessageSysFlag.BORNHOST_V6_FLAG, MessageSysFlag.STOREHOSTADDRESS_V6_FLAG, _HOST_V6_BITS)
}
_TOPIC_CACHE_MAX: Final = 4096
# QUEUEOFFSET and PHYSICALOFFSET are adjacent: patched with one pack under the lock.
_QUEUE_AND_PHYSICAL: Final = struct.Struct(">qq")
assert PHYSICAL_OFFSET_POS == QUEUE_OFFSET_POS + 8


@functools.lru_cache(maxsize=64)
def _msg_id_prefix(host: HostAddress) -> str:
    return host.msg_id_prefix()


@dataclass(slots=True)
class AppendResult:
    """Where a message (or batch) landed. For a batch, `msg_id` is the comma-joined id list."""

    status: AppendMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    msg_id: str = ""
    store_timestamp: int = 0
    logics_offset: int = 0
    msg_num: int = 1
    remark: str = ""

    @property
    def end_offset(self) -> int:
        return self.wrote_offset + self.wrote_bytes


def _advances_queue(sys_flag: int) -> bool:
    """Prepared and rolled-back transaction records take no consume-queue slot."""
    tran = sys_flag & MessageSysFlag.TRANSACTION_MASK
    return tran in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)


class CommitLog:
    """Append, read and locate records; track the next queue offset of every topic-queue."""

    def __init__(self, config: StoreConfig, clock: Clock, *, allocator: Allocator = direct_allocator) -> None:
        self.config = config
        self.clock = clock
        self.file_size = config.maped_file_size_commit_log
        self.queue = MappedFileQueue(
            config.commit_log_dir,
            self.file_size,
            allocator=allocator,
            write_buffer=config.transient_store_pool_enable,
        )
        self.max_message_size = config.max_message_size
        # "topic-queueId" -> next logical offset; rebuilt from the consume queues on recovery.
        self.topic_queue_table: dict[str, int] = {}
        self._lock = threading.Lock()
        self._segment_failing = False  # the last segment creation failed (disk full, ...)
        self.begin_time_in_lock = 0.0
        # (store host, its msg-id prefix) of the last append: one host per broker, so the
        # prefix is almost never recomputed. One tuple, replaced whole, so threads never mix pairs.
        self._id_prefix: tuple[HostAddress | None, str] = (None, "")
        # topic -> TOPICLEN byte + UTF-8 topic, for topics within the length limit.
        self._topic_parts: dict[str, bytes] = {}

    def load(self) -> None:
        self.queue.load()

    # -- appending --------------------------------------------------------------------------
    def _msg_id_prefix(self, host: HostAddress) -> str:
        cached = self._id_prefix
        if cached[0] is not host:
            cached = self._id_prefix = (host, _msg_id_prefix(host))
        return cached[1]

    def _topic_part(self, topic: str) -> bytes | None:
        """TOPICLEN + TOPIC as stored; None if the topic is longer than the limit."""
        part = self._topic_parts.get(topic)
        if part is None:
            encoded = topic.encode("utf-8")
            if len(encoded) > MAX_TOPIC_LENGTH:
                return None
            if len(self._topic_parts) >= _TOPIC_CACHE_MAX:
                self._topic_parts.clear()
            part = self._topic_parts[topic] = bytes((len(encoded),)) + encoded
        return part

    def _segment_for(self, size: int) -> MappedFile:
        """The segment to write `size` bytes into, closing the current one with a blank if needed."""
        files = self.queue.files
        if files:  # fast path: the record fits in the last segment
            last = files[-1]
            if size + END_FILE_MIN_BLANK_LENGTH <= last.file_size - last.wrote_position:
                return last
        mf = self._last_segment()
        if size + END_FILE_MIN_BLANK_LENGTH > mf.remaining:
            remaining = mf.remaining
            if remaining >= END_FILE_MIN_BLANK_LENGTH:
                mf.append(blank_record(remaining))
            mf.wrote_position = mf.file_size
            if mf.committed_position < mf.wrote_position and not self.queue.write_buffer:
                mf.committed_position = mf.wrote_position
            # If this fails the full segment stays closed by its blank; the next put retries.
            mf = self._last_segment()
        return mf

    def _last_segment(self) -> MappedFile:
        try:
            mf = self.queue.get_last_file()
        except OSError as exc:
            # Logged once per outage: every put fails the same way until space returns.
            (log.debug if self._segment_failing else log.error)(
                "cannot create a commit-log segment in %s: %s", self.queue.directory, exc
            )
            self._segment_failing = True
            raise SegmentCreateError(f"cannot create a commit-log segment: {exc.strerror or exc}") from exc
        if self._segment_failing:
            self._segment_failing = False
            log.info("commit-log segment %s created; writes resume", mf and mf.path.name)
        assert mf is not None
        return mf

    def append(self, msg: MessageInner) -> AppendResult:
        """Append one message; fills its store timestamp, queue offset and commit-log offset.

        Encodes the record directly (byte for byte what `prepare_record` + `pack_head` produce);
        a message over a limit goes to `_append_prepared`, which says which limit.
        """
        topic_part = self._topic_part(msg.topic)
        props = msg.properties_string.encode("utf-8")
        props_len = len(props)
        body = msg.body
        body_len = len(body)
        born, store = msg.born_host, msg.store_host
        sys_flag = msg.effective_sys_flag()
        head, fixed, _ = _LAYOUTS_BY_HOST_BITS[sys_flag & _HOST_V6_BITS]
        if topic_part is None or props_len > MAX_PROPERTIES_LENGTH:
            return self._append_prepared(msg)
        size = fixed + body_len + len(topic_part) - 1 + props_len
        if size > self.max_message_size:
            return self._append_prepared(msg)
        crc = zlib.crc32(body) & 0x7FFF_FFFF
        tail = b"".join((body, topic_part, SHORT.pack(props_len), props))
        key = f"{msg.topic}-{msg.queue_id}"
        advances = _advances_queue(sys_flag)
        with self._lock:
            now = self.clock.now_ms()
            mf = self._segment_for(size)
            phys = mf.file_from_offset + mf.wrote_position
            qoff = self.topic_queue_table.get(key, 0) if advances else 0
            header = head.pack(
                size, MESSAGE_MAGIC_CODE, crc, msg.queue_id, msg.flag, qoff, phys, sys_flag,
                msg.born_timestamp, born.ip, born.port, now, store.ip, store.port,
                msg.reconsume_times, msg.prepared_transaction_offset, body_len,
            )  # fmt: skip
            mf.append_parts(header, tail)
            mf.store_timestamp = now
            if advances:
                self.topic_queue_table[key] = qoff + 1
        msg.store_timestamp, msg.queue_offset, msg.commit_log_offset = now, qoff, phys
        return AppendResult(
            AppendMessageStatus.PUT_OK,
            phys,
            size,
            self._msg_id_prefix(store) + format(phys, "016X"),
            now,
            qoff,
        )

    def _append_prepared(self, msg: MessageInner) -> AppendResult:
        """`append` via `prepare_record` (reports which limit a message exceeds)."""
        try:
            rec = prepare_record(msg, self.max_message_size)
        except RecordTooLargeError as exc:
            status = (
                AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED
                if "properties" in str(exc)
                else AppendMessageStatus.MESSAGE_SIZE_EXCEEDED
            )
            return AppendResult(status, remark=str(exc))
        key = f"{msg.topic}-{msg.queue_id}"
        advances = _advances_queue(rec.sys_flag)
        with self._lock:
            now = self.clock.now_ms()
            mf = self._segment_for(rec.total_size)
            phys = mf.file_from_offset + mf.wrote_position
            qoff = self.topic_queue_table.get(key, 0) if advances else 0
            mf.append_parts(pack_head(rec, qoff, phys, now), rec.tail)
            mf.store_timestamp = now
            if advances:
                self.topic_queue_table[key] = qoff + 1
        msg.store_timestamp, msg.queue_offset, msg.commit_log_offset = now, qoff, phys
        return AppendResult(
            AppendMessageStatus.PUT_OK,
            phys,
            rec.total_size,
            self._msg_id_prefix(msg.store_host) + format(phys, "016X"),
            now,
            qoff,
        )

    def append_batch(self, msgs: list[MessageInner]) -> AppendResult:
        """Append messages of one topic-queue with consecutive queue offsets, in one segment."""
        if not msgs:
            return AppendResult(AppendMessageStatus.UNKNOWN_ERROR, remark="empty batch")
        encoded = self._encode_batch(msgs)
        if encoded is None:  # a limit is exceeded: the record-by-record path reports which
            return self._append_prepared_batch(msgs)
        buf, starts, stamp_positions, sys_flag = encoded
        total = len(buf)
        if total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return AppendResult(
                AppendMessageStatus.MESSAGE_SIZE_EXCEEDED,
                remark=f"batch of {total} bytes does not fit in a {self.file_size}-byte segment",
            )
        first = msgs[0]
        key = f"{first.topic}-{first.queue_id}"
        advances = _advances_queue(sys_flag)
        prefix = self._msg_id_prefix(first.store_host)
        patch_offsets = _QUEUE_AND_PHYSICAL.pack_into
        patch_stamp = LONG.pack_into
        with self._lock:
            now = self.clock.now_ms()
            mf = self._segment_for(total)
            base = mf.file_from_offset + mf.wrote_position
            qoff0 = self.topic_queue_table.get(key, 0) if advances else 0
            qoff = qoff0
            for start in starts:
                patch_offsets(buf, start + QUEUE_OFFSET_POS, qoff, base + start)
                if advances:
                    qoff += 1
            for stamp_pos in stamp_positions:
                patch_stamp(buf, stamp_pos, now)
            mf.append(buf)
            mf.store_timestamp = now
            if advances:
                self.topic_queue_table[key] = qoff0 + len(msgs)
        qoff = qoff0
        for m, start in zip(msgs, starts, strict=True):
            m.store_timestamp, m.commit_log_offset, m.queue_offset = now, base + start, qoff
            if advances:
                qoff += 1
        return AppendResult(
            AppendMessageStatus.PUT_OK,
            base,
            total,
            ",".join([f"{prefix}{base + start:016X}" for start in starts]),
            now,
            qoff0,
            len(msgs),
        )

    def _encode_batch(self, msgs: list[MessageInner]) -> tuple[bytearray, list[int], list[int], int] | None:
        """Encode a batch into one buffer, every record complete but for QUEUEOFFSET,
        PHYSICALOFFSET and STORETIMESTAMP (zero; patched under the lock). Byte for byte what
        `prepare_record` + `pack_head` produce, without a `PreparedRecord` per message.

        Returns (buffer, record starts, STORETIMESTAMP positions, first record's SYSFLAG), or None
        if a message exceeds a limit (topic, properties or message size).
        """
        max_size = self.max_message_size
        layouts = _LAYOUTS_BY_HOST_BITS
        crc32 = zlib.crc32
        pack_short = SHORT.pack
        parts: list[bytes] = []
        add = parts.append
        starts: list[int] = []
        stamp_positions: list[int] = []
        topic: str | None = None
        topic_part = b""
        topic_len = 0
        first_sys_flag = 0
        pos = 0
        for m in msgs:
            if m.topic is not topic:
                topic = m.topic
                part = self._topic_part(topic)
                if part is None:
                    return None
                topic_part, topic_len = part, len(part) - 1
            props = m.properties_string.encode("utf-8")
            props_len = len(props)
            body = m.body
            body_len = len(body)
            born, store = m.born_host, m.store_host
            sys_flag = m.effective_sys_flag()
            head, fixed, stamp_pos = layouts[sys_flag & _HOST_V6_BITS]
            size = fixed + body_len + topic_len + props_len
            if props_len > MAX_PROPERTIES_LENGTH or size > max_size:
                return None
            if not starts:
                first_sys_flag = sys_flag
            starts.append(pos)
            stamp_positions.append(pos + stamp_pos)
            add(head.pack(
                size, MESSAGE_MAGIC_CODE, crc32(body) & 0x7FFF_FFFF, m.queue_id, m.flag, 0, 0, sys_flag,
                m.born_timestamp, born.ip, born.port, 0, store.ip, store.port, m.reconsume_times,
                m.prepared_transaction_offset, body_len,
            ))  # fmt: skip
            add(body)
            add(topic_part)
            add(pack_short(props_len))
            add(props)
            pos += size
        return bytearray().join(parts), starts, stamp_positions, first_sys_flag

    def _append_prepared_batch(self, msgs: list[MessageInner]) -> AppendResult:
        """`append_batch` record by record via `prepare_record` (reports which limit is exceeded)."""
        try:
            recs = [prepare_record(m, self.max_message_size) for m in msgs]
        except RecordTooLargeError as exc:
            return AppendResult(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED, remark=str(exc))
        total = sum(r.total_size for r in recs)
        if total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return AppendResult(
                AppendMessageStatus.MESSAGE_SIZE_EXCEEDED,
                remark=f"batch of {total} bytes does not fit in a {self.file_size}-byte segment",
            )
        first = msgs[0]
        key = f"{first.topic}-{first.queue_id}"
        advances = _advances_queue(recs[0].sys_flag)
        prefix = self._msg_id_prefix(first.store_host)
        buf = bytearray(total)
        with self._lock:
            now = self.clock.now_ms()
            mf = self._segment_for(total)
            base = mf.file_from_offset + mf.wrote_position
            qoff0 = self.topic_queue_table.get(key, 0) if advances else 0
            ids = self._pack_batch(buf, recs, base, qoff0 if advances else None, now)
            mf.append(buf)
            mf.store_timestamp = now
            if advances:
                self.topic_queue_table[key] = qoff0 + len(recs)
        phys = base
        for i, m in enumerate(msgs):
            m.store_timestamp, m.commit_log_offset = now, phys
            m.queue_offset = qoff0 + i if advances else 0
            phys += recs[i].total_size
        return AppendResult(
            AppendMessageStatus.PUT_OK,
            base,
            total,
            ",".join(prefix + format(o, "016X") for o in ids),
            now,
            qoff0,
            len(msgs),
        )

    @staticmethod
    def _pack_batch(
        buf: bytearray, recs: list[PreparedRecord], base: int, qoff0: int | None, now: int
    ) -> list[int]:
        pos = 0
        offsets: list[int] = []
        for i, rec in enumerate(recs):
            head = pack_head(rec, 0 if qoff0 is None else qoff0 + i, base + pos, now)
            end = pos + len(head)
            buf[pos:end] = head
            buf[end : end + len(rec.tail)] = rec.tail
            offsets.append(base + pos)
            pos += rec.total_size
        return offsets

    # -- replication (HA slave) -------------------------------------------------------------
    def append_raw(self, offset: int, data: bytes | bytearray | memoryview, store_timestamp: int = 0) -> int:
        """Write a master's commit-log bytes verbatim at `offset`; returns the new end of the log.

        `offset` must be where this log ends (for an empty log: a segment start). The bytes carry
        the master's end-of-file blanks, so segments roll at the same offsets and the two logs stay
        byte-identical. `store_timestamp` (of the last record in `data`) is what the flush service
        records in the checkpoint. Queue offsets are not tracked: a slave takes no appends.
        """
        with self._lock, memoryview(data) as view:
            q = self.queue
            end = q.max_wrote_offset if q.files else offset
            if offset != end:
                raise ValueError(f"replicated bytes for offset {offset}, but the commit log ends at {end}")
            if not q.files and offset % self.file_size:
                raise ValueError(f"replication must start at a segment boundary, not at offset {offset}")
            done, total = 0, len(view)
            mf: MappedFile | None = None
            while done < total:
                mf = q.get_last_file(offset)
                assert mf is not None
                n = min(mf.file_size - mf.wrote_position, total - done)
                with view[done : done + n] as part:
                    mf.append(part)
                done += n
            if mf is not None and store_timestamp:
                mf.store_timestamp = store_timestamp
            return q.max_wrote_offset

    # -- reading ----------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    @property
    def max_offset(self) -> int:
        """End of readable data (what dispatch may consume)."""
        return self.queue.max_offset

    def get_data(self, offset: int) -> memoryview | None:
        """Zero-copy view from `offset` to the readable end of its segment."""
        mf = self.queue.find_by_offset(offset, first_if_not_found=offset == 0)
        if mf is None:
            return None
        return mf.read_from(offset - mf.file_from_offset)

    def get_message(self, offset: int, size: int) -> memoryview | None:
        """Zero-copy view of `size` bytes at `offset`, or None if not (or no longer) there."""
        mf = self.queue.find_by_offset(offset)
        if mf is None:
            return None
        return mf.read(offset - mf.file_from_offset, size)

    def read_record(self, offset: int) -> memoryview | None:
        """The whole record starting at `offset` (size read from its TOTALSIZE field)."""
        head = self.get_message(offset, 4)
        if head is None:
            return None
        size = INT.unpack_from(head)[0]
        if size <= 0:
            return None
        return self.get_message(offset, size)

    def store_timestamp_of(self, offset: int, size: int) -> int | None:
        """STORETIMESTAMP of the record at `offset`; None if it is gone."""
        view = self.get_message(offset, min(size, 96))
        if view is None or len(view) < 64:
            return None
        sys_flag = INT.unpack_from(view, SYSFLAG_POS)[0]
        return int(LONG.unpack_from(view, layout_for(sys_flag).store_timestamp_pos)[0])

    def roll_next_file(self, offset: int) -> int:
        """Start of the segment after the one holding `offset`."""
        return offset + self.file_size - offset % self.file_size

    def slicer(self) -> RecordSlicer:
        """A `RecordSlicer` over this log, for the records of one read (release it after)."""
        return RecordSlicer(self)

    # -- maintenance ------------------------------------------------------------------------
    def flush(self, least_pages: int = 0) -> bool:
        return self.queue.flush(least_pages)

    def commit(self, least_pages: int = 0) -> bool:
        return self.queue.commit(least_pages)

    @property
    def flushed_where(self) -> int:
        return self.queue.flushed_where

    def close(self) -> None:
        self.queue.close()


class RecordSlicer:
    """Zero-copy views of records by (commit-log offset, size): the commit log's half of a pull.

    The records one pull reads are mostly in one segment, so the slicer keeps a view of the
    readable rest of the segment holding the last record sliced and cuts each record out of it,
    instead of looking a segment up per record. Use it as a context manager (or `release`): the
    view keeps the segment's mapping alive. Views it returned stay valid after the release.
    """

    __slots__ = ("_end", "_log", "_seg", "_start")

    def __init__(self, commit_log: CommitLog) -> None:
        self._log = commit_log
        self._seg: memoryview | None = None
        self._start = self._end = 0

    def slice(self, offset: int, size: int) -> memoryview | None:
        """The `size` record bytes at `offset`, or None if they are not (or no longer) in the log."""
        if offset < self._start or offset + size > self._end:
            if self._seg is not None:
                self._seg.release()
            seg = self._seg = self._log.get_data(offset) if offset >= 0 else None
            self._start = offset
            self._end = offset + len(seg) if seg is not None else offset
        seg = self._seg
        if seg is None or size < 0 or offset + size > self._end:
            return None
        rel = offset - self._start
        return seg[rel : rel + size]

    def next_segment(self, offset: int) -> int:
        """Start of the segment after the one holding `offset`: a missing record's whole segment
        is gone, so a reader skips what else points into it."""
        return self._log.roll_next_file(offset)

    def release(self) -> None:
        if self._seg is not None:
            self._seg.release()
            self._seg = None

    def __enter__(self) -> RecordSlicer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
