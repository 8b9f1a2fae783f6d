"""Consumption over gRPC: QueryAssignment, ReceiveMessage (server streaming), AckMessage,
ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue.

As Java's proxy in local mode, each RPC becomes the broker's own POP request, handed in process to
`PopMessageProcessor` (POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME): the same checks,
long polling (woken by new messages), redelivery with attempt+1, DLQ after the group's
`retryMaxTimes`, and the state persisted before each answer. What this module adds is the 5.x
shape around it:

- ReceiveMessage pops across every readable queue of the topic (the queue a client names is only
  where it found this broker, as in Java); the long polling time is clamped to 5-20 s and to the
  call's deadline; `auto_renew` receives (push consumers, which send no invisible duration) get
  60 s, others must ask for 10 s to 12 h; TAG and SQL filter expressions are served as POP serves
  them (a malformed one answers ILLEGAL_FILTER_EXPRESSION naming the error). The stream is a
  `status`, then one `message` per message, then a `delivery_timestamp`; nothing found is
  MESSAGE_NOT_FOUND. Errors are a status on the stream,
  never an aborted call.
- Receipt handles are the POP `extraInfo` text (with the queue offset), opaque to clients. A
  malformed, forged, stale (acked, redelivered since) or expired handle answers
  INVALID_RECEIPT_HANDLE for its entry, and nothing is acked twice.
- The body digest sent is MD5 in uppercase hex, the spelling both the Python and Node clients
  compare exactly (their CRC32 spellings differ).

FIFO groups (`consumeMessageOrderly`) get one assignment per queue and pop that queue with
`order=true`: a queue hands out nothing new while a batch of it is in flight.

Auto-renew receives are renewed while their client is registered (`clients.Renewals`): an ack,
a change of invisible time or a forward to the DLQ of such a delivery stops the renewal and acts
on the broker's latest handle, whichever handle the client holds.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Final, cast

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.grpc.clients import GrpcClients, Renewal, Renewals
from rocketlite.broker.grpc.kit import ProtoKit, RefusedError, client_id
from rocketlite.broker.grpc.route import RouteService, no_route
from rocketlite.broker.pop.processor import MAX_POP_NUMS, PopMessageProcessor
from rocketlite.broker.subscription_group import SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.protocol import perm
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.formats.record import StoredRecord, decode_records
from rocketlite.protocol.message import MessageConst, MessageSysFlag, string_to_properties
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.pop import (
    INIT_MODE_MAX,
    POLLING_TIMEOUT,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    MalformedReceiptHandleError,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    PopRequestCode,
    ReceiptHandle,
    parse_offset_info,
    topic_type,
)

if TYPE_CHECKING:
    from rocketlite.remoting.connection import Connection

log = logging.getLogger("rocketlite.broker.grpc")

MIN_POLLING_MS: Final = 5_000  # Java proxy's grpcClientConsumerMin/MaxLongPollingTimeoutMillis
MAX_POLLING_MS: Final = 20_000
MIN_INVISIBLE_RECEIVE_MS: Final = 10_000  # minInvisibleTimeMillsForRecv
MAX_INVISIBLE_MS: Final = 12 * 3600 * 1000  # maxInvisibleTimeMills
NACK_INVISIBLE_MS: Final = 1_000  # a popped message the stream could not carry comes back after this

# Properties the broker or the 5.x system properties carry: not user properties. Java's proxy hides
# only MessageConst.STRING_HASH_SET, which lacks __SHARDINGKEY and __transactionId__: a FIFO message
# shows its group among its user properties too, a transaction message its transaction id (the
# Node client's own tests check both).
SYSTEM_PROPERTIES: Final = frozenset(
    {v for k, v in vars(MessageConst).items() if k.isupper() and isinstance(v, str)}
    | {
        "POP_CK",
        "1ST_POP_TIME",
        "TRACE_CONTEXT",
        "bname",
        "INNER_NUM",
        "INNER_BASE",
    }
) - {MessageConst.SHARDING_KEY, MessageConst.TRANSACTION_ID}

# 4.x answers of the POP processor mapped onto apache.rocketmq.v2.Code (Java's proxy table).
POP_CODES: Final[dict[int, str]] = {
    ResponseCode.TOPIC_NOT_EXIST: "TOPIC_NOT_FOUND",
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: "CONSUMER_GROUP_NOT_FOUND",
    ResponseCode.NO_PERMISSION: "FORBIDDEN",
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: "ILLEGAL_FILTER_EXPRESSION",
    ResponseCode.NO_MESSAGE: "INVALID_RECEIPT_HANDLE",
    ResponseCode.SYSTEM_BUSY: "TOO_MANY_REQUESTS",
    ResponseCode.SYSTEM_ERROR: "INTERNAL_ERROR",
}


def _refused(exc: RocketliteError) -> RefusedError:
    return RefusedError(POP_CODES.get(exc.code, "BAD_REQUEST"), str(exc))


def _millis(duration: Any) -> int:
    return int(duration.seconds) * 1000 + int(duration.nanos) // 1_000_000


class ConsumerService:
    def __init__(
        self,
        kit: ProtoKit,
        broker: BrokerConfig,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        pop: PopMessageProcessor,
        route: RouteService,
        clients: GrpcClients | None = None,
    ) -> None:
        """`clients`: the registered 5.x clients, whose auto-renew deliveries are renewed (None:
        a registry no one fills, so nothing is renewed)."""
        self.kit = kit
        self.broker = broker
        self.topics = topics
        self.groups = groups
        self.pop = pop
        self.route = route
        clock = pop.service.clock
        self.clients = clients if clients is not None else GrpcClients(None, clock)
        self.renewals = Renewals(self.clients.online, self._renew, clock)
        self.clients.gone.append(self.renewals.forget_client)

    # -- checks shared by the RPCs ----------------------------------------------------------
    def _names(self, request: Any) -> tuple[str, str]:
        """(group, topic) of a request that names both, checked as Java's proxy does first."""
        has_topic = "topic" in request.DESCRIPTOR.fields_by_name  # ReceiveMessage: in its message_queue
        topic = request.topic.name if has_topic else request.message_queue.topic.name
        group = request.group.name
        if not topic:
            raise RefusedError("ILLEGAL_TOPIC", "the request names no topic")
        if not group:
            raise RefusedError("ILLEGAL_CONSUMER_GROUP", "the request names no consumer group")
        return group, topic

    def _fifo(self, group: str) -> bool:
        """Whether the group consumes in order (SubscriptionGroupConfig.consumeMessageOrderly)."""
        cfg = self.groups.find(group)
        return cfg is not None and cfg.consume_message_orderly

    def _check_topic_and_group(self, group: str, topic: str) -> Any:
        tc = self.topics.select(topic)
        if tc is None:
            raise RefusedError("TOPIC_NOT_FOUND", no_route(topic))
        if self.groups.find(group) is None:  # auto-created when autoCreateSubscriptionGroup is on
            raise RefusedError("CONSUMER_GROUP_NOT_FOUND", f"consumer group {group!r} does not exist")
        return tc

    async def _call(self, handler: Any, code: int, ext: dict[str, str], peer: str) -> RemotingCommand:
        """One POP request through the broker's own processor; its refusals become `RefusedError`."""
        conn = cast("Connection", self.kit.peer(peer))
        try:
            answer = await handler(conn, make_request(code, ext))
        except RocketliteError as exc:
            raise _refused(exc) from exc
        assert isinstance(answer, RemotingCommand)
        if answer.code not in (ResponseCode.SUCCESS, POLLING_TIMEOUT):
            raise RefusedError(POP_CODES.get(answer.code, "INTERNAL_ERROR"), answer.remark or "")
        return answer

    # -- QueryAssignment ---------------------------------------------------------------------
    async def query_assignment(self, request: Any, context: Any) -> Any:
        """One assignment for this broker (queue id -1: ReceiveMessage pops across its queues), or
        one per readable queue for a FIFO group, as Java's proxy."""
        kit, pb = self.kit, self.kit.pb
        del context
        try:
            group, topic = self._names(request)
            tc = self._check_topic_and_group(group, topic)
            topic_perm = tc.perm & self.broker.broker_permission
            if not perm.is_readable(topic_perm) or tc.read_queue_nums <= 0:
                raise RefusedError("FORBIDDEN", f"topic {topic!r} has no readable queue on this broker")
            permission = "READ_WRITE" if perm.is_writeable(topic_perm) else "READ"
            broker = pb.Broker(name=self.broker.broker_name, id=0, endpoints=self.route.endpoints())
            ids = list(range(tc.read_queue_nums)) if self._fifo(group) else [-1]
            assignments = [
                pb.Assignment(
                    message_queue=pb.MessageQueue(
                        topic=request.topic,
                        id=queue_id,
                        permission=pb.Permission.Value(permission),
                        broker=broker,
                        accept_message_types=[pb.MessageType.Value("NORMAL")],
                    )
                )
                for queue_id in ids
            ]
        except RefusedError as exc:
            return kit.spb.QueryAssignmentResponse(status=kit.status(exc.status, str(exc)))
        return kit.spb.QueryAssignmentResponse(status=kit.status("OK"), assignments=assignments)

    # -- ReceiveMessage ----------------------------------------------------------------------
    async def receive_message(self, request: Any, context: Any) -> AsyncIterator[Any]:
        kit, spb = self.kit, self.kit.spb
        try:
            records, header = await self._receive(request, context)
        except RefusedError as exc:
            yield spb.ReceiveMessageResponse(status=kit.status(exc.status, str(exc)))
        except Exception as exc:  # never a dropped stream: the client reads a status
            log.exception("ReceiveMessage failed")
            yield spb.ReceiveMessageResponse(
                status=kit.status("INTERNAL_ERROR", f"{type(exc).__name__}: {exc}")
            )
        else:
            if not records:
                yield spb.ReceiveMessageResponse(status=kit.status("MESSAGE_NOT_FOUND", "no new message"))
            else:
                group = request.group.name
                messages = [self._message(r, header, group) for r in records]
                sent = 0
                renew = request.auto_renew
                client, peer = client_id(context), context.peer()
                try:
                    yield spb.ReceiveMessageResponse(status=kit.status("OK", "OK"))
                    for message in messages:
                        yield spb.ReceiveMessageResponse(message=message)
                        sent += 1
                        if renew:
                            handle = message.system_properties.receipt_handle
                            self.renewals.track(client, group, message.topic.name, handle, peer)
                finally:
                    if sent < len(messages):  # the client went away: the rest come back soon
                        self._nack_later(group, messages[sent:], context.peer())
        yield spb.ReceiveMessageResponse(delivery_timestamp=_now_ts(kit))

    async def _receive(
        self, request: Any, context: Any
    ) -> tuple[list[StoredRecord], PopMessageResponseHeader | None]:
        group, topic = self._names(request)
        self._check_topic_and_group(group, topic)
        polling_ms = _millis(request.long_polling_timeout) if request.HasField("long_polling_timeout") else 0
        polling_ms = min(max(polling_ms, MIN_POLLING_MS), MAX_POLLING_MS)
        remaining = context.time_remaining()
        if remaining is not None and polling_ms > remaining * 1000:
            if remaining * 1000 < MIN_POLLING_MS:
                raise RefusedError(
                    "ILLEGAL_POLLING_TIME",
                    f"the call's deadline leaves {remaining:.1f} s, less than the "
                    f"{MIN_POLLING_MS // 1000} s of long polling",
                )
            polling_ms = int(remaining * 1000) - 200  # answer before the client gives up
        if request.auto_renew:
            invisible_ms = self.renewals.invisible_ms
        else:
            invisible_ms = _millis(request.invisible_duration)
            _check_invisible(invisible_ms, MIN_INVISIBLE_RECEIVE_MS)
        expression = request.filter_expression
        # SQL expressions are POPped as SQL92 ones (a malformed one: ILLEGAL_FILTER_EXPRESSION)
        sql = expression.type == self.kit.pb.FilterType.Value("SQL")
        if request.batch_size <= 0:
            raise RefusedError("BAD_REQUEST", f"batch_size {request.batch_size} is not positive")
        fifo = self._fifo(group)
        queue_id = request.message_queue.id if fifo else -1
        header = PopMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=queue_id,
            max_msg_nums=min(request.batch_size, MAX_POP_NUMS),
            invisible_time=invisible_ms,
            poll_time=polling_ms,
            born_time=int(asyncio.get_running_loop().time() * 1000),
            init_mode=INIT_MODE_MAX,
            exp_type="SQL92" if sql else "TAG",
            exp=expression.expression or "*",
            order=fifo or None,
            attempt_id=request.attempt_id or None,
        )
        answer = await self._call(
            self.pop.handle_pop, PopRequestCode.POP_MESSAGE, header.to_ext(), context.peer()
        )
        if answer.code == POLLING_TIMEOUT or not answer.body:
            return [], None
        return decode_records(answer.body), PopMessageResponseHeader.from_ext(answer.ext_fields)

    def _message(self, record: StoredRecord, header: PopMessageResponseHeader | None, group: str) -> Any:
        """A popped record as `apache.rocketmq.v2.Message`, as Java's GrpcConverter builds it."""
        del group
        pb, kit = self.kit.pb, self.kit
        assert header is not None
        props = string_to_properties(record.properties_string)
        system = pb.SystemProperties(
            message_id=props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or record.msg_id,
            body_digest=pb.Digest(
                type=pb.DigestType.Value("MD5"), checksum=hashlib.md5(record.body).hexdigest().upper()
            ),
            body_encoding=pb.Encoding.Value(
                "GZIP" if record.sys_flag & MessageSysFlag.COMPRESSED_FLAG else "IDENTITY"
            ),
            message_type=pb.MessageType.Value("FIFO" if MessageConst.SHARDING_KEY in props else "NORMAL"),
            born_timestamp=_ts(kit, record.born_timestamp),
            born_host=str(record.born_host),
            store_timestamp=_ts(kit, record.store_timestamp),
            store_host=str(record.store_host),
            receipt_handle=self._handle(record, header),
            queue_id=record.queue_id,
            queue_offset=record.queue_offset,
            invisible_duration=kit.duration(
                seconds=header.invisible_time // 1000, nanos=header.invisible_time % 1000 * 1_000_000
            ),
            delivery_attempt=record.reconsume_times + 1,
        )
        if MessageConst.TAGS in props:
            system.tag = props[MessageConst.TAGS]
        if props.get(MessageConst.KEYS):
            system.keys.extend(props[MessageConst.KEYS].split(" "))
        if MessageConst.SHARDING_KEY in props:
            system.message_group = props[MessageConst.SHARDING_KEY]
        if "TRACE_CONTEXT" in props:
            system.trace_context = props["TRACE_CONTEXT"]
        user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTIES}
        return pb.Message(
            topic=pb.Resource(name=record.topic),
            user_properties=user,
            system_properties=system,
            body=record.body,
        )

    def _handle(self, record: StoredRecord, header: PopMessageResponseHeader) -> str:
        """The receipt handle of one popped record: POP's `extraInfo`, with its queue offset."""
        kind = topic_type(record.topic)
        starts = parse_offset_info(header.start_offset_info or "")
        start = starts.get((kind, record.queue_id), [record.queue_offset])[0]
        return ReceiptHandle(
            ck_queue_offset=start,
            pop_time=header.pop_time,
            invisible_time=header.invisible_time,
            revive_qid=header.revive_qid,
            topic_type=kind,
            broker_name=self.broker.broker_name,
            queue_id=record.queue_id,
            queue_offset=record.queue_offset,
        ).build()

    def _nack_later(self, group: str, messages: list[Any], peer: str) -> None:
        """Messages popped but not written to the stream: visible again after a second (Java)."""

        async def nack() -> None:
            for message in messages:
                system = message.system_properties
                try:
                    await self._change(
                        group, message.topic.name, system.receipt_handle, NACK_INVISIBLE_MS, peer
                    )
                except RefusedError as exc:
                    log.warning("nack of %s after a broken stream: %s", system.message_id, exc)

        task = asyncio.get_running_loop().create_task(nack())
        _BACKGROUND.add(task)
        task.add_done_callback(_BACKGROUND.discard)

    # -- AckMessage --------------------------------------------------------------------------
    async def ack_message(self, request: Any, context: Any) -> Any:
        kit, spb = self.kit, self.kit.spb
        try:
            group, topic = self._names(request)
            self._check_topic_and_group(group, topic)
            if not request.entries:
                raise RefusedError("BAD_REQUEST", "no entries to acknowledge")
        except RefusedError as exc:
            return spb.AckMessageResponse(status=kit.status(exc.status, str(exc)))
        entries = []
        for entry in request.entries:
            try:
                handle = await self.renewals.release(entry.receipt_handle)
                await self._ack(group, topic, handle, context.peer())
                status = kit.status("OK", "OK")
            except RefusedError as exc:
                status = kit.status(exc.status, str(exc))
            entries.append(
                spb.AckMessageResultEntry(
                    message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=status
                )
            )
        if len({e.status.code for e in entries}) == 1:
            overall = entries[0].status
        else:
            overall = kit.status("MULTIPLE_RESULTS", "the entries were answered differently")
        return spb.AckMessageResponse(status=overall, entries=entries)

    def _parse_handle(self, text: str) -> ReceiptHandle:
        """A client's receipt handle, refused when malformed, without its queue offset, or past its
        invisible time (the message may be delivered again already: Java's proxy refuses it too)."""
        try:
            handle = ReceiptHandle.parse(text)
        except MalformedReceiptHandleError as exc:
            raise RefusedError("INVALID_RECEIPT_HANDLE", str(exc)) from exc
        if handle.queue_offset is None:
            raise RefusedError("INVALID_RECEIPT_HANDLE", f"receipt handle {text!r} names no queue offset")
        now = self.pop.service.clock.now_ms()
        if handle.pop_time + handle.invisible_time <= now:
            raise RefusedError(
                "INVALID_RECEIPT_HANDLE",
                f"receipt handle expired {now - handle.pop_time - handle.invisible_time} ms ago "
                "(its invisible time is over)",
            )
        return handle

    async def _ack(self, group: str, topic: str, text: str, peer: str) -> None:
        handle = self._parse_handle(text)
        assert handle.queue_offset is not None
        header = AckMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=handle.queue_id,
            extra_info=text,
            offset=handle.queue_offset,
        )
        await self._call(self.pop.handle_ack, PopRequestCode.ACK_MESSAGE, header.to_ext(), peer)

    # -- ChangeInvisibleDuration -------------------------------------------------------------
    async def change_invisible_duration(self, request: Any, context: Any) -> Any:
        kit, spb = self.kit, self.kit.spb
        try:
            group, topic = self._names(request)
            self._check_topic_and_group(group, topic)
            invisible_ms = _millis(request.invisible_duration)
            _check_invisible(invisible_ms, 0)
            current = await self.renewals.release(request.receipt_handle)
            handle = await self._change(group, topic, current, invisible_ms, context.peer())
        except RefusedError as exc:
            return spb.ChangeInvisibleDurationResponse(status=kit.status(exc.status, str(exc)))
        return spb.ChangeInvisibleDurationResponse(status=kit.status("OK", "OK"), receipt_handle=handle)

    async def _renew(self, entry: Renewal, invisible_ms: int) -> str:
        """One renewal of an auto-renew delivery (`Renewals`): its new handle."""
        return await self._change(entry.group, entry.topic, entry.current, invisible_ms, entry.peer)

    async def _change(self, group: str, topic: str, text: str, invisible_ms: int, peer: str) -> str:
        """The new receipt handle once the message's deadline is now + `invisible_ms` (0, Node's
        nack, is made 1 ms: visible again at once)."""
        handle = self._parse_handle(text)
        assert handle.queue_offset is not None
        invisible_ms = max(1, invisible_ms)
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=handle.queue_id,
            extra_info=text,
            offset=handle.queue_offset,
            invisible_time=invisible_ms,
        )
        answer = await self._call(
            self.pop.handle_change_invisible_time,
            PopRequestCode.CHANGE_MESSAGE_INVISIBLETIME,
            header.to_ext(),
            peer,
        )
        changed = ChangeInvisibleTimeResponseHeader.from_ext(answer.ext_fields)
        return ReceiptHandle(
            ck_queue_offset=handle.ck_queue_offset,
            pop_time=changed.pop_time,
            invisible_time=changed.invisible_time,
            revive_qid=changed.revive_qid,
            topic_type=handle.topic_type,
            broker_name=handle.broker_name,
            queue_id=handle.queue_id,
            queue_offset=handle.queue_offset,
        ).build()

    # -- ForwardMessageToDeadLetterQueue -----------------------------------------------------
    async def forward_message_to_dead_letter_queue(self, request: Any, context: Any) -> Any:
        """Store a copy of the delivered message on `%DLQ%group` and acknowledge it (a FIFO push
        consumer whose listener failed its last attempt). A stale handle changes nothing."""
        kit, spb = self.kit, self.kit.spb
        try:
            group, topic = self._names(request)
            self._check_topic_and_group(group, topic)
            text = await self.renewals.release(request.receipt_handle)
            handle = self._parse_handle(text)
            assert handle.queue_offset is not None
            service = self.pop.service
            entry = service.in_flight(group, topic, handle.queue_id).get(handle.queue_offset)
            if entry is None or entry.pop_time != handle.pop_time:
                raise RefusedError(
                    "INVALID_RECEIPT_HANDLE",
                    f"no delivery of {topic}:{handle.queue_id} offset {handle.queue_offset} "
                    f"at popTime {handle.pop_time} is in flight for group {group}",
                )
            record = self._stored(group, topic, handle.queue_id, handle.queue_offset)
            record.reconsume_times = max(record.reconsume_times, entry.attempts)
            # The copy is flushed before the ack, so a crash in between delivers the message again
            # rather than losing it.
            if not await self.pop.dead_letter(group, record):
                raise RefusedError("INTERNAL_ERROR", f"the copy to %DLQ%{group} could not be stored")
            await self._ack(group, topic, text, context.peer())
        except RefusedError as exc:
            return spb.ForwardMessageToDeadLetterQueueResponse(status=kit.status(exc.status, str(exc)))
        return spb.ForwardMessageToDeadLetterQueueResponse(status=kit.status("OK", "OK"))

    def _stored(self, group: str, topic: str, queue_id: int, offset: int) -> StoredRecord:
        found = self.pop.service.store.get_message(group, topic, queue_id, offset, 1)
        try:
            if not found.messages or found.queue_offsets[0] != offset:
                raise RefusedError(
                    "MESSAGE_NOT_FOUND", f"{topic}:{queue_id} offset {offset} is gone from the store"
                )
            return decode_records(bytes(found.messages[0]))[0]
        finally:
            found.release()


_BACKGROUND: set[asyncio.Task[None]] = set()


def _check_invisible(invisible_ms: int, minimum: int) -> None:
    if invisible_ms < minimum:
        raise RefusedError(
            "ILLEGAL_INVISIBLE_TIME",
            f"invisible duration {invisible_ms} ms is below the minimum {minimum} ms",
        )
    if invisible_ms > MAX_INVISIBLE_MS:
        raise RefusedError(
            "ILLEGAL_INVISIBLE_TIME",
            f"invisible duration {invisible_ms} ms is above the maximum {MAX_INVISIBLE_MS} ms",
        )


def _ts(kit: ProtoKit, millis: int) -> Any:
    return kit.timestamp(seconds=millis // 1000, nanos=millis % 1000 * 1_000_000)


def _now_ts(kit: ProtoKit) -> Any:
    stamp = kit.timestamp()
    stamp.GetCurrentTime()
    return stamp
