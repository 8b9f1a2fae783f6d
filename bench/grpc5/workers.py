"""Load-generator processes for the 5.x gRPC endpoint: prebuilt request bytes out, answers counted.

Each worker is a separate process (spawn) with its own event loop and gRPC channels, driven by the
parent over a pipe like bench/broker/workers.py: `prepare` (channels, requests), "ready", "go",
run, result. Requests are serialized once with the generated stubs and sent as bytes (the channel
has no serializer); only the message id is patched into each copy, so the generator's cost per
message is the gRPC call itself. Answers are parsed (status codes checked: a failure fails the
phase). Jobs:

* `send`: `window` SendMessage calls in flight, `batch` messages each, until `cap` or the deadline;
* `receive`: `window` ReceiveMessage streams in flight (32 a call), each batch acked with one
  AckMessage, until a receive finds nothing (the topic is drained) or the deadline; the phase
  ends at the last ack;
* `latency`: SendMessage paced at `rate` (CLOCK_MONOTONIC send time in the body's first 8 bytes)
  and `window` long-polling receivers in the same process, so both times come from one clock.
  Exactly `rate` x `seconds` messages are sent (a pacing tick late at the end still sends its
  share). All workers' receivers share one consumer group, so a worker receives the others'
  messages too: the workers count sent and received messages in one shared `Tally`, and every
  worker keeps receiving until all of them have finished sending and everything sent was
  received (or the grace ran out). A worker that stopped on its own count cancelled its
  receive streams with the others' messages in them: those stayed invisible (60 s), and the
  phase reported them "not received". A receiver acks each batch before it receives again;
  with `ack_behind` (`--ack-behind`) it sends the ack and receives again at once, as RocketMQ's
  PushConsumer acks, and the acks' answers are checked at the end.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import struct
import time
import traceback
import zlib
from dataclasses import dataclass, field
from multiprocessing.connection import Connection as Pipe
from multiprocessing.sharedctypes import SynchronizedArray
from typing import Any, Final

from rocketlite.runtime import new_event_loop

SERVICE: Final = "/apache.rocketmq.v2.MessagingService/"
SEND_NS: Final = struct.Struct(">q")
ID_DIGITS: Final = 24  # the patched tail of each message id ("01" + 8 hex of the worker + 24)
MESSAGE_ID_LENGTH: Final = 2 + 8 + ID_DIGITS  # what these workers send (4.x UNIQ_KEYs have 32)
OK: Final = 20000
TOPIC_NOT_FOUND: Final = 40402  # apache.rocketmq.v2.Code
TOPIC_RETRY_S: Final = 0.01  # QueryAssignment again while the topic is being auto-created
PACE_TICK: Final = 0.001


@dataclass(frozen=True, slots=True)
class Job:
    kind: str  # "send" | "receive" | "latency"
    topic: str
    group: str = ""
    body_size: int = 1024
    seconds: float = 5.0
    window: int = 32  # calls in flight
    batch: int = 1  # messages per SendMessage
    cap: int = 0  # send: messages at most (0: no cap)
    rate: float = 0.0  # latency: messages/s of this worker
    grace: float = 3.0  # latency: s to wait for the last messages
    ack_behind: bool = False  # latency: ack without waiting for the answer before the next receive


@dataclass(slots=True)
class JobResult:
    messages: int = 0
    sent: int = 0
    start: float = 0.0
    end: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    ack_ms: list[float] = field(default_factory=list)  # latency: send -> SendMessage's answer
    lag_ms: list[float] = field(default_factory=list)  # latency: send time behind its schedule
    error: str = ""


class Tally:
    """The workers' shared counts of a latency job: [sent, received, workers done sending]."""

    SENT, RECEIVED, DONE = 0, 1, 2

    def __init__(self, shared: SynchronizedArray[int], workers: int) -> None:
        self.shared, self.workers = shared, workers

    def add(self, slot: int, n: int = 1) -> None:
        with self.shared.get_lock():
            self.shared[slot] += n

    def settled(self) -> bool:
        """Every worker has sent all it will, and every message sent was received."""
        with self.shared.get_lock():
            sent, received, done = self.shared[:]
        return done >= self.workers and received >= sent


class Calls:
    """Raw-bytes callables for the RPCs used, on `channels` channels taken in turn."""

    def __init__(self, grpc: Any, endpoint: str, client_id: str, channels: int = 2) -> None:
        self.channels = [grpc.aio.insecure_channel(endpoint) for _ in range(channels)]
        self.metadata = (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"), ("x-mq-protocol", "v2"))
        self._turn = itertools.cycle(range(channels))
        self.send = [c.unary_unary(SERVICE + "SendMessage") for c in self.channels]
        self.receive = [c.unary_stream(SERVICE + "ReceiveMessage") for c in self.channels]
        self.ack = [c.unary_unary(SERVICE + "AckMessage") for c in self.channels]
        self.assignment = self.channels[0].unary_unary(SERVICE + "QueryAssignment")

    def next(self) -> int:
        return next(self._turn)

    async def close(self) -> None:
        for channel in self.channels:
            await channel.close()


class Worker:
    def __init__(self, endpoint: str, tally: Tally) -> None:
        import grpc  # noqa: PLC0415

        from rocketlite.protocol.proto.v2 import definition_pb2, service_pb2  # noqa: PLC0415

        self.pb: Any = definition_pb2
        self.spb: Any = service_pb2
        self.prefix = f"01{os.getpid() & 0xFFFFFFFF:08X}"
        self.calls = Calls(grpc, endpoint, f"bench@{os.getpid()}@0@{self.prefix}")
        self.serial = itertools.count()
        self.tally = tally
        self.acks: set[asyncio.Future[Any]] = set()  # AckMessage calls not yet answered (ack_behind)

    # -- requests -------------------------------------------------------------------------------
    def message(self, topic: str, body: bytes) -> Any:
        pb = self.pb
        return pb.Message(
            topic=pb.Resource(name=topic),
            system_properties=pb.SystemProperties(
                tag="TagA",
                message_id=self.prefix + "0" * ID_DIGITS,
                body_digest=pb.Digest(type=pb.DigestType.CRC32, checksum=f"{zlib.crc32(body):08X}"),
                body_encoding=pb.Encoding.IDENTITY,
                message_type=pb.MessageType.NORMAL,
            ),
            body=body,
        )

    def send_template(self, topic: str, body: bytes, batch: int) -> tuple[bytes, list[int]]:
        """A serialized SendMessageRequest and where each message id's patched tail starts."""
        request = self.spb.SendMessageRequest(messages=[self.message(topic, body) for _ in range(batch)])
        raw = request.SerializeToString()
        needle = (self.prefix + "0" * ID_DIGITS).encode()
        spots, at = [], raw.find(needle)
        while at >= 0:
            spots.append(at + len(self.prefix))
            at = raw.find(needle, at + 1)
        assert len(spots) == batch, "message id not found once per message in the request"
        return raw, spots

    def patched(self, raw: bytes, spots: list[int]) -> bytes:
        buf = bytearray(raw)
        for spot in spots:
            buf[spot : spot + ID_DIGITS] = f"{next(self.serial):024X}".encode()
        return bytes(buf)

    def check_send(self, answer: bytes) -> int:
        response = self.spb.SendMessageResponse.FromString(answer)
        if response.status.code != OK:
            raise RuntimeError(f"SendMessage answered {response.status.code}: {response.status.message}")
        return len(response.entries)

    # -- jobs -----------------------------------------------------------------------------------
    async def run_send(self, job: Job, go: float) -> JobResult:
        raw, spots = self.send_template(job.topic, b"x" * job.body_size, job.batch)
        requests = [self.patched(raw, spots) for _ in range(4 * job.window)]  # distinct ids, reused
        res = JobResult(start=go)
        deadline = go + job.seconds
        cap = job.cap or 1 << 62
        calls = self.calls

        async def slot(n: int) -> None:
            i = n
            while time.monotonic() < deadline and res.sent < cap:
                res.sent += job.batch
                answer = await calls.send[calls.next()](requests[i % len(requests)], metadata=calls.metadata)
                res.messages += self.check_send(answer)
                i += job.window

        await asyncio.gather(*(slot(n) for n in range(job.window)))
        res.end = time.monotonic()
        return res

    async def queue(self, job: Job, until: float) -> Any:
        """The queue to receive from. The latency phase starts its receivers before its first
        send, whose topic the broker then creates (autoCreateTopicEnable): until it exists (or
        `until`), QueryAssignment answers TOPIC_NOT_FOUND and is asked again."""
        spb, pb = self.spb, self.pb
        request = spb.QueryAssignmentRequest(
            topic=pb.Resource(name=job.topic),
            group=pb.Resource(name=job.group),
            endpoints=pb.Endpoints(),
        ).SerializeToString()
        while True:
            answer = spb.QueryAssignmentResponse.FromString(
                await self.calls.assignment(request, metadata=self.calls.metadata)
            )
            if answer.status.code != TOPIC_NOT_FOUND or time.monotonic() >= until:
                break
            await asyncio.sleep(TOPIC_RETRY_S)
        if answer.status.code != OK or not answer.assignments:
            raise RuntimeError(f"QueryAssignment answered {answer.status.code}: {answer.status.message}")
        return answer.assignments[0].message_queue

    async def receive_loop(self, job: Job, res: JobResult, until: float, latency: bool) -> None:
        spb, pb, calls = self.spb, self.pb, self.calls
        queue = await self.queue(job, until)
        request = spb.ReceiveMessageRequest(
            group=pb.Resource(name=job.group),
            message_queue=queue,
            filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
            batch_size=32,
            invisible_duration={"seconds": 60},
            long_polling_timeout={"seconds": 5},
        ).SerializeToString()
        group, topic = pb.Resource(name=job.group), pb.Resource(name=job.topic)
        while time.monotonic() < until:
            entries = []
            stream = calls.receive[calls.next()](request, metadata=calls.metadata, timeout=30)
            async for raw in stream:
                now = time.monotonic_ns()
                item = spb.ReceiveMessageResponse.FromString(raw)
                if item.WhichOneof("content") != "message":
                    continue
                system = item.message.system_properties
                entries.append(
                    spb.AckMessageEntry(message_id=system.message_id, receipt_handle=system.receipt_handle)
                )
                if latency and len(system.message_id) == MESSAGE_ID_LENGTH:  # not a 4.x warm-up
                    (sent_ns,) = SEND_NS.unpack_from(item.message.body)
                    res.latencies_ms.append((now - sent_ns) / 1e6)
                    self.tally.add(Tally.RECEIVED)
            if not entries:
                if latency:
                    continue
                return  # drained: what the produce phase wrote has all been received
            ack = spb.AckMessageRequest(group=group, topic=topic, entries=entries).SerializeToString()
            call = calls.ack[calls.next()](ack, metadata=calls.metadata)
            if job.ack_behind:  # the next receive goes out at once; the answer is checked later
                acks = asyncio.ensure_future(call)
                self.acks.add(acks)
                acks.add_done_callback(self.acks.discard)
                res.messages += len(entries)
                continue
            self.check_ack(await call)
            res.messages += len(entries)
            res.end = time.monotonic()  # the last ack, not the last (empty) long poll

    def check_ack(self, raw: bytes) -> None:
        answer = self.spb.AckMessageResponse.FromString(raw)
        if answer.status.code != OK:
            raise RuntimeError(f"AckMessage answered {answer.status.code}: {answer.status.message}")

    async def run_receive(self, job: Job, go: float) -> JobResult:
        res = JobResult(start=go)
        until = go + job.seconds
        await asyncio.gather(*(self.receive_loop(job, res, until, latency=False) for _ in range(job.window)))
        res.end = res.end or time.monotonic()
        return res

    async def run_latency(self, job: Job, go: float) -> JobResult:
        res = JobResult(start=go)
        body_pad = b"x" * max(0, job.body_size - SEND_NS.size)
        stop_sending = go + job.seconds
        receivers = [
            asyncio.ensure_future(self.receive_loop(job, res, stop_sending + job.grace, latency=True))
            for _ in range(job.window)
        ]
        calls, spb = self.calls, self.spb
        pending: set[asyncio.Future[Any]] = set()
        total = round(job.seconds * job.rate)  # the last tick may come late: its share still goes
        while res.sent < total:
            owed = min(total, int((time.monotonic() - go) * job.rate)) - res.sent
            for _ in range(owed):
                sent_ns = time.monotonic_ns()
                res.lag_ms.append(max(0.0, sent_ns / 1e6 - (go + res.sent / job.rate) * 1e3))
                body = SEND_NS.pack(sent_ns) + body_pad
                message = self.message(job.topic, body)
                message.system_properties.message_id = f"{self.prefix}{next(self.serial):024X}"
                raw = spb.SendMessageRequest(messages=[message]).SerializeToString()
                call = asyncio.ensure_future(calls.send[calls.next()](raw, metadata=calls.metadata))
                pending.add(call)
                call.add_done_callback(pending.discard)
                call.add_done_callback(
                    lambda _, t=sent_ns: res.ack_ms.append((time.monotonic_ns() - t) / 1e6)
                )
                res.sent += 1
                self.tally.add(Tally.SENT)
            await asyncio.sleep(PACE_TICK)
        if pending:
            for answer in await asyncio.gather(*pending):
                self.check_send(answer)
        self.tally.add(Tally.DONE)
        deadline = max(time.monotonic(), stop_sending) + job.grace
        while not self.tally.settled() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for receiver in receivers:
            receiver.cancel()
        await asyncio.gather(*receivers, return_exceptions=True)
        for answer in await asyncio.gather(*self.acks):
            self.check_ack(answer)
        res.messages = len(res.latencies_ms)
        res.end = time.monotonic()
        return res


def worker_main(pipe: Pipe, endpoint: str, shared: SynchronizedArray[int], workers: int) -> None:
    """The worker process: jobs from the pipe until None; `shared` is the workers' `Tally`."""
    loop = new_event_loop()
    worker = loop.run_until_complete(_make(endpoint, Tally(shared, workers)))
    try:
        while (job := pipe.recv()) is not None:
            pipe.send("ready")
            if pipe.recv() != "go":
                continue
            try:
                runner = {
                    "send": worker.run_send,
                    "receive": worker.run_receive,
                    "latency": worker.run_latency,
                }
                result = loop.run_until_complete(runner[job.kind](job, time.monotonic()))
            except Exception:
                result = JobResult(error=traceback.format_exc())
            pipe.send(result)
    finally:
        loop.run_until_complete(worker.calls.close())
        loop.close()


async def _make(endpoint: str, tally: Tally) -> Worker:
    return Worker(endpoint, tally)
