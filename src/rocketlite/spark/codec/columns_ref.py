"""Records as column buffers: what a columnar reader (Spark's Arrow batches) needs, no objects.

`decode_record_columns(buf, positions)` takes the V1 records starting at `positions` in `buf` (a
PULL body, a commit-log segment) and returns a `RecordColumns`: for each column the buffers of an
Arrow array, native-endian, so a reader wraps them without copying (`spark/records.py`):

* variable-width columns (topic, body, msgId, keys, tags, property names and values): int32
  offsets (count + 1 of them) and the data; keys and tags also a validity bitmap (Arrow's:
  bit i, least significant first, set when record i has the property), or None when every record
  has it;
* properties as a map: int32 offsets into the flattened names and values. Properties are read
  like the Java client's `string2messageProperties`: empty items and items without a name or
  value are dropped, a repeated name keeps its last value, at the place of its last occurrence;
* msgId is the client-made UNIQ_KEY when there is one, else the offsetMsgId (store host and
  commit-log offset in 32 upper-case hex digits), as `MessageClientExt.getMsgId()`;
* fixed-width columns: queueId and reconsumeTimes int32, queueOffset, commitLogOffset, born and
  store timestamps (microseconds) int64. Milliseconds become microseconds in int64 arithmetic,
  as the compiled twin and numpy compute them: a timestamp past int64 microseconds (year
  294,000), which only a damaged header holds, wraps instead of raising `OverflowError`.

Bad records raise `RecordFormatError` exactly as `record.decode_record` does (every record is
checked first, in order). `None` means "not this way": some record has an IPv6 host or a
compressed body, a topic or properties that are not UTF-8, or the data outgrows 32-bit offsets;
the caller then decodes record by record. This module is the reference, written for clarity;
`_native/_columns.pyx` is its compiled twin (`speedups.decode_record_columns`), pinned to it by
`tests/spark/test_native_columns.py`; so are `first_crc_mismatch` (`speedups.first_crc_mismatch`),
the body-CRC check of many records at once that the raw-store reader runs before decoding, and
`first_invalid_record`, the structural check of many records that comes before it.
"""

from __future__ import annotations

import enum
from array import array
from typing import Final, NamedTuple

from rocketlite.protocol.formats.record import (
    MESSAGE_MAGIC_CODE,
    PHYSICAL_OFFSET_POS,
    SIZE_MAGIC,
    SYSFLAG_POS,
    V4_BODY_POS,
    V4_FIXED_SIZE,
    body_crc,
    decode_record,
)
from rocketlite.protocol.message import MessageConst, MessageSysFlag, make_msg_id

__all__ = ["SLOW_SYS_FLAGS", "Invalid", "RecordColumns", "decode_record_columns", "first_invalid_record"]

SLOW_SYS_FLAGS: Final = (
    MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG | MessageSysFlag.COMPRESSED_FLAG
)
"""Records with any of these SYSFLAG bits are not decoded to columns (`None`)."""
_INT32_MAX: Final = (1 << 31) - 1
_UNIQ: Final = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode()
_KEYS: Final = MessageConst.KEYS.encode()
_TAGS: Final = MessageConst.TAGS.encode()

Buffer = bytes | bytearray


class RecordColumns(NamedTuple):
    """The column buffers of `rows` records (see the module docstring)."""

    rows: int
    topic_offsets: Buffer
    topic_data: Buffer
    body_offsets: Buffer
    body_data: Buffer
    msg_id_offsets: Buffer
    msg_id_data: Buffer
    keys_offsets: Buffer
    keys_data: Buffer
    keys_validity: Buffer | None
    tags_offsets: Buffer
    tags_data: Buffer
    tags_validity: Buffer | None
    map_offsets: Buffer
    name_offsets: Buffer
    name_data: Buffer
    value_offsets: Buffer
    value_data: Buffer
    queue_id: Buffer  # int32
    queue_offset: Buffer  # int64
    commit_log_offset: Buffer  # int64
    born_us: Buffer  # int64
    store_us: Buffer  # int64
    reconsume_times: Buffer  # int32


def parse_property_bytes(raw: bytes) -> dict[bytes, bytes]:
    """`string2messageProperties` on bytes: the dict's order is the order of last occurrences."""
    props: dict[bytes, bytes] = {}
    for item in raw.split(b"\x02"):
        name, sep, value = item.partition(b"\x01")
        if sep and name and value:
            props.pop(name, None)
            props[name] = value
    return props


class _Strings:
    """Offsets and data of one variable-width column, with an optional validity bitmap."""

    def __init__(self) -> None:
        self.offsets = array("i", [0])
        self.data = bytearray()
        self.present: list[bool] = []

    def add(self, value: bytes | None) -> None:
        self.present.append(value is not None)
        if value is not None:
            self.data += value
        self.offsets.append(len(self.data))

    def validity(self) -> bytes | None:
        if all(self.present):
            return None
        bits = bytearray((len(self.present) + 7) // 8)
        for i, ok in enumerate(self.present):
            if ok:
                bits[i >> 3] |= 1 << (i & 7)
        return bytes(bits)


def _micros(ms: int) -> int:
    """`ms * 1000` in int64 arithmetic (two's complement wrap), as `_columns.pyx` and numpy do."""
    return (ms * 1000 + (1 << 63)) % (1 << 64) - (1 << 63)


def _native_endian(values: array[int]) -> bytes:
    return values.tobytes()  # machine order, as Arrow holds arrays in memory


def decode_record_columns(
    buf: bytes | bytearray | memoryview, positions: bytes | bytearray | memoryview
) -> RecordColumns | None:
    """The records at `positions` (int64 native-endian, as numpy's int64 array) as columns."""
    starts = memoryview(positions).cast("B").cast("q").tolist()
    records = [decode_record(buf, pos) for pos in starts]  # raises on the first bad record
    topic, body, msg_id, keys, tags = _Strings(), _Strings(), _Strings(), _Strings(), _Strings()
    names, values = _Strings(), _Strings()
    map_offsets = array("i", [0])
    fixed_i32 = (array("i"), array("i"))
    fixed_i64 = (array("q"), array("q"), array("q"), array("q"))
    for rec, pos in zip(records, starts, strict=True):
        if rec.sys_flag & SLOW_SYS_FLAGS:
            return None
        topic_at = pos + V4_BODY_POS + len(rec.body)  # TOPICLEN
        topic_raw = bytes(buf[topic_at + 1 : topic_at + 1 + buf[topic_at]])
        props_raw = bytes(buf[topic_at + 1 + len(topic_raw) + 2 : pos + rec.total_size])
        try:
            topic_raw.decode("utf-8")
            props_raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
        props = parse_property_bytes(props_raw)
        topic.add(topic_raw)
        body.add(rec.body)
        uniq = props.get(_UNIQ)
        msg_id.add(uniq if uniq is not None else make_msg_id(rec.store_host, rec.physical_offset).encode())
        keys.add(props.get(_KEYS))
        tags.add(props.get(_TAGS))
        for name, value in props.items():
            names.add(name)
            values.add(value)
        map_offsets.append(len(names.present))
        fixed_i32[0].append(rec.queue_id)
        fixed_i32[1].append(rec.reconsume_times)
        fixed_i64[0].append(rec.queue_offset)
        fixed_i64[1].append(rec.physical_offset)
        fixed_i64[2].append(_micros(rec.born_timestamp))
        fixed_i64[3].append(_micros(rec.store_timestamp))
    widest = max(len(c.data) for c in (topic, body, msg_id, keys, tags, names, values))
    if widest > _INT32_MAX:
        return None
    return RecordColumns(
        len(records),
        _native_endian(topic.offsets), bytes(topic.data),
        _native_endian(body.offsets), bytes(body.data),
        _native_endian(msg_id.offsets), bytes(msg_id.data),
        _native_endian(keys.offsets), bytes(keys.data), keys.validity(),
        _native_endian(tags.offsets), bytes(tags.data), tags.validity(),
        _native_endian(map_offsets),
        _native_endian(names.offsets), bytes(names.data),
        _native_endian(values.offsets), bytes(values.data),
        _native_endian(fixed_i32[0]), _native_endian(fixed_i64[0]), _native_endian(fixed_i64[1]),
        _native_endian(fixed_i64[2]), _native_endian(fixed_i64[3]), _native_endian(fixed_i32[1]),
    )  # fmt: skip


def first_crc_mismatch(buf: bytes | bytearray | memoryview, positions: bytes | bytearray | memoryview) -> int:
    """Index of the first record at `positions` (int64, machine order) whose BODYCRC is not the
    CRC of its body as stored, or the number of positions when every one matches. Records are
    decoded in order: a bad record raises `RecordFormatError` as `record.decode_record` does
    (unless a CRC mismatch comes first)."""
    starts = memoryview(positions).cast("B").cast("q").tolist()
    for i, pos in enumerate(starts):
        rec = decode_record(buf, pos)
        if body_crc(rec.body) != rec.body_crc:
            return i
    return len(starts)


class StartsStop(enum.IntEnum):
    """Why `record_starts` stopped."""

    LIMIT = 0  # reached `limit` or `max_count`
    SHORT = 1  # fewer than 8 bytes left at `next_pos`
    RUNS_PAST = 2  # a V1 record at `next_pos` shorter than a record can be, or past the data
    OTHER = 3  # no V1 magic at `next_pos` (a blank, zeros, or damage: see `total` and `magic`)


class RecordStarts(NamedTuple):
    positions: bytes | bytearray  # int64, machine order
    next_pos: int
    stop: int  # a `StartsStop`
    total: int  # TOTALSIZE and MAGICCODE read at `next_pos` (0 when not read)
    magic: int


def record_starts(buf: bytes | bytearray | memoryview, pos: int, limit: int, max_count: int) -> RecordStarts:
    """The V1 records from `pos` while `pos < limit`, at most `max_count`, hopping over TOTALSIZE:
    the sequential walk of a raw-store scan (each record's fields are checked afterwards)."""
    size = len(buf)
    out = array("q")
    total = magic = 0
    while pos < limit and len(out) < max_count:
        if size - pos < 8:
            return RecordStarts(out.tobytes(), pos, StartsStop.SHORT, 0, 0)
        total, magic = SIZE_MAGIC.unpack_from(buf, pos)
        if magic != MESSAGE_MAGIC_CODE:
            return RecordStarts(out.tobytes(), pos, StartsStop.OTHER, total, magic)
        if total < V4_FIXED_SIZE or pos + total > size:
            return RecordStarts(out.tobytes(), pos, StartsStop.RUNS_PAST, total, magic)
        out.append(pos)
        pos += total
    return RecordStarts(out.tobytes(), pos, StartsStop.LIMIT, 0, 0)


class Invalid(enum.IntEnum):
    """What `first_invalid_record` found wrong with the record at the index it returns."""

    NONE = 0  # every record is sound (the index is the number of positions)
    OUTSIDE = 1  # fewer than a record's fixed bytes from the position to the end of the data
    FRAMED = 2  # no V1 magic, a TOTALSIZE below a record's fixed size, or past the data
    LENGTHS = 3  # BODYLEN, TOPICLEN and PROPLEN do not add up to TOTALSIZE
    PHYSICAL = 4  # PHYSICALOFFSET is not the record's own commit-log offset
    SLOW = 5  # an IPv6 host: the layout differs, and this check does not read it (the caller does)


_V6_BITS: Final = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_BODY_LEN_POS: Final = V4_BODY_POS - 4


def first_invalid_record(
    buf: bytes | bytearray | memoryview,
    positions: bytes | bytearray | memoryview,
    base: int,
    check_base: bool,
) -> tuple[int, int]:
    """The first record at `positions` (int64, machine order) that is not sound, and why (an
    `Invalid`): `(len(positions), Invalid.NONE)` when all are. With `check_base`, `buf[0]` sits at
    commit-log offset `base` and each PHYSICALOFFSET must be `base` + its position. Records are
    checked in order, each in the order of `Invalid`; an IPv6 record stops the check there
    (`SLOW`). The lengths are read as `spark/scan.py`'s numpy check reads them, clamped to the
    data, so both name the same record for the same bytes."""
    view = memoryview(buf).cast("B")
    size = len(view)
    starts = memoryview(positions).cast("B").cast("q").tolist()
    for i, p in enumerate(starts):
        if p < 0 or p + V4_FIXED_SIZE > size:
            return i, Invalid.OUTSIDE
        total, magic = SIZE_MAGIC.unpack_from(view, p)
        if magic != MESSAGE_MAGIC_CODE or total < V4_FIXED_SIZE or p + total > size:
            return i, Invalid.FRAMED
        if int.from_bytes(view[p + SYSFLAG_POS : p + SYSFLAG_POS + 4], "big", signed=True) & _V6_BITS:
            return i, Invalid.SLOW
        body_len = int.from_bytes(view[p + _BODY_LEN_POS : p + V4_BODY_POS], "big", signed=True)
        topic_len_pos = min(p + V4_BODY_POS + max(body_len, 0), size - 1)
        props_len_pos = min(topic_len_pos + 1 + view[topic_len_pos], size - 2)
        props_len = int.from_bytes(view[props_len_pos : props_len_pos + 2], "big", signed=True)
        if not (
            body_len >= 0
            and V4_FIXED_SIZE + body_len <= total
            and props_len >= 0
            and props_len_pos + 2 + props_len == p + total
        ):
            return i, Invalid.LENGTHS
        phys = view[p + PHYSICAL_OFFSET_POS : p + PHYSICAL_OFFSET_POS + 8]
        if check_base and int.from_bytes(phys, "big", signed=True) != base + p:
            return i, Invalid.PHYSICAL
    return len(starts), Invalid.NONE
