"""`NameServer`: the embeddable name server process (`NamesrvController` + `NamesrvStartup`).

It owns a `RouteInfoManager`, a `KVConfigManager` and a `RemotingServer` serving the handlers of
`processor.py`, plus one periodic task that expires brokers which stopped registering
(`scanNotActiveBrokerInterval`, default every 10 s; expiry after `brokerChannelExpiredTime`,
default 120 s). A closed connection removes the brokers registered over it at once, as Java's
`BrokerHousekeepingService` does.

Lifecycle: `await start()` loads the KV file and binds (`listenPort` 0 picks a free port; `.port`
tells which), `await close()` stops everything and may be called any number of times. Also an
async context manager. `tls` (remoting/tls.py: `tls.server.mode` and the certificate keys)
puts TLS on its port. Time comes from the injected `Clock`, so tests drive expiry with a
`ManualClock` and call `route_info.scan_not_active_brokers()` instead of sleeping.

`embedded`: a service answering more request codes on the name server's own port — controller
mode's controller with `enableControllerInNamesrv=true`, as RocketMQ's name server hosts it. It is
told of every closed connection too (a broker's closed connection makes it inactive at once).

`clusterTest` is accepted but its cross-environment route lookup (`ClusterTestRequestProcessor`)
is not implemented; the name server logs a warning and serves its own routes.
"""

from __future__ import annotations

import asyncio
import logging
from types import TracebackType
from typing import Protocol, Self

from rocketlite.clock import SYSTEM_CLOCK, Clock
from rocketlite.namesrv.config import NamesrvConfig
from rocketlite.namesrv.kv_config import KVConfigManager
from rocketlite.namesrv.processor import NamesrvProcessor
from rocketlite.namesrv.route_info import RouteInfoManager
from rocketlite.remoting.connection import Connection, RequestTable
from rocketlite.remoting.server import RemotingServer
from rocketlite.remoting.tls import ServerTls, TlsConfig

log = logging.getLogger("rocketlite.namesrv.server")


class EmbeddedService(Protocol):
    """A service served on the name server's port (`NameServer(embedded=...)`)."""

    table: RequestTable

    def connection_closed(self, conn: Connection) -> None: ...

    async def start_embedded(self, port: int) -> None: ...

    async def close(self) -> None: ...


class NameServer:
    """One name server; construct, `await start()`, `await close()`."""

    def __init__(
        self,
        config: NamesrvConfig,
        clock: Clock = SYSTEM_CLOCK,
        *,
        tls: TlsConfig | None = None,
        embedded: EmbeddedService | None = None,
    ) -> None:
        self.config = config
        self.embedded = embedded
        self.clock = clock
        self.tls = tls or TlsConfig()
        self._server_tls = ServerTls.of(self.tls)  # certificate files read (and checked) now
        self.route_info = RouteInfoManager(clock, broker_expired_ms=config.broker_expired_ms)
        self.kv_config = KVConfigManager(config.kv_config_path)
        self.processor = NamesrvProcessor(config, self.route_info, self.kv_config)
        self.remoting: RemotingServer | None = None
        self._scan_task: asyncio.Task[None] | None = None
        self._started = False
        self._closed = False

    @property
    def port(self) -> int:
        """The port actually bound (differs from the config when it asked for 0)."""
        if self.remoting is None or not self.remoting.ports:
            raise RuntimeError("name server is not started")
        return self.remoting.ports[0]

    async def start(self) -> None:
        if self._started:
            raise RuntimeError("name server already started")
        self._started = True
        self.kv_config.load()
        if self.config.cluster_test:
            log.warning(
                "clusterTest=true: cross-environment route lookup is not supported; serving local routes"
            )
        table = self.processor.request_table()
        if self.embedded is not None:
            for code, handler in self.embedded.table.handlers.items():
                if code in table.handlers:
                    raise RuntimeError(f"request code {code} is the name server's and the embedded service's")
                table.register(code, handler)
        remoting = RemotingServer(
            table,
            host=self.config.listen_host,
            ports=(self.config.listen_port,),
            idle_seconds=float(self.config.server_channel_max_idle_time_seconds),
            partial_frame_seconds=self.config.server_partial_frame_timeout_millis / 1000,
            on_connection_closed=self._on_connection_closed,
            tls=self._server_tls,
        )
        self.remoting = remoting
        await remoting.start()
        self._scan_task = asyncio.create_task(self._scan_loop(), name="namesrv-scan-not-active-broker")
        if self.embedded is not None:
            await self.embedded.start_embedded(self.port)
        log.info("name server listening on %s:%d", self.config.listen_host, self.port)

    def _on_connection_closed(self, conn: Connection) -> None:
        self.route_info.on_connection_closed(conn)
        if self.embedded is not None:
            self.embedded.connection_closed(conn)

    async def _scan_loop(self) -> None:
        interval = self.config.scan_not_active_broker_interval / 1000.0
        while True:
            await asyncio.sleep(interval)
            try:
                self.route_info.scan_not_active_brokers()
            except Exception:
                log.exception("scanning for inactive brokers failed")

    async def close(self) -> None:
        """Stop the expiry task and the listener, close every connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        task, self._scan_task = self._scan_task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])  # unlike `await task`, never swallows our own cancellation
        if self.embedded is not None:
            await self.embedded.close()
        if self.remoting is not None:
            await self.remoting.close()
        log.info("name server closed")

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
