"""The load generator against our broker: raw remoting connections, batch and windowed single
sends, pulls until everything is read back, and the paced latency phase."""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Callable
from typing import Any, Final

from bench.broker.config import (
    BATCH,
    CONNECTIONS,
    CONSUMER_GROUP,
    DEFAULT_TOPIC,
    PACE_TICK,
    PRODUCER_GROUP,
    PULL_BATCH,
    SEND_NS,
    SEND_V2_BORN_TS,
    SEND_V2_PROPERTIES,
    WINDOW,
    out,
)
from bench.broker.report import Budget, Meter, PhaseResult
from rocketlite.protocol.batch import BatchEntry, encode_batch
from rocketlite.protocol.codes import PullSysFlag, RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand, make_request
from rocketlite.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeader
from rocketlite.protocol.record import INT, SYSFLAG_POS, layout_for
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

    def __init__(self, topic: str, queue_id: int, *, batch: bool) -> None:
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
        return make_request(RequestCode.SEND_MESSAGE_V2, ext, body)

    def batch_of(self, body: bytes, n: int) -> RemotingCommand:
        entries = [BatchEntry(0, body, f"TAGS\x01TagA\x02UNIQ_KEY\x01{uniq_key()}") for _ in range(n)]
        ext = self.template.copy()
        ext[SEND_V2_BORN_TS] = str(time.time_ns() // 1_000_000)
        return make_request(RequestCode.SEND_BATCH_MESSAGE, ext, encode_batch(entries))


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


def pull_request(template: dict[str, str], offset: int) -> RemotingCommand:
    ext = template.copy()
    ext["queueOffset"] = str(offset)
    return make_request(RequestCode.PULL_MESSAGE, ext)


def record_bodies(buf: bytes) -> list[bytes]:
    """The bodies of the stored records of a pull answer. Only SYSFLAG, BODYLEN and the body of each
    record are read (positions from rocketlite.protocol.record): decoding whole records would make
    the load generator, not the broker, the consume phase's bottleneck."""
    bodies: list[bytes] = []
    pos, end = 0, len(buf)
    unpack = INT.unpack_from
    while pos < end:
        (total,) = unpack(buf, pos)
        if total <= 0:
            raise RuntimeError(f"bad record size {total} at {pos} of a pull answer")
        (sys_flag,) = unpack(buf, pos + SYSFLAG_POS)
        at = pos + layout_for(sys_flag).body_len_pos
        (body_len,) = unpack(buf, at)
        bodies.append(buf[at + 4 : at + 4 + body_len])
        pos += total
    return bodies


class PullUnsupportedError(RuntimeError):
    """The broker answered PULL_MESSAGE with REQUEST_CODE_NOT_SUPPORTED."""


def check_pull_code(resp: RemotingCommand) -> None:
    if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        raise PullUnsupportedError(f"PULL_MESSAGE not supported by this broker ({resp.remark})")


# -- produce phases -------------------------------------------------------------------------------
async def ours_produce_batch(
    conns: list[Connection], topic: str, body: bytes, budget: Budget, meter_of: Callable[[], Meter]
) -> PhaseResult:
    senders = [Sender(topic, i, batch=True) for i in range(len(conns))]
    acked = [0] * len(conns)
    failures: list[str] = []
    meter = meter_of()
    deadline = budget.start()

    async def run(i: int) -> None:
        conn, sender = conns[i], senders[i]
        while acked[i] + BATCH <= budget.cap_per_conn and time.perf_counter() < deadline:
            resp = await submit(conn, sender.batch_of(body, BATCH))
            if resp.code != ResponseCode.SUCCESS:
                failures.append(f"code {resp.code}: {resp.remark}")
                return
            acked[i] += BATCH

    await asyncio.gather(*(run(i) for i in range(len(conns))))
    res = meter.result(sum(acked), acked)
    if failures:
        raise RuntimeError(f"{len(failures)} batch sends failed, first: {failures[0]}")
    return res


async def windowed(
    n_conns: int,
    issue: Callable[[int], asyncio.Future[Any]],
    ok: Callable[[Any], str | None],
    budget: Budget,
    meter: Meter,
) -> PhaseResult:
    """Keep WINDOW requests in flight on each connection until the budget runs out; every answer
    (a done callback, no task per request) issues the next one."""
    loop = asyncio.get_running_loop()
    acked = [0] * n_conns
    issued = [0] * n_conns
    inflight = [0] * n_conns
    failures: list[str] = []
    done = loop.create_future()
    deadline = budget.start()
    open_conns = [n_conns]

    def finish_conn() -> None:
        open_conns[0] -= 1
        if open_conns[0] == 0 and not done.done():
            done.set_result(None)

    def fire(i: int) -> None:
        fut = issue(i)
        issued[i] += 1
        inflight[i] += 1
        fut.add_done_callback(lambda f: answered(i, f))

    def answered(i: int, fut: asyncio.Future[Any]) -> None:
        inflight[i] -= 1
        if fut.cancelled() or fut.exception() is not None:
            failures.append(repr(fut.exception()) if not fut.cancelled() else "cancelled")
        else:
            problem = ok(fut.result())
            if problem is None:
                acked[i] += 1
            else:
                failures.append(problem)
        if not failures and issued[i] < budget.cap_per_conn and time.perf_counter() < deadline:
            fire(i)
        elif inflight[i] == 0:
            finish_conn()

    for i in range(n_conns):
        for _ in range(min(WINDOW, budget.cap_per_conn)):
            fire(i)
    await done
    res = meter.result(sum(acked), acked)
    if failures:
        raise RuntimeError(f"{len(failures)} sends failed, first: {failures[0]}")
    return res


def _send_ok(resp: RemotingCommand) -> str | None:
    return None if resp.code == ResponseCode.SUCCESS else f"code {resp.code}: {resp.remark}"


async def ours_produce_single(
    conns: list[Connection], topic: str, body: bytes, budget: Budget, meter_of: Callable[[], Meter]
) -> PhaseResult:
    senders = [Sender(topic, i, batch=False) for i in range(len(conns))]

    def issue(i: int) -> asyncio.Future[RemotingCommand]:
        return submit(conns[i], senders[i].single(body))

    return await windowed(len(conns), issue, _send_ok, budget, meter_of())


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


async def ours_consume(
    conns: list[Connection], topic: str, targets: list[int], seconds: float, meter_of: Callable[[], Meter]
) -> PhaseResult:
    got = [0] * len(conns)
    meter = meter_of()
    deadline = time.perf_counter() + seconds

    async def run(q: int) -> None:
        conn, template = conns[q], pull_template(topic, q, suspend_ms=0)
        offset = 0
        while got[q] < targets[q] and time.perf_counter() < deadline:
            resp = await submit(conn, pull_request(template, offset))
            check_pull_code(resp)
            if resp.code == ResponseCode.SUCCESS:
                got[q] += len(record_bodies(resp.body or b""))
                offset = int(resp.ext_fields["nextBeginOffset"])
            elif resp.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
                await asyncio.sleep(0.001)
            else:
                raise RuntimeError(f"pull of {topic}:{q}@{offset}: code {resp.code} {resp.remark}")

    await asyncio.gather(*(run(q) for q in range(len(conns))))
    return meter.result(sum(min(g, t) for g, t in zip(got, targets, strict=True)), got)


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


async def ours_latency(
    port: int, topic: str, size: int, seconds: float, rate: float, meter_of: Callable[[], Meter]
) -> PhaseResult:
    producers = await open_broker(port, CONNECTIONS)
    consumers = await open_broker(port, CONNECTIONS)
    make_body = latency_body(size)
    senders = [Sender(topic, q, batch=False) for q in range(CONNECTIONS)]
    try:
        # Create the topic and its 16 queues (one message each, sent before the measurement).
        warm = [submit(producers[q], senders[q].single(make_body())) for q in range(CONNECTIONS)]
        for resp in await asyncio.gather(*warm):
            if resp.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"warm-up send: code {resp.code} {resp.remark}")
        # Wait until they can be pulled: creating the consume queues of a new topic is not measured.
        t_new = time.perf_counter()
        await ours_wait_dispatched(consumers[0], topic, [1] * CONNECTIONS)
        out(
            f"  (new topic {topic}: its {CONNECTIONS} queues' first messages were pullable "
            f"{(time.perf_counter() - t_new) * 1000:.0f} ms after their acks)"
        )
        log = LatencyLog(time.perf_counter_ns())
        stop = [False]
        failures: list[str] = []

        async def consume(q: int) -> None:
            conn, template = consumers[q], pull_template(topic, q, suspend_ms=1000)
            offset = 0
            while not stop[0]:
                try:
                    resp = await submit(conn, pull_request(template, offset))
                except ConnectionError:
                    return
                now = time.perf_counter_ns()
                check_pull_code(resp)
                if resp.code == ResponseCode.SUCCESS:
                    for b in record_bodies(resp.body or b""):
                        log.add(b, now)
                    offset = int(resp.ext_fields["nextBeginOffset"])
                elif resp.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
                    offset = int(resp.ext_fields.get("nextBeginOffset", offset))
                else:
                    raise RuntimeError(f"long poll of {topic}:{q}: code {resp.code} {resp.remark}")

        tasks = [asyncio.ensure_future(consume(q)) for q in range(CONNECTIONS)]
        await asyncio.sleep(0.2)  # let the first pulls reach the hold service
        acks: list[asyncio.Future[RemotingCommand]] = []

        ack_ms: list[float] = []

        def note(t0: int, fut: asyncio.Future[RemotingCommand]) -> None:
            ack_ms.append((time.perf_counter_ns() - t0) / 1e6)
            if fut.cancelled() or fut.exception() is not None or fut.result().code != ResponseCode.SUCCESS:
                failures.append("send failed")

        def send(k: int) -> None:
            q = k % CONNECTIONS
            t0 = time.perf_counter_ns()
            fut = submit(producers[q], senders[q].single(make_body()))
            fut.add_done_callback(functools.partial(note, t0))
            acks.append(fut)

        meter = meter_of()
        sent = await paced(rate, seconds, send)
        await asyncio.gather(*acks, return_exceptions=True)
        grace = time.perf_counter() + max(3.0, seconds)  # a backlog drains
        while log.received < sent and time.perf_counter() < grace:
            await asyncio.sleep(0.01)
        res = meter.result(log.received)
        stop[0] = True
        close_all(consumers)
        for t in tasks:
            if t.done() and t.exception() is not None:
                raise t.exception()  # type: ignore[misc]
        await asyncio.gather(*tasks, return_exceptions=True)
        if failures:
            raise RuntimeError(f"{len(failures)} latency-phase sends failed")
        res.latencies_ms = sorted(log.values_ms)
        res.ack_latencies_ms = sorted(ack_ms)
        res.sent = sent
        return res
    finally:
        close_all(producers)
        close_all(consumers)
