"""A Prometheus endpoint: `GET /metrics` on `metricsHost:metricsPort` (0 = off), text format 0.0.4.

A plain `asyncio.start_server` with a minimal HTTP/1.x request parser (request line, headers up
to the blank line; no bodies, no keep-alive). The figures (`BrokerFigures`, built by the
controller) are read from what the broker already keeps: `BrokerStats`, the store's `StoreStats`
and `runtime_info()`, the disk usage of the store root, the committed consumer offsets against the
queues' max offsets (consumer lag), the commit log's flush and commit positions, and the client
manager's connections. TPS is sampled here once a second over a 10 s window.

Commit-log positions (`commit_log_positions`): `commitlog_flushed_offset` is where the last
fdatasync reached; everything appended past it, `commitlog_unflushed_bytes`, is what a machine
crash (power loss, kernel panic) may take under ASYNC_FLUSH. Without a write buffer that is
`commitlog_max_offset - commitlog_flushed_offset`. With `transientStorePoolEnable` the max offset is
the committed (readable) end, and `commitlog_uncommitted_bytes` more sit in the process's write
buffer: those are what a mere process kill takes. The offsets only grow, so a value read is a lower
bound of the position a moment later.

`BrokerFigures.runtime_figures` gives the same figures as GET_BROKER_RUNTIME_INFO keys (the admin
request processor's `extra_info`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Iterable
from typing import Final

from rocketlite.broker.client_manager import ClientManager
from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.state_files import ConsumerOffsetTable
from rocketlite.broker.stats import BrokerStats
from rocketlite.runtime import cancel_tasks
from rocketlite.store.api import StoreAPI

log = logging.getLogger("rocketlite.broker.metrics")

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
TPS_WINDOW_S: Final = 10.0
MAX_REQUEST_HEAD: Final = 8192
READ_TIMEOUT_S: Final = 5.0


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: dict[str, str] | None) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def _num(value: float) -> str:
    return str(value) if isinstance(value, int) else repr(float(value))


class _Family:
    """One metric family: HELP, TYPE, then its samples."""

    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.name = name
        self.kind = kind
        self.help = help_text
        self.samples: list[tuple[dict[str, str] | None, float]] = []

    def add(self, value: float, labels: dict[str, str] | None = None) -> _Family:
        self.samples.append((labels, value))
        return self

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} {self.kind}"
        for labels, value in self.samples:
            yield f"{self.name}{_labels(labels)} {_num(value)}"


class TpsSampler:
    """Samples (time, puts, gets found) once a second; rates over the last `TPS_WINDOW_S`."""

    def __init__(self, store: StoreAPI, interval_s: float = 1.0) -> None:
        self.store = store
        self.interval_s = interval_s
        self.samples: deque[tuple[float, int, int]] = deque(maxlen=int(TPS_WINDOW_S / interval_s) + 2)
        self.sample()

    def current(self) -> tuple[float, int, int]:
        s = self.store.stats
        return time.monotonic(), s.put_count, s.get_found

    def sample(self) -> None:
        self.samples.append(self.current())

    def tps(self) -> tuple[float, float]:
        """(put TPS, get-found TPS) over the window (shorter while the broker is young)."""
        now = self.current()
        base = next((s for s in self.samples if now[0] - s[0] <= TPS_WINDOW_S), now)
        elapsed = now[0] - base[0]
        if elapsed <= 0:
            return 0.0, 0.0
        return (now[1] - base[1]) / elapsed, (now[2] - base[2]) / elapsed


class BrokerFigures:
    """The figures read from what the broker keeps, for /metrics and GET_BROKER_RUNTIME_INFO."""

    def __init__(
        self,
        broker: BrokerConfig,
        store: StoreAPI,
        stats: BrokerStats,
        offsets: ConsumerOffsetTable,
        clients: ClientManager,
    ) -> None:
        self.broker = broker
        self.store = store
        self.stats = stats
        self.offsets = offsets
        self.clients = clients

    def consumer_lag(self) -> dict[tuple[str, str], int]:
        """(group, topic) -> sum over queues of max(max offset - committed offset, 0)."""
        with self.offsets.lock:
            table = {key: dict(queues) for key, queues in self.offsets.offset_table.items()}
        lag: dict[tuple[str, str], int] = {}
        for key, queues in table.items():
            topic, _, group = key.partition("@")
            total = 0
            for queue_id, committed in queues.items():
                total += max(self.store.get_max_offset_in_queue(topic, queue_id) - max(committed, 0), 0)
            lag[(group, topic)] = total
        return lag

    def connection_count(self) -> int:
        """Distinct live connections of the registered producers and consumers."""
        clients = self.clients
        seen: set[int] = set()
        for channels in clients.producers.values():
            seen.update(id(info.conn) for info in channels.values() if not info.conn.closed)
        for group in clients.consumers.values():
            seen.update(id(conn) for conn in group.connections())
        return len(seen)

    def disk_ratio(self) -> float:
        try:
            return self.store.disk_used_ratio()
        except OSError:
            return 0.0

    def commit_log_positions(self) -> tuple[int, int, int]:
        """(flushed offset, unflushed bytes, uncommitted bytes) of the commit log.

        The flushed offset is read first, so the unflushed bytes may be overstated, never
        understated. Uncommitted bytes (in the write buffer, not yet in the file) are 0 without a
        write buffer.
        """
        store = self.store
        flushed = store.durable_end
        committed = store.committed_end
        wrote = store.written_end
        return flushed, max(wrote - flushed, 0), max(wrote - committed, 0)

    def render(self, sampler: TpsSampler) -> str:
        """The whole exposition (text format 0.0.4)."""
        bstats, store = self.stats, self.store
        sstats = store.stats
        info = store.runtime_info()
        put_tps, get_tps = sampler.tps()
        flushed, unflushed, uncommitted = self.commit_log_positions()
        labels = {"cluster": self.broker.broker_cluster_name, "broker": self.broker.broker_name}
        pre = "rocketlite_"
        plain: list[tuple[str, str, str, float]] = [
            ("put_messages_total", "counter", "Messages stored by sends.", bstats.put_nums),
            ("put_bytes_total", "counter", "Message body bytes stored by sends.", bstats.put_size),
            ("put_failures_total", "counter", "Sends refused or failed.", bstats.put_failures),
            ("get_found_messages_total", "counter", "Messages returned by pulls.", bstats.get_found_nums),
            ("get_miss_total", "counter", "Pulls that found nothing.", bstats.get_miss_nums),
            ("send_back_total", "counter", "Messages sent back by consumers.", bstats.send_back_nums),
            ("store_put_messages_total", "counter", "Messages appended to the commit log.", sstats.put_count),
            ("store_put_bytes_total", "counter", "Bytes appended to the commit log.", sstats.put_bytes),
            ("store_put_failures_total", "counter", "Failed commit-log appends.", sstats.put_failures),
            ("store_get_found_total", "counter", "Messages the store returned.", sstats.get_found),
            ("store_get_miss_total", "counter", "Store lookups that found nothing.", sstats.get_miss),
            ("store_put_latency_max_ms", "gauge", "Slowest append so far (ms).", sstats.put_max_ms),
            ("put_tps", "gauge", f"Stored messages per second over {TPS_WINDOW_S:.0f} s.", put_tps),
            ("get_found_tps", "gauge", f"Pulled messages per second over {TPS_WINDOW_S:.0f} s.", get_tps),
            ("disk_used_ratio", "gauge", "Used fraction of the store's file system.", self.disk_ratio()),
            (
                "commitlog_min_offset",
                "gauge",
                "Commit-log min physical offset.",
                int(info["commitLogMinOffset"]),
            ),
            (
                "commitlog_max_offset",
                "gauge",
                "Commit-log max physical offset.",
                int(info["commitLogMaxOffset"]),
            ),
            ("commitlog_flushed_offset", "gauge", "Commit-log offset the last flush reached.", flushed),
            ("commitlog_unflushed_bytes", "gauge", "Commit-log bytes appended but not flushed.", unflushed),
            ("commitlog_uncommitted_bytes", "gauge", "Write-buffer bytes not in the file yet.", uncommitted),
            (
                "dispatch_behind_bytes",
                "gauge",
                "Log bytes not dispatched yet.",
                int(info["dispatchBehindBytes"]),
            ),
            ("disk_full", "gauge", "1 when the disk is full.", int(store.disk_full)),
            (
                "client_connections",
                "gauge",
                "Live connections of registered clients.",
                self.connection_count(),
            ),
        ]
        fams = [_Family(pre + name, kind, text).add(value, labels) for name, kind, text, value in plain]
        latency = _Family(pre + "store_put_latency_total", "counter", "Appends by latency bucket.")
        for bucket, count in sstats.put_latency_buckets.items():
            latency.add(count, {**labels, "bucket": bucket})
        topics = _Family(pre + "topic_put_messages_total", "counter", "Messages stored, by topic.")
        for topic, n in sorted(bstats.topic_put_nums.items()):
            topics.add(n, {**labels, "topic": topic})
        groups = _Family(pre + "group_get_messages_total", "counter", "Messages pulled, by consumer group.")
        for group, n in sorted(bstats.group_get_nums.items()):
            groups.add(n, {**labels, "group": group})
        lag = _Family(
            pre + "consumer_lag_messages", "gauge", "Max minus committed offset, by group and topic."
        )
        for (group, topic), n in sorted(self.consumer_lag().items()):
            lag.add(n, {**labels, "group": group, "topic": topic})
        fams += [latency, topics, groups, lag]
        return "\n".join(line for fam in fams for line in fam.render()) + "\n"

    def runtime_figures(self) -> dict[str, str]:
        """The figures GET_BROKER_RUNTIME_INFO lacks, for `rocketlite admin brokerStatus`."""
        lag = self.consumer_lag()
        return {
            "putLatencyBuckets": " ".join(
                f"{k}:{v}" for k, v in self.store.stats.put_latency_buckets.items()
            ),
            "consumerLagTotal": str(sum(lag.values())),
            "clientConnections": str(self.connection_count()),
            "diskUsedRatio": f"{self.disk_ratio():.6f}",
        }


class MetricsServer:
    """The HTTP endpoint and the TPS sampler; `port` is the bound port once started."""

    def __init__(self, figures: BrokerFigures, host: str, port: int) -> None:
        self.figures = figures
        self.host = host
        self.port = port
        self.sampler = TpsSampler(figures.store)
        self._server: asyncio.Server | None = None
        self._task: asyncio.Task[None] | None = None

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
            status, body, ctype = self._answer(head[:MAX_REQUEST_HEAD])
            payload = body.encode("utf-8")
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

    def _answer(self, head: bytes) -> tuple[str, str, str]:
        parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return "400 Bad Request", "bad request\n", "text/plain"
        method, target = parts[0], parts[1].split("?", 1)[0]
        if target != "/metrics":
            return "404 Not Found", "not found\n", "text/plain"
        if method != "GET":
            return "405 Method Not Allowed", "method not allowed\n", "text/plain"
        return "200 OK", self.figures.render(self.sampler), CONTENT_TYPE
