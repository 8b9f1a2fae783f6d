"""One RocketMQ 4.x index file (`IndexFile.java`, `IndexHeader.java`): a hash index from message
keys to commit-log offsets, byte for byte as the Java broker writes it.

The byte layout (header, hash slots, entries) is declared in `protocol/formats/index_layout.py`.

The header lives in memory and is written into the file by `flush` (as Java's
`IndexHeader.updateByteBuffer` does); slots and entries are written straight into a writable mmap.
Files are named by creation time, `yyyyMMddHHmmssSSS` in local time. The class owns no threads and
does no locking; `IndexService` serialises writers.
"""

from __future__ import annotations

import mmap
import os
import time
from array import array
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final

import numpy as np

from rocketlite.protocol.formats.index_layout import (
    ENTRY,
    ENTRY_DTYPE,
    ENTRY_SIZE,
    HEADER,
    HEADER_SIZE,
    INT_MAX,
    INVALID_INDEX,
    SLOT,
    SLOT_SIZE,
    index_file_size,
)
from rocketlite.protocol.message import index_key_hash
from rocketlite.store.codec.speedups import index_put
from rocketlite.store.mapped_file import create_segment

_NAME_FORMAT: Final = "%Y%m%d%H%M%S"


def index_file_name(ms: int) -> str:
    """`UtilAll.timeMillisToHumanString(ms)`: `yyyyMMddHHmmssSSS` in local time."""
    return time.strftime(_NAME_FORMAT, time.localtime(ms // 1000)) + f"{ms % 1000:03d}"


def next_index_file_name(now_ms: int, last_name: str | None) -> str:
    """A name for a new file created at `now_ms` that sorts after `last_name`.

    Java can reuse a name when two files are created in one millisecond (or the clock steps back);
    here the name is then moved one millisecond past `last_name`, so name order stays file order.
    """
    name = index_file_name(now_ms)
    if last_name is None or name > last_name:
        return name
    try:
        stamp = datetime.strptime(last_name[:14], _NAME_FORMAT) + timedelta(
            milliseconds=int(last_name[14:]) + 1
        )
    except ValueError:
        return name  # a foreign name: keep ours
    return stamp.strftime(_NAME_FORMAT) + f"{stamp.microsecond // 1000:03d}"


class IndexFile:
    """An index file: `put_key`, `select_phy_offsets`, header accessors, `flush`."""

    def __init__(
        self,
        path: Path,
        hash_slot_num: int,
        index_num: int,
        *,
        end_phy_offset: int = 0,
        end_timestamp: int = 0,
    ) -> None:
        """Open `path`, or create it (blocks reserved, see `mapped_file.reserve`) when it does not
        exist: writes go through the mapping, so a hole on a full disk would be a SIGBUS.

        For a new file, `end_phy_offset`/`end_timestamp` (the previous file's end, as Java's
        constructor takes them) become the new header's begin and end values.
        """
        if hash_slot_num <= 0 or index_num <= 1:
            raise ValueError(f"bad index geometry: {hash_slot_num} slots, {index_num} entries")
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.file_size = index_file_size(hash_slot_num, index_num)
        self._entry_base = HEADER_SIZE + hash_slot_num * SLOT_SIZE
        created = not path.exists()
        if created:
            create_segment(path, self.file_size)
        actual = path.stat().st_size
        if actual != self.file_size:
            raise ValueError(f"index file {path} has size {actual}, expected {self.file_size}")
        self._fd = os.open(path, os.O_RDWR)
        try:
            self._mm = mmap.mmap(self._fd, self.file_size, access=mmap.ACCESS_WRITE)
        except BaseException:
            os.close(self._fd)
            raise
        self.closed = False
        if created:
            begin_ts = end_ts = end_timestamp if end_timestamp > 0 else 0
            begin_off = end_off = end_phy_offset if end_phy_offset > 0 else 0
            slot_count, index_count = 0, 1
            self._dirty = True  # the header is not in the file until the first flush
        else:
            begin_ts, end_ts, begin_off, end_off, slot_count, index_count = HEADER.unpack_from(self._mm, 0)
            index_count = max(index_count, 1)  # IndexHeader.load: indexCount <= 0 -> 1
            self._dirty = False
        self._begin_ts: int = begin_ts
        self._end_ts: int = end_ts
        self._begin_off: int = begin_off
        self._end_off: int = end_off
        self._hash_slot_count: int = slot_count
        self._index_count: int = index_count

    # -- header ------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.path.name

    @property
    def begin_timestamp(self) -> int:
        return self._begin_ts

    @property
    def end_timestamp(self) -> int:
        return self._end_ts

    @property
    def begin_phy_offset(self) -> int:
        return self._begin_off

    @property
    def end_phy_offset(self) -> int:
        return self._end_off

    @property
    def hash_slot_count(self) -> int:
        return self._hash_slot_count

    @property
    def index_count(self) -> int:
        """The next entry number (1 for an empty file)."""
        return self._index_count

    @property
    def is_write_full(self) -> bool:
        return self._index_count >= self.index_num

    @property
    def dirty(self) -> bool:
        """Written to since the last header snapshot/flush."""
        return self._dirty

    def is_time_matched(self, begin: int, end: int) -> bool:
        """`IndexFile.isTimeMatched`: [begin, end] overlaps the file's [beginTimestamp, endTimestamp]."""
        b, e = self._begin_ts, self._end_ts
        return (begin < b and end > e) or (b <= begin <= e) or (b <= end <= e)

    def header_bytes(self) -> bytes:
        """The 40-byte header as it would be written now."""
        return HEADER.pack(
            self._begin_ts,
            self._end_ts,
            self._begin_off,
            self._end_off,
            self._hash_slot_count,
            self._index_count,
        )

    def snapshot_header(self) -> bytes:
        """`header_bytes()`, marking the file clean; pass the result to `flush` later."""
        self._dirty = False
        return self.header_bytes()

    def mark_dirty(self) -> None:
        """Have the next flush write the header again (after a failed flush)."""
        self._dirty = True

    def lower_end_phy_offset(self, phy_offset: int) -> None:
        """Set endPhyOffset to `phy_offset` if below it (the commit log was truncated there), so
        records rewritten from that offset on are indexed again."""
        if phy_offset < self._end_off:
            self._end_off = phy_offset
            self._dirty = True

    # -- writes ------------------------------------------------------------------------------
    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """`IndexFile.putKey`: add one entry; False when the file is full."""
        return self.put_hash(index_key_hash(key), phy_offset, store_timestamp)

    def put_hash(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """`put_key` with the key's `index_key_hash` already computed."""
        count = self._index_count
        if count >= self.index_num:
            return False
        mm = self._mm
        slot_pos = HEADER_SIZE + (key_hash % self.hash_slot_num) * SLOT_SIZE
        slot_value = SLOT.unpack_from(mm, slot_pos)[0]
        if slot_value <= INVALID_INDEX or slot_value >= count:
            slot_value = INVALID_INDEX
            self._hash_slot_count += 1
        begin = self._begin_ts
        if begin <= 0:
            time_diff = 0
        else:  # clamped to [0, INT_MAX], with compares (cheaper than min/max on this path)
            time_diff = (store_timestamp - begin) // 1000
            if time_diff < 0:
                time_diff = 0
            elif time_diff > INT_MAX:
                time_diff = INT_MAX
        ENTRY.pack_into(
            mm, self._entry_base + count * ENTRY_SIZE, key_hash, phy_offset, time_diff, slot_value
        )
        SLOT.pack_into(mm, slot_pos, count)
        if count <= 1:
            self._begin_off = phy_offset
            self._begin_ts = store_timestamp
        self._index_count = count + 1
        self._end_off = phy_offset
        self._end_ts = store_timestamp
        self._dirty = True
        return True

    def put_run(self, hashes: array[int], offsets: array[int], stamps: array[int], start: int = 0) -> int:
        """Put the entries from `start` on, in order, as repeated `put_hash` calls would; returns
        how many fitted. One `speedups.index_put` call writes them (compiled: one C loop over
        the mapping, no Python object per entry); the header fields follow here."""
        n = len(hashes) - start
        if n <= 0 or self._index_count >= self.index_num:
            return 0
        done = 0
        if self._index_count <= 1:  # the first put also sets the begin values
            self.put_hash(hashes[start], offsets[start], stamps[start])
            done = 1
        put, new_slots = index_put(
            self._mm, HEADER_SIZE, self.hash_slot_num, self._entry_base, self._index_count,
            self.index_num, self._begin_ts, hashes, offsets, stamps, start + done,
        )  # fmt: skip
        if put:
            last = start + done + put - 1
            self._hash_slot_count += new_slots
            self._index_count += put
            self._end_off = offsets[last]
            self._end_ts = stamps[last]
            self._dirty = True
        return done + put

    def repair(self) -> int:
        """After an unclean exit: make the slots agree with the header, which was written at the
        last flush while slots and entries kept changing in the page cache.

        Entries from `index_count` on are stale (their records are re-indexed by recovery's
        re-dispatch) and are zeroed; every slot is rebuilt as the newest valid entry of its hash.
        Returns the number of stale entries removed.
        """
        count = self._index_count
        chunk = 65_536
        stale_end = count
        while stale_end < self.index_num:
            n = min(chunk, self.index_num - stale_end)
            view = np.frombuffer(self._mm, dtype=np.uint8, count=n * ENTRY_SIZE,
                                 offset=self._entry_base + stale_end * ENTRY_SIZE)  # fmt: skip
            nonzero = np.flatnonzero(view)
            del view
            if len(nonzero) == 0:
                break
            stale_end += int(nonzero[-1]) // ENTRY_SIZE + 1
            if int(nonzero[-1]) // ENTRY_SIZE + 1 < n:
                break
        if stale_end > count:
            start = self._entry_base + count * ENTRY_SIZE
            self._mm[start : self._entry_base + stale_end * ENTRY_SIZE] = bytes(
                (stale_end - count) * ENTRY_SIZE
            )
        slot_view = np.frombuffer(self._mm, dtype=">i4", count=self.hash_slot_num, offset=HEADER_SIZE)
        try:
            newest = np.zeros(self.hash_slot_num, dtype=np.int64)
            if count > 1:
                entries = np.frombuffer(
                    self._mm, dtype=ENTRY_DTYPE, count=count - 1, offset=self._entry_base + ENTRY_SIZE
                )
                slots = entries["key_hash"].astype(np.int64) % self.hash_slot_num
                np.maximum.at(newest, slots, np.arange(1, count, dtype=np.int64))
                del entries
            slot_view[:] = newest
            self._hash_slot_count = int(np.count_nonzero(newest))
        finally:
            del slot_view
        self._dirty = True
        return stale_end - count

    # -- reads -------------------------------------------------------------------------------
    def select_phy_offsets(self, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """`IndexFile.selectPhyOffset`: offsets of entries whose hash equals the key's and whose
        time (beginTimestamp + timeDiff*1000) is in [begin, end], newest first, at most `max_num`."""
        found: list[int] = []
        if max_num <= 0:
            return found
        key_hash = index_key_hash(key)
        mm = self._mm
        count = self._index_count
        (slot_value,) = SLOT.unpack_from(mm, HEADER_SIZE + (key_hash % self.hash_slot_num) * SLOT_SIZE)
        if slot_value <= INVALID_INDEX or slot_value >= count or count <= 1:
            return found
        begin_ts = self._begin_ts
        base = self._entry_base
        limit = min(count - 1, self.index_num - 1)
        nxt = slot_value
        for _ in range(count):  # a chain never has more links than entries (guards corrupt cycles)
            if len(found) >= max_num or nxt > limit:
                break
            key_hash_read, phy_offset, time_diff, prev = ENTRY.unpack_from(mm, base + nxt * ENTRY_SIZE)
            if time_diff < 0:
                break
            time_read = begin_ts + time_diff * 1000
            if key_hash_read == key_hash and begin <= time_read <= end:
                found.append(phy_offset)
            if prev <= INVALID_INDEX or prev >= count or prev == nxt or time_read < begin:
                break
            nxt = prev
        return found

    # -- lifecycle ---------------------------------------------------------------------------
    def flush(self, header: bytes | None = None) -> None:
        """Msync slots and entries, then write the header (`header`, or the current one) and msync
        its page, so a durable header never counts entries that are not durable."""
        if header is None:
            header = self.snapshot_header()
        self._mm.flush()
        self._mm[0:HEADER_SIZE] = header
        self._mm.flush(0, min(mmap.PAGESIZE, self.file_size))

    def close(self) -> None:
        """Flush and unmap."""
        if self.closed:
            return
        self.flush()
        self._release()

    def destroy(self) -> None:
        """Unmap (without flushing) and delete the file."""
        if not self.closed:
            self._release()
        self.path.unlink(missing_ok=True)

    def _release(self) -> None:
        self.closed = True
        self._mm.close()
        os.close(self._fd)

    def __repr__(self) -> str:
        return (
            f"IndexFile({self.name}, count={self._index_count}, "
            f"offsets={self._begin_off}..{self._end_off}, times={self._begin_ts}..{self._end_ts})"
        )
