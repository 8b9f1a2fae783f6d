"""The store read side's dispatch codecs, optimized in pure Python: `speedups.PYTHON`'s versions.

What runs when the compiled `_native/_dispatch` is missing; each gives exactly what its namesake
in `dispatch_codec` (the reference) gives, pinned by `tests/store/test_native_dispatch.py`:

* `check_records`: the fast scanner (`record_codec.scan_messages`) a chunk at a time instead of
  the reference `scan_record` per record;
* `index_entries`: the Java `String.hashCode` of every key with numpy, using
  hash(a + b) = hash(a) * 31^len(b) + hash(b) (mod 2^32) with the `topic#` prefix's hash taken
  once per topic; small batches hash one key at a time;
* `dispatch_batch`: `dispatch_codec.dispatch_batch_over` these and the fast scanner.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from rocketlite.protocol import dispatch_codec, record_codec
from rocketlite.protocol.message import KEY_SEPARATOR, MessageSysFlag, index_key_hash, java_string_hash
from rocketlite.protocol.record import DispatchRequest, ScanKind, ScanResult

__all__ = ["check_records", "dispatch_batch", "index_entries"]

_CHECK_CHUNK: Final = 4 * 1024 * 1024  # bytes of records per scan while checking
_SMALL_BATCH: Final = 8  # below this many keys hashing one by one beats numpy's fixed costs
_MASK32: Final = 0xFFFF_FFFF
_Ints = npt.NDArray[np.int64]


def check_records(
    buf: memoryview, pos: int, base_offset: int, *, verify_crc: bool
) -> tuple[int, int, ScanResult]:
    """`dispatch_codec.check_records` over the fast scanner."""
    if pos < 0:
        return dispatch_codec.check_records(buf, pos, base_offset, verify_crc=verify_crc)
    count = 0
    while True:
        found: list[DispatchRequest] = []
        _, stop = record_codec.scan_messages(buf, pos, pos + _CHECK_CHUNK, found, verify_crc=verify_crc)
        for req in found:
            if req.commit_log_offset != base_offset + pos:
                return pos, count, ScanResult(ScanKind.MESSAGE, req.msg_size, req)
            count += 1
            pos += req.msg_size
        if stop is not None:
            return pos, count, stop
        if pos >= len(buf):
            return pos, count, ScanResult(ScanKind.END, 0)


def index_entries(
    reqs: Sequence[DispatchRequest], end_offset: int
) -> tuple[array[int], array[int], array[int]]:
    """`dispatch_codec.index_entries`, the hashes of a batch computed together."""
    rollback = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
    topics: list[str] = []
    suffixes: list[str] = []
    offsets: array[int] = array("q")
    stamps: array[int] = array("q")
    for req in reqs:
        offset = req.commit_log_offset
        if offset < end_offset or req.sys_flag & rollback == rollback:
            continue
        before = len(suffixes)
        if req.uniq_key is not None:
            suffixes.append(req.uniq_key)
        if req.keys:
            suffixes.extend(k for k in req.keys.split(KEY_SEPARATOR) if k)
        n = len(suffixes) - before
        if n:
            topics += [req.topic] * n
            offsets.extend([offset] * n)
            stamps.extend([req.store_timestamp] * n)
            end_offset = offset
    if len(suffixes) < _SMALL_BATCH:
        hashes = array("q", [index_key_hash(f"{t}#{k}") for t, k in zip(topics, suffixes, strict=True)])
    else:
        hashes = array("q", _hashes(topics, suffixes).tobytes())
    return hashes, offsets, stamps


def _utf16_len(s: str) -> int:
    return len(s) if s.isascii() else len(s.encode("utf-16-le", "surrogatepass")) // 2


def _powers(n: int) -> npt.NDArray[np.uint64]:
    """31^k mod 2^32 for k < n, as uint64."""
    out = [1] * max(n, 1)
    for k in range(1, n):
        out[k] = out[k - 1] * 31 & _MASK32
    return np.array(out, dtype=np.uint64)


def _hashes(topics: list[str], suffixes: list[str]) -> _Ints:
    """`indexKeyHashMethod(topic + "#" + suffix)` for every pair.

    Each suffix code unit c at distance d from its string's end contributes c * 31^d; the sums per
    string are taken with `reduceat`. Unsigned 64-bit arithmetic wraps mod 2^64, which keeps every
    value right mod 2^32.
    """
    n = len(suffixes)
    prefix_of: dict[str, int] = {}
    for t in topics:
        if t not in prefix_of:
            prefix_of[t] = java_string_hash(t + "#") & _MASK32
    prefixes = np.fromiter((prefix_of[t] for t in topics), dtype=np.uint64, count=n)
    joined = "".join(suffixes)
    lens: _Ints
    if joined.isascii():
        data = np.frombuffer(joined.encode("ascii"), dtype=np.uint8)
        lens = np.fromiter(map(len, suffixes), dtype=np.int64, count=n)
    else:
        data = np.frombuffer(joined.encode("utf-16-le", "surrogatepass"), dtype="<u2")
        lens = np.fromiter(map(_utf16_len, suffixes), dtype=np.int64, count=n)
    pw = _powers(int(lens.max()) + 1)
    ends = np.cumsum(lens)
    suffix_hash = np.zeros(n, dtype=np.uint64)
    if data.size:
        distance = np.repeat(ends - 1, lens) - np.arange(data.size, dtype=np.int64)
        contrib = data.astype(np.uint64) * pw[distance]
        nonempty = lens > 0
        suffix_hash[nonempty] = np.add.reduceat(contrib, (ends - lens)[nonempty])
    full = (prefixes * pw[lens] + suffix_hash) & np.uint64(_MASK32)
    signed = full.astype(np.int64)
    absolute = np.where(signed >= 1 << 31, (1 << 32) - signed, signed)
    result: _Ints = np.where(absolute > 0x7FFF_FFFF, 0, absolute).astype(np.int64)
    return result


dispatch_batch = dispatch_codec.dispatch_batch_over(record_codec.scan_messages, index_entries)
