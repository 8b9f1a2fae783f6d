"""The record codec's hot-path operations, optimized in pure Python: the fast implementations.

Each function here does byte for byte what its namesake in `record_codec_py` (the reference, the
definition) does, and `tests/protocol/test_fastpath.py` pins the two together; `protocol.speedups`
chooses between them. The speed comes from the common case only:

* `encode_record` and `encode_records` pack each header with one struct call from the
  per-host-family layouts, with the TOPICLEN+TOPIC bytes of recent topics cached, instead of a
  `PreparedRecord` per message. A message over a limit is handed to the reference, which raises
  the error naming the limit;
* `scan_messages` reads the V4 record (IPv4 hosts, consistent lengths, not the schedule topic)
  with one unpack of `V4_SCAN_FIELDS` and hands anything else to `record_codec_py.scan_record`,
  the general path, so unusual and corrupt bytes are judged by one piece of code.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Final

from rocketlite.protocol import record_codec_py
from rocketlite.protocol.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    MessageConst,
    MessageSysFlag,
    find_property,
    tags_code,
)
from rocketlite.protocol.record import (
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    SHORT,
    V4_BODY_POS,
    V4_FIXED_SIZE,
    V4_SCAN_FIELDS,
    DispatchRequest,
    EncodedRecord,
    EncodedRecords,
    MessageInner,
    ScanKind,
    ScanResult,
    layout_for,
)
from rocketlite.protocol.reserved import SCHEDULE_TOPIC

__all__ = ["encode_record", "encode_records", "scan_messages", "scan_record"]

_HOST_V6_BITS: Final = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
# Per host-family bits of SYSFLAG: the header struct, the fixed part of the record size, and
# where STORETIMESTAMP sits, all from `layout_for`.
_LAYOUTS_BY_HOST_BITS: Final = {
    bits: (layout_for(bits).head, layout_for(bits).fixed_size, layout_for(bits).store_timestamp_pos)
    for bits in (0, MessageSysFlag.BORNHOST_V6_FLAG, MessageSysFlag.STOREHOSTADDRESS_V6_FLAG, _HOST_V6_BITS)
}
_V4_LAYOUT: Final = _LAYOUTS_BY_HOST_BITS[0]
_TOPIC_CACHE_MAX: Final = 4096
# topic -> TOPICLEN byte + UTF-8 topic, for topics within the length limit. Replaced entries are
# whole bytes objects, so threads sharing the cache never see a torn one.
_topic_parts: dict[str, bytes] = {}
_KEYS: Final = MessageConst.KEYS + NAME_VALUE_SEPARATOR
_UNIQ: Final = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX + NAME_VALUE_SEPARATOR
_TAGS: Final = MessageConst.TAGS + NAME_VALUE_SEPARATOR


def _topic_part(topic: str) -> bytes | None:
    """TOPICLEN + TOPIC as stored; None if the topic is longer than the limit."""
    part = _topic_parts.get(topic)
    if part is None:
        encoded = topic.encode("utf-8")
        if len(encoded) > MAX_TOPIC_LENGTH:
            return None
        if len(_topic_parts) >= _TOPIC_CACHE_MAX:
            _topic_parts.clear()
        part = _topic_parts[topic] = bytes((len(encoded),)) + encoded
    return part


def encode_record(msg: MessageInner, max_message_size: int) -> EncodedRecord:
    """`record_codec_py.encode_record`, the header packed straight into its buffer."""
    topic_part = _topic_part(msg.topic)
    props = msg.properties_string.encode("utf-8")
    props_len = len(props)
    body = msg.body
    body_len = len(body)
    born, store = msg.born_host, msg.store_host
    sys_flag = msg.sys_flag
    if len(born.ip) == 4 and len(store.ip) == 4 and not sys_flag & _HOST_V6_BITS:
        head, fixed, stamp_pos = _V4_LAYOUT  # `effective_sys_flag` is `sys_flag` itself
    else:
        sys_flag = msg.effective_sys_flag()
        head, fixed, stamp_pos = _LAYOUTS_BY_HOST_BITS[sys_flag & _HOST_V6_BITS]
    if topic_part is None or props_len > MAX_PROPERTIES_LENGTH:
        return record_codec_py.encode_record(msg, max_message_size)  # raises
    size = fixed + body_len + len(topic_part) - 1 + props_len
    if size > max_message_size:
        return record_codec_py.encode_record(msg, max_message_size)  # raises
    header = bytearray(head.size)
    head.pack_into(
        header, 0, size, MESSAGE_MAGIC_CODE, zlib.crc32(body) & 0x7FFF_FFFF, msg.queue_id, msg.flag, 0, 0,
        sys_flag, msg.born_timestamp, born.ip, born.port, 0, store.ip, store.port, msg.reconsume_times,
        msg.prepared_transaction_offset, body_len,
    )  # fmt: skip
    return (header, b"".join((body, topic_part, SHORT.pack(props_len), props)), stamp_pos, sys_flag)


def encode_records(msgs: Sequence[MessageInner], max_message_size: int) -> EncodedRecords:
    """`record_codec_py.encode_records`, one struct pack per header."""
    layouts = _LAYOUTS_BY_HOST_BITS
    v4_layout = _V4_LAYOUT
    crc32 = zlib.crc32
    pack_short = SHORT.pack
    parts: list[bytes] = []
    add = parts.append
    topic: str | None = None
    topic_part = b""
    topic_len = 0
    first_sys_flag = 0
    pos = 0
    for m in msgs:
        if m.topic is not topic:
            topic = m.topic
            part = _topic_part(topic)
            if part is None:
                return record_codec_py.encode_records(msgs, max_message_size)  # raises
            topic_part, topic_len = part, len(part) - 1
        props = m.properties_string.encode("utf-8")
        props_len = len(props)
        body = m.body
        body_len = len(body)
        born, store = m.born_host, m.store_host
        sys_flag = m.sys_flag
        if len(born.ip) == 4 and len(store.ip) == 4 and not sys_flag & _HOST_V6_BITS:
            head, fixed, _stamp_pos = v4_layout
        else:
            sys_flag = m.effective_sys_flag()
            head, fixed, _stamp_pos = layouts[sys_flag & _HOST_V6_BITS]
        size = fixed + body_len + topic_len + props_len
        if props_len > MAX_PROPERTIES_LENGTH or size > max_message_size:
            return record_codec_py.encode_records(msgs, max_message_size)  # raises
        if not pos:
            first_sys_flag = sys_flag
        add(head.pack(
            size, MESSAGE_MAGIC_CODE, crc32(body) & 0x7FFF_FFFF, m.queue_id, m.flag, 0, 0, sys_flag,
            m.born_timestamp, born.ip, born.port, 0, store.ip, store.port, m.reconsume_times,
            m.prepared_transaction_offset, body_len,
        ))  # fmt: skip
        add(body)
        add(topic_part)
        add(pack_short(props_len))
        add(props)
        pos += size
    return (bytearray().join(parts), first_sys_flag)


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
    """`record_codec_py.scan_record`, through `scan_messages`."""
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
    """`record_codec_py.scan_messages`, the V4 record read with one unpack."""
    size = len(buf)
    unpack = V4_SCAN_FIELDS.unpack_from
    append = out.append
    crc32 = zlib.crc32
    general = record_codec_py.scan_record
    while pos < size and pos < limit:
        if size - pos >= V4_FIXED_SIZE:
            total, magic, crc, queue_id, queue_offset, phys, sys_flag, store_ts, prepared, body_len = unpack(
                buf, pos
            )
            end = pos + total
            p = pos + V4_BODY_POS + body_len
            if (
                magic == MESSAGE_MAGIC_CODE
                and not sys_flag & _HOST_V6_BITS
                and total >= V4_FIXED_SIZE
                and end <= size
                and body_len >= 0
                and p + 3 <= end
                and (not verify_crc or crc32(buf[pos + V4_BODY_POS : p]) & 0x7FFF_FFFF == crc)
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
        res = general(buf, pos, verify_crc=verify_crc, delay_levels_ms=delay_levels_ms)
        if res.kind is not ScanKind.MESSAGE:
            return pos, res
        assert res.request is not None
        append(res.request)
        pos += res.size
    return pos, None
