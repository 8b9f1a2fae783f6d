"""The stored message record of RocketMQ 4.x's commit log (V1 magic), byte for byte.

All integers are big-endian, Java-signed. IPv4 born and store hosts give these offsets::

    off  size  field
      0     4  TOTALSIZE        whole record, this field included
      4     4  MAGICCODE        0xDAA320A7 (V1); 0xCBD43194 marks an end-of-file blank
      8     4  BODYCRC          crc32(body as stored) & 0x7FFFFFFF
     12     4  QUEUEID
     16     4  FLAG             user flag
     20     8  QUEUEOFFSET      logical offset in the consume queue
     28     8  PHYSICALOFFSET   this record's own commit-log offset
     36     4  SYSFLAG          MessageSysFlag bits; 0x10 / 0x20 make born / store host IPv6
     40     8  BORNTIMESTAMP    producer ms
     48   8|20 BORNHOST         ip(4|16) + port(int)
     56     8  STORETIMESTAMP   broker ms
     64   8|20 STOREHOST        ip(4|16) + port(int)
     72     4  RECONSUMETIMES
     76     8  PREPARED TRANSACTION OFFSET
     84   4+n  BODYLEN, BODY
   88+n   1+t  TOPICLEN (signed byte), TOPIC
  89+n+t  2+p  PROPLEN (signed short), PROPERTIES (name\\x01value\\x02...)

Total = 91 + n + t + p, plus 12 per IPv6 host. A blank (end of file) is `int remaining, int
BLANK_MAGIC_CODE` and fills the rest of a segment. Fields after BORNHOST shift by 12 when the born
host is IPv6; `_layout` derives every offset from the structs below, never by hand.
"""

from __future__ import annotations

import enum
import mmap
import struct
import zlib
from dataclasses import dataclass, field
from typing import Final, TypeAlias

import numpy as np

from rocketlite.protocol.message import (
    HostAddress,
    MessageConst,
    MessageSysFlag,
    find_property,
    make_msg_id,
)

MESSAGE_MAGIC_CODE: Final = -626843481  # 0xDAA320A7
MESSAGE_MAGIC_CODE_V2: Final = -626843477  # 0xDAA320AB, 5.x only (long topics); never written
BLANK_MAGIC_CODE: Final = -875286124  # 0xCBD43194
END_FILE_MIN_BLANK_LENGTH: Final = 4 + 4
MAX_TOPIC_LENGTH: Final = 127
MAX_PROPERTIES_LENGTH: Final = 32767

# Fixed prefix up to BORNTIMESTAMP, the same for every host family.
PREFIX = struct.Struct(
    ">"
    "i"  # TOTALSIZE
    "i"  # MAGICCODE
    "i"  # BODYCRC
    "i"  # QUEUEID
    "i"  # FLAG
    "q"  # QUEUEOFFSET
    "q"  # PHYSICALOFFSET
    "i"  # SYSFLAG
    "q"  # BORNTIMESTAMP
)
SIZE_MAGIC = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE (also the blank record)
INT = struct.Struct(">i")
LONG = struct.Struct(">q")
SHORT = struct.Struct(">h")
QUEUE_OFFSET_POS: Final = struct.calcsize(">iiiii")
PHYSICAL_OFFSET_POS: Final = struct.calcsize(">iiiiiq")
SYSFLAG_POS: Final = struct.calcsize(">iiiiiqq")
BORN_HOST_POS: Final = PREFIX.size
assert (QUEUE_OFFSET_POS, PHYSICAL_OFFSET_POS, SYSFLAG_POS, BORN_HOST_POS) == (20, 28, 36, 48)
# QUEUEOFFSET and PHYSICALOFFSET are adjacent: an appender patches both with one pack.
QUEUE_AND_PHYSICAL_OFFSET = struct.Struct(">qq")
assert QUEUE_OFFSET_POS + QUEUE_AND_PHYSICAL_OFFSET.size // 2 == PHYSICAL_OFFSET_POS


def _host_fmt(v6: bool) -> str:
    return "16si" if v6 else "4si"


@dataclass(frozen=True, slots=True)
class _Layout:
    """Header struct from TOTALSIZE to BODYLEN for one (born v6, store v6) combination."""

    head: struct.Struct
    store_timestamp_pos: int
    store_host_pos: int
    reconsume_pos: int
    body_len_pos: int

    @property
    def fixed_size(self) -> int:
        # head + TOPICLEN byte + PROPLEN short
        return self.head.size + 1 + 2


def _make_layout(born_v6: bool, store_v6: bool) -> _Layout:
    after_born = ">iiiiiqqiq" + _host_fmt(born_v6)
    after_store = after_born + "q" + _host_fmt(store_v6)
    head_fmt = after_store + "iq" + "i"  # RECONSUMETIMES, PREPARED OFFSET, BODYLEN
    return _Layout(
        head=struct.Struct(head_fmt),
        store_timestamp_pos=struct.calcsize(after_born),
        store_host_pos=struct.calcsize(after_born + "q"),
        reconsume_pos=struct.calcsize(after_store),
        body_len_pos=struct.calcsize(after_store + "iq"),
    )


_LAYOUTS: Final = {(b, s): _make_layout(b, s) for b in (False, True) for s in (False, True)}
assert _LAYOUTS[(False, False)].fixed_size == 91


def layout_for(sys_flag: int) -> _Layout:
    return _LAYOUTS[
        (
            bool(sys_flag & MessageSysFlag.BORNHOST_V6_FLAG),
            bool(sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG),
        )
    ]


# The common layout, IPv4 born and store hosts, with every field position named: the readers that
# work on many records at once (dispatch scans, the Spark column decoder) index bytes directly.
V4_LAYOUT: Final = _LAYOUTS[(False, False)]
BODY_CRC_POS: Final = struct.calcsize(">ii")
QUEUE_ID_POS: Final = struct.calcsize(">iii")
BORN_TIMESTAMP_POS: Final = struct.calcsize(">iiiiiqqi")
V4_STORE_TIMESTAMP_POS: Final = V4_LAYOUT.store_timestamp_pos
V4_STORE_HOST_POS: Final = V4_LAYOUT.store_host_pos
V4_RECONSUME_POS: Final = V4_LAYOUT.reconsume_pos
V4_BODY_LEN_POS: Final = V4_LAYOUT.body_len_pos
V4_BODY_POS: Final = V4_LAYOUT.head.size
V4_FIXED_SIZE: Final = V4_LAYOUT.fixed_size
assert (BODY_CRC_POS, QUEUE_ID_POS, BORN_TIMESTAMP_POS) == (8, 12, 40)
assert (V4_STORE_TIMESTAMP_POS, V4_STORE_HOST_POS, V4_RECONSUME_POS) == (56, 64, 72)
assert (V4_BODY_LEN_POS, V4_BODY_POS, V4_FIXED_SIZE) == (84, 88, 91)

# The fields a dispatch scan needs from a V4 record, in one unpack: TOTALSIZE, MAGICCODE, BODYCRC,
# QUEUEID, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, STORETIMESTAMP, PREPARED TRANSACTION OFFSET,
# BODYLEN (FLAG, BORNTIMESTAMP, hosts and RECONSUMETIMES skipped as pad bytes).
V4_SCAN_FIELDS: Final = struct.Struct(
    ">"
    "i"  # TOTALSIZE
    "i"  # MAGICCODE
    "i"  # BODYCRC
    "i"  # QUEUEID
    "4x"  # FLAG
    "q"  # QUEUEOFFSET
    "q"  # PHYSICALOFFSET
    "i"  # SYSFLAG
    "16x"  # BORNTIMESTAMP, BORNHOST
    "q"  # STORETIMESTAMP
    "12x"  # STOREHOST, RECONSUMETIMES
    "q"  # PREPARED TRANSACTION OFFSET
    "i"  # BODYLEN
)
assert V4_SCAN_FIELDS.size == V4_BODY_POS

V4_HEADER_DTYPE: Final = np.dtype(
    [
        ("total", ">i4"),
        ("magic", ">i4"),
        ("crc", ">i4"),
        ("queue_id", ">i4"),
        ("flag", ">i4"),
        ("queue_offset", ">i8"),
        ("phys", ">i8"),
        ("sys_flag", ">i4"),
        ("born_ts", ">i8"),
        ("born_host", "V8"),
        ("store_ts", ">i8"),
        ("store_host", "V8"),
        ("reconsume", ">i4"),
        ("prepared", ">i8"),
        ("body_len", ">i4"),
    ]
)
"""TOTALSIZE..BODYLEN of a V4 record as one numpy record: column decoders view many at once."""
assert V4_HEADER_DTYPE.itemsize == V4_BODY_POS and V4_HEADER_DTYPE.fields is not None
assert V4_HEADER_DTYPE.fields["store_host"][1] == V4_STORE_HOST_POS
assert V4_HEADER_DTYPE.fields["phys"][1] == PHYSICAL_OFFSET_POS


def enters_consume_queue(sys_flag: int) -> bool:
    """Prepared and rolled-back transaction records take no consume-queue slot (nor queue offset)."""
    tran = sys_flag & MessageSysFlag.TRANSACTION_MASK
    return tran in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)


# SYSFLAG bits of a COMPRESSED_FLAG body's codec (4.9.4+): 0x100 LZ4, 0x200 ZSTD, 0x300 ZLIB, and 0
# (older clients) zlib too.
COMPRESSION_TYPE_MASK: Final = 0x700
COMPRESSION_ZLIB: Final = 0x300


def inflate_body(body: bytes, sys_flag: int) -> bytes:
    """A body stored with COMPRESSED_FLAG, inflated. LZ4 and ZSTD bodies (codecs we do not ship)
    and bytes that are not a zlib stream are returned as stored."""
    if not sys_flag & MessageSysFlag.COMPRESSED_FLAG:
        return body
    if sys_flag & COMPRESSION_TYPE_MASK not in (0, COMPRESSION_ZLIB):
        return body
    try:
        return zlib.decompress(body)
    except zlib.error:
        return body


def body_crc(body: bytes | memoryview) -> int:
    """`UtilAll.crc32`: CRC-32 of the body with the sign bit cleared."""
    return zlib.crc32(body) & 0x7FFF_FFFF


def calc_msg_length(sys_flag: int, body_len: int, topic_len: int, props_len: int) -> int:
    return layout_for(sys_flag).fixed_size + body_len + topic_len + props_len


@dataclass(slots=True)
class MessageInner:
    """A message on its way into the commit log (RocketMQ's `MessageExtBrokerInner`).

    The store fills `store_timestamp`, `queue_offset` and `commit_log_offset` when it appends.
    `tags_code` is the CQ tag code chosen by the caller (hash of TAGS, or a delivery time).
    `delay_served`: a parked message's delivered copy, whose properties still name its DELAY
    level (RocketMQ writes the copy's properties string before it clears DELAY from the map);
    the store puts it where it is addressed instead of parking it again.
    """

    topic: str
    body: bytes
    born_host: HostAddress
    store_host: HostAddress
    queue_id: int = 0
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    properties_string: str = ""
    tags_code: int = 0
    store_timestamp: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    _encoded_tail: bytes | None = field(default=None, repr=False)
    delay_served: bool = False

    def effective_sys_flag(self) -> int:
        flag = self.sys_flag & ~(MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG)
        if self.born_host.is_v6:
            flag |= MessageSysFlag.BORNHOST_V6_FLAG
        if self.store_host.is_v6:
            flag |= MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
        return flag


class RecordTooLargeError(ValueError):
    """The encoded record would exceed a limit (maxMessageSize, topic or properties length)."""


@dataclass(slots=True)
class PreparedRecord:
    """Everything of a record that does not depend on where it lands; packed under the lock."""

    msg: MessageInner
    sys_flag: int
    layout: _Layout
    tail: bytes  # BODY, TOPICLEN, TOPIC, PROPLEN, PROPERTIES
    total_size: int
    crc: int


def prepare_record(msg: MessageInner, max_message_size: int) -> PreparedRecord:
    """Encode the position-independent parts of a record; `RecordTooLargeError` on limits."""
    topic = msg.topic.encode("utf-8")
    props = msg.properties_string.encode("utf-8")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise RecordTooLargeError(f"topic length {len(topic)} exceeds {MAX_TOPIC_LENGTH} bytes")
    if len(props) > MAX_PROPERTIES_LENGTH:
        raise RecordTooLargeError(f"properties length {len(props)} exceeds {MAX_PROPERTIES_LENGTH} bytes")
    body = msg.body
    sys_flag = msg.effective_sys_flag()
    layout = layout_for(sys_flag)
    total = layout.fixed_size + len(body) + len(topic) + len(props)
    if total > max_message_size:
        raise RecordTooLargeError(f"message size {total} exceeds maxMessageSize {max_message_size}")
    tail = b"".join((body, bytes((len(topic),)), topic, SHORT.pack(len(props)), props))
    return PreparedRecord(msg, sys_flag, layout, tail, total, body_crc(body))


def pack_head(rec: PreparedRecord, queue_offset: int, physical_offset: int, store_timestamp: int) -> bytes:
    """The header (TOTALSIZE..BODYLEN) of a prepared record at its final position."""
    m = rec.msg
    return rec.layout.head.pack(
        rec.total_size,
        MESSAGE_MAGIC_CODE,
        rec.crc,
        m.queue_id,
        m.flag,
        queue_offset,
        physical_offset,
        rec.sys_flag,
        m.born_timestamp,
        m.born_host.ip,
        m.born_host.port,
        store_timestamp,
        m.store_host.ip,
        m.store_host.port,
        m.reconsume_times,
        m.prepared_transaction_offset,
        len(m.body),
    )


def encode_record(msg: MessageInner, max_message_size: int = 1 << 30) -> bytes:
    """A whole record for `msg` with the offsets and store time it carries (tests, tools)."""
    rec = prepare_record(msg, max_message_size)
    return pack_head(rec, msg.queue_offset, msg.commit_log_offset, msg.store_timestamp) + rec.tail


def place_record(
    target: bytearray | mmap.mmap,
    pos: int,
    head: bytearray,
    tail: bytes,
    stamp_pos: int,
    queue_offset: int,
    physical_offset: int,
    store_timestamp: int,
    id_prefix: str,
) -> str:
    """An encoded record (`encode_record`'s header and tail) placed under the commit log's lock:
    QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP patched into `head`, head and tail copied to
    `target[pos:]` (a segment's writable mapping or write buffer), the msg id returned. The
    caller has checked that the record fits; the compiled twin is `_native/_record.pyx`."""
    msg_id = stamp_record(head, 0, stamp_pos, queue_offset, physical_offset, store_timestamp, id_prefix)
    end = pos + len(head)
    stop = end + len(tail)
    if pos < 0 or stop > len(target):
        raise ValueError(f"a record of {stop - pos} bytes at {pos} does not fit in {len(target)}")
    target[pos:end] = head
    target[end:stop] = tail
    return msg_id


def stamp_record(
    buf: bytearray,
    start: int,
    stamp_pos: int,
    queue_offset: int,
    physical_offset: int,
    store_timestamp: int,
    id_prefix: str,
) -> str:
    """The one stamping step of `place_record` and of a batch (`record_ref.stamp_batch`): the
    record at `buf[start:]` gets its QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP (at
    `start + stamp_pos`), and its msg id comes back (`id_prefix`, then 16 hex digits of the
    commit-log offset). The compiled twins share one `_stamp` the same way."""
    QUEUE_AND_PHYSICAL_OFFSET.pack_into(buf, start + QUEUE_OFFSET_POS, queue_offset, physical_offset)
    LONG.pack_into(buf, start + stamp_pos, store_timestamp)
    return id_prefix + format(physical_offset, "016X")


def blank_record(remaining: int) -> bytes:
    """The end-of-file blank: `int remaining, int BLANK_MAGIC_CODE` (the rest stays as it is)."""
    return SIZE_MAGIC.pack(remaining, BLANK_MAGIC_CODE)


@dataclass(slots=True)
class StoredRecord:
    """A record decoded from bytes (commit log, pull body, query body)."""

    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: HostAddress
    store_timestamp: int
    store_host: HostAddress
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties_string: str

    @property
    def msg_id(self) -> str:
        return make_msg_id(self.store_host, self.physical_offset)

    def get_property(self, name: str) -> str | None:
        return find_property(self.properties_string, name)

    @property
    def tags(self) -> str | None:
        return self.get_property(MessageConst.TAGS)

    @property
    def keys(self) -> str | None:
        return self.get_property(MessageConst.KEYS)

    def reposted(
        self,
        topic: str,
        queue_id: int,
        store_host: HostAddress,
        properties_string: str,
        *,
        reconsume_times: int | None = None,
        keep_transaction_offset: bool = True,
        tags_code: int = 0,
        delay_served: bool = False,
    ) -> MessageInner:
        """This record as a new message to put again: a parked message delivered to its real
        topic, a timer rolled over, a copy for a DLQ or retry topic. Body, born host and time,
        flag and sys flag stay; the caller names the new place, the store host and properties.
        `delay_served`: the copy's DELAY (if any) is already served; the store does not park it."""
        return MessageInner(
            topic=topic,
            body=self.body,
            born_host=self.born_host,
            store_host=store_host,
            queue_id=queue_id,
            flag=self.flag,
            sys_flag=self.sys_flag,
            born_timestamp=self.born_timestamp,
            reconsume_times=self.reconsume_times if reconsume_times is None else reconsume_times,
            prepared_transaction_offset=self.prepared_transaction_offset if keep_transaction_offset else 0,
            properties_string=properties_string,
            tags_code=tags_code,
            delay_served=delay_served,
        )


class RecordFormatError(ValueError):
    """Bytes that are not a valid record; `offset` is relative to the buffer given."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"{message} (at byte {offset})")
        self.offset = offset


def decode_record(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, verify_crc: bool = False
) -> StoredRecord:
    """Decode one V1 record at `pos`; `RecordFormatError` if it is blank, torn or corrupt."""
    if len(buf) - pos < PREFIX.size:
        raise RecordFormatError("truncated record header", pos)
    total, magic = SIZE_MAGIC.unpack_from(buf, pos)
    if magic != MESSAGE_MAGIC_CODE:
        raise RecordFormatError(f"bad magic code {magic & 0xFFFFFFFF:#010x}", pos)
    if total <= 0 or pos + total > len(buf):
        raise RecordFormatError(f"record size {total} out of range", pos)
    sys_flag = INT.unpack_from(buf, pos + SYSFLAG_POS)[0]
    layout = layout_for(sys_flag)
    if total < layout.fixed_size:
        raise RecordFormatError(f"record size {total} below minimum", pos)
    (
        _t, _m, crc, queue_id, flag, queue_offset, phys, _sf, born_ts,
        born_ip, born_port, store_ts, store_ip, store_port, reconsume, prepared, body_len,
    ) = layout.head.unpack_from(buf, pos)  # fmt: skip
    p = pos + layout.head.size
    if body_len < 0 or p + body_len + 3 > pos + total:
        raise RecordFormatError(f"body length {body_len} inconsistent with size {total}", pos)
    body = bytes(buf[p : p + body_len])
    p += body_len
    topic_len = buf[p]
    topic = bytes(buf[p + 1 : p + 1 + topic_len]).decode("utf-8", "replace")
    p += 1 + topic_len
    if p + 2 > pos + total:
        raise RecordFormatError("topic length inconsistent with size", pos)
    props_len = SHORT.unpack_from(buf, p)[0]
    p += 2
    if props_len < 0 or p + props_len != pos + total:
        raise RecordFormatError(f"properties length {props_len} inconsistent with size {total}", pos)
    props = bytes(buf[p : p + props_len]).decode("utf-8", "replace")
    if verify_crc and body_crc(body) != crc:
        raise RecordFormatError("body CRC mismatch", pos)
    return StoredRecord(
        total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts,
        HostAddress(born_ip, born_port), store_ts, HostAddress(store_ip, store_port),
        reconsume, prepared, body, topic, props,
    )  # fmt: skip


def decode_records(buf: bytes | bytearray | memoryview) -> list[StoredRecord]:
    """Records back to back (a pull or query body); like the Java client, stop at the first bad one."""
    out: list[StoredRecord] = []
    pos = 0
    while pos < len(buf):
        try:
            rec = decode_record(buf, pos)
        except RecordFormatError:
            break
        out.append(rec)
        pos += rec.total_size
    return out


def record_properties(buf: bytes | bytearray | memoryview) -> str:
    """The PROPERTIES string of the one record in `buf`, without decoding the rest (what a
    property filter reads per message, as `MessageDecoder.decodeProperties` does: the SYSFLAG
    gives the hosts' sizes, BODYLEN and TOPICLEN lead to PROPLEN). `RecordFormatError` if the
    lengths do not fit in `buf`."""
    sys_flag = INT.unpack_from(buf, SYSFLAG_POS)[0]
    layout = layout_for(sys_flag)
    p = layout.head.size + INT.unpack_from(buf, layout.body_len_pos)[0]
    if p < layout.head.size or p + 1 > len(buf):
        raise RecordFormatError("body length inconsistent with size", 0)
    p += 1 + buf[p]
    if p + 2 > len(buf):
        raise RecordFormatError("topic length inconsistent with size", 0)
    props_len = SHORT.unpack_from(buf, p)[0]
    p += 2
    if props_len <= 0:
        return ""
    if p + props_len > len(buf):
        raise RecordFormatError(f"properties length {props_len} inconsistent with size", 0)
    return str(buf[p : p + props_len], "utf-8", "replace")


# -- what the hot-path codecs produce (reference: `record_ref`) -------------------------------
# One record encoded as (header, tail, STORETIMESTAMP position in the header, SYSFLAG): the header
# (TOTALSIZE..BODYLEN) complete but for QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP (zero), which
# the appender patches once it knows where the record lands; the tail is BODY, TOPICLEN, TOPIC,
# PROPLEN, PROPERTIES. A plain tuple: it is built once per message on the send path.
EncodedRecord: TypeAlias = tuple[bytearray, bytes, int, int]
# Records encoded back to back as (buffer, the first record's SYSFLAG), position-dependent fields
# zero, as for `EncodedRecord` (a batch is one topic-queue and one transaction state). Where each
# record starts and where its STORETIMESTAMP lies are not returned: the stamping walks the buffer
# by each record's TOTALSIZE and SYSFLAG.
EncodedRecords: TypeAlias = tuple[bytearray, int]


@dataclass(slots=True)
class DispatchRequest:
    """What a scan extracts from one record for the consume queue and the index (RocketMQ's
    `DispatchRequest`)."""

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: str  # the KEYS property ("" if none), space-separated
    uniq_key: str | None  # the UNIQ_KEY property
    sys_flag: int
    prepared_transaction_offset: int


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
