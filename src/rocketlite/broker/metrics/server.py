"""The Prometheus endpoint: `GET /metrics`, exposition by `prometheus_client` (`generate_latest`
over a registry of our collectors, text format 0.0.4).

Served by a plain `asyncio.start_server` with a minimal HTTP/1.x request parser (request line,
headers up to the blank line; no bodies, no keep-alive), so the collectors run on the broker's
event loop and read its state between two of its callbacks, never while a request changes it.
`metricsExporterType=PROM` serves it on `metricsPromExporterHost:metricsPromExporterPort` (RocketMQ
5's keys; the host defaults to brokerIP1, the port to 5557); rocketlite's older `metricsPort` /
`metricsHost` serve the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Final

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.registry import Collector

from rocketlite.broker.metrics.legacy import TpsSampler
from rocketlite.runtime import cancel_tasks

log = logging.getLogger("rocketlite.broker.metrics")

MAX_REQUEST_HEAD: Final = 8192
READ_TIMEOUT_S: Final = 5.0


class MetricsServer:
    """The HTTP endpoint and the TPS sampler; `port` is the bound port once started."""

    def __init__(self, collectors: list[Collector], sampler: TpsSampler, host: str, port: int) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        for collector in collectors:
            self.registry.register(collector)
        self.sampler = sampler
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None
        self._task: asyncio.Task[None] | None = None

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        sockets = self._server.sockets
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        self._task = asyncio.create_task(self._sample_loop(), name="broker-metrics-sampler")
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    async def close(self) -> None:
        task, self._task = self._task, None
        await cancel_tasks(task)
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()

    async def _sample_loop(self) -> None:
        while True:
            await asyncio.sleep(self.sampler.interval_s)
            self.sampler.sample()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            writer.close()
            return
        try:
            status, payload, ctype = self._answer(head[:MAX_REQUEST_HEAD])
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode("ascii")
                + payload
            )
            await writer.drain()
        except OSError:
            pass
        except Exception:
            log.exception("metrics request failed")
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    def _answer(self, head: bytes) -> tuple[str, bytes, str]:
        parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return "400 Bad Request", b"bad request\n", "text/plain"
        method, target = parts[0], parts[1].split("?", 1)[0]
        if target != "/metrics":
            return "404 Not Found", b"not found\n", "text/plain"
        if method != "GET":
            return "405 Method Not Allowed", b"method not allowed\n", "text/plain"
        return "200 OK", self.exposition(), CONTENT_TYPE_LATEST
