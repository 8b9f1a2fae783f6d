"""`StoreWriter`: the store's write side, the base of `MessageStore` (`message_store.py`), which
builds its collaborators and runs the services; this part answers the puts with RocketMQ's
statuses. Every put is checked (`_check_put`: shut down, a slave, the disk full, not writable, a
topic too long), a DELAY message parked in SCHEDULE_TOPIC_XXXX (`_apply_delay`), appended by the
commit log, counted, and the dispatcher woken; with SYNC_FLUSH the put carries the group commit's
future (`PendingPut.flush_future`). Besides the single put, the appends of several records at once:
one batch's encoded records (`put_encoded_nowait`), several batches (`put_encoded_batches_nowait`,
the batch lane's) and a group of single sends (`takes_group`, `put_group_nowait`: the coalescing
lanes'), each one append under one lock, counted and woken once.

Put latency (the stats' buckets, `put_max_ms`, the slow-put warning) is sampled on the hot path:
an ASYNC_FLUSH single put reads the clock around its append only every `PUT_TIMING_EVERY`-th
time (the first put included), and each put in between is counted in the bucket of the last
sample (capped below the slow threshold, so a slow put is counted and warned about once). Counts
stay exact (the buckets add up to the puts); the distribution is a 1-in-16 sample and the max is
the max of the samples. Batches and SYNC_FLUSH puts are timed every time.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import TimeoutError as FutureTimeout

from rocketlite.protocol.errors import SegmentCreateError
from rocketlite.protocol.formats.batch import BATCH_DELAY_PROPERTY, EncodedBatch
from rocketlite.protocol.formats.record import MAX_TOPIC_LENGTH, MessageInner, enters_consume_queue
from rocketlite.protocol.formats.speedups import stamp_group
from rocketlite.protocol.message import (
    HostAddress,
    MessageConst,
    properties_to_string,
    string_to_properties,
)
from rocketlite.protocol.reserved import SCHEDULE_TOPIC
from rocketlite.store.clean import RunningFlags
from rocketlite.store.commit_log import CommitLog
from rocketlite.store.config import StoreConfig
from rocketlite.store.dispatch import ReputService
from rocketlite.store.flush import GroupCommitService
from rocketlite.store.results import (
    AppendMessageStatus,
    AppendResult,
    PendingPut,
    PutMessageResult,
    PutMessageStatus,
)
from rocketlite.store.stats import SLOW_PUT_MS, StoreStats

log = logging.getLogger("rocketlite.store")

_DELAY_NEEDLE = MessageConst.DELAY_TIME_LEVEL + "\x01"
_ILLEGAL = PutMessageStatus.MESSAGE_ILLEGAL

_APPEND_TO_PUT = {
    AppendMessageStatus.MESSAGE_SIZE_EXCEEDED: PutMessageStatus.MESSAGE_ILLEGAL,
    AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED: PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
    AppendMessageStatus.UNKNOWN_ERROR: PutMessageStatus.UNKNOWN_ERROR,
}

PUT_TIMING_EVERY = 16  # an ASYNC_FLUSH single put reads the clock 1 time in this many
_BELOW_SLOW_MS = SLOW_PUT_MS - 1.0  # the estimate of an untimed put after a slow sample


class StoreWriter:
    """The puts of `MessageStore`, over the collaborators it builds: `group_commit` is SYNC_FLUSH's
    service once the services run (None before, and with ASYNC_FLUSH), `started` set by `start`;
    `config` is replaced by `apply_live_settings`."""

    def __init__(
        self,
        config: StoreConfig,
        flags: RunningFlags,
        stats: StoreStats,
        commit_log: CommitLog,
        reput: ReputService,
        *,
        master: bool,
    ) -> None:
        self.config = config
        self.flags = flags
        self.stats = stats
        self.commit_log = commit_log
        self.reput = reput
        self.master = master
        self.group_commit: GroupCommitService | None = None
        self.started = False
        self._untimed_puts = 0  # single puts left before the next timed one (module docstring)
        self._put_estimate_ms = 0.0  # the last timed put's latency, for the untimed ones

    def _check_put(self, topic: str) -> PutMessageResult | None:
        flags = self.flags
        if flags.shutdown or not self.started:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="store is shut down")
        if not self.master:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="store is a slave")
        if flags.disk_full:
            return PutMessageResult(
                PutMessageStatus.SERVICE_NOT_AVAILABLE,
                remark="the disk is full (above diskSpaceWarningLevelRatio); writes are refused",
            )
        if not flags.writeable:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="store not writeable")
        # An ASCII topic's UTF-8 length is its length: no encoding on the common path.
        if (len(topic) if topic.isascii() else len(topic.encode("utf-8"))) > MAX_TOPIC_LENGTH:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL, remark=f"topic longer than {MAX_TOPIC_LENGTH} bytes"
            )
        return None

    def _apply_delay(self, msg: MessageInner) -> None:
        """Delayed messages go to SCHEDULE_TOPIC_XXXX queue level-1, the real topic in properties.
        A delivered copy (`delay_served`) keeps its DELAY property but is not parked again."""
        if msg.delay_served or _DELAY_NEEDLE not in msg.properties_string:
            return
        if not enters_consume_queue(msg.sys_flag):  # a transaction half or rollback is not delayed
            return
        props = string_to_properties(msg.properties_string)
        level_text = props.get(MessageConst.DELAY_TIME_LEVEL, "0")
        level = int(level_text) if level_text.lstrip("-").isdigit() else 0
        if level <= 0:
            return
        level = min(level, len(self.config.delay_levels_ms))
        props[MessageConst.DELAY_TIME_LEVEL] = str(level)
        props[MessageConst.REAL_TOPIC] = msg.topic
        props[MessageConst.REAL_QUEUE_ID] = str(msg.queue_id)
        msg.properties_string = properties_to_string(props)
        msg.topic = SCHEDULE_TOPIC
        msg.queue_id = level - 1

    def _free_write_buffers(self) -> int:
        """`remainTransientStoreBufferNumbs`: write buffers not held by a segment; Java's
        Integer.MAX_VALUE without transientStorePoolEnable."""
        cfg = self.config
        if not cfg.transient_store_pool_enable:
            return 2**31 - 1
        size = cfg.transient_store_pool_size
        return max(size - sum(1 for mf in self.commit_log.queue.files[-size:] if mf.holds_write_buffer), 0)

    def transient_store_pool_deficient(self) -> bool:
        """`isTransientStorePoolDeficient`: every segment write buffer is taken (the commit
        service lags, the disk is slow), so the broker rejects sends with SYSTEM_BUSY instead of
        holding ever more segments in memory."""
        cfg = self.config
        if not cfg.transient_store_pool_enable:
            return False
        size = cfg.transient_store_pool_size
        files = self.commit_log.queue.files
        return sum(1 for mf in files[-size:] if mf.holds_write_buffer) >= size

    def put_message_nowait(self, msg: MessageInner, *, paced: bool = False) -> PendingPut:
        """Append without waiting for durability; the broker awaits `flush_future` itself.
        `paced`: the append's dispatch round may be shared with the next few loop iterations'
        (the 5.x gRPC sends, one RPC per iteration: `dispatch.py`)."""
        put = self.put_message_async(msg, paced=paced)
        if type(put) is AppendResult:
            return PendingPut(PutMessageResult(PutMessageStatus.PUT_OK, put))
        assert isinstance(put, PendingPut)
        return put

    def put_message_async(self, msg: MessageInner, *, paced: bool = False) -> AppendResult | PendingPut:
        """`put_message_nowait` for a caller that answers at once (the send processor): when the
        message is stored and there is nothing to wait for (ASYNC_FLUSH), its `AppendResult`
        itself, with no result objects around it; otherwise the `PendingPut`."""
        flags = self.flags
        if flags.shutdown or not flags.writeable or flags.disk_full or not self.started or not self.master:
            return PendingPut(self._check_put(msg.topic) or PutMessageResult(PutMessageStatus.UNKNOWN_ERROR))
        topic = msg.topic
        if not topic.isascii() or len(topic) > MAX_TOPIC_LENGTH:  # the rest of `_check_put`
            bad = self._check_put(msg.topic)
            if bad is not None:
                return PendingPut(bad)
        if _DELAY_NEEDLE in msg.properties_string and not msg.delay_served:
            self._apply_delay(msg)
        untimed = self._untimed_puts
        if untimed and self.group_commit is None:
            self._untimed_puts = untimed - 1
            begin = -1.0  # not timed: counted at the last sample's latency
        else:
            self._untimed_puts = PUT_TIMING_EVERY - 1
            begin = time.perf_counter()
        try:
            res = self.commit_log.append(msg)
        except SegmentCreateError as exc:
            return self._segment_failed(exc)
        if res.status is not AppendMessageStatus.PUT_OK or self.group_commit is not None:
            return self._finish_put(res, begin, 1, paced)
        # `_finish_put` of an ASYNC_FLUSH single put, inlined (one call less per send)
        self.stats.record_put(self._put_estimate_ms if begin < 0 else self._timed(begin), res.wrote_bytes, 1)
        self.reput.wakeup(paced)
        return res

    def put_encoded_nowait(
        self, enc: EncodedBatch, topic: str, queue: int, host: HostAddress, *, paced: bool = False
    ) -> PendingPut:
        """Append a batch (one topic-queue, consecutive queue offsets) without waiting: records
        encoded from a SEND_BATCH_MESSAGE body (`speedups.encode_batch_records`). A batch whose
        stored properties hold DELAY is refused (RocketMQ does not delay batches)."""
        bad = self._check_put(topic)
        if bad is not None or enc.outcome == BATCH_DELAY_PROPERTY:
            return PendingPut(bad or PutMessageResult(_ILLEGAL, remark="delayed batches are not supported"))
        begin = time.perf_counter()
        try:
            res = self.commit_log.append_encoded_batch(enc, topic, queue, host)
        except SegmentCreateError as exc:
            return self._segment_failed(exc)
        return self._finish_put(res, begin, enc.messages, paced)

    def put_encoded_batches_nowait(
        self, batches: list[tuple[EncodedBatch, str, int]], host: HostAddress
    ) -> list[AppendResult]:
        """`put_encoded_nowait` of several batches as one append (the batch lane's; `api.py`)."""
        n = 0
        for enc, topic, _queue in batches:
            if enc.outcome == BATCH_DELAY_PROPERTY or self._check_put(topic) is not None:
                break
            n += 1
        begin = time.perf_counter()
        placed, failed = self.commit_log.append_encoded_batches(
            batches if n == len(batches) else batches[:n], host
        )
        if placed:
            elapsed_ms = self._timed(begin)
            record = self.stats.record_put
            for res in placed:  # as `_finish_put` counts each batch
                record(elapsed_ms, res.wrote_bytes, res.msg_num)
            self.reput.wakeup(False)
        if failed is not None:
            self.stats.put_failures += 1
            log.error("a put of %d batches stopped after %d: %s", len(batches), len(placed), failed)
        return placed

    def takes_group(self) -> bool:
        f = self.flags
        return (
            stamp_group is not None and self.group_commit is None and self.started and self.master
            and not f.shutdown and f.writeable and not f.disk_full
        )  # fmt: skip

    def put_group_nowait(
        self, buf: bytearray, sizes: list[int], keys: list[str], host: HostAddress
    ) -> tuple[list[str], list[int]]:
        begin = time.perf_counter()
        ids, qoffs, _now, failed = self.commit_log.append_group(buf, sizes, keys, host)
        if ids:
            self.stats.record_put(self._timed(begin), sum(sizes[: len(ids)]), len(ids))
            self.reput.wakeup(False)
        if failed is not None:
            self.stats.put_failures += 1
            log.error("a grouped put stopped after %d of %d messages: %s", len(ids), len(sizes), failed)
        return ids, qoffs

    def _segment_failed(self, exc: SegmentCreateError) -> PendingPut:
        self.stats.put_failures += 1
        return PendingPut(PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, remark=str(exc)))

    def _timed(self, begin: float) -> float:
        """The latency of a timed put in ms, kept as the estimate of the untimed ones after it."""
        elapsed_ms = (time.perf_counter() - begin) * 1000
        self._put_estimate_ms = elapsed_ms if elapsed_ms < SLOW_PUT_MS else _BELOW_SLOW_MS
        return elapsed_ms

    def _finish_put(self, res: AppendResult, begin: float, n: int, paced: bool) -> PendingPut:
        """`begin` is the put's `perf_counter` start, or negative when it was not timed."""
        elapsed_ms = self._put_estimate_ms if begin < 0 else self._timed(begin)
        if res.status is not AppendMessageStatus.PUT_OK:
            self.stats.put_failures += 1
            return PendingPut(PutMessageResult(_APPEND_TO_PUT[res.status], res, res.remark))
        self.stats.record_put(elapsed_ms, res.wrote_bytes, n)
        self.reput.wakeup(paced)
        fut = self.group_commit.submit(res.end_offset) if self.group_commit is not None else None
        return PendingPut(PutMessageResult(PutMessageStatus.PUT_OK, res), fut)

    def wait_durable(self, pending: PendingPut) -> PutMessageResult:
        """Block until a SYNC_FLUSH put is flushed or `syncFlushTimeout` passes."""
        fut = pending.flush_future
        if fut is None:
            return pending.result
        try:
            flushed = fut.result(timeout=self.config.sync_flush_timeout / 1000)
        except FutureTimeout:
            flushed = False
        if not flushed:
            log.error("sync flush timed out after %d ms", self.config.sync_flush_timeout)
            pending.result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        return pending.result

    def put_message(self, msg: MessageInner) -> PutMessageResult:
        """Append one message; with SYNC_FLUSH, return once it is on disk (or timed out)."""
        return self.wait_durable(self.put_message_nowait(msg))
