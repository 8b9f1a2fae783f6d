"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320): a producer's send.

One typed core serves both ports: `put(SendRequest, peer) -> PutOutcome`. The remoting handler
(`handle_wire`) decodes the frame into a `SendRequest` and encodes the outcome; the 5.x gRPC
endpoint (`broker/grpc/send.py`) converts its protobuf message into the same request. For each
request: check it (`msg_check`: broker permission, reserved topics, topic name, auto-create from
TBW102, queue id), pick a random writable queue when queueId < 0, redirect retries that exhausted
their attempts to `%DLQ%group` (`handle_retry_and_dlq`), build the stored message (born host = the
peer's address, store host = brokerIP1:listenPort, CLUSTER property added, WAIT removed), append
it, and answer with msgId / queueId / queueOffset (plus MSG_REGION and TRACE_ON on the remoting
port). With ASYNC_FLUSH the outcome is there at once; with SYNC_FLUSH the core awaits the group
commit, bounded by `syncFlushTimeout`, and answers FLUSH_DISK_TIMEOUT when it runs out (the
message is stored). On a SYNC_MASTER it then awaits the slave (`replica`, see ha/master.py):
FLUSH_SLAVE_TIMEOUT when the slave does not acknowledge within `syncFlushTimeout`,
SLAVE_NOT_AVAILABLE when no slave is in sync (the message is stored in both cases, as RocketMQ's
`handleHA`).

The remoting send stays frame -> record -> answer: the header letters are decoded by the compiled
fill, a batch body is encoded straight into its commit-log records (no message object per entry),
and a stored send's answer is written as a whole frame from the outcome's values
(`speedups.encode_send_ok`).

Everything that can change a send is a constructor argument of `SendMessageProcessor`: besides
the store and the topic / group tables, `half_message_hook` (the transaction service turns a
PREPARED message into a half message; None refuses transactional sends), `timer_hook` (the timer
service parks a 5.x timer message, one with TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS,
in the timer topic; None refuses them, as RocketMQ with timerWheelEnable=false) and `replica` (a
SYNC_MASTER's HA service; None everywhere else). The controller builds it; nothing sets them later.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Final, Protocol

from rocketlite.broker.config import BrokerConfig, BrokerRole
from rocketlite.broker.delay.timer.park import asks_for_timer
from rocketlite.broker.stats import NORMAL, BrokerStats, message_type
from rocketlite.broker.subscription_group import SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.clock import Clock
from rocketlite.protocol import perm, reserved
from rocketlite.protocol.bodies.route import TopicConfig
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.formats.batch import BATCH_DELAYED_ENTRY, BatchTarget
from rocketlite.protocol.formats.record import MessageInner
from rocketlite.protocol.formats.speedups import encode_batch_records, encode_group, send_properties
from rocketlite.protocol.message import HostAddress, MessageSysFlag
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.protocol.wire.headers import SendMessageRequestHeader
from rocketlite.protocol.wire.send_response import send_ok_command, send_ok_ext
from rocketlite.protocol.wire.speedups import decode_send_header_v2, encode_send_ok
from rocketlite.remoting.connection import Connection, WireResult
from rocketlite.remoting.peer import Peer
from rocketlite.runtime import result_within
from rocketlite.store.api import StoreAPI
from rocketlite.store.results import AppendResult, PendingPut, PutMessageResult, PutMessageStatus

log = logging.getLogger("rocketlite.broker.send")

# Retries beyond this go to the DLQ when the group is unknown to the header (RocketMQ default).
DEFAULT_MAX_RECONSUME_TIMES = 16
DLQ_NUMS_PER_GROUP = 1

_STATUS_RESPONSES: dict[PutMessageStatus, tuple[ResponseCode, str | None]] = {
    PutMessageStatus.PUT_OK: (ResponseCode.SUCCESS, None),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.FLUSH_DISK_TIMEOUT, None),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.FLUSH_SLAVE_TIMEOUT, None),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SLAVE_NOT_AVAILABLE, None),
    PutMessageStatus.CREATE_MAPEDFILE_FAILED: (
        ResponseCode.SYSTEM_ERROR,
        "create mapped file failed, server is busy or broken.",
    ),
    PutMessageStatus.MESSAGE_ILLEGAL: (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message is illegal, maybe msg body or properties length not matched. "
        "msg body length limit {max}, msg properties length limit 32k.",
    ),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message is illegal, maybe msg properties length limit 32k.",
    ),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now. It may be caused by one of the following reasons: "
        "the broker's disk is full, messages are put to the slave, message store has been shut down, etc.",
    ),
    PutMessageStatus.OS_PAGECACHE_BUSY: (
        ResponseCode.SYSTEM_BUSY,
        "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
    ),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
    # RocketMQ 5 has no response code of its own for it: SYSTEM_ERROR with this remark
    PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH: (ResponseCode.SYSTEM_ERROR, "in-sync replicas not enough"),
}

SYSTEM_BUSY_REMARK = "[REJECTREQUEST]system busy, start flow control for a while"
_NO_TIMER_REMARK = "accurate timer message is not enabled, timerWheelEnable is false"

# Topic names already found legal and sendable (name rule, not reserved): a pure function of the
# name, so remembered; bounded so that a client inventing names cannot grow it without end.
_LEGAL_TOPICS_MAX = 4096
_V2_CODES = SendMessageRequestHeader.V2_CODES
_BATCH: Final = int(RequestCode.SEND_BATCH_MESSAGE)
_SUCCESS: Final = int(ResponseCode.SUCCESS)
_RETRY_PREFIX = reserved.RETRY_GROUP_TOPIC_PREFIX
_MULTI_TAGS_FLAG = MessageSysFlag.MULTI_TAGS_FLAG
_TRANSACTION_MASK = MessageSysFlag.TRANSACTION_MASK
_TRANSACTION_PREPARED = MessageSysFlag.TRANSACTION_PREPARED_TYPE
_PUT_OK = PutMessageStatus.PUT_OK
_PERM_WRITE = perm.PERM_WRITE
_SLAVE = BrokerRole.SLAVE

# The transaction service's `to_half_message`: turns a prepared message into a half message.
HalfMessageHook = Callable[[MessageInner], None]
# The timer service's `park`: moves a timer message to the timer topic; raises for bad values.
TimerHook = Callable[[MessageInner], None]
_JAVA_INT_MIN, _JAVA_INT_MAX = -(2**31), 2**31 - 1


def is_java_int(text: str) -> bool:
    """Whether Java's `Integer.parseInt` takes `text` (a sign, ASCII digits, within an int)."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    return digits.isascii() and digits.isdigit() and _JAVA_INT_MIN <= int(text) <= _JAVA_INT_MAX


_TIMER_NEEDLE = "TIMER_"  # in every timer property name: nothing more is looked at without it


class ReplicaWaiter(Protocol):
    """A SYNC_MASTER's HA service: PUT_OK once a slave holds the log up to `end_offset`;
    `accepts_put`: False refuses a put before it is stored (IN_SYNC_REPLICAS_NOT_ENOUGH: in
    controller mode, a SyncStateSet smaller than `minInSyncReplicas`)."""

    def accepts_put(self) -> bool: ...

    async def wait_replicated(self, end_offset: int) -> PutMessageStatus: ...


@dataclass(slots=True)
class SendRequest:
    """One send, as either port gives it: the SendMessageRequestHeader's values (typed), the body,
    whether the body is a SEND_BATCH_MESSAGE body (entries as `MessageBatch` encodes them) rather
    than one message's, and the client's `MQVersion` ordinal (a retry's maxReconsumeTimes counts
    from V3_4_9)."""

    header: SendMessageRequestHeader
    body: bytes
    batch: bool = False
    version: int = 0


@dataclass(slots=True)
class PutOutcome:
    """The answer to a send, for either port. `code` and `remark` are the remoting answer's; a
    stored message (SUCCESS, or stored with its flush or replication timed out) also has where it
    lies: `msg_id` (the offset msg id; comma-joined for a batch), `queue_id`, `queue_offset`,
    `commit_log_offset` (of the first record) and `transaction_id` (a single message's UNIQ_KEY,
    as RocketMQ 5 answers; none for a batch). A refusal or a failed put has no `msg_id`."""

    code: int
    remark: str | None = None
    msg_id: str = ""
    queue_id: int = 0
    queue_offset: int = 0
    commit_log_offset: int = -1
    transaction_id: str | None = None


def born_host_of(peer: Peer) -> HostAddress:
    """The peer's address as a born host, parsed once and kept in its `attrs`."""
    attrs = peer.attrs
    host = attrs.get("born_host")
    if host is None:
        try:
            host = HostAddress.parse(peer.remote_address)
        except ValueError:
            host = HostAddress(b"\x7f\x00\x00\x01", 0)
        attrs["born_host"] = host
    assert isinstance(host, HostAddress)
    return host


class SendMessageProcessor:
    """Handles the three send codes; collaborators are passed in, nothing reaches back.

    `half_message_hook`: what a PREPARED (transactional) message goes through before it is stored;
    None refuses transactional sends (NO_PERMISSION). `replica`: on a SYNC_MASTER, the HA service a
    send waits on after its flush; None answers once the local put (and flush) is done.
    """

    def __init__(
        self,
        broker: BrokerConfig,
        store: StoreAPI,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        stats: BrokerStats,
        clock: Clock,
        store_host: HostAddress,
        *,
        half_message_hook: HalfMessageHook | None,
        replica: ReplicaWaiter | None,
        timer_hook: TimerHook | None = None,
    ) -> None:
        self.broker = broker
        self.store = store
        self.topics = topics
        self.groups = groups
        self.stats = stats
        self.clock = clock
        self.store_host = store_host
        self.start_accept_send_ms = 0
        self.half_message_hook = half_message_hook
        self.timer_hook = timer_hook
        self.replica = replica
        self.rng = random.Random()
        self.flush_waiters = 0  # SYNC_FLUSH sends awaiting the group commit (flow control)
        self._legal_topics: set[str] = set()

    @property
    def legal_topics(self) -> set[str]:
        """The topic names this processor has found legal (the name rule, not a reserved topic),
        live: the coalescing lanes (`send_group.py`, the 5.x `grpc/send_lane.py`) take a request
        only when its topic is in it, so a name is always judged, and a bad one answered, by the
        processor first. A `set` (not a read-only view) because the compiled gather reads it as
        one; the lanes only read it, and only `_check_topic_name` adds to it."""
        return self._legal_topics

    # -- checks -----------------------------------------------------------------------------
    def msg_check(self, header: SendMessageRequestHeader, remote: str) -> TopicConfig:
        """RocketMQ's `AbstractSendMessageProcessor.msgCheck`; raises with the answer to give."""
        b = self.broker
        if not b.broker_permission & _PERM_WRITE and reserved.is_sys_topic(header.topic) is False:
            raise RocketliteError(
                f"the broker[{b.broker_ip1}] sending message is forbidden", code=ResponseCode.NO_PERMISSION
            )
        if header.topic not in self._legal_topics:
            self._check_topic_name(header.topic)
        tc = self.topics.select(header.topic)
        if tc is None:
            sys_flag = 1 if header.unit_mode else 0  # TopicSysFlag.FLAG_UNIT
            if header.topic.startswith(reserved.RETRY_GROUP_TOPIC_PREFIX):
                tc = self.topics.create_in_send_back(
                    header.topic, 1, perm.PERM_READ | perm.PERM_WRITE, sys_flag
                )
            else:
                tc = self.topics.create_in_send(
                    header.topic,
                    header.default_topic,
                    header.default_topic_queue_nums,
                    sys_flag,
                    creator=f"{remote} (producer group {header.producer_group})",
                )
            if tc is None:
                log.warning("send from %s to unknown topic %s refused", remote, header.topic)
                raise RocketliteError(
                    f"topic[{header.topic}] not exist, apply first please! "
                    "See http://rocketmq.apache.org/docs/faq/",
                    code=ResponseCode.TOPIC_NOT_EXIST,
                )
        if not tc.perm & _PERM_WRITE:  # `perm.is_writeable`
            raise RocketliteError(
                f"the topic[{header.topic}] sending message is forbidden", code=ResponseCode.NO_PERMISSION
            )
        queue_id = header.queue_id
        if queue_id >= tc.write_queue_nums and queue_id >= tc.read_queue_nums:  # max() of the two
            raise RocketliteError(f"request queueId[{header.queue_id}] is illegal, {tc} Producer: {remote}")
        return tc

    def _check_topic_name(self, topic: str) -> None:
        """The name rule and the reserved topics; a name that passes is remembered."""
        problem = perm.topic_name_problem(topic)
        if problem is not None:
            raise RocketliteError(problem)
        if topic in reserved.NOT_ALLOWED_SEND_TOPICS:
            raise RocketliteError(
                f"Sending message to topic[{topic}] is forbidden.", code=ResponseCode.NO_PERMISSION
            )
        if len(self._legal_topics) >= _LEGAL_TOPICS_MAX:
            self._legal_topics.clear()
        self._legal_topics.add(topic)

    def handle_retry_and_dlq(
        self, header: SendMessageRequestHeader, topic: str, queue_id: int, request_version: int
    ) -> tuple[str, int]:
        """A send to %RETRY%group past its max reconsume times goes to %DLQ%group instead."""
        if not topic.startswith(reserved.RETRY_GROUP_TOPIC_PREFIX):
            return topic, queue_id
        group = topic[len(reserved.RETRY_GROUP_TOPIC_PREFIX) :]
        cfg = self.groups.find(group)
        if cfg is None:
            raise RocketliteError(
                f"subscription group not exist, {group} See http://rocketmq.apache.org/docs/faq/",
                code=ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
            )
        max_times = cfg.retry_max_times
        if request_version >= 121 and header.max_reconsume_times is not None:  # V3_4_9
            max_times = header.max_reconsume_times
        if (header.reconsume_times or 0) > max_times:
            dlq = reserved.dlq_topic(group)
            self.topics.create_in_send_back(dlq, DLQ_NUMS_PER_GROUP, perm.PERM_READ | perm.PERM_WRITE)
            return dlq, self.rng.randrange(DLQ_NUMS_PER_GROUP)
        return topic, queue_id

    def reject_request(self) -> bool:
        """RocketMQ's `rejectRequest`: too many sends wait on the disk, or every segment write
        buffer is taken. Either way more sends would only queue up in memory."""
        return (
            self.flush_waiters >= self.broker.max_sync_flush_waiters
            or self.store.transient_store_pool_deficient()
        )

    def accepts_group(self) -> bool:
        """Whether sends may go in as one grouped append now (`StoreAPI.put_group_nowait`), which
        every coalescing lane asks before its own conditions (else `_put` serves and answers them):
        the group codecs compiled, no slave to wait on, a writable master, a store that takes
        grouped appends (ASYNC_FLUSH, writable), past the start-accept time, not rejecting sends."""
        b = self.broker
        return (
            encode_group is not None and self.replica is None and b.broker_role is not _SLAVE
            and bool(b.broker_permission & _PERM_WRITE) and self.store.takes_group()
            and not (self.start_accept_send_ms and self.clock.now_ms() < self.start_accept_send_ms)
            and not self.reject_request()
        )  # fmt: skip

    # -- the typed core ---------------------------------------------------------------------
    def put(
        self, request: SendRequest, peer: Peer, *, paced: bool = False
    ) -> PutOutcome | Awaitable[PutOutcome]:
        """Serve one send from either port. A refusal by the checks (`msg_check`, a retry whose
        group is unknown, a bad timer property, a torn batch body) raises `RocketliteError` with
        its response code; every other answer is a `PutOutcome`, at once when there is nothing to
        wait for (ASYNC_FLUSH, no slave to wait on), else once the flush (and the slave) is done.
        `paced`: this message's dispatch round may be shared with the next requests' (the 5.x
        endpoint's sends, which arrive one RPC at a time; see `store/dispatch.py`)."""
        outcome = self._put(request.header, request.body, request.batch, request.version, peer, paced, None)
        assert not isinstance(outcome, bytes)  # only for a `wire` request
        return outcome

    def _put(
        self,
        header: SendMessageRequestHeader,
        body: bytes,
        batch: bool,
        version: int,
        peer: Peer,
        paced: bool,
        wire: RemotingCommand | None,
    ) -> PutOutcome | Awaitable[PutOutcome] | bytes:
        """`put` on the request's fields: the remoting adapter calls it without building the
        `SendRequest` around them (one object less per message on the broker's hottest path).
        `wire`: the remoting request, whose common answer (a single message stored, nothing to
        wait for) is then returned as its encoded frame (`speedups.encode_send_ok`) rather than
        as a `PutOutcome` that `handle_wire` would take apart again; every other answer is the
        same `PutOutcome` either port gets."""
        if self.start_accept_send_ms and self.clock.now_ms() < self.start_accept_send_ms:
            return PutOutcome(
                ResponseCode.SYSTEM_ERROR, f"broker unable to service, until {self.start_accept_send_ms}"
            )
        broker = self.broker
        if broker.broker_role is _SLAVE:  # `broker.is_slave`
            return PutOutcome(ResponseCode.SERVICE_NOT_AVAILABLE, "the broker is a slave")
        if self.reject_request():
            return PutOutcome(ResponseCode.SYSTEM_BUSY, SYSTEM_BUSY_REMARK)
        tc = self.msg_check(header, peer.remote_address)
        if self.replica is not None and not self.replica.accepts_put():  # before the append, as RocketMQ
            code, remark = _STATUS_RESPONSES[PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH]
            return PutOutcome(code, remark)
        queue_id = (
            header.queue_id if header.queue_id >= 0 else self.rng.randrange(max(tc.write_queue_nums, 1))
        )
        if batch:
            return self._put_batch(header, body, queue_id, peer, paced)
        topic = header.topic
        if topic.startswith(_RETRY_PREFIX):
            topic, queue_id = self.handle_retry_and_dlq(header, topic, queue_id, version)
        # WAIT dropped, CLUSTER set; the UNIQ_KEY is the answer's transactionId (RocketMQ 5.x's
        # `MessageClientIDSetter.getUniqID`, for every message, not only a prepared one)
        properties, _tags_code, uniq_key, _keys, delay = send_properties(
            header.properties or "", broker.broker_cluster_name
        )
        if delay is not None and not is_java_int(delay):
            # RocketMQ parses it with Integer.parseInt and fails the send (SYSTEM_ERROR, a
            # NumberFormatException); the store would otherwise take it as "not delayed".
            return PutOutcome(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the message is illegal: DELAY={delay!r} is not a delay level (a whole number; "
                f"1..{len(self.store.config.delay_levels_ms)} here, 0 or less for none)",
            )
        sys_flag = header.sys_flag
        if tc.topic_filter_type == "MULTI_TAG":
            sys_flag |= _MULTI_TAGS_FLAG
        host = peer.attrs.get("born_host")
        msg = MessageInner(
            topic, body, host if host is not None else born_host_of(peer), self.store_host, queue_id,
            header.flag, sys_flag, header.born_timestamp, header.reconsume_times or 0, 0, properties,
        )  # fmt: skip
        if sys_flag & _TRANSACTION_MASK == _TRANSACTION_PREPARED:
            if broker.reject_transaction_message or self.half_message_hook is None:
                return PutOutcome(
                    ResponseCode.NO_PERMISSION,
                    f"the broker[{broker.broker_ip1}] sending transaction message is forbidden",
                )
            self.half_message_hook(msg)
        elif _TIMER_NEEDLE in properties:
            if self.timer_hook is not None:
                self.timer_hook(msg)  # MessageIllegalError (MESSAGE_ILLEGAL) for a bad delivery time
            elif asks_for_timer(properties):
                return PutOutcome(ResponseCode.SYSTEM_ERROR, _NO_TIMER_REMARK)
        kind = message_type(properties, sys_flag & _TRANSACTION_MASK == _TRANSACTION_PREPARED, delay)
        put = self.store.put_message_async(msg, paced=paced)  # the one put of a single message
        if type(put) is AppendResult:  # stored, nothing to wait for (ASYNC_FLUSH)
            if self.replica is None:  # the common answer
                # msg.topic: where it was stored (SCHEDULE_TOPIC_XXXX, the half or the timer topic
                # when a hook or the store moved it), the topic Java's metrics count it under
                self.stats.record_put(msg.topic, 1, put.wrote_bytes, kind)
                if wire is not None:
                    return encode_send_ok(
                        wire.opaque, wire.serialize_type, put.msg_id, queue_id, put.logics_offset,
                        broker.region_id, "true" if broker.trace_on else "false", uniq_key,
                    )  # fmt: skip
                return PutOutcome(
                    _SUCCESS, None, put.msg_id, queue_id, put.logics_offset, put.wrote_offset, uniq_key
                )
            put = PendingPut(PutMessageResult(_PUT_OK, put))
        assert isinstance(put, PendingPut)
        return self._outcome(put, msg.topic, queue_id, 1, len(body), uniq_key, kind)

    def _put_batch(
        self, header: SendMessageRequestHeader, body: bytes, queue_id: int, peer: Peer, paced: bool
    ) -> PutOutcome | Awaitable[PutOutcome]:
        if header.topic.startswith(reserved.RETRY_GROUP_TOPIC_PREFIX):
            return PutOutcome(ResponseCode.MESSAGE_ILLEGAL, "Batch request does not support retry group")
        # the whole body decoded (ProtocolError on a torn entry), each entry's properties
        # rewritten as a single send's and completed with the header's, and encoded straight
        # into the records to append, in one call (no message object per entry)
        store_host = self.store_host
        target = BatchTarget(
            header_properties=header.properties or "",
            cluster=self.broker.broker_cluster_name,
            topic=header.topic,
            born_host=born_host_of(peer),
            store_host=store_host,
            queue_id=queue_id,
            sys_flag=header.sys_flag & ~MessageSysFlag.TRANSACTION_MASK,
            born_timestamp=header.born_timestamp,
            reconsume_times=header.reconsume_times or 0,
            max_message_size=self.store.config.max_message_size,
        )
        encoded = encode_batch_records(body, target)
        count = encoded.messages
        if encoded.outcome == BATCH_DELAYED_ENTRY:
            return PutOutcome(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot be delayed")
        if not count:
            return PutOutcome(ResponseCode.MESSAGE_ILLEGAL, "the batch is empty")
        pending = self.store.put_encoded_nowait(encoded, header.topic, queue_id, store_host, paced=paced)
        return self._outcome(pending, header.topic, queue_id, count, len(body), None)

    def _outcome(
        self,
        pending: PendingPut,
        topic: str,
        queue_id: int,
        n: int,
        size: int,
        transaction_id: str | None,
        kind: str = NORMAL,
    ) -> PutOutcome | Awaitable[PutOutcome]:
        fut = pending.flush_future
        replicate = self.replica is not None and pending.result.ok and pending.result.append is not None
        if fut is None and not replicate:
            return self._result(pending.result, topic, queue_id, n, size, transaction_id, kind)
        return self._await_flush(pending, fut, topic, queue_id, n, size, transaction_id, kind)

    async def _await_flush(
        self,
        pending: PendingPut,
        fut: Future[bool] | None,
        topic: str,
        queue_id: int,
        n: int,
        size: int,
        transaction_id: str | None,
        kind: str = NORMAL,
    ) -> PutOutcome:
        if fut is not None:
            self.flush_waiters += 1
            try:
                flushed = await result_within(
                    asyncio.wrap_future(fut), self.store.config.sync_flush_timeout / 1000
                )
            except TimeoutError:
                flushed = False
            finally:
                self.flush_waiters -= 1
            if not flushed:
                log.error("sync flush timed out for a message to %s", topic)
                pending.result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        append = pending.result.append
        if self.replica is not None and append is not None and pending.result.ok:
            status = await self.replica.wait_replicated(append.end_offset)  # HA: SYNC_MASTER
            if status is not PutMessageStatus.PUT_OK:
                pending.result.status = status
        return self._result(pending.result, topic, queue_id, n, size, transaction_id, kind)

    def _result(
        self,
        result: PutMessageResult,
        topic: str,
        queue_id: int,
        n: int,
        size: int,
        transaction_id: str | None,
        kind: str = NORMAL,
    ) -> PutOutcome:
        """The outcome of a put (`_STATUS_RESPONSES`): a stored message (its flush or slave may
        have timed out) carries where it lies, a failed one only its code and remark. `size` (the
        bodies' bytes) is counted where the store gave no record size, `kind` is the message type
        the metrics count it under."""
        append = result.append
        if append is not None and append.wrote_bytes:
            size = append.wrote_bytes
        if result.status is PutMessageStatus.PUT_OK and append is not None:  # the common answer
            self.stats.record_put(topic, n, size, kind)
            return PutOutcome(
                _SUCCESS, None, append.msg_id, queue_id, append.logics_offset, append.wrote_offset,
                transaction_id,
            )  # fmt: skip
        code, remark = _STATUS_RESPONSES[result.status]
        if remark is not None and "{max}" in remark:
            remark = remark.format(max=self.store.config.max_message_size)
        if result.remark and code != ResponseCode.SUCCESS:
            remark = f"{remark} ({result.remark})" if remark else result.remark
        if append is None or not result.ok:
            self.stats.put_failures += 1
            return PutOutcome(code, remark)
        self.stats.record_put(topic, n, size, kind)
        return PutOutcome(
            code, remark, append.msg_id, queue_id, append.logics_offset, append.wrote_offset, transaction_id
        )

    # -- the remoting adapter ---------------------------------------------------------------
    def handle_wire(self, conn: Connection, request: RemotingCommand) -> WireResult:
        """SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE on the remoting port: the frame
        decoded into the request's fields (the header letters a..n by the compiled fill when
        built), the core (`_put`), and the outcome encoded. A stored send's answer is written as
        its whole frame from the outcome's values (`speedups.encode_send_ok`; a single message
        stored at once is encoded so by `_put` itself, with no `PutOutcome` between), which the
        connection writes as is; an answer that waits for the disk or the slave completes later."""
        code = request.code
        if code in _V2_CODES:
            header = decode_send_header_v2(request.ext_fields)
        else:
            header = SendMessageRequestHeader.from_ext(request.ext_fields, code)
        outcome = self._put(
            header, request.body or b"", code == _BATCH or header.batch, request.version, conn, False, request
        )
        if isinstance(outcome, bytes):  # the common answer, encoded by `_put`
            return outcome
        if not isinstance(outcome, PutOutcome):
            return self._encode_later(request, outcome)
        if outcome.code == _SUCCESS and outcome.msg_id:  # the common answer, encoded at once
            broker = self.broker
            return encode_send_ok(
                request.opaque, request.serialize_type, outcome.msg_id, outcome.queue_id,
                outcome.queue_offset, broker.region_id, "true" if broker.trace_on else "false",
                outcome.transaction_id,
            )  # fmt: skip
        return self._command(request, outcome)

    async def _encode_later(
        self, request: RemotingCommand, pending: Awaitable[PutOutcome]
    ) -> RemotingCommand:
        return self._command(request, await pending)

    def _command(self, request: RemotingCommand, outcome: PutOutcome) -> RemotingCommand:
        """The answer as a command: a stored message's carries RocketMQ's SendMessageResponseHeader
        (plus MSG_REGION and TRACE_ON), whatever its code; a refusal only its code and remark."""
        if not outcome.msg_id:
            return make_response(request, outcome.code, outcome.remark)
        broker = self.broker
        trace_on = "true" if broker.trace_on else "false"
        if outcome.code == _SUCCESS:
            return send_ok_command(
                request.opaque, request.serialize_type, outcome.msg_id, outcome.queue_id,
                outcome.queue_offset, broker.region_id, trace_on, outcome.transaction_id,
            )  # fmt: skip
        ext = send_ok_ext(
            outcome.msg_id, outcome.queue_id, outcome.queue_offset, broker.region_id, trace_on,
            outcome.transaction_id,
        )  # fmt: skip
        return make_response(request, outcome.code, outcome.remark, ext)
