"""Scanning commit-log bytes record by record: what reput and recovery both need.

`scan_record` is RocketMQ's `checkMessageAndReturnSize`: it classifies the bytes at a position as a
message (with its `DispatchRequest`), an end-of-file blank, the end of written data (zeros), or
corruption, without copying the body. `scan_messages` does the same for a run of records in one
call (the dispatch loop): no `ScanResult` per message.

Both take a fast path for the common record (V1 magic, IPv4 hosts, consistent lengths, not the
schedule topic) and hand anything else to `_scan_one`, the field-by-field classifier, so unusual
and corrupt bytes are judged by one piece of code.
"""

from __future__ import annotations

import enum
import zlib
from dataclasses import dataclass
from typing import Final

from rocketlite.protocol.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    MessageConst,
    MessageSysFlag,
    find_property,
    tags_code,
)
from rocketlite.protocol.record import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    INT,
    MESSAGE_MAGIC_CODE,
    SHORT,
    SIZE_MAGIC,
    SYSFLAG_POS,
    V4_BODY_POS,
    V4_FIXED_SIZE,
    V4_SCAN_FIELDS,
    body_crc,
    layout_for,
)
from rocketlite.protocol.reserved import SCHEDULE_TOPIC
from rocketlite.store.dispatch_request import DispatchRequest

_V4_HEAD: Final = V4_BODY_POS
_V4_FIXED: Final = V4_FIXED_SIZE
_HOST_V6_BITS: Final = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_KEYS: Final = MessageConst.KEYS + NAME_VALUE_SEPARATOR
_UNIQ: Final = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX + NAME_VALUE_SEPARATOR
_TAGS: Final = MessageConst.TAGS + NAME_VALUE_SEPARATOR


class ScanKind(enum.Enum):
    MESSAGE = "message"
    BLANK = "blank"  # end-of-file blank: skip to the next segment
    END = "end"  # zeros / no more data: the valid log ends here
    CORRUPT = "corrupt"  # bad magic, size, lengths or CRC: the valid log ends here


@dataclass(slots=True)
class ScanResult:
    kind: ScanKind
    size: int
    request: DispatchRequest | None = None
    reason: str = ""


def _corrupt(reason: str) -> ScanResult:
    return ScanResult(ScanKind.CORRUPT, 0, None, reason)


def _prop(props: str, needle: str) -> str | None:
    """`find_property(props, name)`, `needle` being `name + NAME_VALUE_SEPARATOR`; the usual case
    (the first occurrence starts a property) without building the needle or looping."""
    idx = props.find(needle)
    if idx < 0:
        return None
    if idx == 0 or props[idx - 1] == PROPERTY_SEPARATOR:
        begin = idx + len(needle)
        end = props.find(PROPERTY_SEPARATOR, begin)
        return props[begin:] if end < 0 else props[begin:end]
    return find_property(props, needle[:-1])  # the needle was inside a value: look further


def scan_record(
    buf: memoryview,
    pos: int,
    *,
    verify_crc: bool,
    delay_levels_ms: tuple[int, ...] = (),
) -> ScanResult:
    """Classify the bytes of `buf` at `pos` (buf ends at the segment's readable end)."""
    out: list[DispatchRequest] = []
    _, stop = scan_messages(buf, pos, pos + 1, out, verify_crc=verify_crc, delay_levels_ms=delay_levels_ms)
    if out:
        req = out[0]
        return ScanResult(ScanKind.MESSAGE, req.msg_size, req)
    return stop if stop is not None else ScanResult(ScanKind.END, 0)


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
    size = len(buf)
    unpack = V4_SCAN_FIELDS.unpack_from
    append = out.append
    crc32 = zlib.crc32
    while pos < size and pos < limit:
        if size - pos >= _V4_FIXED:
            total, magic, crc, queue_id, queue_offset, phys, sys_flag, store_ts, prepared, body_len = unpack(
                buf, pos
            )
            end = pos + total
            p = pos + _V4_HEAD + body_len
            if (
                magic == MESSAGE_MAGIC_CODE
                and not sys_flag & _HOST_V6_BITS
                and total >= _V4_FIXED
                and end <= size
                and body_len >= 0
                and p + 3 <= end
                and (not verify_crc or crc32(buf[pos + _V4_HEAD : p]) & 0x7FFF_FFFF == crc)
            ):
                topic_end = p + 1 + buf[p]
                if topic_end + 2 <= end:
                    topic = str(buf[p + 1 : topic_end], "utf-8", "replace")
                    props_len = SHORT.unpack_from(buf, topic_end)[0]
                    if props_len >= 0 and topic_end + 2 + props_len == end and topic != SCHEDULE_TOPIC:
                        if props_len:
                            props = str(buf[topic_end + 2 : end], "utf-8", "replace")
                            keys = _prop(props, _KEYS) or ""
                            uniq = _prop(props, _UNIQ)
                            code = tags_code(_prop(props, _TAGS))
                        else:
                            keys, uniq, code = "", None, 0
                        append(DispatchRequest(
                            topic, queue_id, phys, total, code, store_ts, queue_offset, keys, uniq,
                            sys_flag, prepared,
                        ))  # fmt: skip
                        pos = end
                        continue
        res = _scan_one(buf, pos, verify_crc=verify_crc, delay_levels_ms=delay_levels_ms)
        if res.kind is not ScanKind.MESSAGE:
            return pos, res
        assert res.request is not None
        append(res.request)
        pos += res.size
    return pos, None


def _scan_one(
    buf: memoryview,
    pos: int,
    *,
    verify_crc: bool,
    delay_levels_ms: tuple[int, ...] = (),
) -> ScanResult:
    """`scan_record` field by field: every layout, the schedule topic, and all the corruptions."""
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
