"""The sink's column path: one task's Arrow batches to ordered, encoded SEND_BATCH_MESSAGE entries.

`prepare` does, per task, what `sink_rows` does per row, in bulk:

1. each batch's properties text (the user's properties, then TAGS, then KEYS) and the sorted
   properties part of its digest are built by Arrow compute kernels from the `tags` and `keys`
   columns; a batch with a `properties` map column or `keys` as an array goes through
   `sink_rows.rows` for these two strings (the map's rules live there once);
2. the ids are the reference's (`sink_rows` docstring): the digest input of every row is joined
   by one Arrow kernel, then two `hashlib.blake2b` calls per row and nothing else per row, so a
   replay by this version finds what an earlier version stored and the other way round;
3. the rows are ordered as the reference orders them (target, then id in `content` mode), and
   every SEND_BATCH_MESSAGE entry (`protocol/batch.py`: 20-byte head, body, properties length,
   properties) is built by one Arrow join into one buffer, so a chunk's request body is a slice
   of it, made once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketlite.protocol.batch import ENTRY_OVERHEAD, MAX_PROPERTIES_LENGTH
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.message import MessageConst
from rocketlite.spark import sink_rows
from rocketlite.spark.options import SinkOptions

# The batch entry head (protocol/batch.py ENTRY_HEAD: total, magic, body CRC, flag, body length)
# and the properties length, as numpy records so a whole task's heads are filled at once.
ENTRY_HEAD_DTYPE: Final = np.dtype(
    [("total", ">i4"), ("magic", ">i4"), ("crc", ">i4"), ("flag", ">i4"), ("body", ">i4")]
)
PROPERTIES_LENGTH_DTYPE: Final = np.dtype(">i2")
assert ENTRY_HEAD_DTYPE.itemsize + PROPERTIES_LENGTH_DTYPE.itemsize == ENTRY_OVERHEAD

Target = tuple[str, str | None, int | None]  # topic, broker name, queue id
_UNIQ_PAIR: Final = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX + "\x01"
_ZERO: Final = bytes(8)


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


def _digests(batch: _Batch) -> list[bytes]:
    joined = pc.binary_join_element_wise(batch.prefix, batch.sort_part, "\0", "").cast(pa.binary())
    content = pc.binary_join_element_wise(joined, batch.body, b"")
    blake2b = hashlib.blake2b
    return [blake2b(c, digest_size=16).digest() for c in content.to_pylist()]


def _target_order(targets: list[Target], uniq: list[str] | None) -> list[int]:
    """The reference's order: by (topic, broker or "", queue id or -1), then by id if given."""
    n = len(targets)
    single = not targets or targets.count(targets[0]) == n
    if single:
        return sorted(range(n), key=uniq.__getitem__) if uniq is not None else list(range(n))
    keys = [(t, b or "", -1 if q is None else q) for t, b, q in targets]
    if uniq is None:
        return sorted(range(n), key=keys.__getitem__)
    return sorted(range(n), key=lambda i: (keys[i], uniq[i]))


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
    prefix = sink_rows.id_prefix(query_id, batch_id, partition)
    blake2b = hashlib.blake2b
    uniq: list[str] | None = None
    if mode == "content":
        seen: dict[bytes, int] = {}
        uniq = []
        add = uniq.append
        for part in parts:
            for d in _digests(part):
                n = seen.get(d)
                if n is None:
                    seen[d] = 1
                    add(blake2b(prefix + d + _ZERO, digest_size=16).hexdigest().upper())
                else:
                    seen[d] = n + 1
                    add(blake2b(prefix + d + n.to_bytes(8, "big"), digest_size=16).hexdigest().upper())
    elif mode == "order":
        uniq = [
            blake2b(prefix + i.to_bytes(8, "big"), digest_size=16).hexdigest().upper()
            for i in range(len(targets))
        ]
    order = _target_order(targets, uniq if mode == "content" else None)
    texts: list[str] = []
    for p in parts:
        texts += p.text if isinstance(p.text, list) else p.text.to_pylist()
    if uniq is not None:
        texts = [f"{t}\x02{_UNIQ_PAIR}{u}" if t else _UNIQ_PAIR + u for t, u in zip(texts, uniq, strict=True)]
    return _assemble(parts, targets, uniq, texts, order)


def _assemble(
    parts: list[_Batch], targets: list[Target], uniq: list[str] | None, texts: list[str], order: list[int]
) -> Prepared:
    n = len(order)
    take = pa.array(order, pa.int64())
    bodies = (pa.concat_arrays([p.body for p in parts]) if parts else pa.array([], pa.binary())).take(take)
    props_text = pa.array(texts, pa.string()).take(take)
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
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(ENTRY_OVERHEAD + body_len + prop_len, out=offsets[1:])
    data = entries.buffers()[2] if n else pa.py_buffer(b"")
    start = int(np.frombuffer(entries.buffers()[1], np.int32)[entries.offset]) if n else 0
    return Prepared(
        [targets[i] for i in order],
        [uniq[i] for i in order] if uniq is not None else [""] * n,
        estimates,
        body_len,
        prop_len,
        offsets + start,
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
