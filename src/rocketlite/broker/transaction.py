"""Transactional messages (4.x): half messages, END_TRANSACTION (37) and the check-back service.

1. **Half messages.** The send path calls `to_half_message` for a PREPARED send: the message moves
   to RMQ_SYS_TRANS_HALF_TOPIC queue 0 with REAL_TOPIC / REAL_QID set and the transaction bits
   reset to NOT (Java's `TransactionalMessageBridge.parseHalfMessageInner`), so it is stored and
   indexed but no consumer of the real topic can see it. TRAN_MSG and PGROUP stay; DELAY is
   dropped (the Java producer never sends it with a transaction, and a delayed half would be
   parked in the schedule topic instead).
2. **END_TRANSACTION** (usually one-way). The half is looked up by commitLogOffset and must match
   the header (PGROUP, queue offset, commit-log offset). COMMIT re-puts it to the real topic with
   sysFlag COMMIT and preparedTransactionOffset = the half's offset (REAL_*, TRAN_MSG removed);
   ROLLBACK stores nothing for consumers. Both then write an op message (tag "d", body = the
   half's queue offset) to RMQ_SYS_TRANS_OP_HALF_TOPIC, the durable record that the half is done.
   An end for a half already known to be done is acknowledged and ignored, so a late answer to a
   check cannot deliver a transaction twice (Java would).
3. **Check-back.** Every `transactionCheckInterval` the half queue is scanned from a progress
   cursor; halves with no op that are older than `transactionTimeOut` (or their
   CHECK_IMMUNITY_TIME_IN_SECONDS) get a one-way CHECK_TRANSACTION_STATE on one live connection of
   their producer group, whose body is the record re-encoded with the real topic and queue. After
   `transactionCheckMax` checks a half is copied to TRANS_CHECK_MAX_TIME_TOPIC and marked done.
   A producer's channel is anything with `closed`, `remote_address` and `oneway` (`CheckChannel`):
   a remoting connection, or a 5.x client's Telemetry stream, which turns the request into a
   RecoverOrphanedTransactionCommand (as Java's proxy does with its client channels).

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
import logging
import random
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Protocol

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.delay.levels import message_for_real_topic
from rocketlite.broker.processors.consumer_send_back import answer_after_flush
from rocketlite.broker.state_files import ConsumerOffsetTable
from rocketlite.broker.stats import BrokerStats
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.clock import Clock
from rocketlite.protocol import perm, reserved
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.formats.consume_queue_unit import Unit, is_padding
from rocketlite.protocol.formats.record import (
    MessageInner,
    RecordFormatError,
    StoredRecord,
    decode_record,
    encode_record,
)
from rocketlite.protocol.message import (
    HostAddress,
    MessageConst,
    MessageSysFlag,
    properties_to_string,
    string_to_properties,
)
from rocketlite.protocol.wire.command import RemotingCommand, make_request, make_response
from rocketlite.protocol.wire.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from rocketlite.remoting.connection import Connection, HandlerResult
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
MAX_SCAN_PER_PASS = 5_000  # half-queue units one check pass looks at (keeps the loop responsive)
_COMMIT_DROPS = (MessageConst.REAL_TOPIC, MessageConst.REAL_QUEUE_ID, MessageConst.TRANSACTION_PREPARED)


class CheckChannel(Protocol):
    """Where a check of a producer group's half goes: a remoting `Connection`, or a gRPC stream."""

    @property
    def closed(self) -> bool: ...

    @property
    def remote_address(self) -> str: ...

    def oneway(self, cmd: RemotingCommand) -> None: ...


ProducerChannels = Callable[[str], Sequence[CheckChannel]]

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


def no_producers(group: str) -> Sequence[CheckChannel]:
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
        # half queue offset -> op queue offset of the op that ended it
        self._resolved: dict[int, int] = {}
        self._check_counts: dict[int, int] = {}
        self._ending: set[int] = set()  # commits whose final put is still being flushed
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
        msg.topic = HALF_TOPIC
        msg.queue_id = HALF_QUEUE_ID
        self._ensure_topic(HALF_TOPIC)

    # -- END_TRANSACTION (37) ---------------------------------------------------------------
    def handle_end_transaction(self, conn: Connection, request: RemotingCommand) -> HandlerResult:
        header = EndTransactionRequestHeader.from_ext(request.ext_fields)
        if self.broker.is_slave:
            log.warning("END_TRANSACTION sent to a slave by %s", conn.remote_address)
            return make_response(request, ResponseCode.SLAVE_NOT_AVAILABLE)
        kind = header.commit_or_rollback
        source = "check answer" if header.from_transaction_check else "end"
        if kind not in (MessageSysFlag.TRANSACTION_COMMIT_TYPE, MessageSysFlag.TRANSACTION_ROLLBACK_TYPE):
            # UNKNOW (0) or nonsense: Java returns null, so no answer even to a two-way request.
            log.info(
                "transaction %s of group %s still unknown (%s from %s): %s",
                header.transaction_id, header.producer_group, source, conn.remote_address, request.remark,
            )  # fmt: skip
            return None
        half = self.store.look_message_by_offset(header.commit_log_offset)
        problem = self._mismatch(half, header)
        if problem is not None or half is None:
            return make_response(request, ResponseCode.SYSTEM_ERROR, problem)
        self._read_ops()
        if half.queue_offset in self._resolved or half.queue_offset in self._ending:
            log.warning(
                "half message %s (queue offset %d) already ended; %s ignored",
                half.msg_id, half.queue_offset, source,
            )  # fmt: skip
            return make_response(request, ResponseCode.SUCCESS)
        if kind == MessageSysFlag.TRANSACTION_ROLLBACK_TYPE:
            log.info(
                "transaction %s rolled back (%s): %s", header.transaction_id, source, request.remark or ""
            )
            self._write_op(half)
            return make_response(request, ResponseCode.SUCCESS)
        final = message_for_real_topic(half, self.store_host, drop=_COMMIT_DROPS)
        if final is None:
            return make_response(request, ResponseCode.SYSTEM_ERROR, "The half message has no real topic")
        final.sys_flag = (final.sys_flag & ~MessageSysFlag.TRANSACTION_MASK) | (
            MessageSysFlag.TRANSACTION_COMMIT_TYPE
        )
        final.prepared_transaction_offset = header.commit_log_offset
        target = final.topic
        self._ending.add(half.queue_offset)  # a duplicate arriving during a SYNC_FLUSH wait is ignored
        pending = self.store.put_message_nowait(final)

        def build(result: PutMessageResult) -> RemotingCommand:
            self._ending.discard(half.queue_offset)
            if not result.ok:
                code, remark = _FINAL_PUT_ERRORS.get(
                    result.status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR")
                )
                log.error("commit of %s to %s failed: %s", half.msg_id, target, result.status.name)
                return make_response(request, code, remark)
            self.stats.record_put(target, 1, len(final.body))
            self._write_op(half)
            return make_response(request, ResponseCode.SUCCESS)

        return answer_after_flush(self.store, pending, build)

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
        """One-way CHECK_TRANSACTION_STATE to one live producer of the half's group."""
        group = props.get(MessageConst.PRODUCER_GROUP, "")
        channels = [c for c in self.producer_channels(group) if not c.closed] if group else []
        if not channels:
            log.warning("cannot check half %s: no producer of group %r online", rec.msg_id, group)
            return False
        real_topic = props.get(MessageConst.REAL_TOPIC, rec.topic)
        real_qid = props.get(MessageConst.REAL_QUEUE_ID, "")
        props[MessageConst.TRANSACTION_CHECK_TIMES] = str(count)
        uniq = props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=rec.queue_offset,
            commit_log_offset=rec.physical_offset,
            msg_id=uniq,
            transaction_id=uniq,
            offset_msg_id=rec.msg_id,
        )
        body = encode_record(
            MessageInner(
                topic=real_topic,
                body=rec.body,
                born_host=rec.born_host,
                store_host=rec.store_host,
                queue_id=int(real_qid) if real_qid.lstrip("-").isdigit() else rec.queue_id,
                flag=rec.flag,
                sys_flag=rec.sys_flag,
                born_timestamp=rec.born_timestamp,
                reconsume_times=rec.reconsume_times,
                prepared_transaction_offset=rec.prepared_transaction_offset,
                properties_string=properties_to_string(props),
                store_timestamp=rec.store_timestamp,
                queue_offset=rec.queue_offset,
                commit_log_offset=rec.physical_offset,
            )
        )
        conn = self.rng.choice(channels)
        conn.oneway(make_request(RequestCode.CHECK_TRANSACTION_STATE, header.to_ext(), body))
        self.checks_sent += 1
        log.info("check %d of half %s sent to %s (group %s)", count, rec.msg_id, conn.remote_address, group)
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
