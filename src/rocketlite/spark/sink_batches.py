"""The sink's column path: one task's Arrow batches to ordered, encoded SEND_BATCH_MESSAGE entries.

`prepare` does, per task, what `sink_rows` does per row, in bulk:

1. each batch's properties text (the user's properties, then TAGS, then KEYS) and the sorted
   properties part of its digest are built by Arrow compute kernels from the `tags` and `keys`
   columns; a batch with a `properties` map column or `keys` as an array goes through
   `sink_rows.rows` for these two strings (the map's rules live there once);
2. the ids are the reference's (`sink_rows` docstring), so a replay by this version finds what an
   earlier version stored and the other way round: the digest input of every row is joined by
   one Arrow kernel and hashed by one `speedups.blake2b_digests` call (compiled BLAKE2b, no GIL),
   the occurrence numbers of identical rows come from one stable numpy sort, and the ids are a
   second `blake2b_digests` call over fixed-width records (prefix, digest, occurrence);
3. the rows are ordered as the reference orders them (target, then id in `content` mode: one
   numpy sort of the id bytes when the task has one target), and
   every SEND_BATCH_MESSAGE entry (`protocol/formats/batch.py`: 20-byte head, body, properties length,
   properties) is built by one Arrow join into one buffer, so a chunk's request body is a slice
   of it, made once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.formats.batch import ENTRY_OVERHEAD, MAX_PROPERTIES_LENGTH
from rocketlite.protocol.message import MessageConst
from rocketlite.spark import sink_rows
from rocketlite.spark.codec import speedups
from rocketlite.spark.options import SinkOptions

# The batch entry head (protocol/formats/batch.py ENTRY_HEAD: total, magic, body CRC, flag, body length)
# and the properties length, as numpy records so a whole task's heads are filled at once.
ENTRY_HEAD_DTYPE: Final = np.dtype(
    [("total", ">i4"), ("magic", ">i4"), ("crc", ">i4"), ("flag", ">i4"), ("body", ">i4")]
)
PROPERTIES_LENGTH_DTYPE: Final = np.dtype(">i2")
assert ENTRY_HEAD_DTYPE.itemsize + PROPERTIES_LENGTH_DTYPE.itemsize == ENTRY_OVERHEAD

Target = tuple[str, str | None, int | None]  # topic, broker name, queue id
_UNIQ_PAIR: Final = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX + "\x01"


@dataclass(slots=True)
class Prepared:
    """A task's messages in send order: targets, ids, encoded entries and chunking sizes."""

    targets: list[Target]
    uniq: list[str]  # "" in idempotence=none
    estimates: list[int]  # the chunking estimate (sink_rows.entry_size)
    body_lengths: np.ndarray
    properties_lengths: np.ndarray  # UTF-8 bytes
    entry_offsets: np.ndarray  # int64, len + 1: entry i is entries[offsets[i]:offsets[i + 1]]
    entries: pa.Buffer

    def __len__(self) -> int:
        return len(self.targets)

    def body(self, start: int, end: int) -> bytes:
        """The SEND_BATCH_MESSAGE body of entries [start, end)."""
        a, b = int(self.entry_offsets[start]), int(self.entry_offsets[end])
        data: bytes = self.entries[a:b].to_pybytes()
        return data


@dataclass(slots=True)
class _Batch:
    targets: list[Target]
    body: pa.Array  # binary
    text: list[str] | pa.Array  # properties text without UNIQ_KEY
    sort_part: pa.Array  # sorted properties part of the digest (string)
    prefix: pa.Array | str  # digest prefix per row, or one for all


def _present(col: pa.Array) -> pa.Array:
    return pc.fill_null(pc.greater(pc.binary_length(col), 0), False)


def _pair(name: str, col: pa.Array, present: pa.Array, tail: str = "") -> pa.Array:
    """`name \\1 value tail` where present, else ""."""
    return pc.if_else(present, pc.binary_join_element_wise(name + "\x01", col, tail, ""), "")


def _fast(options: SinkOptions, batch: pa.RecordBatch) -> _Batch | None:
    """A batch without a properties map and with string keys, taken by Arrow kernels."""
    names = batch.schema.names
    if "properties" in names or ("keys" in names and not pa.types.is_string(batch.column("keys").type)):
        return None
    n = batch.num_rows
    body = batch.column("body" if "body" in names else "value")
    if body.null_count:
        raise ValueError(f"row {body.is_null().to_pylist().index(True)} of a batch has a null body")
    if not pa.types.is_binary(body.type):
        body = body.cast(pa.binary())
    topic = options.topic
    topics: list[str] = (
        [topic] * n if topic else (batch.column("topic").to_pylist() if "topic" in names else [])
    )
    if not topic:
        missing = next((i for i, t in enumerate(topics) if not t), None) if topics else 0
        if missing is not None:
            raise ValueError(
                f"row {missing} of a batch has no topic (null topic column and no 'topic' option)"
            )
    queue_ids = batch.column("queueId").to_pylist() if "queueId" in names else [None] * n
    brokers = batch.column("brokerName").to_pylist() if "brokerName" in names else [None] * n
    empty = pa.nulls(n, pa.string())
    tags = batch.column("tags") if "tags" in names else empty
    keys = batch.column("keys") if "keys" in names else empty
    has_tags, has_keys = _present(tags), _present(keys)
    both = pc.and_(has_tags, has_keys)
    tag_pair = _pair(MessageConst.TAGS, tags, has_tags)
    text = pc.binary_join_element_wise(
        tag_pair, pc.if_else(both, "\x02", ""), _pair(MessageConst.KEYS, keys, has_keys), ""
    )
    # sorted by name: KEYS < TAGS
    sort_part = pc.binary_join_element_wise(
        _pair(MessageConst.KEYS, keys, has_keys, "\x02"), _pair(MessageConst.TAGS, tags, has_tags, "\x02"), ""
    )
    targets = list(zip(topics, brokers, queue_ids, strict=True))
    if topic and "queueId" not in names and "brokerName" not in names:
        prefix: pa.Array | str = sink_rows.digest_prefix(topic, None, None)
    else:
        prefix = pa.array([sink_rows.digest_prefix(t, q, b) for t, b, q in targets], pa.string())
    return _Batch(targets, body, text, sort_part, prefix)


def _by_rows(options: SinkOptions, batch: pa.RecordBatch) -> _Batch:
    """Any other batch: the reference's rows, then the same columns."""
    rows = list(sink_rows.rows(options, iter([batch])))
    return _Batch(
        [(r.topic, r.broker, r.queue_id) for r in rows],
        pa.array([r.body for r in rows], pa.binary()),
        [sink_rows.properties_text(r) for r in rows],
        pa.array([sink_rows.sorted_properties(r.properties) for r in rows], pa.string()),
        pa.array([sink_rows.digest_prefix(r.topic, r.queue_id, r.broker) for r in rows], pa.string()),
    )


def _combined(batches: Iterator[pa.RecordBatch]) -> list[pa.RecordBatch]:
    """The task's batches as few as possible (one kernel call costs tens of µs, whatever its
    length; Spark hands a task many small batches)."""
    found = [b for b in batches if b.num_rows]
    if len(found) < 2 or any(b.schema != found[0].schema for b in found):
        return found
    combined: list[pa.RecordBatch] = pa.Table.from_batches(found).combine_chunks().to_batches()
    return combined


def _slices(arr: pa.Array) -> tuple[pa.Buffer, np.ndarray]:
    """A binary array's data buffer and its n + 1 offsets (int64)."""
    first = arr.offset
    offsets = np.frombuffer(arr.buffers()[1], np.int32)[first : first + len(arr) + 1].astype(np.int64)
    return arr.buffers()[2] or pa.py_buffer(b""), offsets


def _digests(batch: _Batch) -> bytes:
    """blake2b-128 of each row's digest input (sink_rows.digest), concatenated."""
    joined = pc.binary_join_element_wise(batch.prefix, batch.sort_part, "\0", "").cast(pa.binary())
    return speedups.blake2b_digests(*_slices(pc.binary_join_element_wise(joined, batch.body, b"")))


def _occurrences(digests: bytes, n: int) -> np.ndarray:
    """For each row, how many earlier rows have the same digest."""
    words = np.frombuffer(digests, ">u8").reshape(n, 2)
    by_digest = np.lexsort((words[:, 1], words[:, 0]))  # stable: equal digests keep row order
    ranked = words[by_digest]
    starts = np.ones(n, bool)
    starts[1:] = (ranked[1:] != ranked[:-1]).any(axis=1)
    positions = np.arange(n)
    out = np.empty(n, np.int64)
    out[by_digest] = positions - np.maximum.accumulate(np.where(starts, positions, 0))
    return out


def _ids(prefix: bytes, details: np.ndarray) -> bytes:
    """blake2b-128 of `prefix + detail` for each row of `details` (n x width bytes)."""
    n, width = details.shape
    records = np.empty((n, len(prefix) + width), np.uint8)
    records[:, : len(prefix)] = np.frombuffer(prefix, np.uint8)
    records[:, len(prefix) :] = details
    step = records.shape[1]
    offsets = np.arange(0, (n + 1) * step, step, dtype=np.int64)
    return speedups.blake2b_digests(records.reshape(-1).data, offsets)


def _big_endian(values: np.ndarray) -> np.ndarray:
    return values.astype(">u8").view(np.uint8).reshape(len(values), 8)


def _target_order(targets: list[Target], ids: bytes | None, single: bool) -> np.ndarray:
    """The reference's order: by (topic, broker or "", queue id or -1), then by id if given."""
    n = len(targets)
    if single:
        if ids is None:
            return np.arange(n)
        words = np.frombuffer(ids, ">u8").reshape(n, 2)  # byte order = upper-case hex order
        return np.lexsort((words[:, 1], words[:, 0]))
    keys = [(t, b or "", -1 if q is None else q) for t, b, q in targets]
    if ids is None:
        return np.array(sorted(range(n), key=keys.__getitem__), np.int64)
    uniq = [ids[i : i + 16] for i in range(0, 16 * n, 16)]
    return np.array(sorted(range(n), key=lambda i: (keys[i], uniq[i])), np.int64)


def prepare(
    options: SinkOptions,
    batches: Iterator[pa.RecordBatch],
    mode: str,
    query_id: str,
    batch_id: str,
    partition: int,
) -> Prepared:
    """Every message one task sends, in send order (module docstring)."""
    parts = [_fast(options, x) or _by_rows(options, x) for x in _combined(batches)]
    targets = [t for p in parts for t in p.targets]
    n = len(targets)
    prefix = sink_rows.id_prefix(query_id, batch_id, partition)
    ids: bytes | None = None
    if mode == "content":
        digests = b"".join(_digests(p) for p in parts)
        details = np.empty((n, 24), np.uint8)
        details[:, :16] = np.frombuffer(digests, np.uint8).reshape(n, 16)
        details[:, 16:] = _big_endian(_occurrences(digests, n))
        ids = _ids(prefix, details)
    elif mode == "order":
        ids = _ids(prefix, _big_endian(np.arange(n)))
    texts = (
        pa.concat_arrays(
            [pa.array(p.text, pa.string()) if isinstance(p.text, list) else p.text for p in parts]
        )
        if parts
        else pa.array([], pa.string())
    )
    if ids is not None:
        hexed = ids.hex().upper()
        separator = pc.if_else(pc.greater(pc.binary_length(texts), 0), "\x02", "")
        keys = _fixed(hexed.encode("ascii"), n, 32).cast(pa.string())
        texts = pc.binary_join_element_wise(texts, separator, _UNIQ_PAIR, keys, "")
    single = not targets or targets.count(targets[0]) == n
    order = _target_order(targets, ids if mode == "content" else None, single)
    uniq = [""] * n
    if ids is not None:
        ordered = np.frombuffer(ids, np.uint8).reshape(n, 16)[order].tobytes().hex().upper()
        uniq = [ordered[i : i + 32] for i in range(0, 32 * n, 32)]
    return _assemble(parts, targets if single else [targets[i] for i in order.tolist()], uniq, texts, order)


def _assemble(
    parts: list[_Batch], targets: list[Target], uniq: list[str], texts: pa.Array, order: np.ndarray
) -> Prepared:
    """The messages in `order` (targets and ids already in it) as encoded entries."""
    n = len(order)
    take = pa.array(order, pa.int64())
    bodies = (pa.concat_arrays([p.body for p in parts]) if parts else pa.array([], pa.binary())).take(take)
    props_text = texts.take(take)
    props = props_text.cast(pa.binary())
    body_len = pc.binary_length(bodies).to_numpy(zero_copy_only=False).astype(np.int64)
    prop_len = pc.binary_length(props).to_numpy(zero_copy_only=False).astype(np.int64)
    chars = pc.utf8_length(props_text).to_numpy(zero_copy_only=False).astype(np.int64)
    estimates = (64 + body_len + np.where(chars > 0, chars + 1, 0)).tolist()
    heads = np.zeros(n, ENTRY_HEAD_DTYPE)
    heads["total"] = ENTRY_OVERHEAD + body_len + prop_len
    heads["body"] = body_len
    lengths = np.minimum(prop_len, MAX_PROPERTIES_LENGTH + 1).astype(PROPERTIES_LENGTH_DTYPE)
    entries = pc.binary_join_element_wise(
        _fixed(heads.tobytes(), n, ENTRY_HEAD_DTYPE.itemsize),
        bodies,
        _fixed(lengths.tobytes(), n, PROPERTIES_LENGTH_DTYPE.itemsize),
        props,
        b"",
    )
    data, offsets = _slices(entries) if n else (pa.py_buffer(b""), np.zeros(1, np.int64))
    return Prepared(
        targets,
        uniq,
        estimates,
        body_len,
        prop_len,
        offsets,
        data,
    )


def _fixed(data: bytes, n: int, width: int) -> pa.Array:
    """n values of `width` bytes each, as a binary array over `data` (no copy)."""
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def check_lengths(prepared: Prepared, start: int, end: int) -> None:
    """Refuse what `encode_batch` refuses: properties longer than a batch entry can say."""
    over = prepared.properties_lengths[start:end] > MAX_PROPERTIES_LENGTH
    if over.any():
        size = int(prepared.properties_lengths[start + int(np.argmax(over))])
        raise ProtocolError(f"batch entry properties of {size} bytes exceed {MAX_PROPERTIES_LENGTH}")
