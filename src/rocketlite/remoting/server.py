"""`RemotingServer`: listens on one or more ports and serves a `RequestTable` on each connection.

Binding port 0 picks a free port (tests); `ports` tells what was bound. Idle connections are closed
after `idle_seconds` (RocketMQ's 120 s), and those holding an incomplete frame for
`partial_frame_seconds` (30 s). `close` is idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any

from rocketlite.remoting.connection import Connection, RequestTable
from rocketlite.remoting.tls import TLS_HANDSHAKE_RECORD, ServerTls, TlsMode
from rocketlite.runtime import cancel_tasks

log = logging.getLogger("rocketlite.remoting.server")


def check_ports_free(endpoints: Iterable[tuple[str, int]]) -> None:
    """Raise OSError (`cannot listen on HOST:PORT: ...`, as `RemotingServer.bind` words it) for the
    first (host, port) that cannot be bound now; port 0 (any free port) is skipped. A server checks
    its fixed ports before slow or lasting work (a broker opening and preallocating its store), so
    a port in use stops it before it creates anything. The probe binds with SO_REUSEADDR, as the
    servers do, so a port whose old connections linger in TIME_WAIT counts as free."""
    for host, port in endpoints:
        if not port:
            continue
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as exc:
                raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from exc


def _set_once(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _peer(sock: socket.socket) -> str:
    try:
        host, port = sock.getpeername()[:2]
    except OSError:
        return "?"
    return f"{host}:{port}"


class RemotingServer:
    def __init__(
        self,
        table: RequestTable,
        *,
        host: str = "0.0.0.0",
        ports: tuple[int, ...] = (0,),
        idle_seconds: float = 120.0,
        partial_frame_seconds: float = 30.0,
        on_connection_closed: Callable[[Connection], None] | None = None,
        tls: ServerTls | None = None,
    ) -> None:
        self.table = table
        self.tls = tls if tls is not None and tls.context is not None else None
        self.host = host
        self.requested_ports = ports
        self.idle_seconds = idle_seconds
        self.partial_frame_seconds = partial_frame_seconds
        self.on_connection_closed = on_connection_closed
        self.connections: set[Connection] = set()
        self._servers: list[asyncio.AbstractServer] = []
        self._sockets: list[socket.socket] = []
        self.ports: list[int] = []
        self._idle_task: asyncio.Task[None] | None = None
        self._accept_tasks: set[asyncio.Task[None]] = set()

    def _make_connection(self) -> Connection:
        conn = Connection(self.table, on_close=self._closed)
        self.connections.add(conn)
        return conn

    def _closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        if self.on_connection_closed is not None:
            self.on_connection_closed(conn)

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """(host, port) of each bound listening socket, as the kernel reports it (empty before
        `bind`): what the server really listens on, whatever the config said."""
        return [(str(s.getsockname()[0]), int(s.getsockname()[1])) for s in self._sockets]

    def bind(self) -> list[int]:
        """Bind the listening sockets now (so the real ports are known before serving)."""
        if self._sockets:
            return self.ports
        for port in self.requested_ports:
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((self.host, port))
            except OSError as exc:
                sock.close()
                for s in self._sockets:
                    s.close()
                self._sockets.clear()
                raise OSError(exc.errno, f"cannot listen on {self.host}:{port}: {exc.strerror}") from exc
            sock.listen(1024)
            sock.setblocking(False)
            self._sockets.append(sock)
            self.ports.append(int(sock.getsockname()[1]))
        return self.ports

    async def start(self) -> None:
        """Bind (if not yet) and serve."""
        self.bind()
        loop = asyncio.get_running_loop()
        for sock in self._sockets:
            if self.tls is None:
                server = await loop.create_server(self._make_connection, sock=sock)
                self._servers.append(server)
            else:
                self._spawn(self._accept_loop(sock), "remoting-accept")
        self._idle_task = asyncio.create_task(self._close_idle(), name="remoting-idle")
        tls = f", TLS {self.tls.mode.value}" if self.tls is not None else ""
        log.info("listening on %s ports %s%s", self.host, self.ports, tls)

    def _spawn(self, coro: Any, name: str) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro, name=name)
        self._accept_tasks.add(task)
        task.add_done_callback(self._accept_tasks.discard)

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn_sock, _addr = await loop.sock_accept(sock)
            except OSError as exc:
                log.warning("accept failed on port %s: %s", sock.getsockname()[1], exc)
                await asyncio.sleep(0.1)
                continue
            conn_sock.setblocking(False)
            self._spawn(self._start_connection(conn_sock), "remoting-tls-sniff")

    async def _start_connection(self, sock: socket.socket) -> None:
        """Peek at the first byte; start the connection with TLS or plaintext, or close it."""
        tls = self.tls
        assert tls is not None
        loop = asyncio.get_running_loop()
        peer = _peer(sock)
        readable: asyncio.Future[None] = loop.create_future()
        fd = sock.fileno()
        loop.add_reader(fd, _set_once, readable)
        try:
            async with asyncio.timeout(self.partial_frame_seconds):
                await readable
            first = sock.recv(1, socket.MSG_PEEK)
        except (TimeoutError, OSError, asyncio.CancelledError) as exc:
            sock.close()
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        finally:
            loop.remove_reader(fd)
        if not first:
            sock.close()
            return
        is_tls = first[0] == TLS_HANDSHAKE_RECORD
        if not is_tls and tls.mode is TlsMode.ENFORCING:
            log.warning("closing %s: a plaintext connection, while TLS is enforcing", peer)
            sock.close()
            return
        try:
            await loop.connect_accepted_socket(
                self._make_connection,
                sock,
                ssl=tls.context if is_tls else None,
                ssl_handshake_timeout=self.partial_frame_seconds if is_tls else None,
            )
        except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
            log.warning("closing %s: TLS handshake failed: %s", peer, exc or type(exc).__name__)
            with contextlib.suppress(OSError):
                sock.close()

    async def _close_idle(self) -> None:
        """Close connections idle for `idle_seconds`, and those whose started frame has not
        completed within `partial_frame_seconds` (a slowloris peer dribbling bytes is never
        idle, but must not hold a connection and a frame buffer forever)."""
        while True:
            await asyncio.sleep(min(self.idle_seconds / 4, self.partial_frame_seconds / 4, 30.0))
            now = time.monotonic()
            for conn in list(self.connections):
                if conn.partial_since and now - conn.partial_since > self.partial_frame_seconds:
                    log.warning(
                        "closing %s: a frame started %.1f s ago is still incomplete (%d bytes)",
                        conn.remote_address,
                        now - conn.partial_since,
                        conn.decoder.buffered,
                    )
                    conn.close()
                elif now - conn.last_active > self.idle_seconds and not conn.pending:
                    log.info("closing idle connection %s", conn.remote_address)
                    conn.close()

    async def close(self) -> None:
        if self._idle_task is not None:
            self._idle_task.cancel()
            self._idle_task = None
        for server in self._servers:
            server.close()
        await cancel_tasks(*self._accept_tasks)
        for conn in list(self.connections):
            conn.close()
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()
