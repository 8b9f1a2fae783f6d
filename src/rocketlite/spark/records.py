"""Columnar decoding of stored RocketMQ 4.x records into Arrow record batches.

Both readers of `rocketlite.spark` hold bytes with records back to back: a PULL_MESSAGE body
(broker reads) or a commit-log segment (raw store reads). Two steps:

* `scan_positions` finds and checks the records (`spark/scan.py`, re-exported here);
* `decode_batch` turns record positions into one `pyarrow.RecordBatch` in the data source's
  schema (`ARROW_SCHEMA`) without Python work per record. With the compiled data plane built,
  `speedups.decode_record_columns` (`spark/codec/_native/_columns.pyx`) writes every column's Arrow
  buffers in one pass without the GIL and `batch_of_columns` wraps them. Without it, numpy: the
  88-byte headers are one numpy
  gather (a stride-1 view of the buffer as opaque 88-byte items, read through a big-endian record
  dtype); the buffer is cut at every field boundary into one zero-copy Arrow binary array and
  `take` copies bodies, topics and properties out in C++; the properties strings
  (`name\\x01value\\x02...`) are split into the map column the same way, after numpy has located
  the separators.
  Properties are decoded like the Java client's `string2messageProperties`: empty items and items
  without a name or value are dropped and a repeated name keeps its last value.

Records the columnar path does not handle (IPv6 hosts, compressed bodies, properties that are not
UTF-8) send the whole chunk down `decode_batch_py`, the per-record reference decoder built on
`protocol.record.decode_record`; both paths give identical rows (`tests/spark/test_records.py`),
and `ROCKETLITE_NATIVE=0` makes the reference the only one. The Spark family's chooser
(`spark/codec/speedups.py`, `TIER`) says which of the three runs.

msgId is the client-made UNIQ_KEY when the message has one, else the broker's offsetMsgId (store
host + commit-log offset, 32 upper-case hex digits for IPv4), as `MessageClientExt.getMsgId()`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from rocketlite.protocol.formats.record import (
    PHYSICAL_OFFSET_POS,
    SIZE_MAGIC,
    V4_BODY_POS,
    V4_STORE_HOST_POS,
    decode_record,
    inflate_body,
)
from rocketlite.protocol.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    MessageConst,
    MessageSysFlag,
    make_msg_id,
)
from rocketlite.spark.codec import speedups
from rocketlite.spark.codec.columns_ref import RecordColumns
from rocketlite.spark.codec.speedups import Tier
from rocketlite.spark.scan import Scan, Stop, Views, scan_positions, validate_positions
from rocketlite.spark.schema import COLUMNS

log = logging.getLogger("rocketlite.spark.records")

__all__ = [
    "ARROW_SCHEMA",
    "Scan",
    "Stop",
    "batch_of_columns",
    "decode_batch",
    "decode_batch_py",
    "empty_batch",
    "scan_positions",
    "validate_positions",
]

TIMESTAMP: Final = pa.timestamp("us", tz="UTC")
_STRING: Final = pa.string()
PROPERTIES_TYPE: Final = pa.map_(_STRING, _STRING)
_TYPES: Final = {
    "topic": pa.string(),
    "brokerName": pa.string(),
    "queueId": pa.int32(),
    "queueOffset": pa.int64(),
    "commitLogOffset": pa.int64(),
    "msgId": pa.string(),
    "keys": pa.string(),
    "tags": pa.string(),
    "body": pa.binary(),
    "properties": PROPERTIES_TYPE,
    "bornTimestamp": TIMESTAMP,
    "storeTimestamp": TIMESTAMP,
    "reconsumeTimes": pa.int32(),
}
ARROW_SCHEMA: Final = pa.schema([pa.field(name, _TYPES[name]) for name in COLUMNS])
"""What Spark expects from `read()` for the schema in `schema.SPARK_DDL` (timestamps in UTC)."""

# Field positions of the record with IPv4 born and store hosts (declared in protocol.record).
_OFF_PHYS: Final = PHYSICAL_OFFSET_POS
_OFF_STORE_HOST: Final = V4_STORE_HOST_POS
_OFF_BODY: Final = V4_BODY_POS

_V6_BITS: Final = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_SLOW_BITS: Final = _V6_BITS | MessageSysFlag.COMPRESSED_FLAG
_PAD: Final = 16  # zero bytes after the copied properties text: 8-byte key loads stay inside it
_HEX_PAIRS: Final = np.frombuffer(b"".join(f"{i:02X}".encode() for i in range(256)), dtype="<u2")
_INT32_MAX: Final = (1 << 31) - 1
_MAX_LAGS: Final = 16  # records with more properties than this are checked for repeats by sorting

# The compiled column decoder when it is built; without it, the numpy path below (its reference,
# `columns_ref.decode_record_columns`, goes record by record: slower than numpy). The chooser
# says which (`speedups.TIER`).
_NATIVE_COLUMNS: Final = speedups.TIER is Tier.COMPILED

_U8 = npt.NDArray[np.uint8]
_I64 = npt.NDArray[np.int64]


# ------------------------------------------------------------------------------------------ decoding
def empty_batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], type=t) for t in ARROW_SCHEMA.types], schema=ARROW_SCHEMA)


class _DeclinedError(Exception):
    """The fast path declines this chunk."""


def decode_batch(buf: Any, positions: _I64 | Sequence[int], broker_name: str = "") -> pa.RecordBatch:
    """One RecordBatch (`ARROW_SCHEMA`) of the records starting at `positions` in `buf`.

    The records must have passed `scan_positions`; ascending, non-overlapping positions take the
    fast path.
    """
    p = np.asarray(positions, dtype=np.int64)
    if len(p) == 0:
        return empty_batch()
    end = int(p[-1]) + SIZE_MAGIC.unpack_from(buf, int(p[-1]))[0]
    if end > _INT32_MAX:
        # Arrow's 32-bit offsets cannot reach that far into `buf`: decode from a copy.
        lo = int(p[0])
        return decode_batch(memoryview(buf)[lo:end], p - lo, broker_name)
    if speedups.TIER is Tier.REFERENCE:
        return decode_batch_py(buf, p, broker_name)
    if _NATIVE_COLUMNS:
        columns = speedups.decode_record_columns(buf, np.ascontiguousarray(p, dtype=np.int64).data)
        if columns is None:  # IPv6 hosts, compressed bodies, text that is not UTF-8
            return decode_batch_py(buf, p, broker_name)
        return batch_of_columns(columns, broker_name)
    try:
        return _decode_columns(buf, end, p, broker_name)
    except _DeclinedError:
        return decode_batch_py(buf, p, broker_name)


def batch_of_columns(c: RecordColumns, broker_name: str) -> pa.RecordBatch:
    """The RecordBatch over the buffers of `speedups.decode_record_columns` (no copy)."""
    n = c.rows
    buf = pa.py_buffer

    def strings(offsets: Any, data: Any, validity: Any = None, kind: pa.DataType = _STRING) -> pa.Array:
        count = len(offsets) // 4 - 1
        return pa.Array.from_buffers(
            kind, count, [None if validity is None else buf(validity), buf(offsets), buf(data)]
        )

    def fixed(kind: pa.DataType, data: Any) -> pa.Array:
        return pa.Array.from_buffers(kind, n, [None, buf(data)])

    props = pa.MapArray.from_arrays(
        pa.Array.from_buffers(pa.int32(), n + 1, [None, buf(c.map_offsets)]),
        strings(c.name_offsets, c.name_data),
        strings(c.value_offsets, c.value_data),
    )
    arrays = [
        strings(c.topic_offsets, c.topic_data),
        _const_string(broker_name, n),
        fixed(pa.int32(), c.queue_id),
        fixed(pa.int64(), c.queue_offset),
        fixed(pa.int64(), c.commit_log_offset),
        strings(c.msg_id_offsets, c.msg_id_data),
        strings(c.keys_offsets, c.keys_data, c.keys_validity),
        strings(c.tags_offsets, c.tags_data, c.tags_validity),
        strings(c.body_offsets, c.body_data, kind=pa.binary()),
        props,
        fixed(TIMESTAMP, c.born_us),
        fixed(TIMESTAMP, c.store_us),
        fixed(pa.int32(), c.reconsume_times),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def _segments(window: pa.Buffer, bounds: npt.NDArray[np.int32]) -> pa.BinaryArray:
    """The window cut at `bounds` (ascending): element i is `window[bounds[i] : bounds[i + 1]]`."""
    return pa.Array.from_buffers(pa.binary(), len(bounds) - 1, [None, pa.py_buffer(bounds), window])


def _every(step: int, first: int, n: int) -> pa.Array:
    return pa.array(np.arange(n, dtype=np.int32) * step + first)


def _const_string(value: str, n: int) -> pa.Array:
    raw = value.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def _timestamps(ms: npt.NDArray[Any]) -> pa.Array:
    us = ms.astype(np.int64) * 1000
    return pa.Array.from_buffers(TIMESTAMP, len(us), [None, pa.py_buffer(us)])


def _offset_msg_ids(h: npt.NDArray[Any]) -> pa.Array:
    """offsetMsgId of IPv4 records: hex(store ip + store port + commit-log offset), 32 chars each."""
    n = len(h)
    raw = h.view(np.uint8).reshape(n, _OFF_BODY)
    picked = np.concatenate(
        [raw[:, _OFF_STORE_HOST : _OFF_STORE_HOST + 8], raw[:, _OFF_PHYS : _OFF_PHYS + 8]], axis=1
    )
    text = _HEX_PAIRS[picked]  # (n, 16) pairs of hex digits
    offsets = np.arange(n + 1, dtype=np.int32) * 32
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(text)])


def _decode_columns(buf: Any, used: int, p: _I64, broker_name: str) -> pa.RecordBatch:
    v = Views(buf)
    n = len(p)
    h = v.headers(p)
    if bool(np.any(h["sys_flag"] & _SLOW_BITS)):
        raise _DeclinedError
    total = h["total"].astype(np.int64)
    ends = p + total
    if bool(np.any(ends[:-1] > p[1:])):
        raise _DeclinedError  # overlapping or unordered positions
    body_len = h["body_len"].astype(np.int64)
    body_end = p + _OFF_BODY + body_len
    topic_end = body_end + 1 + v.u8[body_end]
    # Each record cut in 7 pieces: header, body, TOPICLEN, topic, PROPLEN, properties, and the gap
    # to the next record (usually empty); `take` then copies each column's pieces out in C++.
    bounds = np.empty((n, 7), dtype=np.int32)
    bounds[:, 0] = p
    bounds[:, 1] = p + _OFF_BODY
    bounds[:, 2] = body_end
    bounds[:, 3] = body_end + 1
    bounds[:, 4] = topic_end
    bounds[:, 5] = topic_end + 2
    bounds[:, 6] = ends
    flat = np.empty(7 * n + 1, dtype=np.int32)
    flat[:-1] = bounds.ravel()
    flat[-1] = used
    pieces = _segments(pa.py_buffer(buf), flat)
    body = pieces.take(_every(7, 1, n))
    try:
        topic = pieces.take(_every(7, 3, n)).cast(pa.string())
        props_text = pieces.take(_every(7, 5, n)).cast(pa.string())
    except pa.ArrowInvalid as exc:  # not UTF-8
        raise _DeclinedError from exc
    props = _split_properties(props_text)
    uniq = props.lookup(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    msg_id = uniq if uniq.null_count == 0 else pc.coalesce(uniq, _offset_msg_ids(h))
    arrays = [
        topic,
        _const_string(broker_name, n),
        pa.array(h["queue_id"].astype(np.int32)),
        pa.array(h["queue_offset"].astype(np.int64)),
        pa.array(h["phys"].astype(np.int64)),
        msg_id,
        props.lookup(MessageConst.KEYS),
        props.lookup(MessageConst.TAGS),
        body,
        props.map,
        _timestamps(h["born_ts"]),
        _timestamps(h["store_ts"]),
        pa.array(h["reconsume"].astype(np.int32)),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


@dataclass(slots=True)
class _Properties:
    map: pa.MapArray
    values: pa.Array  # the map's values, flattened
    item_record: _I64  # record index of each item
    key_len: _I64
    key_prefix: npt.NDArray[np.uint64]  # first 8 bytes of each key, big-endian, zero-padded
    n: int
    keys: pa.Array

    def lookup(self, name: str) -> pa.Array:
        """Each record's value of property `name` (null when absent)."""
        raw = name.encode("utf-8")
        if len(raw) > 8:
            matches = np.flatnonzero(pc.equal(self.keys, name).to_numpy(zero_copy_only=False))
        else:
            want = np.uint64(int.from_bytes(raw.ljust(8, b"\0"), "big"))
            matches = np.flatnonzero((self.key_len == len(raw)) & (self.key_prefix == want))
        if len(matches) == self.n and bool(np.all(self.item_record[matches] == np.arange(self.n))):
            return self.values.take(pa.array(matches.astype(np.int32)))
        index = np.full(self.n, -1, dtype=np.int32)
        index[self.item_record[matches]] = matches  # names are unique per record
        return self.values.take(pa.array(index, mask=index < 0))


def _split_properties(text: pa.StringArray) -> _Properties:
    """The map column from properties strings, like `string2messageProperties` (last value wins)."""
    n = len(text)
    buffers = text.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int32)[text.offset : text.offset + n + 1].astype(np.int64)
    lo, hi = int(offsets[0]), int(offsets[-1])
    data = bytearray(hi - lo + _PAD)
    if buffers[2] is not None:
        data[: hi - lo] = memoryview(buffers[2])[lo:hi]
    rec_start = offsets[:-1] - lo
    rec_end = offsets[1:] - lo
    v = Views(data)
    content = v.u8[: hi - lo]
    low = np.flatnonzero(content < 3)  # both separators in one pass (other bytes < 3 are rare)
    kinds = content[low]
    seps = low[kinds == 2]  # PROPERTY_SEPARATOR
    eqs = low[kinds == 1]  # NAME_VALUE_SEPARATOR
    # Item boundaries: every separator, plus the end of each non-empty record (a virtual one:
    # 4.9 clients write no trailing separator; older ones do, which leaves an empty last item).
    non_empty = np.flatnonzero(rec_end > rec_start)
    ends_virtual = rec_end[non_empty]
    bounds = np.empty(len(seps) + len(ends_virtual), dtype=np.int64)
    at = np.searchsorted(seps, ends_virtual, side="left") + np.arange(len(ends_virtual))
    is_real = np.ones(len(bounds), dtype=bool)
    is_real[at] = False
    bounds[at] = ends_virtual
    bounds[is_real] = seps
    item_end = bounds
    item_start = np.empty_like(bounds)
    if len(bounds):
        item_start[0] = 0
        item_start[1:] = bounds[:-1] + is_real[:-1]
    if len(eqs):
        j = np.searchsorted(eqs, item_start, side="left")
        eq = np.where(j < len(eqs), eqs[np.minimum(j, len(eqs) - 1)], hi - lo + 1)
    else:
        eq = np.full(len(item_start), hi - lo + 1, dtype=np.int64)
    # An item belongs to the record whose (virtual) end is the first at or after its own end.
    virtual_seen = np.cumsum(~is_real)
    item_record = (
        non_empty[np.minimum(virtual_seen - 1 + is_real, len(non_empty) - 1)] if len(bounds) else bounds
    )
    key_len = eq - item_start
    keep = (eq < item_end) & (key_len > 0) & (item_end - eq > 1)
    sel = np.flatnonzero(keep)
    item_start, item_end, eq, key_len = item_start[sel], item_end[sel], eq[sel], key_len[sel]
    item_record = item_record[sel]
    # First 8 bytes of each key, for exact matches of short names and for finding repeats.
    raw8 = v.i64[item_start].view(">u8").astype(np.uint64)
    shift = (8 - np.minimum(key_len, 8)).astype(np.uint64) * np.uint64(8)
    key_prefix = np.where(key_len >= 8, raw8, (raw8 >> shift) << shift)
    drop = _repeated_names(content, item_start, item_record, key_len, key_prefix)
    if len(drop):
        keep2 = np.ones(len(item_start), dtype=bool)
        keep2[drop] = False
        sel = np.flatnonzero(keep2)
        item_start, item_end, eq = item_start[sel], item_end[sel], eq[sel]
        item_record, key_len, key_prefix = item_record[sel], key_len[sel], key_prefix[sel]
    k = len(item_start)
    # Cut the text at every item's key and value: [gap][key][\x01][value] per item.
    cuts = np.empty((k, 4), dtype=np.int32)
    cuts[:, 0] = item_start
    cuts[:, 1] = eq
    cuts[:, 2] = eq + 1
    cuts[:, 3] = item_end
    flat = np.empty(4 * k + 1, dtype=np.int32)
    flat[0] = 0
    flat[1:] = cuts.ravel()
    pieces = _segments(pa.py_buffer(data), flat)
    keys = pieces.take(_every(4, 1, k)).view(pa.string())  # cut at ASCII separators: still UTF-8
    values = pieces.take(_every(4, 3, k)).view(pa.string())
    counts = np.bincount(item_record, minlength=n) if k else np.zeros(n, dtype=np.int64)
    map_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=map_offsets[1:])
    mapped = pa.MapArray.from_arrays(pa.array(map_offsets), keys, values)
    return _Properties(mapped, values, item_record, key_len, key_prefix, n, keys)


def _repeated_names(
    content: _U8, start: _I64, record: _I64, key_len: _I64, prefix: npt.NDArray[np.uint64]
) -> _I64:
    """Items whose name appears again later in the same record (the earlier ones are dropped)."""
    if len(record) < 2:
        return np.zeros(0, dtype=np.int64)
    widest = int(np.bincount(record).max())
    candidates: list[tuple[int, int]] = []
    if widest <= _MAX_LAGS:
        # Items of a record are adjacent: compare each with the next `widest - 1` items.
        for lag in range(1, widest):
            same = (record[:-lag] == record[lag:]) & (key_len[:-lag] == key_len[lag:])
            same &= prefix[:-lag] == prefix[lag:]
            candidates.extend((int(i), int(i) + lag) for i in np.flatnonzero(same))
    else:
        order = np.lexsort((np.arange(len(record)), prefix, key_len, record))
        first, second = order[:-1], order[1:]
        same = (record[first] == record[second]) & (key_len[first] == key_len[second])
        same &= prefix[first] == prefix[second]
        candidates.extend((int(x), int(y)) for x, y in zip(first[same], second[same], strict=True))
    drop: set[int] = set()
    long_names: set[int] = set()  # records where names longer than 8 bytes may repeat
    for earlier, _ in candidates:
        if key_len[earlier] <= 8:
            drop.add(earlier)  # equal length and first 8 bytes: the same name
        else:
            long_names.add(int(record[earlier]))
    if long_names:
        raw = content.tobytes()
        for rec in sorted(long_names):
            lo, hi = np.searchsorted(record, [rec, rec + 1])
            last: dict[bytes, int] = {}
            for i in range(int(lo), int(hi)):
                name = raw[int(start[i]) : int(start[i]) + int(key_len[i])]
                if name in last:
                    drop.add(last[name])
                last[name] = i
    return np.array(sorted(drop), dtype=np.int64)


def parse_properties(text: str) -> list[tuple[str, str]]:
    """`string2messageProperties` as pairs: items without a name or value dropped, the last value
    of a repeated name kept (in the position of its last occurrence, as the fast path has it)."""
    props: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        key, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep and key and value:
            props.pop(key, None)
            props[key] = value
    return list(props.items())


def decode_batch_py(buf: Any, p: _I64, broker_name: str) -> pa.RecordBatch:
    """`decode_batch` record by record: the reference (`speedups.TIER` `REFERENCE` makes it
    the only path), and the general path for any layout, compressed bodies, properties that are
    not UTF-8."""
    cols: dict[str, list[Any]] = {name: [] for name in ARROW_SCHEMA.names}
    for pos in p.tolist():
        rec = decode_record(buf, pos)
        pairs = parse_properties(rec.properties_string)
        props = dict(pairs)
        uniq = props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        cols["topic"].append(rec.topic)
        cols["brokerName"].append(broker_name)
        cols["queueId"].append(rec.queue_id)
        cols["queueOffset"].append(rec.queue_offset)
        cols["commitLogOffset"].append(rec.physical_offset)
        cols["msgId"].append(uniq or make_msg_id(rec.store_host, rec.physical_offset))
        cols["keys"].append(props.get(MessageConst.KEYS))
        cols["tags"].append(props.get(MessageConst.TAGS))
        cols["body"].append(inflate_body(rec.body, rec.sys_flag))
        cols["properties"].append(pairs)
        cols["bornTimestamp"].append(rec.born_timestamp * 1000)
        cols["storeTimestamp"].append(rec.store_timestamp * 1000)
        cols["reconsumeTimes"].append(rec.reconsume_times)
    arrays = [pa.array(cols[f.name], type=f.type) for f in ARROW_SCHEMA]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
