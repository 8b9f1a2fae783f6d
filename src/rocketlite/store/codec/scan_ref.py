"""The commit-log record scan, written for clarity: the reference of the compiled store scanner.

`store.codec.speedups` picks these when `ROCKETLITE_NATIVE=0` or the compiled twin
(`_native/_dispatch.pyx`) is not built.

* `scan_record`: RocketMQ's `checkMessageAndReturnSize`, field by field: classifies the bytes at
  a position as a message (with its `DispatchRequest`), an end-of-file blank, the end of written
  data (zeros) or corruption, for every layout. It is also the general path of the compiled
  scanner, which hands it every record it does not take itself, so unusual and corrupt bytes are
  judged by this one piece of code;
* `scan_messages`: `scan_record` record after record (the dispatch loop).

The record's layout is `protocol/formats/record.py`.
"""

from __future__ import annotations

from rocketlite.protocol.formats.record import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    INT,
    MESSAGE_MAGIC_CODE,
    SHORT,
    SIZE_MAGIC,
    SYSFLAG_POS,
    DispatchRequest,
    ScanKind,
    ScanResult,
    body_crc,
    layout_for,
)
from rocketlite.protocol.message import MessageConst, find_property, tags_code
from rocketlite.protocol.reserved import SCHEDULE_TOPIC

__all__ = ["scan_messages", "scan_record"]


def _corrupt(reason: str) -> ScanResult:
    return ScanResult(ScanKind.CORRUPT, 0, None, reason)


def scan_record(
    buf: memoryview,
    pos: int,
    *,
    verify_crc: bool,
    delay_levels_ms: tuple[int, ...] = (),
) -> ScanResult:
    """Classify the bytes of `buf` at `pos` (buf ends at the segment's readable end).

    A message of the schedule topic gets its delivery time as tag code (store time plus the
    delay of its DELAY level), as RocketMQ's dispatch does.
    """
    avail = len(buf) - pos
    if avail < END_FILE_MIN_BLANK_LENGTH:
        return ScanResult(ScanKind.END, 0)
    total, magic = SIZE_MAGIC.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        if not END_FILE_MIN_BLANK_LENGTH <= total <= avail:
            return _corrupt(f"blank record with size {total}")
        return ScanResult(ScanKind.BLANK, total)
    if magic != MESSAGE_MAGIC_CODE:
        if total == 0 and magic == 0:
            return ScanResult(ScanKind.END, 0)
        return _corrupt(f"bad magic code {magic & 0xFFFFFFFF:#010x}")
    if total > avail:
        return _corrupt(f"record size {total} runs past the written data ({avail} bytes left)")
    sys_flag = INT.unpack_from(buf, pos + SYSFLAG_POS)[0]
    layout = layout_for(sys_flag)
    if total < layout.fixed_size:
        return _corrupt(f"record size {total} below the minimum {layout.fixed_size}")
    (
        _t, _m, crc, queue_id, _flag, queue_offset, phys, _sf, _born_ts,
        _bip, _bport, store_ts, _sip, _sport, _reconsume, prepared, body_len,
    ) = layout.head.unpack_from(buf, pos)  # fmt: skip
    p = pos + layout.head.size
    end = pos + total
    if body_len < 0 or p + body_len + 3 > end:
        return _corrupt(f"body length {body_len} inconsistent with record size {total}")
    if verify_crc and body_crc(buf[p : p + body_len]) != crc:
        return _corrupt("body CRC mismatch")
    p += body_len
    topic_len = buf[p]
    topic = bytes(buf[p + 1 : p + 1 + topic_len]).decode("utf-8", "replace")
    p += 1 + topic_len
    if p + 2 > end:
        return _corrupt("topic length inconsistent with record size")
    props_len = SHORT.unpack_from(buf, p)[0]
    p += 2
    if props_len < 0 or p + props_len != end:
        return _corrupt(f"properties length {props_len} inconsistent with record size {total}")
    keys = ""
    uniq: str | None = None
    code = 0
    if props_len:
        props = bytes(buf[p:end]).decode("utf-8", "replace")
        keys = find_property(props, MessageConst.KEYS) or ""
        uniq = find_property(props, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        code = tags_code(find_property(props, MessageConst.TAGS))
        if topic == SCHEDULE_TOPIC:
            level = find_property(props, MessageConst.DELAY_TIME_LEVEL)
            if level and level.isdigit() and delay_levels_ms:
                idx = min(max(int(level), 1), len(delay_levels_ms)) - 1
                code = store_ts + delay_levels_ms[idx]
    req = DispatchRequest(
        topic, queue_id, phys, total, code, store_ts, queue_offset, keys, uniq, sys_flag, prepared
    )
    return ScanResult(ScanKind.MESSAGE, total, req)


def scan_messages(
    buf: memoryview,
    pos: int,
    limit: int,
    out: list[DispatchRequest],
    *,
    verify_crc: bool,
    delay_levels_ms: tuple[int, ...] = (),
) -> tuple[int, ScanResult | None]:
    """Scan records from `pos` while `pos < limit`, appending a `DispatchRequest` per message.

    Returns the position after the last message, and what stopped the scan there (a BLANK, END or
    CORRUPT `ScanResult`, exactly what `scan_record` says at that position), or None if `limit` or
    the end of `buf` was reached. A record that starts before `limit` is scanned whole.
    """
    while pos < len(buf) and pos < limit:
        res = scan_record(buf, pos, verify_crc=verify_crc, delay_levels_ms=delay_levels_ms)
        if res.kind is not ScanKind.MESSAGE:
            return pos, res
        assert res.request is not None
        out.append(res.request)
        pos += res.size
    return pos, None
