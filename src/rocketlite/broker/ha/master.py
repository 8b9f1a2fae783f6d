"""The master side of HA: serve slaves on `haListenPort`, track how far they hold the log.

RocketMQ's `HAService` (acceptor, `push2SlaveMaxOffset`, `GroupTransferService`) and `HAConnection`
(a reader and a writer per slave), as asyncio tasks on the broker's loop:

* reader: the slave's 8-byte reports. The first one says where to start (`transfer_start` checks
  the slave's log can be a prefix of ours, else the slave is refused, see ha_protocol); each one is
  an acknowledgement: `push2slave_max_offset` is the highest offset any slave reported.
* writer: streams the commit log from that start, `haTransferBatchSize` bytes per transfer, copied
  out of the mapping; when caught up it waits to be woken (a SYNC_MASTER send waiting, or the
  dispatcher having new records), polling every `_POLL_S` in case a record enters no consume
  queue, and sends a heartbeat header after `haSendHeartbeatInterval` ms of silence. A slave silent
  for `haHousekeepingInterval` ms is disconnected.

SYNC_MASTER sends call `wait_replicated(end_offset)` (send.py) after their flush: PUT_OK once a slave
reported `end_offset`; SLAVE_NOT_AVAILABLE at once when no slave is connected or the best one lags
by `haMaxGapNotInSync` bytes or more; FLUSH_SLAVE_TIMEOUT after `syncFlushTimeout` ms. The message
is stored in all three cases (RocketMQ's `handleHA`).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import socket
import time
from collections.abc import Callable

from rocketlite.broker.config import BrokerConfig
from rocketlite.protocol.formats.ha_frames import (
    HANDSHAKE_MARK,
    HEADER,
    LEARNER_HANDSHAKE_MARK,
    REFUSED_OFFSET,
    REPORT,
)
from rocketlite.protocol.formats.record import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    LONG,
    MESSAGE_MAGIC_CODE,
    PHYSICAL_OFFSET_POS,
    SIZE_MAGIC,
)
from rocketlite.runtime import cancel_tasks, result_within, wait_event
from rocketlite.store.api import StoreAPI
from rocketlite.store.results import PutMessageStatus

log = logging.getLogger("rocketlite.broker.ha")

_POLL_S = 0.1  # a writer re-checks the log this often even when nobody woke it
_PHYS_END = PHYSICAL_OFFSET_POS + 8


def transfer_start(store: StoreAPI, slave_offset: int) -> int | str:
    """Where to stream from for a slave that holds `slave_offset` bytes, or why it cannot be served.

    A new slave (offset 0) gets the master's whole retained log, from its oldest segment. Otherwise
    the slave's end must be an offset the master's log also has a record boundary at: the start of
    a segment, the master's end, an end-of-file blank, or a record whose PHYSICALOFFSET field says
    it starts exactly there (every stored record carries its own offset).
    """
    master_end, segment = store.max_phy_offset, store.log_segment_size
    if slave_offset == 0:
        return store.min_phy_offset
    if slave_offset < 0:
        return f"slave reported a negative offset {slave_offset}"
    if slave_offset > master_end:
        return (
            f"the slave's commit log ({slave_offset} bytes) is ahead of the master's ({master_end}): "
            "the logs diverged"
        )
    if slave_offset < store.min_phy_offset:
        return (
            f"the slave's commit log ends at {slave_offset}, before the master's oldest retained "
            f"offset {store.min_phy_offset}: it cannot catch up"
        )
    if slave_offset == master_end or slave_offset % segment == 0:
        return slave_offset
    head = store.read_log(slave_offset, END_FILE_MIN_BLANK_LENGTH)
    if head is not None:
        size, magic = SIZE_MAGIC.unpack_from(head)
        head.release()
        if magic == BLANK_MAGIC_CODE and size == segment - slave_offset % segment:
            return slave_offset
        if magic == MESSAGE_MAGIC_CODE:
            fixed = store.read_log(slave_offset, _PHYS_END)
            if fixed is not None:
                phys = LONG.unpack_from(fixed, PHYSICAL_OFFSET_POS)[0]
                fixed.release()
                if phys == slave_offset:
                    return slave_offset
    return (
        f"the master's commit log has no record boundary at the slave's offset {slave_offset}: "
        "the logs diverged"
    )


def ha_listen_port(configured: int, listen_port: int, bound_port: int) -> int:
    """`haListenPort`, or listenPort + 1 (RocketMQ's default); 0 (ephemeral) for an ephemeral broker."""
    if configured:
        return configured
    return bound_port + 1 if listen_port else 0


def bind_ha_socket(host: str, port: int) -> socket.socket:
    """The listening socket, bound now (so startup fails early and the port is known)."""
    sock = socket.create_server((host, port), backlog=16)
    sock.setblocking(False)
    return sock


class HAConnection:
    """One slave: reads its reports, streams it the log."""

    def __init__(self, service: HAMasterService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.service = service
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.accepted = False
        self.replica_id: int | None = None  # controller mode: the slave's brokerId (handshake)
        self.async_learner = False  # controller mode: a replica that never joins the SyncStateSet
        self.acked_offset = -1
        self.next_offset = -1
        self.data_ready = asyncio.Event()
        self.closed = False

    async def run(self) -> None:
        cfg = self.service.config
        try:
            first = await result_within(
                self.reader.readexactly(REPORT.size), cfg.ha_housekeeping_interval / 1000
            )
        except (asyncio.IncompleteReadError, TimeoutError, OSError):
            log.warning("HA: slave %s sent no offset; closing", self.peer)
            return
        slave_offset = REPORT.unpack(first)[0]
        if slave_offset in (HANDSHAKE_MARK, LEARNER_HANDSHAKE_MARK):
            self.async_learner = slave_offset == LEARNER_HANDSHAKE_MARK
            try:
                hello = await result_within(
                    self.reader.readexactly(2 * REPORT.size), cfg.ha_housekeeping_interval / 1000
                )
            except (asyncio.IncompleteReadError, TimeoutError, OSError):
                log.warning("HA: slave %s sent a handshake but no offset; closing", self.peer)
                return
            self.replica_id, slave_offset = REPORT.unpack_from(hello)[0], REPORT.unpack_from(hello, 8)[0]
        verdict = transfer_start(self.service.store, slave_offset)
        if isinstance(verdict, str):
            log.error("HA: refusing slave %s: %s", self.peer, verdict)
            self.service.refusals += 1
            reason = verdict.encode("utf-8")
            self.writer.write(HEADER.pack(REFUSED_OFFSET, len(reason)) + reason)
            with contextlib.suppress(OSError, ConnectionError):
                await self.writer.drain()
            return
        self.next_offset = verdict
        self.accepted = True
        log.info(
            "HA: slave %s connected, holds %d bytes; streaming from %d", self.peer, slave_offset, verdict
        )
        self.service.on_report(self, slave_offset)
        reads = asyncio.create_task(self._read_reports(), name=f"ha-read-{self.peer}")
        try:
            await self._write_loop()
        except (OSError, ConnectionError) as exc:
            if not self.closed:
                log.warning("HA: slave %s: %s", self.peer, exc)
        finally:
            await cancel_tasks(reads)

    async def _read_reports(self) -> None:
        housekeeping = self.service.config.ha_housekeeping_interval / 1000
        try:
            while True:
                data = await result_within(self.reader.readexactly(REPORT.size), housekeeping)
                self.service.on_report(self, REPORT.unpack(data)[0])
        except TimeoutError:
            log.warning("HA: slave %s silent for %.0f s; closing", self.peer, housekeeping)
        except (asyncio.IncompleteReadError, OSError, ConnectionError):
            log.info("HA: slave %s disconnected", self.peer)
        self.close()

    async def _write_loop(self) -> None:
        store = self.service.store
        cfg = self.service.config
        writer = self.writer
        last_write = time.monotonic()
        while not self.closed:
            view = store.read_log_from(self.next_offset)
            if view is not None and len(view):
                n = min(len(view), cfg.ha_transfer_batch_size)
                buf = bytearray(HEADER.size + n)
                HEADER.pack_into(buf, 0, self.next_offset, n)
                buf[HEADER.size :] = view[:n]
                view.release()
                writer.write(buf)
                self.next_offset += n
                self.service.bytes_sent += n
                await writer.drain()
                last_write = time.monotonic()
                continue
            if view is not None:
                view.release()
            if self.next_offset < store.min_phy_offset:
                log.error("HA: slave %s fell behind the master's retained log; closing", self.peer)
                return
            self.data_ready.clear()
            if store.max_phy_offset > self.next_offset:
                continue
            idle = time.monotonic() - last_write
            heartbeat = cfg.ha_send_heartbeat_interval / 1000
            if idle >= heartbeat:
                writer.write(HEADER.pack(self.next_offset, 0))
                await writer.drain()
                last_write = time.monotonic()
                continue
            await wait_event(self.data_ready, min(heartbeat - idle, _POLL_S))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.data_ready.set()
            self.writer.close()


class HAMasterService:
    """Accepts slaves, tracks `push2slave_max_offset`, answers SYNC_MASTER waits."""

    def __init__(
        self,
        store: StoreAPI,
        config: BrokerConfig,
        sock: socket.socket,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.store = store
        self.config = config
        self.sock = sock
        self.loop = loop
        self.port: int = sock.getsockname()[1]
        self.connections: set[HAConnection] = set()
        self.push2slave_max_offset = 0
        self.bytes_sent = 0
        self.refusals = 0
        self._waiters: list[tuple[int, int, asyncio.Future[bool]]] = []
        self._seq = itertools.count()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake_scheduled = False
        self._closing = False
        self._ack_listeners: list[Callable[[HAConnection, int], None]] = []

    def add_ack_listener(self, listener: Callable[[HAConnection, int], None]) -> None:
        """`listener(conn, offset)` on every report of an accepted slave (controller mode's
        SyncStateSet keeper counts acknowledgements per replica)."""
        self._ack_listeners.append(listener)

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, sock=self.sock)
        log.info("HA: master listening on port %d", self.port)

    async def close(self) -> None:
        self._closing = True
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        await cancel_tasks(*self._tasks)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await result_within(self._server.wait_closed(), 2)
        for _, _, fut in self._waiters:
            if not fut.done():
                fut.set_result(False)
        self._waiters.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = HAConnection(self, reader, writer)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self.connections.add(conn)
        try:
            await conn.run()
        except asyncio.CancelledError:
            # close() cancels the handlers. Python 3.11's start_server calls task.exception() on a
            # handler task that ended cancelled and logs that as an event-loop ERROR, so a handler
            # our own close cancelled ends normally; any other cancellation goes on.
            if not self._closing:
                raise
        finally:
            conn.close()
            self.connections.discard(conn)
            if task is not None:
                self._tasks.discard(task)
            if not self.accepted_slaves:
                log.warning("HA: no slave connected")

    # -- state ------------------------------------------------------------------------------
    @property
    def accepted_slaves(self) -> list[HAConnection]:
        return [c for c in self.connections if c.accepted and not c.closed]

    def slave_ok(self, end_offset: int) -> bool:
        """RocketMQ's `isSlaveOK`: a slave is connected and lags by less than haMaxGapNotInSync."""
        if not self.accepted_slaves:
            return False
        return end_offset - self.push2slave_max_offset < self.config.ha_max_gap_not_in_sync

    def on_report(self, conn: HAConnection, offset: int) -> None:
        """A slave holds everything before `offset`: complete the waits it covers."""
        conn.acked_offset = max(conn.acked_offset, offset)
        for listener in self._ack_listeners:
            listener(conn, conn.acked_offset)
        if offset <= self.push2slave_max_offset:
            return
        self.push2slave_max_offset = offset
        waiters = self._waiters
        while waiters and waiters[0][0] <= offset:
            fut = heapq.heappop(waiters)[2]
            if not fut.done():
                fut.set_result(True)

    # -- waking writers ---------------------------------------------------------------------
    def wake(self) -> None:
        for conn in self.connections:
            conn.data_ready.set()

    def on_dispatch(self, topic: str, queue_id: int, max_offset: int, tags_code: int, ts: int) -> None:
        """Dispatcher listener (reput thread): new records are readable; wake the writers once."""
        del topic, queue_id, max_offset, tags_code, ts
        if not self._wake_scheduled and self.connections:
            self._wake_scheduled = True
            self.loop.call_soon_threadsafe(self._wake_from_thread)

    def _wake_from_thread(self) -> None:
        self._wake_scheduled = False
        self.wake()

    # -- SYNC_MASTER ------------------------------------------------------------------------
    def accepts_put(self) -> bool:
        """A plain SYNC_MASTER takes every put (minInSyncReplicas is controller mode's)."""
        return True

    async def wait_replicated(self, end_offset: int) -> PutMessageStatus:
        """Wait until a slave holds the log up to `end_offset` (or say why not)."""
        if self.push2slave_max_offset >= end_offset and self.accepted_slaves:
            return PutMessageStatus.PUT_OK
        if not self.slave_ok(end_offset):
            return PutMessageStatus.SLAVE_NOT_AVAILABLE
        fut: asyncio.Future[bool] = self.loop.create_future()
        if len(self._waiters) > 4096:  # drop the timed-out ones now and then
            self._waiters = [w for w in self._waiters if not w[2].done()]
            heapq.heapify(self._waiters)
        heapq.heappush(self._waiters, (end_offset, next(self._seq), fut))
        self.wake()
        timeout = self.store.config.sync_flush_timeout / 1000
        try:
            ok = await result_within(fut, timeout)
        except TimeoutError:
            ok = False
        if not ok:
            log.warning(
                "HA: slave did not acknowledge offset %d within %d ms (slave holds %d)",
                end_offset,
                self.store.config.sync_flush_timeout,
                self.push2slave_max_offset,
            )
            return PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        return PutMessageStatus.PUT_OK

    def runtime_info(self) -> dict[str, str]:
        slaves = self.accepted_slaves
        return {
            "haConnections": str(len(slaves)),
            "haPush2SlaveMaxOffset": str(self.push2slave_max_offset),
            "haSlaveFallBehind": str(max(self.store.max_phy_offset - self.push2slave_max_offset, 0)),
            "haSlaves": ",".join(f"{c.peer}@{c.acked_offset}" for c in sorted(slaves, key=lambda c: c.peer)),
        }
