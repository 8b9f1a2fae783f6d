"""`TimerMessageService`: delivers parked 5.x timer messages to their topics at their time.

The send path parks a timer message in `rmq_sys_wheel_timer` queue 0 (`park.py`). Unlike a delay
level's queue, that queue is not in delivery order, so the service keeps the pending timers in a
heap, one int per timer (`delivery ms << 48 | queue offset`, about 45 bytes with its slot); the
record itself stays in the commit log until delivery.

Timing: one asyncio task reads the units the dispatcher added (woken by the store's arrival
listener), delivers every timer whose time has come, and sleeps on a loop timer until the
earliest one left (`due.DueDelivery`, shared with the 4.x delay levels). A timer is
never delivered before its time (checked against the clock after every wake-up) and normally
within a few milliseconds after it.

Delivery re-puts the stored record to REAL_TOPIC / REAL_QID the way RocketMQ's timer does:
REAL_TOPIC and REAL_QID removed, TIMER_OUT_MS kept, TIMER_ENQUEUE_MS (when it was parked) and
TIMER_DEQUEUE_MS (now) added, body, flags, born host and time, UNIQ_KEY and the rest as stored.
A put refused for a transient reason is retried after `FAILURE_BACKOFF_S`; one the store will
never take (too large) is logged and dropped, so it cannot come back forever.

Progress (`progress.py`): the lowest queue offset not done (the cursor) and the done offsets above
it, written every `timerFlushIntervalMs` and on close. A restart reads the queue from the cursor,
skipping done units: a clean restart delivers nothing twice and loses nothing; after a crash the
deliveries since the last write are delivered again (at least once). Before a write, the commit
log is flushed up to its end as of the snapshot, so a unit the file calls done has its delivered
(or rolled) copy on disk even with ASYNC_FLUSH: a power loss cannot lose a timer.

A timer far in the future would hold the cursor while everything after it is delivered, making
every restart read more; so once more than `roll_span` (`ROLL_SPAN`) done units lie above the
cursor, the pending timers at the cursor are rolled: re-put at the tail of the timer topic
(TIMER_ROLL_TIMES + 1, as RocketMQ rolls messages beyond its wheel) and marked done, and the
cursor moves on past them and the done units behind them. Only done units count: pending ones
are read on a restart anyway, and rolling cannot shrink them (it only moves them to the tail), so
many pending timers and no deliveries roll nothing. A crash just after a roll can deliver that
timer twice (the original and its copy), never lose it.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections import Counter
from pathlib import Path
from typing import Final

from rocketlite.broker.delay.due import FAILURE_BACKOFF_S, DueDelivery
from rocketlite.broker.delay.levels import message_for_real_topic
from rocketlite.broker.delay.timer.park import TIMER_QUEUE_ID, TIMER_TOPIC, park_timer_message
from rocketlite.broker.delay.timer.progress import TimerProgressFile
from rocketlite.broker.histogram import Histogram
from rocketlite.broker.stats import BrokerStats
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.clock import Clock
from rocketlite.protocol import perm
from rocketlite.protocol.formats.record import MessageInner, RecordFormatError, StoredRecord, decode_record
from rocketlite.protocol.message import HostAddress, MessageConst, properties_to_string, string_to_properties
from rocketlite.store.api import StoreAPI
from rocketlite.store.queue_view import QueueView
from rocketlite.store.results import PutMessageStatus

log = logging.getLogger("rocketlite.broker.timer")

BATCH_PER_PASS = 256  # units read, or timers delivered, before yielding to the event loop
ROLL_SPAN = 50_000  # units between the cursor and the queue's end before the oldest are rolled
ROLL_BATCH = 64  # units at the cursor looked at per roll
_SHIFT = 48
_MASK = (1 << _SHIFT) - 1
_DELIVERY_DROPS = (MessageConst.REAL_TOPIC, MessageConst.REAL_QUEUE_ID)
_PERMANENT_FAILURES = frozenset({PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED})
TIMER_DIST_S: Final = (5, 60, 300, 900, 3600, 14400, 28800, 86400)  # TimerMetrics.timerDist
DELAY_LATENCY_BUCKETS_S: Final = (60.0, 600.0, 3600.0, 43200.0, 86400.0, 259200.0)  # the store's view


class TimerMessageService:
    """The send hook (`park`), the pending heap and the delivery task, one per broker."""

    def __init__(
        self,
        store: StoreAPI,
        topics: TopicConfigManager,
        stats: BrokerStats,
        clock: Clock,
        store_host: HostAddress,
        config_dir: Path,
        *,
        enabled: bool = True,
        roll_span: int = ROLL_SPAN,
    ) -> None:
        self.store = store
        self.topics = topics
        self.stats = stats
        self.clock = clock
        self.store_host = store_host
        self.enabled = enabled
        self.roll_span = roll_span
        self.max_delay_sec = store.config.timer_max_delay_sec
        self.flush_interval_s = store.config.timer_flush_interval_ms / 1000
        self.progress = TimerProgressFile(config_dir)
        self.delivered = 0
        self.rolled = 0
        # RocketMQ 5's timer metrics (DefaultStoreMetricsManager), by real topic: timers read
        # from the timer queue, delivered, and pending; the delay asked for (deliver - born, s)
        self.enqueued: Counter[str] = Counter()
        self.dequeued: Counter[str] = Counter()
        self.timing: Counter[str] = Counter()
        self.delay_latency: dict[str, Histogram] = {}
        self._heap: list[int] = []
        self._stale = 0  # heap entries of rolled timers, dropped when popped
        self._cursor = 0  # every unit below is done
        self._done: set[int] = set()  # done units at or above the cursor
        self._read = 0  # next unit to read into the heap
        self._dirty = False
        self._durable_end = 0  # commit-log end when the progress was last snapshotted
        self._unreadable = -1  # a unit below the queue's end that could not be read (logged once)
        self._due = DueDelivery(
            store, TIMER_TOPIC, "broker-timer", self.run_once, self._save, self.flush_interval_s, log
        )

    # -- state ------------------------------------------------------------------------------
    def load(self) -> None:
        """Read the progress file; the pending timers are read from the queue by the first pass."""
        self.progress.load()
        self._cursor = self.progress.cursor
        self._done = set(self.progress.done)
        cq = self.store.queue(TIMER_TOPIC, TIMER_QUEUE_ID)
        if cq is not None and self._cursor < cq.min_offset:
            log.warning("timer cursor %d below the queue's first unit %d", self._cursor, cq.min_offset)
            self._cursor = cq.min_offset
        if cq is not None and self._cursor > cq.max_offset:
            log.warning("timer cursor %d past the queue's end %d; corrected", self._cursor, cq.max_offset)
            self._cursor = cq.max_offset
        self._done = {off for off in self._done if off >= self._cursor}
        self._read = self._cursor
        if self.enabled and self.topics.select(TIMER_TOPIC) is None:
            self.topics.create_in_send_back(TIMER_TOPIC, 1, perm.PERM_READ | perm.PERM_WRITE)

    @property
    def pending(self) -> int:
        """Timers read and not delivered yet."""
        return len(self._heap) - self._stale

    @property
    def cursor(self) -> int:
        return self._cursor

    def _snapshot(self) -> None:
        """Hand the progress to the file (a copy, so a writer thread never sees it change), and
        note the commit log's end: every copy the snapshot calls delivered or rolled is below it."""
        with self.progress.lock:
            self.progress.cursor, self.progress.done = self._cursor, set(self._done)
        self._durable_end = self.store.written_end  # write buffer too
        self._dirty = False

    def persist(self) -> None:
        """Snapshot, flush the commit log under it and write the file, on the calling thread
        (`_save` and `close` do the same off the loop)."""
        self._snapshot()
        if not self._write():
            self._dirty = True

    def _flush_copies(self) -> bool:
        """Flush the commit log up to the last snapshot's end (blocking: call it off the loop),
        so the progress file never calls done a unit whose copy could still be lost
        (`StoreAPI.flush_to`)."""
        end = self._durable_end
        if not self.store.flush_to(end):
            log.warning("commit log not flushed to %d; timer progress not written yet", end)
            return False
        return True

    # -- the send hook ----------------------------------------------------------------------
    def park(self, msg: MessageInner) -> None:
        """Park a timer message in the timer topic (in place); MessageIllegalError for bad input."""
        park_timer_message(msg, self.clock.now_ms(), self.max_delay_sec)

    # -- one pass ---------------------------------------------------------------------------
    def run_once(self) -> float | None:
        """Read new units, roll if needed, deliver what is due; seconds until the next timer is
        due, None when none is pending, 0 when a batch limit left more to do right away."""
        if self._read_new():
            return 0.0  # everything is read before anything is delivered: time order holds
        delay = self._deliver_due()
        if self._roll_if_needed():  # after delivery: what is left at the cursor is not due yet
            return 0.0
        return delay

    def _record_at(self, cq: QueueView, off: int) -> StoredRecord | None:
        """The timer message of queue offset `off`; None for padding or a record gone."""
        view = cq.read(off)
        if view is None:
            return None
        try:
            return decode_record(view)
        except RecordFormatError as exc:
            log.error("timer message at queue offset %d unreadable (%s)", off, exc)
            return None
        finally:
            view.release()

    def _mark_done(self, off: int) -> None:
        self._done.add(off)
        self._dirty = True
        cursor, done = self._cursor, self._done
        while cursor in done:
            done.discard(cursor)
            cursor += 1
        self._cursor = cursor

    def _read_new(self) -> bool:
        """Push the timers of units not read yet; True if a batch limit stopped the reading."""
        cq = self.store.queue(TIMER_TOPIC, TIMER_QUEUE_ID)
        if cq is None:
            return False
        if self._cursor < cq.min_offset:  # segments deleted under pending timers: they are gone
            log.error("timer messages below queue offset %d were deleted before delivery", cq.min_offset)
            self._cursor = cq.min_offset
            self._done = {o for o in self._done if o >= self._cursor}
            self._dirty = True
        off = max(self._read, cq.min_offset)
        end = min(cq.max_offset, off + BATCH_PER_PASS)
        while off < end:
            unit = cq.unit(off)
            if unit is None:  # below the end, yet unreadable (its file is missing or closed)
                if off != self._unreadable:
                    self._unreadable = off
                    log.error("timer queue unit %d unreadable; retried on the next pass", off)
                self._read = off
                return False  # not "more right away": that would spin on it
            if off >= self._cursor and off not in self._done:
                rec = self._record_at(cq, off)
                text = rec.get_property(MessageConst.TIMER_OUT_MS) if rec is not None else None
                if text is None or not text.lstrip("-").isdigit():
                    if rec is not None:
                        log.error("timer message %s has no usable TIMER_OUT_MS; dropped", rec.msg_id)
                    self._mark_done(off)
                else:
                    heapq.heappush(self._heap, (max(int(text), 0) << _SHIFT) | off)
                    self._count_enqueued(rec, max(int(text), 0))
            off += 1
        self._read = off
        return off < cq.max_offset  # the batch limit stopped the reading

    def _count_enqueued(self, rec: StoredRecord | None, due: int) -> None:
        topic = (rec.get_property(MessageConst.REAL_TOPIC) if rec is not None else None) or ""
        self.enqueued[topic] += 1
        self.timing[topic] += 1
        if rec is not None:
            hist = self.delay_latency.get(topic)
            if hist is None:
                hist = self.delay_latency[topic] = Histogram(DELAY_LATENCY_BUCKETS_S)
            hist.observe(max(due - rec.born_timestamp, 0) // 1000)

    def _count_done(self, topic: str, delivered: bool) -> None:
        left = self.timing[topic] - 1
        if left > 0:
            self.timing[topic] = left
        else:
            self.timing.pop(topic, None)
        if delivered:
            self.dequeued[topic] += 1

    # -- what RocketMQ's timer gauges read ---------------------------------------------------
    def enqueue_behind(self) -> tuple[int, int]:
        """Units in the timer queue not read into the heap yet, and the age (ms) of the oldest:
        RocketMQ's enqueue lag and latency."""
        cq = self.store.queue(TIMER_TOPIC, TIMER_QUEUE_ID)
        if cq is None or self._read >= cq.max_offset:
            return 0, 0
        first = self.store.get_message_store_timestamp(TIMER_TOPIC, TIMER_QUEUE_ID, self._read)
        return cq.max_offset - self._read, (self.clock.now_ms() - first if first > 0 else 0)

    def dequeue_behind(self) -> tuple[int, int]:
        """Timers due and not delivered yet, and how long (ms) the oldest of them is overdue:
        RocketMQ's dequeue lag and latency. Walks only the part of the heap that is due."""
        now = self.clock.now_ms()
        heap, count, oldest = self._heap, 0, now
        stack = [0] if heap else []
        while stack:
            i = stack.pop()
            key = heap[i]
            due = key >> _SHIFT
            if due > now:
                continue  # nothing below it is due either (heap order)
            off = key & _MASK
            if off >= self._cursor and off not in self._done:
                count += 1
                oldest = min(oldest, due)
            stack.extend(j for j in (2 * i + 1, 2 * i + 2) if j < len(heap))
        return count, now - oldest

    def snapshot(self) -> list[tuple[int, int]]:
        """(bound in seconds, pending timers due within (previous bound, bound] from now), for
        RocketMQ's `timer_bound_s` buckets; timers more than 24 h ahead are not counted."""
        now = self.clock.now_ms()
        counts = [0] * len(TIMER_DIST_S)
        for key in self._heap:
            off = key & _MASK
            if off < self._cursor or off in self._done:
                continue
            ahead = max((key >> _SHIFT) - now, 0)
            for i, bound in enumerate(TIMER_DIST_S):
                if ahead < bound * 1000:
                    counts[i] += 1
                    break
        return list(zip(TIMER_DIST_S, counts, strict=True))

    def _deliver_due(self) -> float | None:
        now = self.clock.now_ms()
        heap = self._heap
        budget = BATCH_PER_PASS
        while heap:
            key = heap[0]
            due, off = key >> _SHIFT, key & _MASK
            if off < self._cursor or off in self._done:  # rolled to the tail meanwhile
                heapq.heappop(heap)
                self._stale = max(self._stale - 1, 0)  # 0: its segment was deleted, not rolled
                continue
            if due > now:
                return (due - now) / 1000
            if budget <= 0:
                return 0.0
            budget -= 1
            heapq.heappop(heap)
            if not self._deliver(off, now):
                heapq.heappush(heap, ((now + int(FAILURE_BACKOFF_S * 1000)) << _SHIFT) | off)
                return FAILURE_BACKOFF_S
        return None

    def _deliver(self, off: int, now: int) -> bool:
        """Re-put one timer to its topic; False when the store refused it for now."""
        cq = self.store.queue(TIMER_TOPIC, TIMER_QUEUE_ID)
        rec = self._record_at(cq, off) if cq is not None else None
        msg = message_for_real_topic(rec, self.store_host, drop=_DELIVERY_DROPS) if rec is not None else None
        if rec is None or msg is None:
            log.error("timer message at queue offset %d is gone or has no REAL_TOPIC/REAL_QID; dropped", off)
            self._count_done(
                (rec.get_property(MessageConst.REAL_TOPIC) if rec is not None else None) or "", False
            )
            self._mark_done(off)
            return True
        props = string_to_properties(msg.properties_string)
        props[MessageConst.TIMER_ENQUEUE_MS] = str(rec.store_timestamp)
        props[MessageConst.TIMER_DEQUEUE_MS] = str(now)
        msg.properties_string = properties_to_string(props)
        result = self.store.put_message_nowait(msg).result
        if not result.ok:
            log.error(
                "timer message %s for %s not delivered: %s %s",
                rec.msg_id, msg.topic, result.status.name, result.remark,
            )  # fmt: skip
            if result.status not in _PERMANENT_FAILURES:
                return False
        else:
            self.delivered += 1
            self.stats.record_put(msg.topic, 1, len(msg.body))
        self._count_done(msg.topic, result.ok)
        self._mark_done(off)
        return True

    # -- rolling ----------------------------------------------------------------------------
    def _roll_if_needed(self) -> bool:
        """Re-put the pending timers at the cursor to the tail while more than `roll_span` done
        units lie above it (what a restart would read for nothing); True when the batch limit
        left more to roll right away."""
        if len(self._done) <= self.roll_span:
            return False
        cq = self.store.queue(TIMER_TOPIC, TIMER_QUEUE_ID)
        if cq is None:
            return False
        more = True
        for _ in range(ROLL_BATCH):
            off = self._cursor  # never done: the lowest unit that is not
            if len(self._done) <= self.roll_span or off >= self._read:
                more = False
                break
            rec = self._record_at(cq, off)
            if rec is None:
                self._mark_done(off)
                continue
            if not self._roll(rec):
                return False  # the store refused it: the next pass tries again
            self._stale += 1  # its heap entry is dropped when it comes up
            self._mark_done(off)
        self._compact_heap()
        return more

    def _compact_heap(self) -> None:
        """Drop the heap entries of rolled timers once they are most of it."""
        if self._stale > 1024 and self._stale * 2 > len(self._heap):
            self._heap = [
                k for k in self._heap if (k & _MASK) >= self._cursor and (k & _MASK) not in self._done
            ]
            heapq.heapify(self._heap)
            self._stale = 0

    def _roll(self, rec: StoredRecord) -> bool:
        props = string_to_properties(rec.properties_string)
        times = props.get(MessageConst.TIMER_ROLL_TIMES, "0")
        props[MessageConst.TIMER_ROLL_TIMES] = str((int(times) if times.isdigit() else 0) + 1)
        copy = rec.reposted(TIMER_TOPIC, TIMER_QUEUE_ID, self.store_host, properties_to_string(props))
        result = self.store.put_message_nowait(copy).result
        if not result.ok:
            log.error("timer message %s not rolled: %s", rec.msg_id, result.status.name)
            return False
        self.rolled += 1
        self._count_done(rec.get_property(MessageConst.REAL_TOPIC) or "", False)  # counted again when read
        return True

    # -- the task ---------------------------------------------------------------------------
    async def _save(self) -> None:
        if self._dirty:
            self._snapshot()
            ok = await asyncio.get_running_loop().run_in_executor(None, self._write)
            self._dirty = self._dirty or not ok

    def _write(self) -> bool:
        """The copies under the snapshot to disk, then the snapshot (blocking)."""
        return self._flush_copies() and self.progress.persist()

    async def start(self) -> None:
        if not self.enabled:
            log.info("timer service idle (slave broker or timerWheelEnable=false)")
            return
        await self._due.start()

    async def close(self) -> None:
        await self._due.close()
        if self.enabled:
            self._snapshot()
            await asyncio.get_running_loop().run_in_executor(None, self._write)
