"""The commit log: one append-only log of stored message records for all topics.

Byte layout: consecutive segments of `mapedFileSizeCommitLog` bytes under `commitlog/`, each named by
its 20-digit start offset, holding records as `protocol.record` describes them back to back. When a
record (plus the 8 bytes a later blank needs) does not fit in what is left of a segment, the rest
of the segment is marked by an end-of-file blank (`int remaining, int 0xCBD43194`) and the record
goes to the start of the next segment. A batch is never split across segments.

Appends are serialised by one lock; records are encoded before taking it by the record codec
`protocol.formats.speedups` chose (complete but for the queue offset, the record's own offset and the
store time, which are patched in under the lock). Reads hand out zero-copy views; a pull cuts its
records out of segment views (`get_data`, in `ConsumeQueue.read`). The class owns no threads:
flushing, committing and dispatching are services that call into it.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Final

from rocketlite.clock import Clock
from rocketlite.protocol.errors import SegmentCreateError
from rocketlite.protocol.formats.batch import BATCH_TOO_LARGE, EncodedBatch
from rocketlite.protocol.formats.record import (
    END_FILE_MIN_BLANK_LENGTH,
    INT,
    LONG,
    SYSFLAG_POS,
    MessageInner,
    RecordTooLargeError,
    blank_record,
    layout_for,
)
from rocketlite.protocol.formats.speedups import encode_record, stamp_batch, stamp_group
from rocketlite.protocol.message import HostAddress, MessageSysFlag
from rocketlite.store.config import StoreConfig
from rocketlite.store.mapped_file import MappedFile, segment_name, stage_reserved, staging_path
from rocketlite.store.mapped_file_queue import Allocator, MappedFileQueue, direct_allocator
from rocketlite.store.results import AppendMessageStatus, AppendResult

log = logging.getLogger("rocketlite.store.commit_log")

# `enters_consume_queue`, inlined on the single-message path.
_TRANSACTION_MASK: Final = MessageSysFlag.TRANSACTION_MASK
_IN_CONSUME_QUEUE: Final = (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
_APPEND_OK: Final = AppendMessageStatus.PUT_OK


@functools.lru_cache(maxsize=64)
def _msg_id_prefix(host: HostAddress) -> str:
    return host.msg_id_prefix()


def _too_large_status(exc: RecordTooLargeError, *, single: bool) -> AppendMessageStatus:
    """The status for a refused message: a single message says which limit it exceeds; a batch
    is MESSAGE_SIZE_EXCEEDED whatever the limit, as RocketMQ's batch path answers."""
    if single and "properties" in str(exc):
        return AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED
    return AppendMessageStatus.MESSAGE_SIZE_EXCEEDED


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

    def load(self) -> None:
        self.queue.load()

    def retune(self, config: StoreConfig) -> None:
        """A new config (`MessageStore.apply_live_settings`): the size limit and the timeouts."""
        self.config = config
        self.max_message_size = config.max_message_size

    # -- appending --------------------------------------------------------------------------
    def _msg_id_prefix(self, host: HostAddress) -> str:
        cached = self._id_prefix
        if cached[0] is not host:
            cached = self._id_prefix = (host, _msg_id_prefix(host))
        return cached[1]

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

        Encoded outside the lock (`speedups.encode_record`); under it only the segment, the
        queue offset, the record's offset and the store time, patched into the header.
        """
        try:
            head, tail, stamp_pos, sys_flag = encode_record(msg, self.max_message_size)
        except RecordTooLargeError as exc:
            return AppendResult(_too_large_status(exc, single=True), remark=str(exc))
        size = len(head) + len(tail)
        key = f"{msg.topic}-{msg.queue_id}"
        advances = sys_flag & _TRANSACTION_MASK in _IN_CONSUME_QUEUE  # `enters_consume_queue`
        host = msg.store_host
        cached = self._id_prefix
        if cached[0] is not host:
            cached = self._id_prefix = (host, _msg_id_prefix(host))
        with self._lock:
            now = self.clock.now_ms()
            files = self.queue.files
            mf = files[-1] if files else None  # the fast path of `_segment_for`, inlined
            if mf is None or size + END_FILE_MIN_BLANK_LENGTH > mf.file_size - mf.wrote_position:
                mf = self._segment_for(size)
            qoff = self.topic_queue_table.get(key, 0) if advances else 0
            phys, msg_id = mf.place_record(head, tail, stamp_pos, qoff, now, cached[1])
            if advances:
                self.topic_queue_table[key] = qoff + 1
        msg.store_timestamp = now
        msg.queue_offset = qoff
        msg.commit_log_offset = phys
        return AppendResult(_APPEND_OK, phys, size, msg_id, now, qoff)

    def append_encoded_batch(
        self, encoded: EncodedBatch, topic: str, queue_id: int, store_host: HostAddress
    ) -> AppendResult:
        """Append a batch of one topic-queue, its records already encoded
        (`speedups.encode_batch_records`: a SEND_BATCH_MESSAGE body straight to records, no
        `MessageInner`s), placed in one segment with consecutive queue offsets. Encoded outside
        the lock; under it only the segment and one `speedups.stamp_batch` call for the whole
        batch (queue offsets, the records' offsets and the store time patched in, the msg ids out),
        then the copy. A batch the encoder found over a limit is MESSAGE_SIZE_EXCEEDED with its
        remark, as `append` answers a `RecordTooLargeError`."""
        buf, count, sys_flag, found, remark = encoded
        if found == BATCH_TOO_LARGE:
            return AppendResult(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED, remark=remark)
        total = len(buf)
        if total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return AppendResult(
                AppendMessageStatus.MESSAGE_SIZE_EXCEEDED,
                remark=f"batch of {total} bytes does not fit in a {self.file_size}-byte segment",
            )
        key = f"{topic}-{queue_id}"
        advances = sys_flag & _TRANSACTION_MASK in _IN_CONSUME_QUEUE  # `enters_consume_queue`
        prefix = self._msg_id_prefix(store_host)
        with self._lock:
            now = self.clock.now_ms()
            mf = self._segment_for(total)
            base = mf.file_from_offset + mf.wrote_position
            qoff0 = self.topic_queue_table.get(key, 0) if advances else 0
            msg_ids = stamp_batch(buf, count, qoff0, advances, base, now, prefix)
            mf.append(buf)
            mf.store_timestamp = now
            if advances:
                self.topic_queue_table[key] = qoff0 + count
        return AppendResult(_APPEND_OK, base, total, msg_ids, now, qoff0, count)

    def append_encoded_batches(
        self, batches: list[tuple[EncodedBatch, str, int]], store_host: HostAddress
    ) -> tuple[list[AppendResult], SegmentCreateError | None]:
        """`append_encoded_batch` of several batches (encoded, topic, queue id) one after the
        other, as if appended one by one, under one lock and one clock read; the batches that
        share a segment are written with one `MappedFile.append_many` (one `pwritev`). The
        AppendResults of the leading batches placed, and the segment failure that stopped it.
        A batch `append_encoded_batch` would refuse (over a limit) stops it too, before it is
        placed: the caller leaves it and the rest to the per-request path, which answers it."""
        prefix = self._msg_id_prefix(store_host)
        table = self.topic_queue_table
        out: list[AppendResult] = []
        parts: list[bytearray] = []
        failed: SegmentCreateError | None = None
        mf: MappedFile | None = None
        end = 0  # where the pending parts end in `mf`
        with self._lock:
            now = self.clock.now_ms()
            for (buf, count, sys_flag, found, _remark), topic, queue_id in batches:
                total = len(buf)
                if found == BATCH_TOO_LARGE or total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
                    break
                if mf is None or total + END_FILE_MIN_BLANK_LENGTH > mf.file_size - end:
                    if parts:
                        assert mf is not None
                        mf.append_many(parts)
                        mf.store_timestamp = now
                        parts = []
                    try:
                        mf = self._segment_for(total)
                    except SegmentCreateError as exc:
                        failed = exc
                        break
                    end = mf.wrote_position
                base = mf.file_from_offset + end
                key = f"{topic}-{queue_id}"
                advances = sys_flag & _TRANSACTION_MASK in _IN_CONSUME_QUEUE  # `enters_consume_queue`
                qoff0 = table.get(key, 0) if advances else 0
                msg_ids = stamp_batch(buf, count, qoff0, advances, base, now, prefix)
                if advances:
                    table[key] = qoff0 + count
                parts.append(buf)
                end += total
                out.append(AppendResult(_APPEND_OK, base, total, msg_ids, now, qoff0, count))
            if parts:
                assert mf is not None
                mf.append_many(parts)
                mf.store_timestamp = now
        return out, failed

    def append_group(
        self, buf: bytearray, sizes: list[int], keys: list[str], store_host: HostAddress
    ) -> tuple[list[str], list[int], int, SegmentCreateError | None]:
        """Append several single messages of different queues, their records encoded back to
        back in `buf` (`speedups.encode_group`; record k is `sizes[k]` bytes, for queue `keys[k]`,
        "topic-queueId"), under one lock and one clock read: (msg ids, queue offsets, store time,
        the segment failure that stopped it). Each record goes where `append` would have put it
        were they appended one by one: the group is split where a record does not fit what is
        left of the segment (which then gets its blank, as `append` rolls it; a group that fits,
        the common case, is not walked record by record), and each part is
        stamped (`speedups.stamp_group`, which also takes each record's queue offset from
        `topic_queue_table` and advances it) and copied in one piece. A failed roll stops it there: the
        records before are placed, the rest are not (the caller answers them with the failure);
        so does a record that no segment can hold.
        Only for messages that enter their consume queue (no transaction type) and whose records
        are within the limits (checked by the caller): this is the coalescing lane of the send
        processor, which runs only where `stamp_group` is compiled."""
        assert stamp_group is not None
        prefix = self._msg_id_prefix(store_host)
        table = self.topic_queue_table
        ids: list[str] = []
        qoffs: list[int] = []
        n = len(sizes)
        i = pos = 0
        with self._lock, memoryview(buf) as view:
            now = self.clock.now_ms()
            while i < n:
                try:
                    mf = self._segment_for(sizes[i])
                except SegmentCreateError as exc:
                    return ids, qoffs, now, exc
                room = mf.file_size - mf.wrote_position - END_FILE_MIN_BLANK_LENGTH
                if i == 0 and (total := sum(sizes)) <= room:
                    j, end = n, total  # the common case: the whole group fits, no walk over it
                else:
                    j, end = i, pos
                    while j < n and end - pos + sizes[j] <= room:
                        end += sizes[j]
                        j += 1
                if j == i:  # a record larger than a segment: left to `append`, which refuses it
                    break
                part = keys if i == 0 and j == n else keys[i:j]  # the queue offsets: assigned there
                ids += stamp_group(
                    buf, pos, part, table, qoffs, mf.file_from_offset + mf.wrote_position, now, prefix
                )
                with view[pos:end] as piece:
                    mf.append(piece)
                mf.store_timestamp = now
                i, pos = j, end
        return ids, qoffs, now, None

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
            if not q.files and offset:  # a master whose oldest segment is not 0: no use for it
                staging_path(q.directory / segment_name(0)).unlink(missing_ok=True)
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

    def stage_first_segment(self) -> None:
        """An empty log (a new slave) builds its first segment ahead of the first bytes, so the
        first transfer does not wait for it (`mapped_file.stage_reserved`)."""
        q = self.queue
        if q.files:
            return
        q.directory.mkdir(parents=True, exist_ok=True)
        staged = staging_path(q.directory / segment_name(0))
        if not staged.exists() or staged.stat().st_size != q.file_size:
            log.info("empty commit log; preparing its first segment")
            stage_reserved(staged, q.file_size)

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

    def forget_queues(self, topic: str, queue_id: int | None = None) -> None:
        """Drop the next queue offsets of a deleted topic (or one deleted queue of it), so a
        topic created again under the name starts its queues at 0, as RocketMQ's does."""
        if queue_id is not None:
            self.topic_queue_table.pop(f"{topic}-{queue_id}", None)
            return
        prefix = f"{topic}-"
        for key in [k for k in self.topic_queue_table if k.startswith(prefix)]:
            del self.topic_queue_table[key]

    def roll_next_file(self, offset: int) -> int:
        """Start of the segment after the one holding `offset`."""
        return offset + self.file_size - offset % self.file_size

    # -- maintenance ------------------------------------------------------------------------
    def flush(self, least_pages: int = 0) -> bool:
        return self.queue.flush(least_pages)

    def commit(self, least_pages: int = 0) -> bool:
        return self.queue.commit(least_pages)

    def flush_to(self, end: int) -> bool:
        """Make the log durable up to `end` now (blocking: call it off the event loop), for a
        service that must not record a copy as done before the copy is on disk (a POP DLQ move,
        timer progress). With a write buffer (`transientStorePoolEnable`) the commit service owns
        the file writes: wait for the flusher, at most `syncFlushTimeout`. Whether it got there."""
        queue = self.queue
        if not self.config.transient_store_pool_enable:
            queue.flush_all_to(end)
        else:
            deadline = time.monotonic() + self.config.sync_flush_timeout / 1000
            while queue.flushed_where < end and (left := deadline - time.monotonic()) > 0:
                time.sleep(min(self.config.flush_interval_commit_log / 4000, left))
        return queue.flushed_where >= end

    @property
    def flushed_where(self) -> int:
        return self.queue.flushed_where

    def close(self) -> None:
        self.queue.close()
