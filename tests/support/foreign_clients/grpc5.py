"""Driving the gRPC endpoint in tests: a raw stub built from our own generated stubs, and the
unmodified official 5.x clients run as subprocesses.

- Python: rocketmq-python-client 5.1.2 in its own venv (`.clients/grpc5`): it imports as
  `rocketmq` and its generated stubs clash with ours, so it never loads in the test process.
- Node: rocketmq-client-nodejs 1.0.8 in `.clients/npm5`, always under `timeout` (a client that
  misses the settings handshake hangs forever).

Both log only under `$HOME/logs/`, so each run gets HOME in a temp dir, and the tail of those logs
is part of the failure message. `make test` installs both clients; without them the tests skip,
except under CI=true on x86_64, where they fail.
"""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocketlite.protocol.proto import available
from tests.support.broker_harness import BrokerUnderTest, stored_by_uniq_key

ROOT = Path(__file__).resolve().parents[3]
CLIENTS = Path(os.environ.get("ROCKETLITE_CLIENTS", ROOT / ".clients"))
PYTHON5 = CLIENTS / "grpc5" / "bin" / "python"
NODE5_MODULE = CLIENTS / "npm5" / "node_modules" / "rocketmq-client-nodejs"

# Clients' script exit codes, shared by the scripts of the tests.
OK = 0


def _skip_or_fail(why: str | None) -> None:
    if why is None:
        return
    if os.environ.get("CI", "").lower() == "true" and platform.machine() in ("x86_64", "AMD64"):
        pytest.fail(f"{why} (CI=true on x86_64: the 5.x clients are required)")
    pytest.skip(why)


def require_endpoint() -> None:
    """Skip (or fail under CI) when grpcio or the generated stubs are missing."""
    _skip_or_fail(available())


DOORS = ("grpcio", "nghttp2")
"""The 5.x endpoint's two servers (`grpcServerImpl`): the scenarios that run on both take one."""


def door(name: str) -> dict[str, Any]:
    """Broker overrides serving the endpoint on `name`; the compiled core, when not built, skips
    the test (fails under CI=true, where the build must have it), and so does ROCKETLITE_NATIVE=0,
    whose run serves every 5.x test on grpcio, the reference."""
    from rocketlite import native  # noqa: PLC0415
    from rocketlite.broker.config import GrpcServerImpl  # noqa: PLC0415
    from rocketlite.broker.grpc import h2door  # noqa: PLC0415

    impl = GrpcServerImpl(name)
    if impl is GrpcServerImpl.NGHTTP2 and native.REFERENCE_ONLY:
        pytest.skip("ROCKETLITE_NATIVE=0: the reference door only")
    if impl is GrpcServerImpl.NGHTTP2 and (why := h2door.unavailable_reason()):
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{why} (CI=true: the compiled HTTP/2 core is required)")
        pytest.skip(why)
    return {"grpc_server_impl": impl}


def require_python5() -> None:
    why = available()
    if why is None and not PYTHON5.is_file():
        why = f"rocketmq-python-client 5.1.2 venv {PYTHON5.parent.parent} is missing (run `make clients`)"
    _skip_or_fail(why)


def require_node5() -> None:
    why = available()
    if why is None and shutil.which("node") is None:
        why = "node is not installed"
    if why is None and not (NODE5_MODULE / "package.json").is_file():
        why = f"rocketmq-client-nodejs 1.0.8 is not installed in {NODE5_MODULE} (run `make clients`)"
    _skip_or_fail(why)


def endpoint_address(broker: BrokerUnderTest) -> str:
    """`127.0.0.1:port` of the broker's gRPC endpoint (which must be on)."""
    endpoint = broker.controller.parts.grpc if broker.controller.parts else None
    assert endpoint is not None and endpoint.port > 0, "the gRPC endpoint is not serving"
    return f"127.0.0.1:{endpoint.port}"


def raw_stub(broker: BrokerUnderTest) -> tuple[Any, Any]:
    """(channel, MessagingServiceStub) over 127.0.0.1, from rocketlite's own generated stubs; use
    the channel as an async context manager."""
    import grpc  # noqa: PLC0415  (optional extra)

    from rocketlite.protocol.proto.v2 import service_pb2_grpc  # noqa: PLC0415

    channel = grpc.aio.insecure_channel(endpoint_address(broker))
    stubs: Any = service_pb2_grpc  # generated without types
    return channel, stubs.MessagingServiceStub(channel)


@dataclass
class ClientRun:
    returncode: int
    out: str
    err: str
    logs: str

    def lines(self) -> list[str]:
        return self.out.split("\n")

    def explain(self) -> str:
        return (
            f"exit {self.returncode}\nstdout:\n{self.out[-3000:]}\n"
            f"stderr:\n{self.err[-3000:]}\nlogs:\n{self.logs}"
        )


class ClientProcess:
    """A started client script: read its stdout line by line while it runs, then `finish`."""

    def __init__(self, proc: asyncio.subprocess.Process, home: Path) -> None:
        self.proc = proc
        self.home = home
        self.seen: list[str] = []

    async def line(self, timeout: float) -> str:
        """The next stdout line (without the newline); fails on EOF or after `timeout` seconds."""
        assert self.proc.stdout is not None
        raw = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not raw:
            run = await self.finish(5)
            pytest.fail(f"the client ended before printing the expected line: {run.explain()}")
        text = raw.decode().rstrip("\n")
        self.seen.append(text)
        return text

    async def wait_for(self, prefix: str, timeout: float) -> str:
        """The first line starting with `prefix` (others are kept in `seen`)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            text = await self.line(max(0.1, deadline - loop.time()))
            if text.startswith(prefix):
                return text

    async def finish(self, timeout: float) -> ClientRun:
        """Close the client's stdin (scripts may wait on it to shut down), wait for the exit
        (killing the client after `timeout` s) and collect what it wrote."""
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            out, err = await asyncio.wait_for(self.proc.communicate(), timeout)
        except TimeoutError:
            self.proc.kill()
            out, err = await self.proc.communicate()
        logs = "\n".join(p.read_text(errors="replace")[-3000:] for p in self.home.rglob("*.log"))
        rc = self.proc.returncode if self.proc.returncode is not None else -1
        return ClientRun(
            rc, "\n".join(self.seen) + ("\n" if self.seen else "") + out.decode(), err.decode(), logs
        )


async def start_python5(script: str, *args: str, home: Path) -> ClientProcess:
    """Run `script` (source text) with the 5.x client's Python, HOME at `home`."""
    home.mkdir(parents=True, exist_ok=True)
    proc = await asyncio.create_subprocess_exec(
        str(PYTHON5), "-u", "-c", script, *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": str(home)},
    )  # fmt: skip
    return ClientProcess(proc, home)


async def start_node5(script: str, *args: str, home: Path, limit_s: int = 120) -> ClientProcess:
    """Run `script` with node under `timeout limit_s`; its argv[1] is the client module's path."""
    home.mkdir(parents=True, exist_ok=True)
    proc = await asyncio.create_subprocess_exec(
        "timeout", str(limit_s), "node", "-e", script, str(NODE5_MODULE), *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": str(home)},
    )  # fmt: skip
    return ClientProcess(proc, home)


async def run_python5(script: str, *args: str, home: Path, timeout: float = 90) -> ClientRun:
    """Run a 5.x Python client script to its end; fail the test with its output and logs when it
    exits non-zero."""
    run = await (await start_python5(script, *args, home=home)).finish(timeout)
    if run.returncode != OK:
        pytest.fail(f"5.x Python client script failed: {run.explain()}")
    return run


async def run_node5(script: str, *args: str, home: Path, timeout: float = 90) -> ClientRun:
    run = await (await start_node5(script, *args, home=home, limit_s=int(timeout))).finish(timeout + 10)
    if run.returncode != OK:
        pytest.fail(f"5.x Node client script failed: {run.explain()}")
    return run


async def check_stored(broker: BrokerUnderTest, topic: str, message_ids: list[str], prefix: str) -> None:
    """What the producer scripts of test_python_client / test_node_client send, read back through
    the 4.x pull path: body `<prefix>-<i>`, tag TagA, keys `key<i>`, property color=red, by id."""
    assert message_ids, "the producer printed no message id"
    stored = await stored_by_uniq_key(broker, topic)
    for i, message_id in enumerate(message_ids):
        body, props = stored[message_id]
        assert (body, props["TAGS"], props["KEYS"], props["color"]) == (
            f"{prefix}-{i}".encode(), "TagA", f"key{i}", "red",
        )  # fmt: skip
