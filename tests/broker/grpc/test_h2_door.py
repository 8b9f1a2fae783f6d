"""The compiled HTTP/2 front door (`grpcServerImpl=nghttp2`) over 127.0.0.1, where it differs from
grpc.aio: a client that drops mid-stream cancels its call and the broker serves on; bytes that are
not HTTP/2 get GOAWAY and a closed connection; a half-sent frame and a vanished client leave
nothing behind. (The official clients' scenarios on this door are parametrized in their suites.)"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocketlite.protocol.proto import available
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test
from tests.support.foreign_clients.grpc5 import door, endpoint_address, raw_stub

pytestmark = pytest.mark.skipif(available() is not None, reason=f"{available()}")

if available() is None:
    import grpc

    from rocketlite.protocol.proto.v2 import definition_pb2 as pb
    from rocketlite.protocol.proto.v2 import service_pb2 as spb

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
GOAWAY = 7
METADATA = (("x-mq-client-id", "h2-door@1"), ("x-mq-language", "PYTHON"))


def _h2(broker: BrokerUnderTest) -> Any:
    endpoint = broker.controller.parts.grpc if broker.controller.parts else None
    assert endpoint is not None and endpoint.h2 is not None, "not served by the nghttp2 door"
    return endpoint.h2


async def _until(cond: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    """Await a state of the server no event announces (it is on this loop: a turn at a time)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def _heartbeat_ok(broker: BrokerUnderTest) -> None:
    channel, stub = raw_stub(broker)
    async with channel:
        answer = await stub.Heartbeat(spb.HeartbeatRequest(), metadata=METADATA, timeout=5)
    assert answer.status.code == pb.Code.OK


def test_a_client_dropped_mid_stream_cancels_its_call_and_the_broker_serves_on(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store", **door("nghttp2")) as broker:
            await broker.send("DropT")
            h2 = _h2(broker)
            channel, stub = raw_stub(broker)
            request = spb.ReceiveMessageRequest(
                group=pb.Resource(name="DropG"),
                message_queue=pb.MessageQueue(topic=pb.Resource(name="DropT"), id=-1),
                filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="NoSuchTag"),
                batch_size=4,
                invisible_duration={"seconds": 30},
                long_polling_timeout={"seconds": 20},
            )
            call = stub.ReceiveMessage(request, metadata=METADATA, timeout=30)
            reading = asyncio.ensure_future(call.read())  # the OK header never comes: long polling

            def running() -> list[Any]:
                return [c.task for conn in h2.connections for c in conn.calls.values() if c.task]

            await _until(lambda: bool(running()), "the long-polling receive to run on the broker")
            [task] = running()
            await channel.close(grace=None)  # the client goes away mid-stream
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, 5)
            assert task.cancelled()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await reading
            await _until(lambda: not running(), "the dropped call to be forgotten")
            await _heartbeat_ok(broker)

    run(scenario())


def _read_all(sock: socket.socket) -> bytes:
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


def _frame_types(data: bytes) -> list[int]:
    types = []
    while len(data) >= 9:
        types.append(data[3])
        data = data[9 + int.from_bytes(data[:3], "big") :]
    return types


@pytest.mark.parametrize(
    "garbage",
    [
        b"GET / HTTP/1.1\r\nHost: broker\r\n\r\n",  # HTTP/1.1 to an h2c port
        PREFACE + b"\x00\x00\x04\x09\x00\x00\x00\x00\x01junk",  # CONTINUATION with nothing open
        PREFACE + b"\x00\x00\x06\x04\x00\x00\x00\x00\x00" + b"\x00\x04\xff\xff\xff\xff",  # window > 2^31-1
    ],
)
def test_bytes_that_are_not_http2_get_goaway_and_a_closed_connection(tmp_path: Path, garbage: bytes) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store", **door("nghttp2")) as broker:
            host, port = endpoint_address(broker).split(":")

            def exchange() -> bytes:
                with socket.create_connection((host, int(port)), timeout=5) as sock:
                    sock.sendall(garbage)
                    return _read_all(sock)  # until the broker closes

            answer = await asyncio.to_thread(exchange)
            assert GOAWAY in _frame_types(answer)
            await _until(lambda: not _h2(broker).connections, "the connection to be forgotten")
            await _heartbeat_ok(broker)

    run(scenario())


def test_a_half_sent_frame_then_a_vanished_client_leaves_nothing_behind(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store", **door("nghttp2")) as broker:
            host, port = endpoint_address(broker).split(":")
            h2 = _h2(broker)

            def half_and_gone() -> None:
                sock = socket.create_connection((host, int(port)), timeout=5)
                sock.sendall(PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00" + b"\x00\x01\x00\x01\x05")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                sock.close()  # RST: gone without a goodbye

            await asyncio.to_thread(half_and_gone)
            await _until(lambda: not h2.connections, "the vanished connection to be forgotten")
            await _heartbeat_ok(broker)

    run(scenario())


def test_an_unknown_method_is_unimplemented_on_this_door_too(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store", **door("nghttp2")) as broker:
            channel, stub = raw_stub(broker)
            async with channel:
                with pytest.raises(grpc.aio.AioRpcError) as served:
                    await stub.UpdateOffset(spb.UpdateOffsetRequest(), timeout=5)
                nowhere = channel.unary_unary("/no.Such/Method")
                with pytest.raises(grpc.aio.AioRpcError) as unknown:
                    await nowhere(b"", timeout=5)
            assert served.value.code() == grpc.StatusCode.UNIMPLEMENTED
            assert unknown.value.code() == grpc.StatusCode.UNIMPLEMENTED
            assert "Method not found: /no.Such/Method" in (unknown.value.details() or "")

    run(scenario())
