"""`ScheduleMessageService`: delivers delayed messages when their time comes.

The store parks a message with a `DELAY` level in SCHEDULE_TOPIC_XXXX queue level-1 (real topic and
queue in `REAL_TOPIC` / `REAL_QID`), and the consume-queue unit's tagsCode is the delivery time
(store time + the level's delay). Each level's queue is therefore ordered by delivery time, so one
cursor per level is enough: deliver units while their time has come, stop at the first that has
not. The cursors are `config/delayOffset.json` (`{"offsetTable":{1:12,2:0}}`, level -> next queue
offset), persisted every `persist_interval_s` and on close, as RocketMQ's ScheduleMessageService.

Timing (`due.DueDelivery`, shared with the 5.x timers): one asyncio task sleeps until
the earliest due time of all levels (a loop timer, not a poll), or until the dispatcher reports new
units in the schedule topic, with a safety tick in case a wake-up is ever missed. A message is
never delivered before its due time (checked against the wall clock after every wake-up) and
normally within a few milliseconds after.

Delivery (`messageTimeup`): the stored record is re-put to REAL_TOPIC / REAL_QID with every
property kept (body as stored, flags, born host and time, reconsume times, UNIQ_KEY, RETRY_TOPIC,
and DELAY, REAL_TOPIC and REAL_QID too: RocketMQ writes the copy's properties string before it
clears those from the copy's map). The copy is marked `delay_served`, so the store does not park
it again for its DELAY (Java's map no longer has one). Puts are synchronous appends, fine on the loop.
A put refused for a transient reason (disk full, shutting down) is retried after
`FAILURE_BACKOFF_S` from the same cursor; a message the store will never take (too large) is
logged and skipped, so one bad record cannot stall its level forever.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from rocketlite.broker.delay.due import FAILURE_BACKOFF_S, DueDelivery
from rocketlite.broker.state_files import DelayOffsetTable
from rocketlite.broker.stats import BrokerStats
from rocketlite.clock import Clock
from rocketlite.protocol import reserved
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.formats.consume_queue_unit import is_padding
from rocketlite.protocol.formats.record import MessageInner, RecordFormatError, StoredRecord, decode_record
from rocketlite.protocol.message import (
    HostAddress,
    MessageConst,
    properties_to_string,
    string_to_properties,
    tags_code,
)
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.remoting.connection import Connection
from rocketlite.store.api import StoreAPI
from rocketlite.store.results import PutMessageStatus

log = logging.getLogger("rocketlite.broker.schedule")

SCHEDULE_TOPIC = reserved.SCHEDULE_TOPIC
PERSIST_INTERVAL_S = 10.0  # flushDelayOffsetInterval
BATCH_PER_PASS = 256  # messages delivered (all levels together) before yielding to the event loop
_PERMANENT_FAILURES = frozenset({PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED})


def message_for_real_topic(
    record: StoredRecord,
    store_host: HostAddress,
    *,
    drop: tuple[str, ...] = (),
    delay_served: bool = False,
) -> MessageInner | None:
    """A copy of a parked record (schedule, timer or half topic) addressed to its REAL_TOPIC / REAL_QID.

    `drop` names the properties to remove; None if the record carries no usable real address.
    `delay_served`: the copy keeps its DELAY property but the store does not park it again.
    The store host is this broker's current one, so the new msgId points at a reachable broker.
    """
    props = string_to_properties(record.properties_string)
    topic = props.get(MessageConst.REAL_TOPIC)
    qid_text = props.get(MessageConst.REAL_QUEUE_ID, "")
    if not topic or not qid_text.lstrip("-").isdigit():
        return None
    for name in drop:
        props.pop(name, None)
    return record.reposted(
        topic, int(qid_text), store_host, properties_to_string(props),
        tags_code=tags_code(props.get(MessageConst.TAGS)), delay_served=delay_served,
    )  # fmt: skip


class ScheduleMessageService:
    """One cursor per delay level over SCHEDULE_TOPIC_XXXX, driven by a single asyncio task."""

    def __init__(
        self,
        store: StoreAPI,
        stats: BrokerStats,
        clock: Clock,
        store_host: HostAddress,
        config_dir: Path,
        delay_levels_ms: tuple[int, ...],
        *,
        enabled: bool = True,
        persist_interval_s: float = PERSIST_INTERVAL_S,
    ) -> None:
        self.store = store
        self.stats = stats
        self.clock = clock
        self.store_host = store_host
        self.delay_levels_ms = delay_levels_ms
        self.enabled = enabled
        self.persist_interval_s = persist_interval_s
        self.offsets = DelayOffsetTable(config_dir)
        self.delivered = 0
        self._budget = BATCH_PER_PASS
        self._dirty = False
        self._due = DueDelivery(
            store, SCHEDULE_TOPIC, "broker-schedule", self.deliver_due, self._save, persist_interval_s, log
        )

    # -- offsets ----------------------------------------------------------------------------
    def load(self) -> None:
        """Read delayOffset.json and clamp every cursor into its queue (`correctDelayOffset`)."""
        self.offsets.load()
        with self.offsets.lock:
            for level in range(1, len(self.delay_levels_ms) + 1):
                cq = self.store.queue(SCHEDULE_TOPIC, level - 1)
                if cq is None:
                    continue
                current = self.offsets.offset_table.get(level, 0)
                fixed = min(max(current, cq.min_offset), cq.max_offset)
                if fixed != current:
                    log.warning("delay level %d: offset %d corrected to %d", level, current, fixed)
                    self.offsets.offset_table[level] = fixed
                    self._dirty = True

    def offset_of(self, level: int) -> int:
        with self.offsets.lock:
            return self.offsets.offset_table.get(level, 0)

    def encode(self) -> str:
        """delayOffset.json's content (GET_ALL_DELAY_OFFSET, slave sync)."""
        with self.offsets.lock:
            return self.offsets.encode()

    def persist(self) -> None:
        self._dirty = not self.offsets.persist()

    # -- delivery ---------------------------------------------------------------------------
    def deliver_due(self) -> float | None:
        """Deliver every unit whose time has come; return seconds until the next one is due.

        None means nothing is waiting; 0 means more is due right away (a batch limit was hit).
        """
        now = self.clock.now_ms()
        earliest: int | None = None
        self._budget = BATCH_PER_PASS
        for level, delay_ms in enumerate(self.delay_levels_ms, start=1):
            due = self._deliver_level(level, delay_ms, now)
            if due is not None and (earliest is None or due < earliest):
                earliest = due
        if earliest is None:
            return None
        return max(0.0, (earliest - now) / 1000)

    def _deliver_level(self, level: int, delay_ms: int, now: int) -> int | None:
        """Advance one level's cursor; the due time (ms) of the first unit left, or None."""
        cq = self.store.queue(SCHEDULE_TOPIC, level - 1)
        if cq is None:
            return None
        stored = self.offset_of(level)
        offset = max(stored, cq.min_offset)
        next_due: int | None = None
        while offset < cq.max_offset:
            if self._budget <= 0:
                next_due = now  # more may be due: come back right after yielding
                break
            unit = cq.unit(offset)
            if unit is None:
                break
            if is_padding(unit):
                offset += 1
                continue
            phy, size, due = unit
            if due > now + delay_ms:
                # `correctDeliverTimestamp`: a time beyond now + delay (clock moved back, delay
                # table shortened) would stall the level; deliver it now instead.
                due = now
            if due > now:
                next_due = due
                break
            status = self._deliver_one(phy, size)
            if status is not None and status not in _PERMANENT_FAILURES:
                next_due = now + int(FAILURE_BACKOFF_S * 1000)
                break
            offset += 1
            self._budget -= 1
        if offset != stored:
            with self.offsets.lock:
                self.offsets.offset_table[level] = offset
            self._dirty = True
        return next_due

    def _deliver_one(self, phy: int, size: int) -> PutMessageStatus | None:
        """Re-put one parked record; the failure status, or None when done (or skipped)."""
        view = self.store.select_one_message_by_offset(phy, size)
        if view is None:
            log.warning("scheduled message at %d is gone from the commit log; skipped", phy)
            return None
        try:
            record = decode_record(view)
        except RecordFormatError as exc:
            log.error("scheduled message at %d unreadable (%s); skipped", phy, exc)
            return None
        finally:
            view.release()
        msg = message_for_real_topic(record, self.store_host, delay_served=True)
        if msg is None:
            log.error("scheduled message %s has no REAL_TOPIC/REAL_QID; skipped", record.msg_id)
            return None
        topic = msg.topic
        result = self.store.put_message_nowait(msg).result
        if not result.ok:
            log.error(
                "delayed message %s for %s could not be delivered: %s %s",
                record.msg_id, topic, result.status.name, result.remark,
            )  # fmt: skip
            return result.status
        self.delivered += 1
        wrote = result.append.wrote_bytes if result.append is not None else len(msg.body)
        self.stats.record_put(topic, 1, wrote, "delay")  # ScheduleMessageService: type DELAY
        return None

    # -- the task ---------------------------------------------------------------------------
    async def _save(self) -> None:
        if self._dirty:
            await asyncio.get_running_loop().run_in_executor(None, self.persist)

    async def start(self) -> None:
        if not self.enabled:
            log.info("schedule service idle (slave broker)")
            return
        await self._due.start()

    async def close(self) -> None:
        await self._due.close()
        if self.enabled:
            await asyncio.get_running_loop().run_in_executor(None, self.persist)

    # -- GET_ALL_DELAY_OFFSET (45) -----------------------------------------------------------
    def handle_get_all_delay_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        return make_response(request, ResponseCode.SUCCESS, body=self.encode().encode("utf-8"))
