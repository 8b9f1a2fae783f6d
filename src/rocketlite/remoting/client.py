"""`RemotingClient`: request/response over cached connections keyed by `host:port`."""

from __future__ import annotations

import asyncio
import logging

from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.remoting.connection import Connection, RequestTable
from rocketlite.runtime import result_within

log = logging.getLogger("rocketlite.remoting.client")


class RemotingClient:
    """Opens at most one connection per address; requests from the peer go to `table`."""

    def __init__(self, table: RequestTable | None = None, *, connect_timeout: float = 3.0) -> None:
        self.table = table or RequestTable()
        self.connect_timeout = connect_timeout
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
            loop = asyncio.get_running_loop()
            _transport, protocol = await result_within(
                loop.create_connection(lambda: Connection(self.table), host.strip("[]"), int(port)),
                self.connect_timeout,
            )
            self._conns[addr] = protocol
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
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
