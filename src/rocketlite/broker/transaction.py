"""Transactional messages (4.x): half messages, END_TRANSACTION (37) and the check-back service.

1. **Half messages.** The send path calls `to_half_message` for a PREPARED send: the message moves
   to RMQ_SYS_TRANS_HALF_TOPIC queue 0 with REAL_TOPIC / REAL_QID set and the transaction bits
   reset to NOT (Java's `TransactionalMessageBridge.parseHalfMessageInner`), so it is stored and
   indexed but no consumer of the real topic can see it. TRAN_MSG and PGROUP stay; DELAY is
   dropped (the Java producer never sends it with a transaction, and a delayed half would be
   parked in the schedule topic instead).
2. **END_TRANSACTION** (usually one-way). The half is looked up by commitLogOffset and must match
   the header (PGROUP, queue offset, commit-log offset). COMMIT re-puts it to the real topic with
   sysFlag COMMIT and preparedTransactionOffset = the half's offset, every property kept (REAL_*,
   TRAN_MSG, PGROUP: RocketMQ writes the copy's properties string before it clears REAL_*);
   ROLLBACK stores nothing for consumers. Both then write an op message (tag "d", body = the
   half's queue offset) to RMQ_SYS_TRANS_OP_HALF_TOPIC, the durable record that the half is done.
   An end for a half already known to be done is acknowledged and ignored, so a late answer to a
   check cannot deliver a transaction twice (Java would).
3. **Check-back.** Every `transactionCheckInterval` the half queue is scanned from a progress
   cursor; halves with no op that are older than `transactionTimeOut` (or their
   CHECK_IMMUNITY_TIME_IN_SECONDS) get a check pushed to one live peer of their producer group: a
   `remoting.peer.TransactionCheck`, the CHECK_TRANSACTION_STATE header and the half as its
   producer sent it (real topic and queue, TRANSACTION_CHECK_TIMES). A remoting connection sends
   it as the one-way CHECK_TRANSACTION_STATE, a 5.x client's Telemetry stream as a
   RecoverOrphanedTransactionCommand. After `transactionCheckMax` checks a half is copied to
   TRANS_CHECK_MAX_TIME_TOPIC and marked done.

END_TRANSACTION has a typed core, `end_transaction(header, peer)`, which the remoting handler and
the 5.x EndTransaction RPC both call.

Bookkeeping differs from Java on purpose: instead of re-putting a half after every check (which
doubles the half queue and needs TRAN_PREPARED_QUEUE_OFFSET to link the copies), check counts
live in memory (restart: counting starts again from the record's TRANSACTION_CHECK_TIMES, if any),
and the progress cursor only moves over halves that are done. The cursors are persisted the
Java way, as consumer offsets of group CID_RMQ_SYS_TRANS on the half and op topics; the op cursor
never passes an op whose half is still at or above the half cursor, so a restart rebuilds the
"done" set by re-reading those ops.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import struct
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from enum import Enum

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.delay.levels import message_for_real_topic
from rocketlite.broker.histogram import Histogram
from rocketlite.broker.processors.outcome import OK, Outcome, after_flush, command_later
from rocketlite.broker.state_files import ConsumerOffsetTable
from rocketlite.broker.stats import BrokerStats
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.clock import Clock
from rocketlite.protocol import perm, reserved
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.formats.consume_queue_unit import Unit, is_padding
from rocketlite.protocol.formats.record import MessageInner, RecordFormatError, StoredRecord, decode_record
from rocketlite.protocol.message import (
    HostAddress,
    MessageConst,
    MessageSysFlag,
    properties_to_string,
    string_to_properties,
)
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from rocketlite.remoting.connection import Connection, HandlerResult
from rocketlite.remoting.peer import Peer, TransactionCheck
from rocketlite.runtime import cancel_tasks
from rocketlite.store.api import StoreAPI
from rocketlite.store.results import PutMessageResult, PutMessageStatus

log = logging.getLogger("rocketlite.broker.transaction")

HALF_TOPIC = reserved.TRANS_HALF_TOPIC
OP_TOPIC = reserved.TRANS_OP_HALF_TOPIC
CHECK_MAX_TOPIC = reserved.TRANS_CHECK_MAX_TIME_TOPIC
HALF_QUEUE_ID = 0
REMOVE_TAG = "d"
SYS_TRANS_GROUP = "CID_RMQ_SYS_TRANS"  # MixAll.CID_SYS_RMQ_TRANS: owner of the two cursors
RESOLVED_WINDOW = 65_536  # done halves remembered below the cursor (late duplicate ends)
HALF_PLACES_MAX = 65_536  # halves whose place is remembered by UNIQ_KEY (5.x transaction ids)
FINISH_LATENCY_BUCKETS_S = (5.0, 60.0, 600.0, 3600.0, 43200.0, 86400.0)  # BrokerMetricsManager's view
MAX_SCAN_PER_PASS = 5_000  # half-queue units one check pass looks at (keeps the loop responsive)


ProducerChannels = Callable[[str], Sequence[Peer]]
"""The live peers of a producer group (the client manager's), where its checks go."""

# EndTransactionProcessor.sendFinalMessage: how a failed final put is answered.
_FINAL_PUT_ERRORS: dict[PutMessageStatus, tuple[ResponseCode, str]] = {
    PutMessageStatus.CREATE_MAPEDFILE_FAILED: (ResponseCode.SYSTEM_ERROR, "Create mapped file failed."),
    PutMessageStatus.MESSAGE_ILLEGAL: (
        ResponseCode.MESSAGE_ILLEGAL,
        "The message is illegal, maybe msg body or properties length not matched.",
    ),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: (
        ResponseCode.MESSAGE_ILLEGAL,
        "The message is illegal, maybe msg properties length limit 32k.",
    ),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "Service not available now.",
    ),
    PutMessageStatus.OS_PAGECACHE_BUSY: (
        ResponseCode.SYSTEM_ERROR,
        "OS page cache busy, please try another machine",
    ),
}


def no_producers(group: str) -> Sequence[Peer]:
    del group
    return []


class _Verdict(Enum):
    DONE = "done"  # nothing more to do for this half (discarded)
    CHECKED = "checked"  # a check was sent
    WAIT = "wait"  # not yet due, later halves may be
    STOP = "stop"  # not yet due, and neither are later halves


class TransactionalMessageService:
    """Half-message hook, END_TRANSACTION handler and check-back loop (one per broker)."""

    def __init__(
        self,
        broker: BrokerConfig,
        store: StoreAPI,
        topics: TopicConfigManager,
        offsets: ConsumerOffsetTable,
        stats: BrokerStats,
        clock: Clock,
        store_host: HostAddress,
        producer_channels: ProducerChannels = no_producers,
        rng: random.Random | None = None,
    ) -> None:
        self.broker = broker
        self.store = store
        self.topics = topics
        self.offsets = offsets
        self.stats = stats
        self.clock = clock
        self.store_host = store_host
        self.producer_channels = producer_channels
        self.rng = rng or random.Random()
        self.checks_sent = 0
        # RocketMQ 5's transaction metrics, by real topic (BrokerMetricsManager): commits,
        # rollbacks, halves not ended yet (counted from this start: halves stored before a
        # restart are not), and how long after its birth a transaction ended (seconds)
        self.commits: Counter[str] = Counter()
        self.rollbacks: Counter[str] = Counter()
        self.half_counts: Counter[str] = Counter()
        self.finish_latency: dict[str, Histogram] = {}
        # half queue offset -> op queue offset of the op that ended it
        self._resolved: dict[int, int] = {}
        self._check_counts: dict[int, int] = {}
        self._ending: set[int] = set()  # commits whose final put is still being flushed
        # UNIQ_KEY -> (commit-log offset, half-queue offset) of recent halves: what a 5.x
        # transaction id names (Java proxy's TransactionDataManager, filled at send and at checks)
        self._half_places: dict[str, tuple[int, int]] = {}
        self._half_progress = max(offsets.query(SYS_TRANS_GROUP, HALF_TOPIC, HALF_QUEUE_ID), 0)
        self._op_read = max(offsets.query(SYS_TRANS_GROUP, OP_TOPIC, HALF_QUEUE_ID), 0)
        self._task: asyncio.Task[None] | None = None

    def _ensure_topic(self, topic: str) -> None:
        if self.topics.select(topic) is None:
            self.topics.create_in_send_back(topic, 1, perm.PERM_READ | perm.PERM_WRITE)

    # -- half messages ----------------------------------------------------------------------
    def to_half_message(self, msg: MessageInner) -> None:
        """The send path's hook: park a PREPARED message in the half topic (in place)."""
        props = string_to_properties(msg.properties_string)
        props[MessageConst.REAL_TOPIC] = msg.topic
        props[MessageConst.REAL_QUEUE_ID] = str(msg.queue_id)
        props.pop(MessageConst.DELAY_TIME_LEVEL, None)
        msg.properties_string = properties_to_string(props)
        msg.sys_flag &= ~MessageSysFlag.TRANSACTION_MASK
        self.half_counts[msg.topic] += 1
        msg.topic = HALF_TOPIC
        msg.queue_id = HALF_QUEUE_ID
        self._ensure_topic(HALF_TOPIC)

    def _half_ended(self, topic: str) -> None:
        left = self.half_counts[topic] - 1
        if left > 0:
            self.half_counts[topic] = left
        else:
            self.half_counts.pop(topic, None)

    def _count_end(self, half: StoredRecord, committed: bool) -> None:
        topic = half.get_property(MessageConst.REAL_TOPIC) or ""
        self._half_ended(topic)
        (self.commits if committed else self.rollbacks)[topic] += 1
        if committed:
            hist = self.finish_latency.get(topic)
            if hist is None:
                hist = self.finish_latency[topic] = Histogram(FINISH_LATENCY_BUCKETS_S)
            hist.observe(max(self.clock.now_ms() - half.born_timestamp, 0) // 1000)

    # -- END_TRANSACTION (37) ---------------------------------------------------------------
    def handle_end_transaction(self, conn: Connection, request: RemotingCommand) -> HandlerResult:
        """END_TRANSACTION on the remoting port: the header decoded, `end_transaction`, the
        outcome as the answer (none for an UNKNOW)."""
        header = EndTransactionRequestHeader.from_ext(request.ext_fields)
        outcome = self.end_transaction(header, conn, request.remark)
        if outcome is None or isinstance(outcome, Outcome):
            return None if outcome is None else outcome.command(request)
        return command_later(request, outcome)

    def end_transaction(
        self, header: EndTransactionRequestHeader, peer: Peer, remark: str | None = None
    ) -> Outcome | Awaitable[Outcome] | None:
        """The typed core: COMMIT or ROLLBACK of the half at `header.commit_log_offset`. None for
        UNKNOW (0) or nonsense: left for the check-back, with no answer (Java returns null, so
        not even a two-way request gets one). `remark`: the producer's note, logged."""
        if self.broker.is_slave:
            log.warning("END_TRANSACTION sent to a slave by %s", peer.remote_address)
            return Outcome(ResponseCode.SLAVE_NOT_AVAILABLE)
        kind = header.commit_or_rollback
        source = "check answer" if header.from_transaction_check else "end"
        if kind not in (MessageSysFlag.TRANSACTION_COMMIT_TYPE, MessageSysFlag.TRANSACTION_ROLLBACK_TYPE):
            log.info(
                "transaction %s of group %s still unknown (%s from %s): %s",
                header.transaction_id, header.producer_group, source, peer.remote_address, remark,
            )  # fmt: skip
            return None
        half = self.store.look_message_by_offset(header.commit_log_offset)
        problem = self._mismatch(half, header)
        if problem is not None or half is None:
            return Outcome(ResponseCode.SYSTEM_ERROR, problem)
        self._read_ops()
        if half.queue_offset in self._resolved or half.queue_offset in self._ending:
            log.warning(
                "half message %s (queue offset %d) already ended; %s ignored",
                half.msg_id, half.queue_offset, source,
            )  # fmt: skip
            return OK
        if kind == MessageSysFlag.TRANSACTION_ROLLBACK_TYPE:
            log.info("transaction %s rolled back (%s): %s", header.transaction_id, source, remark or "")
            self._write_op(half)
            self._count_end(half, committed=False)
            return OK
        final = message_for_real_topic(half, self.store_host)  # every property kept, REAL_* too
        if final is None:
            return Outcome(ResponseCode.SYSTEM_ERROR, "The half message has no real topic")
        final.sys_flag = (final.sys_flag & ~MessageSysFlag.TRANSACTION_MASK) | (
            MessageSysFlag.TRANSACTION_COMMIT_TYPE
        )
        final.prepared_transaction_offset = header.commit_log_offset
        target = final.topic
        self._ending.add(half.queue_offset)  # a duplicate arriving during a SYNC_FLUSH wait is ignored
        pending = self.store.put_message_nowait(final)

        def build(result: PutMessageResult) -> Outcome:
            self._ending.discard(half.queue_offset)
            if not result.ok:
                code, why = _FINAL_PUT_ERRORS.get(result.status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"))
                log.error("commit of %s to %s failed: %s", half.msg_id, target, result.status.name)
                return Outcome(code, why)
            self.stats.record_put(target, 1, len(final.body))
            self._write_op(half)
            self._count_end(half, committed=True)
            return OK

        return after_flush(self.store, pending, build)

    def remember_half(self, uniq_key: str, commit_log_offset: int, queue_offset: int) -> None:
        """A half just stored or checked: where it lies, by the id its 5.x producer holds."""
        places = self._half_places
        if len(places) >= HALF_PLACES_MAX:
            del places[next(iter(places))]  # the oldest
        places[uniq_key] = (commit_log_offset, queue_offset)

    def find_half(self, uniq_key: str, topic: str) -> tuple[int, int] | None:
        """(commit-log offset, half-queue offset) of message `uniq_key`'s half in `topic` (a 5.x
        transaction id is the message id, as RocketMQ's proxy answers): remembered at its send or
        its last check, else (after a restart) found through the index of the half topic."""
        found = self._half_places.get(uniq_key)
        if found is not None:
            return found
        result = self.store.query_message(HALF_TOPIC, uniq_key, 32, 0, self.clock.now_ms())
        try:
            for view in result.messages:
                try:
                    rec = decode_record(view)
                except RecordFormatError:
                    continue
                uniq = rec.get_property(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
                if uniq == uniq_key and rec.get_property(MessageConst.REAL_TOPIC) == topic:
                    found = (rec.physical_offset, rec.queue_offset)  # the last stored wins
        finally:
            for view in result.messages:
                view.release()
        return found

    def half_problem(
        self, commit_log_offset: int, queue_offset: int, topic: str, message_id: str
    ) -> str | None:
        """Why the record at `commit_log_offset` is not message `message_id`'s half in `topic` at
        half-queue offset `queue_offset`, or None (what a 5.x transaction id must name)."""
        try:
            half = self.store.look_message_by_offset(commit_log_offset)
        except (ValueError, IndexError, struct.error):  # a forged offset inside a record
            half = None
        if half is None or half.topic != HALF_TOPIC or half.queue_offset != queue_offset:
            return "no half message there"
        if half.get_property(MessageConst.REAL_TOPIC) != topic:
            return f"the half message is not in topic {topic!r}"
        if message_id and half.get_property(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) != message_id:
            return f"the half message is not message {message_id!r}"
        return None

    @staticmethod
    def _mismatch(half: StoredRecord | None, header: EndTransactionRequestHeader) -> str | None:
        """`checkPrepareMessage`: why the record cannot be this transaction's half, or None."""
        if half is None or half.topic != HALF_TOPIC:
            return "Find prepared transaction message failed"
        if half.get_property(MessageConst.PRODUCER_GROUP) != header.producer_group:
            return "The producer group wrong"
        if half.queue_offset != header.tran_state_table_offset:
            return "The transaction state table offset wrong"
        if half.physical_offset != header.commit_log_offset:
            return "The commit log offset wrong"
        return None

    # -- op messages ------------------------------------------------------------------------
    def _write_op(self, half: StoredRecord) -> bool:
        """Record durably that `half` is done (Java's `addRemoveTagInTransactionOp`)."""
        self._ensure_topic(OP_TOPIC)
        now = self.clock.now_ms()
        op = MessageInner(
            topic=OP_TOPIC,
            body=str(half.queue_offset).encode("ascii"),
            born_host=self.store_host,
            store_host=self.store_host,
            queue_id=half.queue_id,
            born_timestamp=now,
            properties_string=properties_to_string({MessageConst.TAGS: REMOVE_TAG}),
        )
        result = self.store.put_message_nowait(op).result
        if not result.ok or result.append is None:
            log.error("op message for half %s not stored: %s", half.msg_id, result.status.name)
            return False
        self._resolved.setdefault(half.queue_offset, result.append.logics_offset)
        return True

    def _record_at(self, unit: Unit) -> StoredRecord | None:
        view = self.store.select_one_message_by_offset(unit[0], unit[1])
        if view is None:
            return None
        try:
            return decode_record(view)
        except RecordFormatError:
            return None
        finally:
            view.release()

    def _read_ops(self) -> None:
        """Learn which halves are done from the op queue entries not read yet."""
        cq = self.store.queue(OP_TOPIC, HALF_QUEUE_ID)
        if cq is None:
            return
        offset = max(self._op_read, cq.min_offset)
        while offset < cq.max_offset:
            unit = cq.unit(offset)
            if unit is None:
                break
            rec = None if is_padding(unit) else self._record_at(unit)
            if rec is not None and rec.tags == REMOVE_TAG:
                # 4.x writes one offset per op; 5.x may join several with commas.
                for token in rec.body.decode("ascii", "replace").split(","):
                    if token.strip().isdigit():
                        self._resolved.setdefault(int(token), offset)
            offset += 1
        self._op_read = offset

    # -- check-back -------------------------------------------------------------------------
    def check_once(self) -> int:
        """One scan of the half queue (`TransactionalMessageServiceImpl.check`); checks sent."""
        cq = self.store.queue(HALF_TOPIC, HALF_QUEUE_ID)
        if cq is None:
            return 0
        self._read_ops()
        now = self.clock.now_ms()
        progress = offset = max(self._half_progress, cq.min_offset)
        end = min(cq.max_offset, offset + MAX_SCAN_PER_PASS)
        blocked = False
        sent = 0
        while offset < end:
            unit = cq.unit(offset)
            if unit is None:
                break
            done = is_padding(unit) or offset in self._resolved
            if not done:
                rec = self._record_at(unit)
                verdict = _Verdict.DONE if rec is None else self._check_half(rec, offset, now)
                if verdict is _Verdict.STOP:
                    break
                done = verdict is _Verdict.DONE
                sent += verdict is _Verdict.CHECKED
            if done and not blocked:
                progress = offset + 1
            blocked = blocked or not done
            offset += 1
        self._half_progress = progress
        self._forget_below(progress)
        self._save_progress()
        return sent

    def _check_half(self, rec: StoredRecord, offset: int, now: int) -> _Verdict:
        if rec.store_timestamp > now:
            return _Verdict.STOP
        props = string_to_properties(rec.properties_string)
        age = now - rec.born_timestamp
        immunity = props.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS, "")
        if immunity.isdigit():
            if 0 <= age < int(immunity) * 1000:
                return _Verdict.WAIT
        elif 0 <= age < self.broker.transaction_timeout:
            return _Verdict.STOP
        count = self._check_counts.get(offset)
        if count is None:
            text = props.get(MessageConst.TRANSACTION_CHECK_TIMES, "0")
            count = int(text) if text.isdigit() else 0
        expired = age > self.store.config.file_reserved_time * 3_600_000
        if count >= self.broker.transaction_check_max or expired:
            return _Verdict.DONE if self._discard(rec) else _Verdict.WAIT
        self._check_counts[offset] = count + 1  # counted even with no producer online, as Java
        return _Verdict.CHECKED if self._send_check(rec, props, count + 1) else _Verdict.WAIT

    def _send_check(self, rec: StoredRecord, props: dict[str, str], count: int) -> bool:
        """A check pushed to one live producer peer of the half's group."""
        group = props.get(MessageConst.PRODUCER_GROUP, "")
        peers = [c for c in self.producer_channels(group) if not c.closed] if group else []
        if not peers:
            log.warning("cannot check half %s: no producer of group %r online", rec.msg_id, group)
            return False
        real_topic = props.get(MessageConst.REAL_TOPIC, rec.topic)
        real_qid = props.get(MessageConst.REAL_QUEUE_ID, "")
        props[MessageConst.TRANSACTION_CHECK_TIMES] = str(count)
        uniq = props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if uniq:
            self.remember_half(uniq, rec.physical_offset, rec.queue_offset)
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=rec.queue_offset,
            commit_log_offset=rec.physical_offset,
            msg_id=uniq,
            transaction_id=uniq,
            offset_msg_id=rec.msg_id,
        )
        shown = dataclasses.replace(  # the half as its producer sent it (Java's sendCheckMessage)
            rec,
            topic=real_topic,
            queue_id=int(real_qid) if real_qid.lstrip("-").isdigit() else rec.queue_id,
            properties_string=properties_to_string(props),
        )
        peer = self.rng.choice(peers)
        peer.push(TransactionCheck(header, shown))
        self.checks_sent += 1
        log.info("check %d of half %s sent to %s (group %s)", count, rec.msg_id, peer.remote_address, group)
        return True

    def _discard(self, rec: StoredRecord) -> bool:
        """Checked too often (or too old): keep a copy in TRANS_CHECK_MAX_TIME_TOPIC, end the half."""
        self._ensure_topic(CHECK_MAX_TOPIC)
        copy = MessageInner(
            topic=CHECK_MAX_TOPIC,
            body=rec.body,
            born_host=rec.born_host,
            store_host=self.store_host,
            queue_id=0,
            flag=rec.flag,
            sys_flag=rec.sys_flag,
            born_timestamp=rec.born_timestamp,
            reconsume_times=rec.reconsume_times,
            properties_string=rec.properties_string,
        )
        result = self.store.put_message_nowait(copy).result
        if not result.ok:
            log.error("half %s not moved to %s: %s", rec.msg_id, CHECK_MAX_TOPIC, result.status.name)
            return False
        log.warning("half message %s checked too often; moved to %s", rec.msg_id, CHECK_MAX_TOPIC)
        self._half_ended(rec.get_property(MessageConst.REAL_TOPIC) or "")
        return self._write_op(rec)

    def _forget_below(self, progress: int) -> None:
        self._check_counts = {k: v for k, v in self._check_counts.items() if k >= progress}
        if len(self._resolved) > RESOLVED_WINDOW:
            floor = progress - RESOLVED_WINDOW
            self._resolved = {k: v for k, v in self._resolved.items() if k >= floor}

    def _save_progress(self) -> None:
        """Persist both cursors as CID_RMQ_SYS_TRANS consumer offsets (Java's layout)."""
        pending = [op for half, op in self._resolved.items() if half >= self._half_progress]
        op_progress = min(pending) if pending else self._op_read
        self.offsets.commit(SYS_TRANS_GROUP, HALF_TOPIC, HALF_QUEUE_ID, self._half_progress)
        self.offsets.commit(SYS_TRANS_GROUP, OP_TOPIC, HALF_QUEUE_ID, op_progress)

    async def _check_loop(self) -> None:
        interval = max(self.broker.transaction_check_interval, 10) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.check_once()
            except Exception:
                log.exception("transaction check pass failed")

    # -- service ----------------------------------------------------------------------------
    async def start(self) -> None:
        if not self.broker.is_slave:
            self._task = asyncio.create_task(self._check_loop(), name="broker-transaction-check")

    async def close(self) -> None:
        task, self._task = self._task, None
        await cancel_tasks(task)
