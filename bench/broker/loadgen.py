"""Request building and the unmeasured steps against our broker: the Java-shaped SEND_MESSAGE_V2,
SEND_BATCH_MESSAGE and PULL_MESSAGE requests (which bench/broker/frames.py encodes once into
prebuilt frames), warm-up sends and the wait until the dispatcher caught up, through rocketlite's
own remoting `Connection`; and the pacing and latency log that both sides' latency phases share.
The measured phases run in bench/broker/workers.py processes."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Final

from bench.broker.config import (
    CONNECTIONS,
    CONSUMER_GROUP,
    DEFAULT_TOPIC,
    PACE_TICK,
    PRODUCER_GROUP,
    PULL_BATCH,
    SEND_NS,
    SEND_V2_BORN_TS,
    SEND_V2_PROPERTIES,
)
from rocketlite.protocol.codes import PullSysFlag, RequestCode, ResponseCode, SerializeType
from rocketlite.protocol.formats.batch import BatchEntry, encode_batch
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import PullMessageRequestHeader, SendMessageRequestHeader
from rocketlite.remoting.connection import Connection, RequestTable, next_opaque


# -- our client side ----------------------------------------------------------------------------
def submit(conn: Connection, cmd: RemotingCommand) -> asyncio.Future[RemotingCommand]:
    """`Connection.request` without its per-request `wait_for` (phases are bounded as a whole):
    register a future under a fresh opaque and send; the connection resolves it."""
    loop = conn.loop
    if loop is None or conn.closed:
        raise ConnectionError("connection closed")
    cmd.opaque = next_opaque()
    fut: asyncio.Future[RemotingCommand] = loop.create_future()
    conn.pending[cmd.opaque] = fut
    conn.send(cmd)
    return fut


async def open_broker(port: int, n: int) -> list[Connection]:
    loop = asyncio.get_running_loop()
    conns: list[Connection] = []
    for _ in range(n):
        _t, conn = await loop.create_connection(lambda: Connection(RequestTable()), "127.0.0.1", port)
        conns.append(conn)
    return conns


def close_all(conns: list[Connection]) -> None:
    for c in conns:
        c.close()


_uniq_counter = 0


def uniq_key() -> str:
    """A 32-hex-digit UNIQ_KEY like the Java client's (ip, pid, counter)."""
    global _uniq_counter
    _uniq_counter += 1
    return f"7F000001{os.getpid() & 0xFFFF:04X}{_uniq_counter:020X}"


def single_properties() -> str:
    return f"TAGS\x01TagA\x02UNIQ_KEY\x01{uniq_key()}\x02WAIT\x01true"


class Sender:
    """Builds SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE requests for one topic-queue, as Java does."""

    def __init__(
        self, topic: str, queue_id: int, *, batch: bool, serialize: SerializeType = SerializeType.JSON
    ) -> None:
        self.serialize = serialize
        header = SendMessageRequestHeader(
            producer_group=PRODUCER_GROUP,
            topic=topic,
            default_topic=DEFAULT_TOPIC,
            default_topic_queue_nums=CONNECTIONS,
            queue_id=queue_id,
            sys_flag=0,
            born_timestamp=0,
            flag=0,
            properties="WAIT\x01true" if batch else "",
            reconsume_times=0,
            batch=batch,
        )
        self.template = header.to_ext_v2()
        self.batch = batch

    def single(self, body: bytes) -> RemotingCommand:
        ext = self.template.copy()
        ext[SEND_V2_BORN_TS] = str(time.time_ns() // 1_000_000)
        ext[SEND_V2_PROPERTIES] = single_properties()
        return make_request(RequestCode.SEND_MESSAGE_V2, ext, body, serialize_type=self.serialize)

    def batch_of(self, body: bytes, n: int) -> RemotingCommand:
        entries = [BatchEntry(0, body, f"TAGS\x01TagA\x02UNIQ_KEY\x01{uniq_key()}") for _ in range(n)]
        ext = self.template.copy()
        ext[SEND_V2_BORN_TS] = str(time.time_ns() // 1_000_000)
        return make_request(
            RequestCode.SEND_BATCH_MESSAGE, ext, encode_batch(entries), serialize_type=self.serialize
        )


def pull_template(topic: str, queue_id: int, *, suspend_ms: int) -> dict[str, str]:
    flags = PullSysFlag.SUBSCRIPTION | (PullSysFlag.SUSPEND if suspend_ms else 0)
    return PullMessageRequestHeader(
        consumer_group=CONSUMER_GROUP,
        topic=topic,
        queue_id=queue_id,
        queue_offset=0,
        max_msg_nums=PULL_BATCH,
        sys_flag=flags,
        commit_offset=0,
        suspend_timeout_millis=suspend_ms,
        subscription="*",
        sub_version=0,
        expression_type="TAG",
    ).to_ext()


def pull_request(
    template: dict[str, str], offset: int, serialize: SerializeType = SerializeType.JSON
) -> RemotingCommand:
    ext = template.copy()
    ext["queueOffset"] = str(offset)
    return make_request(RequestCode.PULL_MESSAGE, ext, serialize_type=serialize)


class PullUnsupportedError(RuntimeError):
    """The broker answered PULL_MESSAGE with REQUEST_CODE_NOT_SUPPORTED."""


def check_pull_code(resp: RemotingCommand) -> None:
    if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        raise PullUnsupportedError(f"PULL_MESSAGE not supported by this broker ({resp.remark})")


# -- consume phases -------------------------------------------------------------------------------
_NOT_YET_CODES: Final = frozenset(
    {ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED}
)


async def ours_wait_dispatched(
    conn: Connection, topic: str, targets: list[int], timeout: float = 60.0, *, pull_optional: bool = False
) -> bool:
    """Until the last message of every queue can be pulled (the dispatcher caught up). With
    `pull_optional`, a broker without PULL_MESSAGE gets a second instead (and False is returned)."""
    deadline = time.monotonic() + timeout
    for q, target in enumerate(targets):
        if target == 0:
            continue
        template = pull_template(topic, q, suspend_ms=0)
        while True:
            resp = await submit(conn, pull_request(template, target - 1))
            if pull_optional and resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                await asyncio.sleep(1.0)
                return False
            check_pull_code(resp)
            if resp.code == ResponseCode.SUCCESS:
                break
            # Not dispatched that far yet: 19 at maxOffset, 21 (OFFSET_OVERFLOW_BADLY) beyond it.
            not_yet = int(resp.ext_fields.get("maxOffset", "-1")) < target
            if not not_yet or resp.code not in _NOT_YET_CODES:
                raise RuntimeError(f"pull of {topic}:{q}@{target - 1}: code {resp.code} {resp.remark}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}:{q} not dispatched up to {target} after {timeout:.0f} s")
            await asyncio.sleep(0.01)
    return True


# -- latency phases -------------------------------------------------------------------------------
def latency_body(size: int) -> Callable[[], bytes]:
    pad = os.urandom(max(0, size - SEND_NS.size))

    def make() -> bytes:
        return SEND_NS.pack(time.perf_counter_ns()) + pad

    return make


async def paced(rate: float, seconds: float, send: Callable[[int], None]) -> int:
    """Call `send(k)` (k = 0, 1, ...) `rate` times a second for `seconds`, catching up each tick.

    Ticks are 1 ms apart: uvloop's timers have millisecond resolution and a shorter sleep returns
    at once, which would turn this loop into a spin taking a core from the servers."""
    t0 = time.perf_counter()
    sent = 0
    while True:
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return sent
        due = int(elapsed * rate) + 1
        while sent < due:
            send(sent)
            sent += 1
        await asyncio.sleep(max(PACE_TICK, (sent / rate) - (time.perf_counter() - t0)))


class LatencyLog:
    def __init__(self, t_start_ns: int) -> None:
        self.t_start_ns = t_start_ns
        self.values_ms: list[float] = []
        self.received = 0

    def add(self, body: bytes, now_ns: int) -> None:
        (sent_ns,) = SEND_NS.unpack_from(body, 0)
        if sent_ns >= self.t_start_ns:
            self.received += 1
            self.values_ms.append((now_ns - sent_ns) / 1e6)
