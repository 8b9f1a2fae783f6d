"""The POP state on disk: an append-only log of small binary records over a snapshot, with group
commit. `broker/pop/state.py` owns the rules; this module owns the bytes, the fdatasync and the
recovery.

Files in the config dir:

- `popState.log`: a 16-byte header, then records appended per change;
- `popState.snap`: the whole state at one moment (a header, then one QUEUE record per
  group/topic/queue), replaced atomically (temp file, fsync, rename, directory fsync);
- `popState.json`: the JSON file of older versions, read once when no snapshot exists (upgrade),
  then replaced by a snapshot.

Both headers are ``FILE_HEADER`` (big-endian)::

    magic   4s   b"RLPL" (log) or b"RLPS" (snapshot)
    version I    1
    epoch   Q    the log generation: the log is replayed over the snapshot only when the epochs match

A compaction writes the snapshot of epoch E+1 first, then truncates the log and writes the header
of E+1. A crash between the two leaves a log of epoch E, which recovery ignores: everything in it
is in the snapshot already (replaying it would bring acked messages back).

A record is ``RECORD_FRAME`` then its body::

    length  I    bytes of the body
    crc     I    CRC-32 of the body
    body:   kind B, then KEY (group, topic, queue id), then the kind's fields

    KEY     = group_len H, group (UTF-8), topic_len H, topic (UTF-8), queue_id i
    POP     (1) cursor q, popTime q, deadline q, count H, count x (offset q, attempts i)
    ACK     (2) count H, count x offset q            -- acked, dead-lettered or gone: forgotten
    CHANGE  (3) offset q, popTime q, deadline q      -- a new invisible time
    CURSOR  (4) cursor q                             -- the cursor moved with nothing taken
    QUEUE   (5) cursor q, count I, count x (offset q, popTime q, deadline q, attempts i)

A batch pop is one POP record per queue, however many messages it hands out. Recovery reads
records until the first one that is short or fails its CRC (a torn last write) and cuts the log
there, so later appends follow a complete record.

`append` only adds bytes to a buffer (on the event loop, under the state's lock); `durable()`
is what an answer waits for, and it follows the store's flushDiskType (`sync_flush`):

- SYNC_FLUSH (group commit): `durable()` waits until an fdatasync covers everything appended
  before it. The first waiter starts a flush that yields one loop iteration first, so the changes
  of that iteration share it; changes made while an fdatasync runs share the next one. The write
  and fdatasync run on one worker thread, never on the loop.
- ASYNC_FLUSH: `durable()` writes the pending bytes to the file (the page cache) and returns; a
  background fdatasync follows within `sync_interval_s`, off the loop. RocketMQ answers a POP or
  an ack once its checkpoint or ack record is put in the revive topic, which under ASYNC_FLUSH is
  the page cache too. A killed broker loses nothing written (the kernel still has it); a power
  loss can lose the last interval's records, and a lost POP or ack record only brings messages
  back after their invisible time (at least once), never loses one.

`sync()` is the blocking write + fdatasync for threads, tests and `close()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from rocketlite.atomic_file import write_atomically

log = logging.getLogger("rocketlite.broker.pop")

FILE_HEADER: Final = struct.Struct(">4sIQ")
LOG_MAGIC: Final = b"RLPL"
SNAP_MAGIC: Final = b"RLPS"
VERSION: Final = 1
RECORD_FRAME: Final = struct.Struct(">II")
KIND: Final = struct.Struct(">B")
STR_LEN: Final = struct.Struct(">H")
QUEUE_ID: Final = struct.Struct(">i")
POP_HEAD: Final = struct.Struct(">qqqH")
POP_ENTRY: Final = struct.Struct(">qi")
_REPEATED: dict[tuple[str, int], struct.Struct] = {}
_REPEATED_KEPT: Final = 64
ACK_HEAD: Final = struct.Struct(">H")
OFFSET: Final = struct.Struct(">q")
CHANGE: Final = struct.Struct(">qqq")
CURSOR: Final = struct.Struct(">q")
QUEUE_HEAD: Final = struct.Struct(">qI")
QUEUE_ENTRY: Final = struct.Struct(">qqqi")

POP, ACK, CHANGE_KIND, CURSOR_KIND, QUEUE = 1, 2, 3, 4, 5
MAX_BATCH: Final = 0xFFFF  # entries of one POP or ACK record
LOG_NAME: Final = "popState.log"
SNAP_NAME: Final = "popState.snap"
JSON_NAME: Final = "popState.json"
COMPACT_MIN_BYTES: Final = 4 << 20  # never compact a log smaller than this ...
COMPACT_RATIO: Final = 4  # ... or smaller than this many times the last snapshot
SYNC_INTERVAL_S: Final = 0.5  # ASYNC_FLUSH: a background fdatasync this long after a write at most

QueueKey = tuple[str, str, int]  # group, topic, queue id


class PopLogError(ValueError):
    """A snapshot or log that is not this format (bad magic or version): refused naming the file."""


@dataclass(slots=True, frozen=True)
class InFlight:
    """One delivery in flight. Frozen: the messages of one pop share one (a change replaces a
    message's own), so a batch makes one, not one per message."""

    pop_time: int
    deadline: int  # wall-clock ms; due for redelivery from then on
    attempts: int  # deliveries before this one (0 on the first)


@dataclass(slots=True)
class QueuePopState:
    cursor: int
    in_flight: dict[int, InFlight] = field(default_factory=dict)
    # No message in flight is due before this (wall ms; a lower bound, 0 when not known): a pop
    # scans the in-flight messages for due ones only from then on. Memory only.
    due_from: int = field(default=0, compare=False)
    # Every offset in flight was put there in ascending order (`keep`), so the lowest is the
    # dict's first key: the committed offset without a look at the others. An offset put
    # there out of order (a cursor corrected backwards, a state loaded from disk) clears it
    # until nothing is in flight. `last`: the highest offset put there. Memory only.
    ordered: bool = field(default=False, compare=False)
    last: int = field(default=-1, compare=False)

    def keep(self, offset: int, entry: InFlight) -> None:
        """Put `offset` in flight (a new one, or a redelivery's new popTime and deadline)."""
        in_flight = self.in_flight
        if offset not in in_flight:
            if not in_flight:
                self.ordered, self.last = True, offset
            elif offset > self.last:
                self.last = offset
            else:
                self.ordered = False
        in_flight[offset] = entry

    def keep_all(self, offsets: list[int], entry: InFlight) -> None:
        """`keep` for each of `offsets` (ascending), with one dict update when they all lie past
        every offset put in flight before (a pop's new messages)."""
        in_flight = self.in_flight
        if not in_flight:
            self.ordered, self.last = True, offsets[-1]
        elif offsets[0] > self.last:
            self.last = offsets[-1]
        else:
            for offset in offsets:
                self.keep(offset, entry)
            return
        in_flight.update(dict.fromkeys(offsets, entry))

    def committed(self) -> int:
        """The lowest offset in flight, or the cursor when none is."""
        in_flight = self.in_flight
        if not in_flight:
            return self.cursor
        return next(iter(in_flight)) if self.ordered else min(in_flight)


States = dict[QueueKey, QueuePopState]


# -- encoding ---------------------------------------------------------------------------------
def _key(key: QueueKey) -> bytes:
    group, topic = key[0].encode(), key[1].encode()
    return b"".join((STR_LEN.pack(len(group)), group, STR_LEN.pack(len(topic)), topic, QUEUE_ID.pack(key[2])))


def _frame(kind: int, key: QueueKey, fields: bytes) -> bytes:
    body = KIND.pack(kind) + _key(key) + fields
    return RECORD_FRAME.pack(len(body), zlib.crc32(body)) + body


def pop_record(
    key: QueueKey, cursor: int, pop_time: int, deadline: int, entries: list[tuple[int, int]]
) -> bytes:
    """`entries`: (offset, attempts) handed out at `pop_time` until `deadline`."""
    return pop_columns(key, cursor, pop_time, deadline, [o for o, _ in entries], [a for _, a in entries])


def pop_columns(
    key: QueueKey, cursor: int, pop_time: int, deadline: int, offsets: list[int], attempts: list[int]
) -> bytes:
    """`pop_record` with its entries as two columns (a pop's runs give them so, no tuple per
    message): `attempts[k]` is that of `offsets[k]`."""
    n = len(offsets)
    flat: list[int] = [0] * (2 * n)
    flat[0::2] = offsets
    flat[1::2] = attempts
    body = _repeated(POP_ENTRY, n).pack(*flat)
    return _frame(POP, key, POP_HEAD.pack(cursor, pop_time, deadline, n) + body)


def ack_record(key: QueueKey, offsets: list[int]) -> bytes:
    return _frame(ACK, key, ACK_HEAD.pack(len(offsets)) + _repeated(OFFSET, len(offsets)).pack(*offsets))


def _repeated(one: struct.Struct, n: int) -> struct.Struct:
    """`one`'s layout `n` times in a row: a record's entries packed in one call (kept for the
    small counts a pop or an ack has)."""
    packing = _REPEATED.get((one.format, n))
    if packing is None:
        packing = struct.Struct(">" + one.format[1:] * n)
        if n <= _REPEATED_KEPT:
            _REPEATED[(one.format, n)] = packing
    return packing


def change_record(key: QueueKey, offset: int, pop_time: int, deadline: int) -> bytes:
    return _frame(CHANGE_KIND, key, CHANGE.pack(offset, pop_time, deadline))


def cursor_record(key: QueueKey, cursor: int) -> bytes:
    return _frame(CURSOR_KIND, key, CURSOR.pack(cursor))


def queue_record(key: QueueKey, state: QueuePopState) -> bytes:
    items = sorted(state.in_flight.items())
    parts = [QUEUE_HEAD.pack(state.cursor, len(items))]
    parts += [QUEUE_ENTRY.pack(o, f.pop_time, f.deadline, f.attempts) for o, f in items]
    return _frame(QUEUE, key, b"".join(parts))


# -- decoding ---------------------------------------------------------------------------------
def _records(data: bytes, start: int) -> Iterator[tuple[int, bytes]]:
    """(end position, body) of each complete record from `start`; stops at a torn or bad one."""
    pos = start
    while pos + RECORD_FRAME.size <= len(data):
        length, crc = RECORD_FRAME.unpack_from(data, pos)
        end = pos + RECORD_FRAME.size + length
        body = data[pos + RECORD_FRAME.size : end]
        if end > len(data) or length == 0 or zlib.crc32(body) != crc:
            return
        yield end, body
        pos = end


def apply(states: States, body: bytes) -> None:
    """Apply one record's body to `states`."""
    kind = body[0]
    pos = 1
    (n,) = STR_LEN.unpack_from(body, pos)
    group = body[pos + 2 : pos + 2 + n].decode()
    pos += 2 + n
    (n,) = STR_LEN.unpack_from(body, pos)
    topic = body[pos + 2 : pos + 2 + n].decode()
    pos += 2 + n
    (queue_id,) = QUEUE_ID.unpack_from(body, pos)
    pos += QUEUE_ID.size
    key = (group, topic, queue_id)
    state = states.get(key)
    if kind == QUEUE:
        cursor, count = QUEUE_HEAD.unpack_from(body, pos)
        state = states[key] = QueuePopState(cursor)
        for o, pt, dl, at in QUEUE_ENTRY.iter_unpack(
            body[pos + QUEUE_HEAD.size :][: count * QUEUE_ENTRY.size]
        ):
            state.in_flight[o] = InFlight(pt, dl, at)
    elif kind == POP:
        cursor, pop_time, deadline, count = POP_HEAD.unpack_from(body, pos)
        if state is None:
            state = states[key] = QueuePopState(cursor)
        state.cursor = cursor
        for o, at in POP_ENTRY.iter_unpack(body[pos + POP_HEAD.size :][: count * POP_ENTRY.size]):
            state.in_flight[o] = InFlight(pop_time, deadline, at)
    elif kind == CURSOR_KIND:
        (cursor,) = CURSOR.unpack_from(body, pos)
        if state is None:
            states[key] = QueuePopState(cursor)
        else:
            state.cursor = cursor
    elif kind == ACK and state is not None:
        (count,) = ACK_HEAD.unpack_from(body, pos)
        for (o,) in OFFSET.iter_unpack(body[pos + ACK_HEAD.size :][: count * OFFSET.size]):
            state.in_flight.pop(o, None)
    elif kind == CHANGE_KIND and state is not None:
        offset, pop_time, deadline = CHANGE.unpack_from(body, pos)
        entry = state.in_flight.get(offset)
        if entry is not None:
            state.in_flight[offset] = InFlight(pop_time, deadline, entry.attempts)
    elif kind not in (ACK, CHANGE_KIND):
        raise PopLogError(f"unknown POP log record kind {kind}")


def _header(data: bytes, magic: bytes, path: Path) -> int:
    """The epoch of a file that starts with `magic`'s header."""
    if len(data) < FILE_HEADER.size:
        raise PopLogError(f"{path.name}: shorter than its {FILE_HEADER.size}-byte header")
    got, version, epoch = FILE_HEADER.unpack_from(data)
    if got != magic or version != VERSION:
        raise PopLogError(f"{path.name}: not a POP state file (magic {got!r}, version {version})")
    return int(epoch)


def decode_json(text: str) -> States:
    """The JSON state file of older versions: `{"queues": [{group, topic, queueId, cursor,
    inFlight: [[offset, popTime, deadline, attempts], ...]}]}`."""
    data: Any = json.loads(text)
    states: States = {}
    for row in data["queues"]:
        state = QueuePopState(int(row["cursor"]))
        for offset, pop_time, deadline, attempts in row["inFlight"]:
            state.in_flight[int(offset)] = InFlight(int(pop_time), int(deadline), int(attempts))
        states[(str(row["group"]), str(row["topic"]), int(row["queueId"]))] = state
    return states


# -- the files ------------------------------------------------------------------------------
class PopLog:
    """The log file, its pending bytes and the snapshot; see the module docstring."""

    def __init__(
        self,
        config_dir: Path,
        *,
        compact_min_bytes: int = COMPACT_MIN_BYTES,
        sync_flush: bool = True,
        sync_interval_s: float = SYNC_INTERVAL_S,
    ) -> None:
        self.dir = config_dir
        self.sync_flush = sync_flush  # SYNC_FLUSH: answers wait for the fdatasync (see the docstring)
        self.sync_interval_s = sync_interval_s
        self.log_path = config_dir / LOG_NAME
        self.snap_path = config_dir / SNAP_NAME
        self.json_path = config_dir / JSON_NAME
        self.compact_min_bytes = compact_min_bytes
        self._lock = threading.Lock()  # pending bytes and sequence numbers
        self._io_lock = threading.Lock()  # one writer of the files at a time
        self._pending = bytearray()
        self._appended = 0  # bytes ever appended (a sequence number, not a file position)
        self._durable = 0
        self._fd = -1
        self._epoch = 0
        self._log_bytes = 0
        self._snap_bytes = 0
        self._written = 0  # appended bytes in the file (maybe only in the page cache)
        self._synced_bytes = 0  # the file's length at its last fdatasync (see `positions`)
        self._flushing: asyncio.Future[None] | None = None
        self._syncing: asyncio.Handle | asyncio.Future[None] | None = None  # ASYNC_FLUSH's fdatasync
        self._executor: ThreadPoolExecutor | None = None
        self.flushes = 0  # fdatasyncs of the log (tests check batching with it)
        self.writes = 0  # writes of pending bytes to the file
        self.compactions = 0

    # -- recovery
    def load(self) -> States:
        """Snapshot (or the old JSON file), then the log of the same epoch; opens the log for
        appending, cut after its last complete record."""
        self.dir.mkdir(parents=True, exist_ok=True)
        states: States = {}
        upgraded = False
        if self.snap_path.exists():
            data = self.snap_path.read_bytes()
            self._epoch = _header(data, SNAP_MAGIC, self.snap_path)
            end = FILE_HEADER.size
            for record_end, body in _records(data, FILE_HEADER.size):
                apply(states, body)
                end = record_end
            if end != len(data):
                raise PopLogError(f"{self.snap_path.name}: a damaged record at byte {end}")
            self._snap_bytes = len(data)
        elif self.json_path.exists():
            states = decode_json(self.json_path.read_text(encoding="utf-8"))
            upgraded = True
        log_end = 0
        if self.log_path.exists():
            data = self.log_path.read_bytes()
            if len(data) >= FILE_HEADER.size and _header(data, LOG_MAGIC, self.log_path) == self._epoch:
                log_end = FILE_HEADER.size
                for record_end, body in _records(data, FILE_HEADER.size):
                    apply(states, body)
                    log_end = record_end
                if log_end != len(data):
                    log.warning("%s: torn record at byte %d cut off", self.log_path.name, log_end)
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        if log_end == 0:  # no log, another epoch's, or a torn header: start it afresh
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, FILE_HEADER.pack(LOG_MAGIC, VERSION, self._epoch), 0)
            log_end = FILE_HEADER.size
        else:
            os.ftruncate(self._fd, log_end)
        os.fsync(self._fd)
        os.lseek(self._fd, log_end, os.SEEK_SET)
        self._log_bytes = self._synced_bytes = log_end
        if upgraded:
            self.compact(states, contextlib.nullcontext())
            self.json_path.unlink(missing_ok=True)
            log.info("%s upgraded to %s", JSON_NAME, SNAP_NAME)
        return states

    # -- appending
    def append(self, record: bytes) -> None:
        with self._lock:
            self._pending += record
            self._appended += len(record)

    def sync(self) -> bool:
        """Write and fdatasync everything appended so far (blocking); False on an OS error."""
        try:
            self._write_pending()
        except OSError as exc:
            log.error("cannot write %s: %s", self.log_path, exc)
            return False
        return True

    def _write_pending(self, fdatasync: bool = True) -> None:
        """Write the pending bytes at the end of the last good record (and fdatasync the file).
        On an error (ENOSPC, EIO, ...) the file is cut back to that end and the bytes go back to
        the front of the buffer: the next flush writes them whole, never after torn bytes
        (recovery would cut the log there and drop every later record), and nothing counts as
        written or durable."""
        with self._io_lock:
            self._write_locked(fdatasync)

    def _write_locked(self, fdatasync: bool) -> None:
        if self._fd < 0:
            raise OSError(f"{self.log_path.name} is not open")
        with self._lock:
            data, upto = bytes(self._pending), self._appended
            self._pending.clear()
        if upto <= (self._durable if fdatasync else self._written):
            return
        start = self._log_bytes  # the end of the last good record
        try:
            view, pos = memoryview(data), start
            while view:
                n = os.pwrite(self._fd, view, pos)
                view, pos = view[n:], pos + n
            if fdatasync:
                os.fdatasync(self._fd)
        except OSError:
            with self._lock:
                self._pending[0:0] = data
            with contextlib.suppress(OSError):  # best effort: the retry overwrites them anyway
                os.ftruncate(self._fd, start)
            raise
        if data:
            self.writes += 1
        self._log_bytes = start + len(data)
        if fdatasync:
            self._synced_bytes = self._log_bytes
        with self._lock:
            self._written = max(self._written, upto)
            if fdatasync:
                self.flushes += 1
                self._durable = max(self._durable, upto)

    async def durable(self) -> None:
        """SYNC_FLUSH: until an fdatasync covers everything appended before this call (group
        commit). ASYNC_FLUSH: until it is written to the file, with an fdatasync to follow."""
        target = self._appended
        if not self.sync_flush:
            if self._written < target:
                await self._write_now()
            self._schedule_sync()
            return
        while self._durable < target:
            if self._flushing is None:
                self._flushing = asyncio.ensure_future(self._flush())
            await asyncio.shield(self._flushing)

    async def _write_now(self) -> None:
        """ASYNC_FLUSH's write: a pwrite of a few hundred bytes into the page cache, on the loop,
        unless a compaction or fdatasync holds the file (then on the worker thread)."""
        if self._io_lock.acquire(blocking=False):
            try:
                self._write_locked(fdatasync=False)
            finally:
                self._io_lock.release()
            return
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._worker(), self._write_pending, False)

    def _schedule_sync(self) -> None:
        """ASYNC_FLUSH: one background fdatasync at most `sync_interval_s` after a write."""
        if self._syncing is None and self._durable < self._written:
            loop = asyncio.get_running_loop()
            self._syncing = loop.call_later(self.sync_interval_s, self._background_sync)

    def _background_sync(self) -> None:
        future = asyncio.get_running_loop().run_in_executor(self._worker(), self._sync_written)
        self._syncing = future

        def done(f: asyncio.Future[None]) -> None:
            self._syncing = None
            if not f.cancelled() and f.exception() is not None:
                log.error("cannot fdatasync %s: %s", self.log_path, f.exception())
            elif self._fd >= 0:
                self._schedule_sync()  # written while that fdatasync ran

        future.add_done_callback(done)

    def _sync_written(self) -> None:
        """fdatasync what is written so far (not the pending bytes: `durable` writes those)."""
        with self._io_lock:
            if self._fd < 0:
                return
            with self._lock:
                upto = self._written
            if upto <= self._durable:
                return
            os.fdatasync(self._fd)
            self._synced_bytes = self._log_bytes
            with self._lock:
                self.flushes += 1
                self._durable = max(self._durable, upto)

    def _worker(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="rocketlite-pop-log")
        return self._executor

    async def _flush(self) -> None:
        try:
            await asyncio.sleep(0)  # the rest of this loop iteration's changes join this fdatasync
            await asyncio.get_running_loop().run_in_executor(self._worker(), self._write_pending)
        finally:
            self._flushing = None

    def positions(self) -> tuple[int, int, int]:
        """(epoch, flushed bytes, written bytes) of the log file: its length at the last
        fdatasync, and its length now (the page cache included). What survives a power loss is
        the file's first `flushed` bytes, while the epoch stays the same (a compaction starts the
        file over under the next one); an operator reads these in GET /metrics. The flushed
        length is read first, so it never exceeds the written one."""
        flushed = self._synced_bytes
        return self._epoch, flushed, max(self._log_bytes, flushed)

    # -- compaction
    def wants_compaction(self) -> bool:
        return self._log_bytes > self.compact_min_bytes and self._log_bytes > COMPACT_RATIO * self._snap_bytes

    def compact(self, states: States, state_lock: AbstractContextManager[Any]) -> None:
        """Snapshot `states` as a new epoch, then restart the log empty. Blocking; `state_lock`
        (under which every change is made and appended) is held only while the snapshot is
        encoded, so it holds exactly the changes appended so far."""
        with self._io_lock:
            epoch = self._epoch + 1
            with state_lock:
                with self._lock:
                    self._pending.clear()
                    upto = self._appended
                data = FILE_HEADER.pack(SNAP_MAGIC, VERSION, epoch) + b"".join(
                    queue_record(k, s) for k, s in sorted(states.items())
                )
            write_atomically(self.snap_path, data, keep_backup=False)
            # From here the snapshot is the state; the old log (epoch - 1) is ignored if we crash.
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, FILE_HEADER.pack(LOG_MAGIC, VERSION, epoch), 0)
            os.fdatasync(self._fd)
            os.lseek(self._fd, FILE_HEADER.size, os.SEEK_SET)
            self._epoch = epoch
            self._log_bytes = self._synced_bytes = FILE_HEADER.size
            self._snap_bytes = len(data)
            self.compactions += 1
            with self._lock:
                self._written = max(self._written, upto)
                self._durable = max(self._durable, upto)

    def close(self) -> None:
        if isinstance(self._syncing, asyncio.Handle):
            self._syncing.cancel()  # the caller's sync() (PopService.close) covers it
        self._syncing = None
        with self._io_lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
