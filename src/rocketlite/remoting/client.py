"""`RemotingClient`: request/response over cached connections keyed by `host:port`.

With `ssl_context` (remoting/tls.py `client_context`) every connection it opens uses TLS."""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl

from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.remoting.connection import Connection, RequestTable
from rocketlite.runtime import result_within

log = logging.getLogger("rocketlite.remoting.client")


def _resolve(fut: asyncio.Future[None], _conn: Connection) -> None:
    if not fut.done():
        fut.set_result(None)


class RemotingClient:
    """Opens at most one connection per address; requests from the peer go to `table`."""

    def __init__(
        self,
        table: RequestTable | None = None,
        *,
        connect_timeout: float = 3.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.table = table or RequestTable()
        self.connect_timeout = connect_timeout
        self.ssl_context = ssl_context
        self._conns: dict[str, Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def connection(self, addr: str) -> Connection:
        conn = self._conns.get(addr)
        if conn is not None and not conn.closed:
            return conn
        lock = self._locks.setdefault(addr, asyncio.Lock())
        async with lock:
            conn = self._conns.get(addr)
            if conn is not None and not conn.closed:
                return conn
            host, _, port = addr.rpartition(":")
            protocol = await result_within(self._connect(host.strip("[]"), int(port)), self.connect_timeout)
            self._conns[addr] = protocol
            return protocol

    async def _connect(self, host: str, port: int) -> Connection:
        """A connection; with TLS the handshake runs on the transport held here (`start_tls`), so a
        failed or cancelled handshake closes it at once (not when the garbage collector finds it)."""
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.create_connection(lambda: Connection(self.table), host, port)
        if self.ssl_context is None:
            return protocol
        try:
            secured = await loop.start_tls(transport, protocol, self.ssl_context, server_hostname=host)
        except BaseException:
            transport.close()
            raise
        if secured is None:
            transport.close()
            raise ConnectionError(f"connection to {host}:{port} closed during the TLS handshake")
        protocol.connection_made(secured)  # from now on it writes through TLS
        return protocol

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        conn = await self.connection(addr)
        return await conn.request(cmd, timeout)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        conn = await self.connection(addr)
        conn.oneway(cmd)

    def close_address(self, addr: str) -> None:
        conn = self._conns.pop(addr, None)
        if conn is not None:
            conn.close()

    async def close(self) -> None:
        """Close every connection; TLS ones are waited for (up to a second) while their close
        alerts are exchanged, so none outlives the loop half closed."""
        conns = list(self._conns.values())
        self._conns.clear()
        for conn in conns:
            conn.close()
        if self.ssl_context is None:
            return
        loop = asyncio.get_running_loop()
        waits: list[asyncio.Future[None]] = []
        for conn in conns:
            if not conn.lost:
                lost: asyncio.Future[None] = loop.create_future()
                conn.close_callbacks.append(functools.partial(_resolve, lost))
                waits.append(lost)
        if waits:
            await asyncio.wait(waits, timeout=1.0)
        for conn in conns:
            if not conn.lost and conn.transport is not None:
                conn.transport.abort()
