"""Finding and checking stored RocketMQ 4.x records in a buffer, for the Spark readers.

`scan_positions` walks the records (one hop per record over TOTALSIZE, the only sequential part:
`speedups.record_starts`, compiled when built), then `validate_positions` checks every record's
structure at once with numpy: BODYLEN, TOPICLEN and PROPLEN must add up to TOTALSIZE, the
PHYSICALOFFSET must equal the record's own position when the caller knows where the buffer sits
in the commit log, and optionally the body CRC (`speedups.first_crc_mismatch`, compiled when
built). A scan stops at an end-of-file blank, at zeros (the end of written data), at a record
that runs past the buffer (a torn tail) or at the first inconsistent record, and says which
(`Stop`). `spark/records.py` then decodes the positions into Arrow batches.
"""

from __future__ import annotations

import enum
import zlib
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from rocketlite.protocol.formats.record import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    V4_BODY_POS,
    V4_FIXED_SIZE,
    V4_HEADER_DTYPE,
    RecordFormatError,
    body_crc,
    decode_record,
)
from rocketlite.protocol.message import MessageSysFlag
from rocketlite.spark.codec import speedups
from rocketlite.spark.codec.columns_ref import Invalid, StartsStop
from rocketlite.spark.codec.speedups import Tier

__all__ = ["Scan", "Stop", "Views", "scan_positions", "validate_positions"]

_OFF_BODY: Final = V4_BODY_POS
_V4_FIXED: Final = V4_FIXED_SIZE
_V6_BITS: Final = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG

# The compiled CRC check over many records when it is built (no GIL, no Python per record); its
# reference decodes each record, slower than the zlib loop below, which stays the fallback. The
# chooser says which (`speedups.TIER`).
_NATIVE_CRC: Final = speedups.TIER is Tier.COMPILED
# The compiled structural check, one pass over the records: its reference reads record by record
# in Python, slower than numpy over all records at once, which stays the path without it.
_NATIVE_CHECKS: Final = speedups.TIER is Tier.COMPILED
_REASONS: Final = {
    Invalid.NONE: "",
    Invalid.OUTSIDE: "record runs past the end of the data",
    Invalid.FRAMED: "no record starts there, or it runs past the data",
    Invalid.LENGTHS: "record lengths are inconsistent",
    Invalid.PHYSICAL: "record's PHYSICALOFFSET does not match its position",
}
_CRC_MISMATCH: Final = "body CRC mismatch"

_U8 = npt.NDArray[np.uint8]
_I64 = npt.NDArray[np.int64]


class Stop(enum.Enum):
    """Why `scan_positions` stopped."""

    LIMIT = "limit"  # reached the limit position or the record count asked for; more may follow
    BLANK = "blank"  # an end-of-file blank record: the rest of the segment is unused
    END = "end"  # zeros or the end of the buffer: no more written data
    CORRUPT = "corrupt"  # a record that is torn or inconsistent starts at `next_pos`


@dataclass(slots=True)
class Scan:
    positions: _I64  # record starts, ascending
    next_pos: int  # the position after the last good record (where the stop condition is)
    stop: Stop
    reason: str = ""


_HEADER: Final = V4_HEADER_DTYPE


class Views:
    """Stride-1 views of a byte buffer: `i16[p]` is the big-endian short at byte p, `header[p]` the
    88 bytes at p (gathered as one opaque item, then read through `_HEADER`)."""

    def __init__(self, buf: Any) -> None:
        self.u8: _U8 = np.frombuffer(buf, dtype=np.uint8)
        self.size = len(self.u8)
        self.i16 = self._view(buf, np.dtype(">i2"))
        self.i64 = self._view(buf, np.dtype(">i8"))
        self._header = self._view(buf, np.dtype((np.void, _OFF_BODY)))

    def _view(self, buf: Any, dtype: np.dtype[Any]) -> npt.NDArray[Any]:
        count = max(self.size - dtype.itemsize + 1, 0)
        return np.ndarray(shape=(count,), dtype=dtype, buffer=buf, offset=0, strides=(1,))

    def headers(self, positions: _I64) -> npt.NDArray[Any]:
        """The `_HEADER`s at `positions` (each must have 88 bytes behind it)."""
        return self._header[positions].view(_HEADER)


def scan_positions(
    buf: Any,
    pos: int,
    limit: int,
    *,
    max_count: int,
    base_offset: int | None = None,
    verify_crc: bool = False,
) -> Scan:
    """Record starts from `pos` while `pos < limit`, at most `max_count` of them.

    `buf` is any buffer (bytes, mmap, memoryview). With `base_offset` (the commit-log offset of
    `buf[0]`) each record's PHYSICALOFFSET must equal its position, which also rejects bytes that
    merely look like a record.
    """
    size = len(buf)
    starts = speedups.record_starts(buf, pos, limit, max_count)
    pos, stop, reason = starts.next_pos, Stop.LIMIT, ""
    if starts.stop == StartsStop.SHORT:
        stop = Stop.END
    elif starts.stop == StartsStop.RUNS_PAST:
        stop, reason = Stop.CORRUPT, f"record of {starts.total} bytes runs past the data ({size - pos} left)"
    elif starts.stop == StartsStop.OTHER:
        if starts.magic == BLANK_MAGIC_CODE:
            stop = Stop.BLANK
        elif starts.total == 0 and starts.magic == 0:
            stop = Stop.END
        else:
            stop, reason = Stop.CORRUPT, f"bad magic code {starts.magic & 0xFFFFFFFF:#010x}"
    if stop is Stop.LIMIT and pos >= size:
        stop = Stop.END
    positions = np.frombuffer(starts.positions, dtype=np.int64)
    if len(positions):
        bad = validate_positions(buf, positions, base_offset, verify_crc)
        if bad is not None:
            index, why = bad
            return Scan(positions[:index], int(positions[index]), Stop.CORRUPT, why)
    return Scan(positions, pos, stop, reason)


def validate_positions(
    buf: Any, positions: _I64, base: int | None, verify_crc: bool
) -> tuple[int, str] | None:
    """Index of the first record that fails the checks of `scan_positions`, and why.

    Positions may come from anywhere (a consume queue): each must hold a V1 record that fits in
    `buf`, with consistent lengths, the right PHYSICALOFFSET when `base` is given, and the right
    body CRC when `verify_crc`.
    """
    if _NATIVE_CHECKS:
        index, code = speedups.first_invalid_record(buf, np.ascontiguousarray(positions).data, base or 0,
                                                     base is not None)  # fmt: skip
        if code != Invalid.SLOW:
            first_bad, reason = index, _REASONS[Invalid(code)]
            if verify_crc:
                first_bad, reason = _first_crc_mismatch(buf, positions, first_bad, reason)
            return (first_bad, reason) if first_bad < len(positions) else None
    return _validate_numpy(buf, positions, base, verify_crc)


def _validate_numpy(buf: Any, positions: _I64, base: int | None, verify_crc: bool) -> tuple[int, str] | None:
    """`validate_positions` with numpy over all records at once, IPv6 hosts included (the path
    without the compiled check, and the compiled check's own fallback)."""
    v = Views(buf)
    outside = np.flatnonzero((positions < 0) | (positions + _V4_FIXED > v.size))
    if len(outside):
        index = int(outside[0])
        found = _validate_numpy(buf, positions[:index], base, verify_crc) if index else None
        return found if found is not None else (index, _REASONS[Invalid.OUTSIDE])
    p = positions
    h = v.headers(p)
    total = h["total"].astype(np.int64)
    framed = np.flatnonzero((h["magic"] != MESSAGE_MAGIC_CODE) | (total < _V4_FIXED) | (p + total > v.size))
    if len(framed):
        index = int(framed[0])
        found = _validate_numpy(buf, positions[:index], base, verify_crc) if index else None
        return found if found is not None else (index, _REASONS[Invalid.FRAMED])
    v6 = (h["sys_flag"] & _V6_BITS) != 0
    body_len = h["body_len"].astype(np.int64)
    ok_len = (body_len >= 0) & (_V4_FIXED + body_len <= total)
    topic_len_pos = np.minimum(p + _OFF_BODY + np.maximum(body_len, 0), v.size - 1)
    props_len_pos = np.minimum(topic_len_pos + 1 + v.u8[topic_len_pos], v.size - 2)
    props_len = v.i16[props_len_pos].astype(np.int64)
    ok_len &= (props_len >= 0) & (props_len_pos + 2 + props_len == p + total)
    ok_len |= v6  # other layouts are checked one by one below
    ok_phys = h["phys"] == base + p if base is not None else np.ones(len(p), dtype=bool)
    bad = np.flatnonzero(~(ok_len & ok_phys))
    first_bad = int(bad[0]) if len(bad) else len(p)
    reason = ""
    if first_bad < len(p):
        reason = _REASONS[Invalid.LENGTHS if not ok_len[first_bad] else Invalid.PHYSICAL]
    for i in np.flatnonzero(v6[:first_bad]).tolist():
        try:
            decode_record(buf, int(p[i]))
        except RecordFormatError as exc:
            first_bad, reason = i, str(exc)
            break
    if verify_crc and _NATIVE_CRC:
        first_bad, reason = _first_crc_mismatch(buf, p, first_bad, reason)
    elif verify_crc:
        mv = memoryview(buf)
        crcs = h["crc"].tolist()
        starts = (p + _OFF_BODY).tolist()
        ends = (p + _OFF_BODY + body_len).tolist()
        crc32 = zlib.crc32
        for i in range(first_bad):
            if v6[i]:
                actual = body_crc(decode_record(buf, starts[i] - _OFF_BODY).body)
            else:
                actual = crc32(mv[starts[i] : ends[i]]) & 0x7FFF_FFFF
            if actual != crcs[i]:
                first_bad, reason = i, _CRC_MISMATCH
                break
    return (first_bad, reason) if first_bad < len(p) else None


def _first_crc_mismatch(buf: Any, positions: _I64, first_bad: int, reason: str) -> tuple[int, str]:
    """The compiled body-CRC check of the records before `first_bad`: the first whose CRC is
    wrong, or `first_bad` and `reason` as they were."""
    if first_bad:
        mismatch = speedups.first_crc_mismatch(buf, np.ascontiguousarray(positions[:first_bad]).data)
        if mismatch < first_bad:
            return mismatch, _CRC_MISMATCH
    return first_bad, reason
