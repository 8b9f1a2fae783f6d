"""The slave side of HA: copy the master's commit log, byte for byte, into this broker's store.

RocketMQ's `HAClient`, as one thread with a blocking socket (storing may create a segment, which
pre-zeroes a whole file: no work for the event loop):

1. connect to the master's HA address — `haMasterAddress` when set, else the `haServerAddr` of the
   name server's answer to this broker's registration (the master's own registration), re-learned
   on every registration as RocketMQ does; while it is unknown the broker re-registers every few
   seconds to learn it;
2. report the offset this store's commit log ends at (after recovery: a restarted slave resumes
   exactly where its log ends, nothing is fetched twice);
3. for every transfer: check it continues the log, store the whole records of it verbatim with
   `StoreAPI.append_replicated` (blanks included, so segments roll at the master's offsets; the
   store's dispatcher then builds this slave's consume queues and index from the bytes, as on
   the master), and report the new end. Reports also go out every `haSendHeartbeatInterval` ms;
   a master silent for `haHousekeepingInterval` ms, a broken stream or a closed connection means
   reconnect after `RECONNECT_DELAY_S`.

A master that refuses this slave (its log diverged: see ha_protocol) stops the thread for good:
`on_refused` is called with the reason (the broker then stops serving reads, see ha.py), and the
store must be rebuilt by an operator — serving the diverged bytes would be serving wrong data.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable

from rocketlite.broker.config import BrokerConfig
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.formats.ha_frames import (
    HANDSHAKE_MARK,
    HEADER,
    LEARNER_HANDSHAKE_MARK,
    MAX_BODY_SIZE,
    REFUSED_OFFSET,
    REPORT,
    RefusedError,
    whole_records,
)
from rocketlite.protocol.wire.headers import RegisterBrokerResponseHeader
from rocketlite.store.api import StoreAPI

log = logging.getLogger("rocketlite.broker.ha")

RECONNECT_DELAY_S = 1.0
_NO_MASTER_REGISTER_S = 3.0
_CONNECT_TIMEOUT_S = 3.0


def derived_master_addr(ha_addr: str) -> str:
    """The master's broker address when only its HA address is configured: RocketMQ's default
    layout puts haListenPort at listenPort + 1."""
    host, _, port = ha_addr.rpartition(":")
    return f"{host}:{int(port) - 1}"


class HASlaveService:
    """The replication thread of a slave broker."""

    def __init__(
        self,
        store: StoreAPI,
        config: BrokerConfig,
        *,
        on_refused: Callable[[str], None],
        request_register: Callable[[], None],
    ) -> None:
        self.store = store
        self.config = config
        self.on_refused = on_refused
        self.request_register = request_register
        configured = config.ha_master_address
        self.master_ha_addr: str | None = configured.strip() if configured else None
        # The master's broker address (for the config sync): from the name server, else derived.
        self.master_addr: str | None = (
            derived_master_addr(self.master_ha_addr) if self.master_ha_addr else None
        )
        self.refused: str | None = None
        self.connected = False
        self.reported_offset = -1
        self.bytes_received = 0
        self._last_report = 0.0
        self._failures = 0
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="rocketlite-ha-slave", daemon=True)
        self._thread.start()

    async def close(self) -> None:
        self._stop.set()
        self._drop_connection()
        thread = self._thread
        if thread is not None:
            await asyncio.get_running_loop().run_in_executor(None, thread.join, 10)

    def _drop_connection(self) -> None:
        with self._lock:
            sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    # -- where the master is ----------------------------------------------------------------
    def on_register_result(self, result: RegisterBrokerResponseHeader) -> None:
        """The name server's answer to this broker's registration (from the event loop)."""
        if result.master_addr:
            self.master_addr = result.master_addr
        if self.config.ha_master_address or not result.ha_server_addr:
            return
        if result.ha_server_addr != self.master_ha_addr:
            log.info("HA: master HA address %s (from the name server)", result.ha_server_addr)
            old = self.master_ha_addr
            self.master_ha_addr = result.ha_server_addr
            if old is not None:
                self._drop_connection()  # reconnect to the new address

    def on_config_change(self, keys: set[str]) -> None:
        """Live configuration: a new `haMasterAddress` means reconnecting there."""
        if "haMasterAddress" not in keys:
            return
        addr = self.config.ha_master_address
        self.master_ha_addr = addr.strip() if addr else None
        if self.master_ha_addr:
            self.master_addr = derived_master_addr(self.master_ha_addr)
        self._drop_connection()

    # -- the thread -------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self.store.prestage_first_segment()  # so the first transfer does not wait for it
        except OSError as exc:
            log.warning("HA: cannot prepare the first segment: %s", exc)
        while not self._stop.is_set():
            addr = self.master_ha_addr
            if addr is None:
                self.request_register()
                self._stop.wait(_NO_MASTER_REGISTER_S)
                continue
            try:
                self._session(addr)
            except RefusedError as exc:
                self.refused = str(exc)
                log.error(
                    "HA: master %s refused this slave: %s. Replication stopped; this slave no longer "
                    "serves reads. Rebuild its store (empty storePathRootDir) from the master.",
                    addr,
                    exc,
                )
                self.on_refused(str(exc))
                return
            except (OSError, ProtocolError, ValueError) as exc:
                if not self._stop.is_set():
                    # Say it once per outage, not every RECONNECT_DELAY_S while the master is down.
                    level = logging.WARNING if self._failures == 0 else logging.DEBUG
                    log.log(level, "HA: connection to master %s: %s; reconnecting", addr, exc)
                    self._failures += 1
            finally:
                self.connected = False
                with self._lock:
                    sock, self._sock = self._sock, None
                if sock is not None:
                    sock.close()
            self._stop.wait(RECONNECT_DELAY_S)

    def _session(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=_CONNECT_TIMEOUT_S)
        with self._lock:
            self._sock = sock
        if self._stop.is_set():
            return
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        store = self.store
        file_size = store.log_segment_size
        end = store.written_end
        pending = bytearray()  # received bytes after `end` that do not make a whole record yet
        if self.config.enable_controller_mode:  # say which replica this is (ha_frames)
            mark = LEARNER_HANDSHAKE_MARK if self.config.async_learner else HANDSHAKE_MARK
            sock.sendall(REPORT.pack(mark) + REPORT.pack(self.config.broker_id))
        self._report(sock, end)
        self.connected = True
        self._failures = 0
        log.info("HA: connected to master %s; this slave's commit log ends at %d", addr, end)
        while not self._stop.is_set():
            phy, size = HEADER.unpack(self._recv(sock, HEADER.size))
            if phy == REFUSED_OFFSET:
                reason = self._recv(sock, min(max(size, 0), 65536)).decode("utf-8", "replace")
                raise RefusedError(reason)
            if not 0 <= size <= MAX_BODY_SIZE:
                raise ProtocolError(f"transfer header with body size {size}")
            expected = end + len(pending)
            if phy != expected:
                if end == expected and store.log_is_empty and phy % file_size == 0 and phy > end:
                    end = expected = phy  # a new slave of a master whose oldest segment is not 0
                else:
                    raise ProtocolError(f"master sent offset {phy}, this slave expects {expected}")
            if size == 0:
                self._report_if_due(sock, end)
                continue
            body = self._recv(sock, size)
            self.bytes_received += size
            if pending:
                pending += body
                data: bytearray = pending
            else:
                data = body
            cut, stamp = whole_records(data, end, file_size)
            if cut:
                with memoryview(data) as view, view[:cut] as part:
                    end = store.append_replicated(end, part, stamp)
            pending = data[cut:] if cut < len(data) else bytearray()
            if cut:
                self._report(sock, end)
            else:
                self._report_if_due(sock, end)

    def _recv(self, sock: socket.socket, n: int) -> bytearray:
        """Exactly `n` bytes; sends heartbeats while waiting, gives up after housekeeping time."""
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        heartbeat_s = self.config.ha_send_heartbeat_interval / 1000
        sock.settimeout(heartbeat_s)
        silent_since = time.monotonic()
        try:
            while got < n:
                try:
                    k = sock.recv_into(view[got:], n - got)
                except TimeoutError:
                    if self._stop.is_set():
                        raise ProtocolError("stopping") from None
                    silent = time.monotonic() - silent_since
                    if silent * 1000 >= self.config.ha_housekeeping_interval:
                        raise ProtocolError(f"master silent for {silent:.0f} s") from None
                    self._report(sock, self.reported_offset)
                    continue
                if k == 0:
                    raise ProtocolError("master closed the connection")
                got += k
                silent_since = time.monotonic()
        finally:
            view.release()
        return buf

    def _report(self, sock: socket.socket, offset: int) -> None:
        sock.sendall(REPORT.pack(offset))
        self.reported_offset = offset
        self._last_report = time.monotonic()

    def _report_if_due(self, sock: socket.socket, offset: int) -> None:
        due = self.config.ha_send_heartbeat_interval / 1000
        if offset != self.reported_offset or time.monotonic() - self._last_report >= due:
            self._report(sock, offset)

    def runtime_info(self) -> dict[str, str]:
        return {
            "haMasterAddress": self.master_ha_addr or "",
            "haConnected": str(self.connected).lower(),
            "haSlaveReportedOffset": str(max(self.reported_offset, 0)),
            "haRefused": self.refused or "",
        }
