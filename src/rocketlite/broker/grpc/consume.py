"""Consumption over gRPC: QueryAssignment, ReceiveMessage (server streaming), AckMessage,
ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue.

As Java's proxy in local mode, each RPC is served by the broker's own POP cores, in process
(`PopMessageProcessor.pop`, `ack`, `change_invisible`, the ones POP_MESSAGE, ACK_MESSAGE and
CHANGE_MESSAGE_INVISIBLETIME call): the same checks, long polling (woken by new messages),
redelivery with attempt+1, DLQ after the group's `retryMaxTimes`, and the state persisted before
each answer. What this module adds is the 5.x shape around it (each message as
`convert.delivery_responses` writes it):

- ReceiveMessage pops across every readable queue of the topic (the queue a client names is only
  where it found this broker, as in Java); the long polling time is clamped to 5-20 s and to the
  call's deadline; `auto_renew` receives (push consumers, which send no invisible duration) get
  60 s, others must ask for 10 s to 12 h; TAG and SQL filter expressions are served as POP serves
  them (a malformed one answers ILLEGAL_FILTER_EXPRESSION naming the error). The stream is a
  `status`, then one `message` per message, then a `delivery_timestamp`; nothing found is
  MESSAGE_NOT_FOUND. Each `message` answer is written as bytes straight from the popped record
  (`convert.delivery_responses`, compiled, one call per run of records), not built as a
  protobuf object. Errors are a status on the stream, never an aborted call.
- Receipt handles are the POP `extraInfo` text (with the queue offset), opaque to clients. A
  malformed, forged, stale (acked, redelivered since) or expired handle answers
  INVALID_RECEIPT_HANDLE for its entry, and nothing is acked twice.

FIFO groups (`consumeMessageOrderly`) get one assignment per queue and pop that queue with
`order=true`: a queue hands out nothing new while a batch of it is in flight.

Auto-renew receives are renewed while their client is registered (`clients.Renewals`): an ack,
a change of invisible time or a forward to the DLQ of such a delivery stops the renewal and acts
on the broker's latest handle, whichever handle the client holds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any, Final

from google.protobuf.duration_pb2 import Duration

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.grpc.clients import GrpcClients, Renewal, Renewals
from rocketlite.broker.grpc.convert import Delivered, PopStamp, delivery_responses, timestamp_answer
from rocketlite.broker.grpc.kit import ProtoKit, RefusedError, client_id
from rocketlite.broker.grpc.route import RouteService, no_route
from rocketlite.broker.pop.columns import HandleAck
from rocketlite.broker.pop.processor import (
    MAX_POP_NUMS,
    REVIVE_QID,
    AckRequest,
    ChangeInvisibleRequest,
    PopMessageProcessor,
    PopRequest,
)
from rocketlite.broker.pop.state import PopBatch
from rocketlite.broker.subscription_group import SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.protocol import perm
from rocketlite.protocol.bodies.route import TopicConfig
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.formats.record import StoredRecord, decode_records
from rocketlite.protocol.proto.speedups import ack_response, handle_columns
from rocketlite.protocol.proto.v2 import definition_pb2 as pb
from rocketlite.protocol.proto.v2 import service_pb2 as spb
from rocketlite.protocol.wire.pop import INIT_MODE_MAX, MalformedReceiptHandleError, ReceiptHandle

log = logging.getLogger("rocketlite.broker.grpc")

MIN_POLLING_MS: Final = 5_000  # Java proxy's grpcClientConsumerMin/MaxLongPollingTimeoutMillis
MAX_POLLING_MS: Final = 20_000
MIN_INVISIBLE_RECEIVE_MS: Final = 10_000  # minInvisibleTimeMillsForRecv
MAX_INVISIBLE_MS: Final = 12 * 3600 * 1000  # maxInvisibleTimeMills
NACK_INVISIBLE_MS: Final = 1_000  # a popped message the stream could not carry comes back after this

# Refusals of the POP cores (their 4.x response codes) mapped onto apache.rocketmq.v2.Code (Java's
# proxy table).
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


def _millis(duration: Duration) -> int:
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
        self._ok = kit.status("OK", "OK")  # an acknowledged entry's status, and its bytes
        self._ok_bytes = bytes(self._ok.SerializeToString())
        # a receive's first answer when it found messages, written once
        self._found = bytes(spb.ReceiveMessageResponse(status=self._ok).SerializeToString())

    # -- checks shared by the RPCs ----------------------------------------------------------
    def _names(
        self,
        request: (
            spb.QueryAssignmentRequest
            | spb.ReceiveMessageRequest
            | spb.AckMessageRequest
            | spb.ChangeInvisibleDurationRequest
            | spb.ForwardMessageToDeadLetterQueueRequest
        ),
    ) -> tuple[str, str]:
        """(group, topic) of a request that names both, checked as Java's proxy does first."""
        if isinstance(request, spb.ReceiveMessageRequest):  # the topic is in its message_queue
            topic = request.message_queue.topic.name
        else:
            topic = request.topic.name
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

    def _check_topic_and_group(self, group: str, topic: str) -> TopicConfig:
        tc = self.topics.select(topic)
        if tc is None:
            raise RefusedError("TOPIC_NOT_FOUND", no_route(topic))
        if self.groups.find(group) is None:  # auto-created when autoCreateSubscriptionGroup is on
            raise RefusedError("CONSUMER_GROUP_NOT_FOUND", f"consumer group {group!r} does not exist")
        return tc

    # -- QueryAssignment ---------------------------------------------------------------------
    async def query_assignment(
        self, request: spb.QueryAssignmentRequest, context: Any
    ) -> spb.QueryAssignmentResponse:
        """One assignment for this broker (queue id -1: ReceiveMessage pops across its queues), or
        one per readable queue for a FIFO group, as Java's proxy."""
        kit = self.kit
        del context
        try:
            group, topic = self._names(request)
            tc = self._check_topic_and_group(group, topic)
            topic_perm = tc.perm & self.broker.broker_permission
            if not perm.is_readable(topic_perm) or tc.read_queue_nums <= 0:
                raise RefusedError("FORBIDDEN", f"topic {topic!r} has no readable queue on this broker")
            permission = pb.Permission.READ_WRITE if perm.is_writeable(topic_perm) else pb.Permission.READ
            broker = pb.Broker(name=self.broker.broker_name, id=0, endpoints=self.route.endpoints())
            ids = list(range(tc.read_queue_nums)) if self._fifo(group) else [-1]
            assignments = [
                pb.Assignment(
                    message_queue=pb.MessageQueue(
                        topic=request.topic,
                        id=queue_id,
                        permission=permission,
                        broker=broker,
                        accept_message_types=[pb.MessageType.NORMAL],
                    )
                )
                for queue_id in ids
            ]
        except RefusedError as exc:
            return spb.QueryAssignmentResponse(status=kit.status(exc.status, str(exc)))
        return spb.QueryAssignmentResponse(status=kit.status("OK"), assignments=assignments)

    # -- ReceiveMessage ----------------------------------------------------------------------
    async def receive_message(
        self, request: spb.ReceiveMessageRequest, context: Any
    ) -> AsyncIterator[spb.ReceiveMessageResponse | bytes | list[Any]]:
        """The stream's answers; a batch of messages as one list (the status, each message's
        serialized bytes, the end), which the front doors write in one step. A door may take the
        answers out of the list as it writes them (grpc.aio): those left when the stream breaks
        were not written, and their messages come back soon."""
        kit = self.kit
        try:
            batch = await self._receive(request, context)
        except RefusedError as exc:
            yield spb.ReceiveMessageResponse(status=kit.status(exc.status, str(exc)))
        except Exception as exc:  # never a dropped stream: the client reads a status
            log.exception("ReceiveMessage failed")
            yield spb.ReceiveMessageResponse(
                status=kit.status("INTERNAL_ERROR", f"{type(exc).__name__}: {exc}")
            )
        else:
            if batch.runs:
                messages = self._messages(batch)
                answers: list[Any] = [self._found]
                answers += [message.response for message in messages]
                answers.append(timestamp_answer(time.time_ns()))
                try:
                    yield answers
                except BaseException:  # the client went away: what was not written comes back soon
                    # (what a door took out of the list was written, the status first)
                    sent = min(len(messages), max(0, len(messages) + 1 - len(answers)))
                    if sent < len(messages):
                        self._nack_later(request.group.name, messages[sent:])
                    raise
                if request.auto_renew:
                    self._track(request.group.name, context, batch, messages)
                return
            yield spb.ReceiveMessageResponse(status=kit.status("MESSAGE_NOT_FOUND", "no new message"))
        yield timestamp_answer(time.time_ns())

    def _track(self, group: str, context: Any, batch: PopBatch, messages: list[Delivered]) -> None:
        """Auto-renew receives: each message written is renewed while its client is registered."""
        deadline = batch.pop_time + batch.invisible_time  # every handle's in the batch
        deliveries = [(message.topic, message.handle) for message in messages]
        self.renewals.track_all(client_id(context), group, context.peer(), deadline, deliveries)

    async def _receive(self, request: spb.ReceiveMessageRequest, context: Any) -> PopBatch:
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
        sql = expression.type == pb.FilterType.SQL
        if request.batch_size <= 0:
            raise RefusedError("BAD_REQUEST", f"batch_size {request.batch_size} is not positive")
        fifo = self._fifo(group)
        pop = PopRequest(
            group,
            topic,
            request.message_queue.id if fifo else -1,
            min(request.batch_size, MAX_POP_NUMS),
            invisible_ms,
            polling_ms,
            INIT_MODE_MAX,
            "SQL92" if sql else "TAG",
            expression.expression or "*",
            order=fifo,
        )
        try:
            return await self.pop.pop(pop)
        except RocketliteError as exc:
            raise _refused(exc) from exc

    def _messages(self, batch: PopBatch) -> list[Delivered]:
        """The popped records as the stream's message answers, each with its receipt handle: POP's
        `extraInfo` (the batch's popTime and invisible time, the queue's first offset in the
        batch), with its queue offset."""
        stamp = PopStamp(
            batch.pop_time, batch.invisible_time, REVIVE_QID, self.broker.broker_name, batch.start_offsets
        )
        now = self.pop.service.clock.now_ms()
        out: list[Delivered] = []
        for run in batch.runs:  # one call per run of back-to-back records, none per message
            out += delivery_responses(run.data, run.sizes, stamp, now)
        return out

    def _nack_later(self, group: str, messages: list[Delivered]) -> None:
        """Messages popped but not written to the stream: visible again after a second (Java)."""

        async def nack() -> None:
            for message in messages:
                try:
                    await self._change(group, message.topic, message.handle, NACK_INVISIBLE_MS)
                except RefusedError as exc:
                    log.warning("nack of %s after a broken stream: %s", message.message_id, exc)

        task = asyncio.get_running_loop().create_task(nack())
        _BACKGROUND.add(task)
        task.add_done_callback(_BACKGROUND.discard)

    # -- AckMessage --------------------------------------------------------------------------
    async def ack_message(
        self, request: spb.AckMessageRequest, context: Any
    ) -> spb.AckMessageResponse | bytes:
        """Every entry applied first, then one wait for the POP log for all of them; the answer
        written as bytes (`protocol.proto.acks`)."""
        kit = self.kit
        del context
        try:
            group, topic = self._names(request)
            self._check_topic_and_group(group, topic)
            if not request.entries:
                raise RefusedError("BAD_REQUEST", "no entries to acknowledge")
        except RefusedError as exc:
            return spb.AckMessageResponse(status=kit.status(exc.status, str(exc)))
        entries = request.entries
        handles = [entry.receipt_handle for entry in entries]
        texts = await self.renewals.release_all(handles)
        service = self.pop.service
        now = service.clock.now_ms()
        taken = handle_columns(texts, now, service.broker_name)
        refused = await self.pop.ack_columns(group, topic, taken.queue_ids, taken.offsets, taken.pop_times)
        ok = self._ok_bytes
        if not refused and len(taken.at) == len(texts):  # every entry acked: one status for all
            return ack_response(
                ok, [(entry.message_id, handle, ok) for entry, handle in zip(entries, handles, strict=True)]
            )
        statuses: list[Any] = [self._ok] * len(texts)
        for k, refusal in refused.items():
            as_refused = _refused(refusal)
            statuses[taken.at[k]] = kit.status(as_refused.status, str(as_refused))
        left = set(range(len(texts))).difference(taken.at)
        if left:  # not taken by `handle_columns`: each one refused or acked here, naming the cause
            await self._ack_left(group, topic, texts, sorted(left), statuses, now)
        written = [ok if status is self._ok else bytes(status.SerializeToString()) for status in statuses]
        if len({status.code for status in statuses}) == 1:  # one code: the first entry's status
            overall = written[0]
        else:
            overall = kit.status("MULTIPLE_RESULTS", "the entries were answered differently")
            overall = bytes(overall.SerializeToString())
        return ack_response(
            overall,
            [
                (entry.message_id, handle, status)
                for entry, handle, status in zip(entries, handles, written, strict=True)
            ],
        )

    async def _ack_left(
        self, group: str, topic: str, texts: list[str], left: list[int], statuses: list[Any], now: int
    ) -> None:
        """The entries `handle_columns` left: a malformed, expired or foreign handle refused
        naming why; one the reader does not take but `ReceiptHandle.parse` does (non-ASCII, a
        broker of another spelling) acked through `PopMessageProcessor.ack_all`."""
        kit = self.kit
        todo: list[HandleAck] = []
        at: list[int] = []
        for i in left:
            try:
                handle, offset = self._parse_handle(texts[i], now)
            except RefusedError as exc:
                statuses[i] = kit.status(exc.status, str(exc))
                continue
            todo.append((handle.queue_id, offset, handle.pop_time, handle.topic_type, handle.broker_name))
            at.append(i)
        for i, refusal in zip(at, await self.pop.ack_all(group, topic, todo), strict=True):
            if refusal is not None:
                refused = _refused(refusal)
                statuses[i] = kit.status(refused.status, str(refused))

    def _parse_handle(self, text: str, now: int | None = None) -> tuple[ReceiptHandle, int]:
        """A client's receipt handle and its queue offset, refused when malformed, without its
        queue offset, or past its invisible time at `now` (None: the clock's; the message may be
        delivered again already: Java's proxy refuses it too)."""
        try:
            handle = ReceiptHandle.parse(text)
        except MalformedReceiptHandleError as exc:
            raise RefusedError("INVALID_RECEIPT_HANDLE", str(exc)) from exc
        if handle.queue_offset is None:
            raise RefusedError("INVALID_RECEIPT_HANDLE", f"receipt handle {text!r} names no queue offset")
        if now is None:
            now = self.pop.service.clock.now_ms()
        if handle.pop_time + handle.invisible_time <= now:
            raise RefusedError(
                "INVALID_RECEIPT_HANDLE",
                f"receipt handle expired {now - handle.pop_time - handle.invisible_time} ms ago "
                "(its invisible time is over)",
            )
        return handle, handle.queue_offset

    async def _ack(self, group: str, topic: str, text: str) -> None:
        handle, offset = self._parse_handle(text)
        try:
            await self.pop.ack(AckRequest(group, topic, handle.queue_id, offset, text))
        except RocketliteError as exc:
            raise _refused(exc) from exc

    # -- ChangeInvisibleDuration -------------------------------------------------------------
    async def change_invisible_duration(
        self, request: spb.ChangeInvisibleDurationRequest, context: Any
    ) -> spb.ChangeInvisibleDurationResponse:
        kit = self.kit
        del context
        try:
            group, topic = self._names(request)
            self._check_topic_and_group(group, topic)
            invisible_ms = _millis(request.invisible_duration)
            _check_invisible(invisible_ms, 0)
            current = await self.renewals.release(request.receipt_handle)
            handle = await self._change(group, topic, current, invisible_ms)
        except RefusedError as exc:
            return spb.ChangeInvisibleDurationResponse(status=kit.status(exc.status, str(exc)))
        return spb.ChangeInvisibleDurationResponse(status=kit.status("OK", "OK"), receipt_handle=handle)

    async def _renew(self, entry: Renewal, invisible_ms: int) -> str:
        """One renewal of an auto-renew delivery (`Renewals`): its new handle."""
        return await self._change(entry.group, entry.topic, entry.current, invisible_ms)

    async def _change(self, group: str, topic: str, text: str, invisible_ms: int) -> str:
        """The new receipt handle once the message's deadline is now + `invisible_ms` (0, Node's
        nack, is made 1 ms: visible again at once)."""
        handle, offset = self._parse_handle(text)
        invisible_ms = max(1, invisible_ms)
        change = ChangeInvisibleRequest(group, topic, handle.queue_id, offset, text, invisible_ms)
        try:
            pop_time = await self.pop.change_invisible(change)
        except RocketliteError as exc:
            raise _refused(exc) from exc
        return ReceiptHandle(
            ck_queue_offset=handle.ck_queue_offset,
            pop_time=pop_time,
            invisible_time=invisible_ms,
            revive_qid=REVIVE_QID,
            topic_type=handle.topic_type,
            broker_name=handle.broker_name,
            queue_id=handle.queue_id,
            queue_offset=offset,
        ).build()

    # -- ForwardMessageToDeadLetterQueue -----------------------------------------------------
    async def forward_message_to_dead_letter_queue(
        self, request: spb.ForwardMessageToDeadLetterQueueRequest, context: Any
    ) -> spb.ForwardMessageToDeadLetterQueueResponse:
        """Store a copy of the delivered message on `%DLQ%group` and acknowledge it (a FIFO push
        consumer whose listener failed its last attempt). A stale handle changes nothing."""
        kit = self.kit
        del context
        try:
            group, topic = self._names(request)
            self._check_topic_and_group(group, topic)
            text = await self.renewals.release(request.receipt_handle)
            handle, offset = self._parse_handle(text)
            service = self.pop.service
            entry = service.in_flight(group, topic, handle.queue_id).get(offset)
            if entry is None or entry.pop_time != handle.pop_time:
                raise RefusedError(
                    "INVALID_RECEIPT_HANDLE",
                    f"no delivery of {topic}:{handle.queue_id} offset {offset} "
                    f"at popTime {handle.pop_time} is in flight for group {group}",
                )
            record = self._stored(group, topic, handle.queue_id, offset)
            record.reconsume_times = max(record.reconsume_times, entry.attempts)
            # The copy is flushed before the ack, so a crash in between delivers the message again
            # rather than losing it.
            if not await self.pop.dead_letter(group, record):
                raise RefusedError("INTERNAL_ERROR", f"the copy to %DLQ%{group} could not be stored")
            await self._ack(group, topic, text)
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
