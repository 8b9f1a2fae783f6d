"""`AsyncProducer`: sends messages the way `DefaultMQProducer` does (SEND_MESSAGE_V2, code 310).

A send finds the topic's route (asking the name server, then falling back to the `TBW102` route so
the broker auto-creates the topic), picks a queue round-robin, and retries on another broker when
the failure is retriable (`ClientError.retriable`: timeouts, broken connections, and the codes in
`DefaultMQProducer.retryResponseCodes`), all within one overall timeout. SYSTEM_BUSY and
FLOW_CONTROL back off exponentially before the next attempt, because retrying a busy broker at
once only adds load. With an explicit queue or a selector the same queue is retried (order matters
more than availability there). One-way sends are attempted once.

Every message gets a `UNIQ_KEY` (the msgId users see) unless it has one; bodies of at least
`compress_over` bytes (4 KiB) are zlib-compressed at level 5 with sysFlag bit 0x1, as Java does
(batches never are). `send_batch` packs messages with `protocol.batch.encode_batch` into
SEND_BATCH_MESSAGE (320) requests, split so that no request body exceeds `max_message_size`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import zlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar, Unpack

from rocketlite.client.config import ClientOptions
from rocketlite.client.errors import (
    ClientError,
    ClientStateError,
    MessageIllegalError,
    NoRouteError,
    RemotingTimeoutError,
    parse_answer,
)
from rocketlite.client.instance import ClientInstance
from rocketlite.client.lifecycle import AsyncClientBase
from rocketlite.client.message import Message, MessageExt, MessageQueue, SendResult
from rocketlite.client.request_reply import create_reply_message, send_request
from rocketlite.client.route import TopicPublishInfo
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.formats.batch import ENTRY_OVERHEAD, BatchEntry, encode_batch
from rocketlite.protocol.message import MessageConst, MessageSysFlag, java_string_hash, properties_to_string
from rocketlite.protocol.perm import TOPIC_MAX_LENGTH, TOPIC_NAME_RE
from rocketlite.protocol.requests.reply import build_send_reply, is_reply
from rocketlite.protocol.requests.send import SendResponse, build_send, build_send_batch, parse_send
from rocketlite.protocol.reserved import DEFAULT_TOPIC, NOT_ALLOWED_SEND_TOPICS
from rocketlite.protocol.reserved import RETRY_GROUP_TOPIC_PREFIX as RETRY_PREFIX
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.headers import CheckTransactionStateRequestHeader
from rocketlite.remoting.connection import Connection

log = logging.getLogger("rocketlite.client.producer")

__all__ = [
    "AsyncProducer",
    "MessageQueueSelector",
    "select_by_hash",
    "select_by_sharding_key",
    "select_random",
]

BACKOFF_CODES: Final = frozenset({ResponseCode.SYSTEM_BUSY, ResponseCode.FLOW_CONTROL})

R = TypeVar("R")
MessageQueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]
SendCallback = Callable[[SendResult | None, BaseException | None], None]


def _java_hash(value: Any) -> int:
    """`Object.hashCode` for the values people pass as selector args (str, int, bytes)."""
    if isinstance(value, str):
        return java_string_hash(value)
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return value
        v = value & 0xFFFF_FFFF_FFFF_FFFF  # Long.hashCode: (int)(v ^ (v >>> 32))
        h = (v ^ (v >> 32)) & 0xFFFF_FFFF
        return h - (1 << 32) if h & 0x8000_0000 else h
    return java_string_hash(str(value))


def select_by_hash(mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """`SelectMessageQueueByHash`: `abs(arg.hashCode() % n)` (Java's remainder keeps the sign)."""
    del msg
    h = _java_hash(arg)
    value = abs(h) % len(mqs)  # == abs(h % n) for Java's truncating remainder
    return mqs[value]


def select_by_sharding_key(mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """The same hash over `arg`, or the message's sharding key (`__SHARDING_KEY`), or its keys."""
    key = arg if arg is not None else msg.sharding_key or msg.keys
    if key is None:
        raise ClientStateError("select_by_sharding_key needs an arg or a message sharding key")
    return select_by_hash(mqs, msg, key)


def select_random(mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    del msg, arg
    return random.choice(list(mqs))


def check_topic(topic: str) -> None:
    """`Validators.checkTopic` + the not-allowed-send set."""
    if not topic:
        raise MessageIllegalError("the specified topic is blank")
    if not TOPIC_NAME_RE.match(topic):
        raise MessageIllegalError(f"the specified topic[{topic}] contains illegal characters")
    if len(topic.encode("utf-8")) > TOPIC_MAX_LENGTH:
        raise MessageIllegalError(f"the specified topic is longer than {TOPIC_MAX_LENGTH} bytes")
    if topic in NOT_ALLOWED_SEND_TOPICS:
        raise MessageIllegalError(f"sending message to topic[{topic}] is forbidden")


class AsyncProducer(AsyncClientBase):
    """An asyncio producer; `start()` before sending, `close()` after (or `async with`).

    `config=`, or `instance_name=` and `access_key` / `secret_key` (/ `security_token`) to sign
    requests for a broker with ACL: see `ClientOptions`.
    """

    kind = "producer"

    def __init__(
        self,
        group: str = "DEFAULT_PRODUCER",
        namesrv_addr: str | None = None,
        *,
        send_timeout: float = 3.0,
        retry_times_when_send_failed: int = 2,
        retry_times_when_send_async_failed: int = 2,
        compress_over: int = 4096,
        compress_level: int = 5,
        max_message_size: int = 4 * 1024 * 1024,
        default_topic_queue_nums: int = 4,
        create_topic_key: str = DEFAULT_TOPIC,
        retry_backoff: float = 0.05,
        **options: Unpack[ClientOptions],
    ) -> None:
        super().__init__(group, namesrv_addr, **options)
        self.send_timeout = send_timeout
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_times_when_send_async_failed = retry_times_when_send_async_failed
        self.compress_over = compress_over
        self.compress_level = compress_level
        self.max_message_size = max_message_size
        self.default_topic_queue_nums = default_topic_queue_nums
        self.create_topic_key = create_topic_key
        self.retry_backoff = retry_backoff
        self._topics: set[str] = set()
        self._index: dict[str, int] = {}
        self._pending: set[asyncio.Task[Any]] = set()

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        if self._instance is not None:
            return
        instance = await self._acquire_instance()
        self._instance = instance
        await instance.send_heartbeat_to_all()

    async def close(self) -> None:
        instance, self._instance = self._instance, None
        if instance is None:
            return
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        await self._release_instance(instance)

    def _register(self, instance: ClientInstance) -> None:
        instance.register_producer(self)

    async def _unregister(self, instance: ClientInstance) -> None:
        await instance.unregister_producer(self.group)

    @property
    def client_id(self) -> str:
        return self.instance.client_id

    # -- ClientInstance member protocol -----------------------------------------------------
    def publish_topics(self) -> set[str]:
        return set(self._topics)

    def on_check_transaction(
        self, conn: Connection, header: CheckTransactionStateRequestHeader, body: bytes
    ) -> None:
        del conn, body
        log.warning("producer %s got a transaction check (%s) but has no listener", self.group, header.msg_id)

    # -- routes ----------------------------------------------------------------------------
    async def publish_info(self, topic: str) -> TopicPublishInfo:
        """`tryToFindTopicPublishInfo`: cached route, the name server, then the TBW102 template."""
        instance = self.instance
        self._topics.add(topic)
        info = instance.publish_info(topic)
        if info is None or not info.queues:
            await instance.update_topic_route(topic)
            info = instance.publish_info(topic)
        if info is None or not info.queues:
            await instance.update_topic_route(
                topic, default_topic=self.create_topic_key, default_queue_nums=self.default_topic_queue_nums
            )
            info = instance.publish_info(topic)
        if info is None or not info.queues:
            raise NoRouteError(await instance.no_route_reason(topic))
        return info

    async def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        return list((await self.publish_info(topic)).queues)

    def _select_queue(self, topic: str, info: TopicPublishInfo, last_broker: str | None) -> MessageQueue:
        """Round-robin, skipping the broker that just failed when another one is available."""
        queues = info.queues
        start = self._index.get(topic, random.randrange(len(queues)))
        self._index[topic] = start + 1
        if last_broker is not None:
            for i in range(len(queues)):
                mq = queues[(start + i) % len(queues)]
                if mq.broker_name != last_broker:
                    self._index[topic] = start + i + 1
                    return mq
        return queues[start % len(queues)]

    # -- sending ---------------------------------------------------------------------------
    def _check_message(self, msg: Message) -> None:
        check_topic(msg.topic)
        if not msg.body:
            raise MessageIllegalError("the message body is empty")
        if len(msg.body) > self.max_message_size:
            raise MessageIllegalError(
                f"the message body size {len(msg.body)} exceeds the maximum {self.max_message_size}"
            )

    async def send(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout: float | None = None,
    ) -> SendResult:
        """Send and wait for the broker's answer (`SendResult`); raises a `ClientError` on failure."""
        result = await self._send(msg, queue, selector, arg, timeout, self.retry_times_when_send_failed)
        assert result is not None
        return result

    def send_async(
        self,
        msg: Message,
        callback: SendCallback | None = None,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout: float | None = None,
    ) -> asyncio.Task[SendResult]:
        """Start a send in the background; the task (and `callback(result, error)`) get the outcome."""
        self.instance  # noqa: B018 - raises when not started

        async def run() -> SendResult:
            result = await self._send(
                msg, queue, selector, arg, timeout, self.retry_times_when_send_async_failed
            )
            assert result is not None
            return result

        task = asyncio.get_running_loop().create_task(run())
        self._pending.add(task)

        def done(t: asyncio.Task[SendResult]) -> None:
            self._pending.discard(t)
            if t.cancelled():
                return
            exc = t.exception()
            if callback is not None:
                try:
                    callback(None if exc else t.result(), exc)
                except Exception:
                    log.exception("send callback failed")

        task.add_done_callback(done)
        return task

    async def request(self, msg: Message, timeout: float = 3.0) -> MessageExt:
        """Send `msg` as a request and return its reply (`DefaultMQProducer.request`): the message
        gets CORRELATION_ID, REPLY_TO_CLIENT and TTL; a consumer answers it with `reply` (or
        `send(create_reply_message(msg, body))`). Raises `RequestTimeoutError` (naming the topic
        and the correlation id) when no reply comes within `timeout` seconds."""
        return await send_request(self, msg, timeout)

    async def reply(self, request: Message, body: bytes | str, *, timeout: float | None = None) -> SendResult:
        """Answer a received request message: `create_reply_message(request, body)` sent with
        SEND_REPLY_MESSAGE_V2, once. The broker pushes it to the requester; a requester that is
        gone raises `BrokerSystemError` naming it."""
        # One attempt: the broker stores a reply even when it cannot push it, so a retry of an
        # undeliverable reply would only store it again.
        result = await self._send(create_reply_message(request, body), None, None, None, timeout, 0)
        assert result is not None
        return result

    async def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> None:
        """Send without waiting for (or getting) an answer; one attempt, as in Java."""
        await self._send(msg, queue, selector, arg, None, 0, oneway=True)

    async def _send(
        self,
        msg: Message,
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        arg: Any,
        timeout: float | None,
        retries: int,
        *,
        oneway: bool = False,
    ) -> SendResult | None:
        self._check_message(msg)
        if MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX not in msg.properties:
            msg.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = self.instance.uniq_ids.next_id()
        body, sys_flag = self._encode_body(msg)
        return await self._send_with_retries(
            msg.topic,
            queue,
            lambda info: selector(list(info.queues), msg, arg) if selector is not None else None,
            lambda mq, left: self._send_kernel(msg, mq, body, sys_flag, left, oneway=oneway),
            timeout,
            retries,
        )

    def _encode_body(self, msg: Message) -> tuple[bytes, int]:
        sys_flag = 0
        body = msg.body
        if len(body) >= self.compress_over:
            body = zlib.compress(body, self.compress_level)
            sys_flag |= MessageSysFlag.COMPRESSED_FLAG
        if msg.properties.get(MessageConst.TRANSACTION_PREPARED) == "true":
            sys_flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
        return body, sys_flag

    async def _send_with_retries(
        self,
        topic: str,
        queue: MessageQueue | None,
        select: Callable[[TopicPublishInfo], MessageQueue | None],
        attempt_send: Callable[[MessageQueue, float], Awaitable[R]],
        timeout: float | None,
        retries: int,
    ) -> R:
        """`sendDefaultImpl`'s loop: up to 1 + retries attempts within one deadline."""
        limit = self.send_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        last_broker: str | None = None
        last_error: ClientError | None = None
        for attempt in range(1 + max(0, retries)):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                mq = queue
                if mq is None:
                    info = await self.publish_info(topic)
                    mq = select(info) or self._select_queue(topic, info, last_broker)
                last_broker = mq.broker_name
                return await attempt_send(mq, left)
            except ClientError as exc:
                last_error = exc
                if not exc.retriable:
                    raise
                log.info("send to %s failed (attempt %d): %s", topic, attempt + 1, exc)
                if exc.response_code == ResponseCode.TOPIC_NOT_EXIST:
                    await self._refresh_route_quietly(topic)
                if exc.response_code in BACKOFF_CODES:
                    pause = min(self.retry_backoff * (2**attempt), max(0.0, deadline - time.monotonic()))
                    await asyncio.sleep(pause)
        if last_error is not None:
            raise last_error
        raise RemotingTimeoutError(f"sending to {topic} timed out after {limit:.1f}s")

    async def _master_addr(self, mq: MessageQueue) -> str:
        """`findBrokerAddressInPublish`, then the topic's route (TBW102 fallback included)."""
        addr = self.instance.master_addr(mq.broker_name)
        if addr is None:
            await self.publish_info(mq.topic)
            addr = self.instance.master_addr(mq.broker_name)
        if addr is None:
            raise NoRouteError(f"broker {mq.broker_name} of topic {mq.topic} has no master address")
        return addr

    async def _refresh_route_quietly(self, topic: str) -> None:
        try:
            await self.instance.update_topic_route(topic)
        except ClientError as exc:
            log.debug("route refresh for %s failed: %s", topic, exc)

    def _retry_counts(self, topic: str, props: dict[str, str]) -> tuple[int, int | None]:
        """(reconsume times, max reconsume times) a send to a %RETRY% topic carries in its header."""
        if not topic.startswith(RETRY_PREFIX):
            return 0, None
        text = props.get(MessageConst.RECONSUME_TIME)
        reconsume_times = int(text) if text and text.isdigit() else 0
        text = props.get(MessageConst.MAX_RECONSUME_TIMES)
        return reconsume_times, int(text) if text and text.isdigit() else None

    async def _send_kernel(
        self, msg: Message, mq: MessageQueue, body: bytes, sys_flag: int, timeout: float, *, oneway: bool
    ) -> SendResult | None:
        instance = self.instance
        addr = await self._master_addr(mq)
        reconsume_times, max_reconsume_times = self._retry_counts(msg.topic, msg.properties)
        if is_reply(msg.properties):  # MSG_TYPE=reply: SEND_REPLY_MESSAGE_V2, as Java's sendKernelImpl
            cmd = build_send_reply(
                group=self.group, topic=msg.topic, queue_id=mq.queue_id, body=body,
                properties=_props_string(msg.properties), born_timestamp=int(time.time() * 1000),
                sys_flag=sys_flag, flag=msg.flag, default_topic=self.create_topic_key,
                default_topic_queue_nums=self.default_topic_queue_nums, broker_name=mq.broker_name,
            )  # fmt: skip
        else:
            cmd = build_send(
                group=self.group,
                topic=msg.topic,
                queue_id=mq.queue_id,
                body=body,
                properties=_props_string(msg.properties),
                born_timestamp=int(time.time() * 1000),
                sys_flag=sys_flag,
                flag=msg.flag,
                reconsume_times=reconsume_times,
                max_reconsume_times=max_reconsume_times,
                default_topic=self.create_topic_key,
                default_topic_queue_nums=self.default_topic_queue_nums,
                broker_name=mq.broker_name,
            )
        if oneway:
            await instance.invoke_oneway(addr, cmd)
            return None
        return _send_result(await instance.invoke(addr, cmd, timeout), mq, msg.properties)

    # -- batches ---------------------------------------------------------------------------
    async def send_batch(
        self, msgs: Sequence[Message], *, queue: MessageQueue | None = None, timeout: float | None = None
    ) -> list[SendResult]:
        """Send messages of one topic as SEND_BATCH_MESSAGE requests, split to fit `max_message_size`.

        Each request goes to one queue and gets one `SendResult` (msg ids comma-joined). Batches
        cannot be delayed or sent to retry topics, as in Java.
        """
        if not msgs:
            return []
        topic = msgs[0].topic
        for m in msgs:
            if m.topic != topic:
                raise MessageIllegalError("all messages of a batch must have the same topic")
            if m.delay_level > 0:
                raise MessageIllegalError("batch messages cannot be delayed")
            if m.topic.startswith(RETRY_PREFIX):
                raise MessageIllegalError("batch messages cannot be sent to a retry topic")
            self._check_message(m)
            if MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX not in m.properties:
                m.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = self.instance.uniq_ids.next_id()
        results = []
        for chunk in self.split_batch(msgs):
            entries = [BatchEntry(m.flag, m.body, _props_string(m.properties)) for m in chunk]
            body = encode_batch(entries)

            async def attempt(
                mq: MessageQueue, left: float, c: list[Message] = chunk, b: bytes = body
            ) -> SendResult:
                return await self._send_batch_kernel(c, mq, b, left)

            results.append(
                await self._send_with_retries(
                    topic, queue, lambda info: None, attempt, timeout, self.retry_times_when_send_failed
                )
            )
        return results

    def split_batch(self, msgs: Sequence[Message]) -> list[list[Message]]:
        """Consecutive chunks whose encoded batch body stays within `max_message_size`."""
        chunks: list[list[Message]] = []
        current: list[Message] = []
        size = 0
        for m in msgs:
            entry = ENTRY_OVERHEAD + len(m.body) + len(_props_string(m.properties).encode("utf-8"))
            if entry > self.max_message_size:
                raise MessageIllegalError(
                    f"a batch message of {entry} bytes exceeds the maximum {self.max_message_size}"
                )
            if current and size + entry > self.max_message_size:
                chunks.append(current)
                current, size = [], 0
            current.append(m)
            size += entry
        if current:
            chunks.append(current)
        return chunks

    async def _send_batch_kernel(
        self, chunk: list[Message], mq: MessageQueue, body: bytes, timeout: float
    ) -> SendResult:
        instance = self.instance
        addr = await self._master_addr(mq)
        first = chunk[0]
        props = {}
        if first.properties.get(MessageConst.WAIT_STORE_MSG_OK) == "false":
            props[MessageConst.WAIT_STORE_MSG_OK] = "false"
        cmd = build_send_batch(
            group=self.group,
            topic=first.topic,
            queue_id=mq.queue_id,
            body=body,
            properties=_props_string(props),
            born_timestamp=int(time.time() * 1000),
            default_topic=self.create_topic_key,
            default_topic_queue_nums=self.default_topic_queue_nums,
            broker_name=mq.broker_name,
        )
        response = await instance.invoke(addr, cmd, timeout)
        uniq = ",".join(m.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for m in chunk)
        return _send_result(response, mq, {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq})


def _props_string(props: dict[str, str]) -> str:
    return properties_to_string(props)


def _send_result(response: RemotingCommand, mq: MessageQueue, props: dict[str, str]) -> SendResult:
    """`processSendResponse`: SUCCESS and the flush/slave codes give a result, others raise."""
    sent: SendResponse = parse_answer(parse_send, response)
    return SendResult(
        status=sent.status,
        msg_id=props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, sent.offset_msg_id),
        offset_msg_id=sent.offset_msg_id,
        queue=MessageQueue(mq.topic, mq.broker_name, sent.queue_id),
        queue_offset=sent.queue_offset,
        transaction_id=sent.transaction_id,
        region_id=sent.region_id,
        trace_on=sent.trace_on,
    )
