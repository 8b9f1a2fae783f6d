"""`remoting.h2.server.H2GrpcServer` with methods of its own (bytes in, bytes out), called by a real
gRPC client (grpc.aio) over 127.0.0.1: the three call shapes, status codes from `abort` and from
a failing handler, `grpc-timeout` as `time_remaining()` and as a deadline that cancels the
handler, and metadata as the handler sees it."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.aio import run

try:
    from rocketlite.remoting.h2.group import GroupedContext
    from rocketlite.remoting.h2.server import H2GrpcServer, Method
except ImportError as exc:
    if os.environ.get("CI", "").lower() == "true":
        raise
    pytest.skip(f"the compiled HTTP/2 core is not built: {exc}", allow_module_level=True)

grpc = pytest.importorskip("grpc")


def _same(data: bytes) -> bytes:
    return data


class Served:
    """The handlers, and what they saw."""

    def __init__(self) -> None:
        self.remaining: float | None = None
        self.metadata: dict[str, Any] = {}
        self.hung_cancelled = asyncio.Event()

    async def echo(self, request: bytes, context: Any) -> bytes:
        self.remaining = context.time_remaining()
        self.metadata = dict(context.invocation_metadata())
        return request.upper()

    async def count(self, request: bytes, context: Any) -> AsyncIterator[bytes]:
        for i in range(int(request)):
            yield str(i).encode()

    async def chat(self, requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        async for request in requests:
            yield b"re: " + request

    async def refuse(self, request: bytes, context: Any) -> bytes:
        await context.abort(grpc.StatusCode.PERMISSION_DENIED, "not you, né")
        return b""

    async def fail(self, request: bytes, context: Any) -> bytes:
        raise ValueError("broken handler")

    async def hang(self, request: bytes, context: Any) -> bytes:
        try:
            await asyncio.Event().wait()
        finally:
            self.hung_cancelled.set()
        return b""

    def methods(self) -> dict[str, Method]:
        def unary(handler: Any) -> Method:
            return Method("unary", _same, _same, handler)

        return {
            "/t.S/Echo": unary(self.echo),
            "/t.S/Count": Method("server_stream", _same, _same, self.count),
            "/t.S/Chat": Method("bidi", _same, _same, self.chat),
            "/t.S/Refuse": unary(self.refuse),
            "/t.S/Fail": unary(self.fail),
            "/t.S/Hang": unary(self.hang),
        }


@contextlib.asynccontextmanager
async def serving(served: Served) -> AsyncIterator[Any]:
    """An `H2GrpcServer` of `served`'s methods on a free port, and a grpc.aio channel to it."""
    server = H2GrpcServer(served.methods(), max_message=1 << 20)
    port = await server.start("127.0.0.1", 0)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield channel
    finally:
        await server.close()


def test_every_call_shape_status_deadline_and_metadata() -> None:
    async def scenario() -> None:
        served = Served()
        async with serving(served) as channel:
            echo = channel.unary_unary("/t.S/Echo")
            assert await echo(b"hello", metadata=(("x-mq-client-id", "c1"),), timeout=30) == b"HELLO"
            assert served.metadata["x-mq-client-id"] == "c1"
            assert served.remaining is not None and 25 < served.remaining <= 30
            assert await echo(b"x" * 200_000, timeout=5) == b"X" * 200_000  # past one DATA frame

            counted = [r async for r in channel.unary_stream("/t.S/Count")(b"5", timeout=5)]
            assert counted == [b"0", b"1", b"2", b"3", b"4"]

            chat = channel.stream_stream("/t.S/Chat")(timeout=5)
            for word in (b"a", b"b"):
                await chat.write(word)
                assert await chat.read() == b"re: " + word
            await chat.done_writing()
            assert await chat.read() is grpc.aio.EOF

            for path, code, details in (
                ("/t.S/Refuse", grpc.StatusCode.PERMISSION_DENIED, "not you, né"),
                ("/t.S/Fail", grpc.StatusCode.UNKNOWN, "Unexpected ValueError: broken handler"),
                ("/t.S/Nope", grpc.StatusCode.UNIMPLEMENTED, "Method not found: /t.S/Nope"),
            ):
                with pytest.raises(grpc.aio.AioRpcError) as raised:
                    await channel.unary_unary(path)(b"", timeout=5)
                assert (raised.value.code(), raised.value.details()) == (code, details)

            with pytest.raises(grpc.aio.AioRpcError) as late:
                await channel.unary_unary("/t.S/Hang")(b"", timeout=0.3)
            assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            await asyncio.wait_for(served.hung_cancelled.wait(), 5)  # the broker gave up too

    run(scenario())


def test_compressed_requests_are_inflated_within_the_size_limit() -> None:
    """grpc.aio compresses what it sends when told to: gzip and deflate requests reach the handler
    inflated; one that inflates past `max_message` is refused RESOURCE_EXHAUSTED, though its
    compressed bytes are few."""

    async def scenario() -> None:
        served = Served()
        async with serving(served) as channel:
            echo = channel.unary_unary("/t.S/Echo")
            body = b"compress me " * 5000
            for compression in (grpc.Compression.Gzip, grpc.Compression.Deflate):
                assert await echo(body, compression=compression, timeout=5) == body.upper()
            chat = channel.stream_stream("/t.S/Chat")(timeout=5, compression=grpc.Compression.Gzip)
            await chat.write(b"a" * 1000)
            assert await chat.read() == b"re: " + b"a" * 1000
            await chat.done_writing()
            with pytest.raises(grpc.aio.AioRpcError) as bomb:
                await echo(bytes(2 << 20), compression=grpc.Compression.Gzip, timeout=5)
            assert bomb.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "decompressed message exceeds the limit of 1048576" in (bomb.value.details() or "")
            assert await echo(b"after", timeout=5) == b"AFTER"  # the connection serves on

    run(scenario())


class Grouped:
    """A unary method with a group handler: it takes the leading requests not starting with "x"
    (answered "grp:"), the handler the others ("one:"); `served` is the order both saw."""

    def __init__(self) -> None:
        self.served: list[bytes] = []
        self.largest = 0  # the most calls one group handler call was offered

    async def one(self, request: bytes, context: Any) -> bytes:
        self.served.append(request)
        return b"one:" + request

    def group(self, calls: list[tuple[Any, Any]], start: int) -> list[bytes]:
        self.largest = max(self.largest, len(calls) - start)
        if calls[start][0] == b"boom":
            raise ValueError("broken group")
        answers = []
        for request, _ in calls[start:]:
            if request.startswith(b"x"):
                break
            self.served.append(request)
            answers.append(b"grp:" + request)
        return answers


def test_a_group_handler_serves_the_calls_of_a_read_in_order() -> None:
    """Calls that end in one read go to the group handler together; the ones it leaves go through
    the handler, in their place; a group handler that raises ends its calls UNKNOWN."""
    grouped = Grouped()

    async def scenario() -> None:
        methods = {"/t.S/Put": Method("unary", _same, _same, grouped.one, grouped.group)}
        server = H2GrpcServer(methods, max_message=1 << 20)
        port = await server.start("127.0.0.1", 0)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                put = channel.unary_unary("/t.S/Put")
                requests = [(b"x%d" if i % 7 == 3 else b"r%d") % i for i in range(60)]
                answers = await asyncio.gather(*(put(r) for r in requests))
                with pytest.raises(grpc.aio.AioRpcError) as failed:
                    await put(b"boom")
                assert failed.value.code() == grpc.StatusCode.UNKNOWN
                assert "broken group" in (failed.value.details() or "")
        finally:
            await server.close()
        for request, answer in zip(requests, answers, strict=True):
            assert answer == (b"one:" if request.startswith(b"x") else b"grp:") + request
        assert sorted(grouped.served) == sorted(requests)  # each served once, "boom" by nobody
        assert grouped.largest > 1  # several calls of one read were offered together

    run(scenario())


def test_a_grouped_call_the_group_leaves_is_parsed_then_and_its_context_has_the_metadata() -> None:
    """A plain call comes to the group handler as its bytes, with a context that reads the call's
    metadata; one the group leaves is parsed by the method's `decode` only then, and a request
    that does not parse ends INTERNAL."""
    seen: list[tuple[str, tuple[tuple[str, Any], ...]]] = []

    def decode(data: bytes) -> bytes:
        if data == b"xbad":
            raise ValueError("not a request")
        return data

    def group(calls: list[tuple[Any, Any]], start: int) -> list[bytes]:
        request, context = calls[start]
        seen.append((context.peer(), tuple(context.invocation_metadata())))
        assert isinstance(request, bytes) and isinstance(context, GroupedContext)  # GROUPED by the session
        return [] if request.startswith(b"x") else [b"grp:" + request]

    async def one(request: bytes, context: Any) -> bytes:
        return b"one:" + request

    async def scenario() -> None:
        server = H2GrpcServer({"/t.S/Put": Method("unary", decode, _same, one, group)}, max_message=1 << 20)
        port = await server.start("127.0.0.1", 0)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                put = channel.unary_unary("/t.S/Put")
                assert await put(b"a", metadata=(("x-mq-client-id", "c7"),)) == b"grp:a"
                assert await put(b"xgood") == b"one:xgood"
                with pytest.raises(grpc.aio.AioRpcError) as failed:
                    await put(b"xbad")
                assert failed.value.code() == grpc.StatusCode.INTERNAL
                assert "cannot parse the request" in (failed.value.details() or "")
        finally:
            await server.close()
        peer, metadata = seen[0]
        assert peer.startswith("ipv4:127.0.0.1:") and ("x-mq-client-id", "c7") in metadata

    run(scenario())
