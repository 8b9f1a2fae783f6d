"""CPU per 5.x SendMessage on the compiled HTTP/2 front door, inside one process: HTTP/2 bytes in
-> `H2Session` -> request parsing -> the servicer's guarded handler -> the store -> answer bytes
out. `bench/send_path.py`'s counterpart for the 5.x path.

It starts a real `BrokerController` (ASYNC_FLUSH, a temporary store) on this process's loop,
captures what a real grpc.aio client writes for `--calls` SendMessage calls (1 KiB, one message
each, `--window` in flight) on a loopback connection to the broker's own h2 methods (a
`GrpcConnection` that records each `data_received`), then replays those bytes, read for read,
into fresh `GrpcConnection`s on a stub transport (no socket): HPACK state, frame boundaries and
read batches are the client's. Printed: the loop's CPU per call (min of `--runs`), and with
`--profile` the cProfile top entries of one replay. `--no-lane` replays into methods whose
`Method.group` is taken away: every SendMessage through the per-message path (the A/B of
`broker/grpc/send_lane.py`).

`--rpc receive`: `--calls` x `--batch` messages are sent, then received back by pairs of one
ReceiveMessage of up to `--batch` (32) messages and one AckMessage of their handles, through the
servicer's guarded handlers (requests parsed from bytes, answers serialized; the HTTP/2 framing,
shared by the batch, left out) until every one of them was received: a receive may hand out
fewer than 32 (a pop takes what its look at the queues found), so there may be more pairs than
`--calls`. The figure is per message received; the pairs made are printed too. The messages
are spread over `--queues` queues of the topic (4 by default; `grpc5_bench.py` uses 16), one each
in turn, so a receive drains the queues one after the other.

    .venv/bin/python bench/grpc5_h2_path.py [--calls 2000] [--runs 5] [--profile] [--no-lane]
                                            [--rpc send|receive] [--queues 4]

Opens a loopback socket for the capture (port 0): run it in a network namespace of its own when
other brokers share the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench` and `tests.support`

from bench.grpc5_probe import METADATA, SERVICE, TOPIC, _Context, send_requests

GROUP = "ProbeGroup5"


class StubTransport:
    """What `GrpcConnection` needs of a transport; writes are kept."""

    def __init__(self) -> None:
        self.out: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.out.append(data)

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else default


async def capture(methods: dict[bytes, Any], calls: list[tuple[str, bytes]], window: int) -> list[bytes]:
    """The reads a server sees while a grpc.aio client makes `calls` ((rpc, request bytes))."""
    import grpc  # noqa: PLC0415

    from rocketlite.remoting.h2.server import GrpcConnection  # noqa: PLC0415

    reads: list[bytes] = []
    connections: list[GrpcConnection] = []

    class Recording(GrpcConnection):
        def connection_made(self, transport: Any) -> None:
            connections.append(self)
            super().connection_made(transport)

        def data_received(self, data: bytes) -> None:
            reads.append(bytes(data))
            super().data_received(data)

    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Recording(methods, 4 << 20), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    stubs = {rpc: channel.unary_unary(SERVICE + rpc) for rpc in {rpc for rpc, _ in calls}}
    if window <= 1:
        for rpc, payload in calls:
            await stubs[rpc](payload, metadata=METADATA)
    else:
        queue = list(reversed(calls))

        async def slot() -> None:
            while queue:
                rpc, payload = queue.pop()
                await stubs[rpc](payload, metadata=METADATA)

        await asyncio.gather(*(slot() for _ in range(window)))
    await channel.close()
    server.close()
    for connection in connections:  # (asyncio's server leaves accepted connections open)
        connection.transport.close()
    await server.wait_closed()
    return reads


async def replay(methods: dict[bytes, Any], reads: list[bytes]) -> StubTransport:
    from rocketlite.remoting.h2.server import GrpcConnection  # noqa: PLC0415

    connection = GrpcConnection(methods, 4 << 20)
    transport = StubTransport()
    connection.connection_made(transport)
    for data in reads:
        connection.data_received(data)
        await asyncio.sleep(0)  # the answers' flush, as the loop would run it between reads
    for _ in range(3):
        await asyncio.sleep(0)
    return transport


async def main(args: argparse.Namespace) -> None:
    from tests.support.broker_harness import broker_under_test  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp:
        async with broker_under_test(Path(tmp), store_maped_file_size_commit_log=64 << 20) as broker:
            await broker.send(TOPIC)  # the topic exists
            if args.queues != 4:
                topics = broker.controller.topics
                found = topics.select(TOPIC)
                assert found is not None
                topics.update(
                    dataclasses.replace(found, read_queue_nums=args.queues, write_queue_nums=args.queues)
                )
            parts = broker.controller.parts
            assert parts is not None and parts.grpc is not None and parts.grpc.h2 is not None
            methods = parts.grpc.h2.methods
            if args.no_lane:
                methods = {path: dataclasses.replace(m, group=None) for path, m in methods.items()}
            if args.rpc == "receive":
                await receive_main(broker, parts.grpc._servicer(), args)
                return
            requests = [("SendMessage", r.SerializeToString()) for r in send_requests(args.calls)]
            reads = await capture(methods, requests, args.window)
            print(f"captured {sum(map(len, reads))} bytes in {len(reads)} reads")
            for _ in range(2):  # warm-up
                await replay(methods, reads)
            best = float("inf")
            for _ in range(args.runs):
                t0 = time.thread_time()
                transport = await replay(methods, reads)
                best = min(best, time.thread_time() - t0)
            print(f"answered {sum(map(len, transport.out))} bytes in {len(transport.out)} writes")
            print(f"SendMessage: {best / args.calls * 1e6:.1f} us of loop CPU per call")
            if args.profile:
                profiler = cProfile.Profile()
                profiler.enable()
                await replay(methods, reads)
                profiler.disable()
                pstats.Stats(profiler).sort_stats("tottime").print_stats(args.top)


async def receive_main(broker: Any, servicer: Any, args: argparse.Namespace) -> None:
    from rocketlite.protocol.proto.v2 import definition_pb2 as pb  # noqa: PLC0415
    from rocketlite.protocol.proto.v2 import service_pb2 as spb  # noqa: PLC0415

    count = args.calls * args.batch
    await refill(broker, count, args.queues)  # a warm-up run, which also takes the topic's first message
    await receive_ack(broker, servicer, count + 1, args.batch, pb, spb)
    best, split, pairs = float("inf"), (0.0, 0.0), 0
    for _ in range(args.runs):
        await refill(broker, count, args.queues)
        (receiving, acking), pairs = await receive_ack(broker, servicer, count, args.batch, pb, spb)
        if receiving + acking < best:
            best, split = receiving + acking, (receiving, acking)
    print(
        f"ReceiveMessage of up to {args.batch} + AckMessage: {best / count * 1e6:.1f} us of loop CPU "
        f"per message (receive {split[0] / count * 1e6:.1f}, ack {split[1] / count * 1e6:.1f}; "
        f"{count} messages in {pairs} pairs in the last run)"
    )
    if args.profile:
        await refill(broker, count, args.queues)
        profiler = cProfile.Profile(time.thread_time)  # CPU of the loop's thread, not wall time
        profiler.enable()
        await receive_ack(broker, servicer, count, args.batch, pb, spb)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.top)


async def refill(broker: Any, count: int, queues: int) -> None:
    for i in range(count):
        await broker.send(TOPIC, b"x" * 1024, queue_id=i % queues)
    await broker.dispatched()


async def receive_ack(
    broker: Any, servicer: Any, count: int, batch: int, pb: Any, spb: Any
) -> tuple[tuple[float, float], int]:
    """Loop CPU of ReceiveMessage (of up to `batch`) + AckMessage (of their handles) pairs until
    `count` messages were received, and how many pairs that took: the requests parsed from bytes,
    the servicer's guarded handlers, the answers serialized (the HTTP/2 framing, a few us per
    call, is left out: it is shared by the batch's messages)."""
    from rocketlite.broker.grpc.h2door import serialize  # noqa: PLC0415

    group = pb.Resource(name=GROUP)
    topic = pb.Resource(name=TOPIC)
    request = spb.ReceiveMessageRequest(
        group=group,
        message_queue=pb.MessageQueue(topic=topic, id=-1, permission=pb.Permission.READ_WRITE),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        batch_size=batch,
        auto_renew=True,
    )
    request.long_polling_timeout.FromMilliseconds(0)
    raw = request.SerializeToString()
    context = _Context()
    receiving = acking = 0.0
    received = pairs = 0
    while received < count:
        pairs += 1
        t0 = time.thread_time()
        answers = []
        async for answer in servicer.ReceiveMessage(spb.ReceiveMessageRequest.FromString(raw), context):
            # what both front doors write (a message answer may be bytes already; a list is a batch)
            answers += [serialize(a) for a in answer] if isinstance(answer, list) else [serialize(answer)]
        receiving += time.thread_time() - t0
        entries = []
        for data in answers:  # the client's side: not timed
            answer = spb.ReceiveMessageResponse.FromString(data)
            if answer.HasField("message"):
                system = answer.message.system_properties
                entries.append(
                    spb.AckMessageEntry(message_id=system.message_id, receipt_handle=system.receipt_handle)
                )
        if not entries:
            raise RuntimeError(f"a receive found nothing after {received} of the {count} messages sent")
        received += len(entries)
        ack = spb.AckMessageRequest(group=group, topic=topic, entries=entries).SerializeToString()
        t0 = time.thread_time()
        written = serialize(await servicer.AckMessage(spb.AckMessageRequest.FromString(ack), context))
        acking += time.thread_time() - t0
        answer = spb.AckMessageResponse.FromString(written)
        assert answer.status.code == pb.Code.OK, answer.status
    if received != count:
        raise RuntimeError(f"received {received} messages, {count} were sent")
    return (receiving, acking), pairs


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rpc", choices=["send", "receive"], default="send")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--window", type=int, default=32)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--queues", type=int, default=4, help="queues of the topic the receive pops")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--no-lane", action="store_true", help="SendMessage without its group lane")
    parser.add_argument("--top", type=int, default=30)
    asyncio.run(main(parser.parse_args()))
