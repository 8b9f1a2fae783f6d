"""`grpcClientIdleTimeMills` on both front doors: a gRPC connection with no call open for that
long is ended with GOAWAY and closed (RocketMQ's proxy sets its Netty server's maxConnectionIdle
from the same key), while a connection that has a call open is left alone however long the call
lasts. A client that vanished without closing its socket would otherwise hold the connection and
its HTTP/2 state forever."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from rocketlite.protocol.proto import available
from tests.support.aio import run
from tests.support.broker_harness import broker_under_test
from tests.support.foreign_clients.grpc5 import door, endpoint_address, raw_stub

pytestmark = pytest.mark.skipif(available() is not None, reason=f"{available()}")

if available() is None:
    import grpc

    from rocketlite.protocol.proto.v2 import definition_pb2 as pb
    from rocketlite.protocol.proto.v2 import service_pb2 as spb

DOORS = ["nghttp2", "grpcio"]
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS, PING, GOAWAY = 4, 6, 7
ACK = 1
IDLE_MS = 300
METADATA = (("x-mq-client-id", "idle-test@1"), ("x-mq-language", "PYTHON"))


async def _frames_until_goaway(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> tuple[int, bytes]:
    """Read HTTP/2 frames until a GOAWAY, acknowledging SETTINGS and PING as a client must; the
    GOAWAY's error code and debug data."""
    while True:
        head = await reader.readexactly(9)
        length = int.from_bytes(head[:3], "big")
        kind, flags = head[3], head[4]
        payload = await reader.readexactly(length)
        if kind == SETTINGS and not flags & ACK:
            writer.write(_frame(SETTINGS, ACK, b""))
        elif kind == PING and not flags & ACK:
            writer.write(_frame(PING, ACK, payload))
        elif kind == GOAWAY:
            code: int = struct.unpack_from(">I", payload, 4)[0]
            return code, payload[8:]


def _frame(kind: int, flags: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + (0).to_bytes(4, "big") + payload


async def _silent_connection_is_ended(address: str) -> tuple[float, int, bytes]:
    """Open a connection that never starts a call; the seconds until GOAWAY and EOF, and the
    GOAWAY's error code and debug data."""
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    loop = asyncio.get_running_loop()
    opened = loop.time()
    try:
        writer.write(PREFACE + _frame(SETTINGS, 0, b""))
        code, debug = await asyncio.wait_for(_frames_until_goaway(reader, writer), 15)
        # the server closes once the GOAWAY is out (grpc core may send a second, final one)
        while await asyncio.wait_for(reader.read(65536), 15):
            pass
        return loop.time() - opened, code, debug
    finally:
        writer.close()


@pytest.mark.parametrize("impl", DOORS)
def test_a_connection_without_calls_is_ended_after_the_idle_time(tmp_path: Path, impl: str) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path, grpc_client_idle_time_mills=IDLE_MS, **door(impl)) as broker:
            lived, code, debug = await _silent_connection_is_ended(endpoint_address(broker))
            assert lived >= IDLE_MS / 1000 * 0.9, f"ended after {lived:.3f} s, before the idle time"
            # ours says NO_ERROR, as Netty's maxConnectionIdle does; grpc core's server sends
            # INTERNAL_ERROR with "connection idle" (its choice; clients reconnect either way)
            assert (code, debug) == ((0, b"") if impl == "nghttp2" else (2, b"connection idle"))

    run(scenario())


@pytest.mark.parametrize("impl", DOORS)
def test_an_open_call_keeps_its_connection_past_the_idle_time(tmp_path: Path, impl: str) -> None:
    """A Telemetry stream opened first, then a silent connection: once the silent one has been
    ended, the stream's connection (older, so past its idle time too) still answers on it."""
    settings = pb.Settings(
        client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name="T")])
    )
    more = asyncio.Queue[Any]()

    async def commands() -> AsyncIterator[Any]:
        while (command := await more.get()) is not None:
            yield command

    async def scenario() -> None:
        async with broker_under_test(tmp_path, grpc_client_idle_time_mills=IDLE_MS, **door(impl)) as broker:
            channel, stub = raw_stub(broker)
            async with channel:
                call = stub.Telemetry(commands(), metadata=METADATA, timeout=30)
                more.put_nowait(spb.TelemetryCommand(settings=settings))
                first = await call.read()
                assert first.status.code == pb.Code.OK
                await _silent_connection_is_ended(endpoint_address(broker))
                more.put_nowait(spb.TelemetryCommand(settings=settings))
                second = await asyncio.wait_for(call.read(), 10)
                assert second.status.code == pb.Code.OK, second.status.message
                more.put_nowait(None)
                assert await call.code() == grpc.StatusCode.OK

    run(scenario())


def test_grpc_client_idle_time_mills_must_be_positive() -> None:
    from rocketlite.broker.config import BrokerConfig  # noqa: PLC0415
    from rocketlite.protocol.errors import ConfigError  # noqa: PLC0415

    with pytest.raises(ConfigError, match="grpcClientIdleTimeMills"):
        BrokerConfig(grpc_client_idle_time_mills=0)
