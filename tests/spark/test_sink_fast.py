"""The sink's columnar path: the per-row reference (`sink_rows`) pinned to the Message-based way
rows were built before (so a replay by a newer version still finds what an older one stored),
the column path (`sink_batches`) pinned to the per-row reference, and the pipelined sends
against a real broker (no Spark needed)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from rocketlite.client.errors import ClientError, MessageIllegalError  # noqa: E402
from rocketlite.client.message import Message, MessageQueue  # noqa: E402
from rocketlite.embedded import EmbeddedCluster  # noqa: E402
from rocketlite.protocol.bodies.route import TopicConfig  # noqa: E402
from rocketlite.protocol.errors import ProtocolError  # noqa: E402
from rocketlite.protocol.formats.batch import (  # noqa: E402
    BatchEntry,
    decode_batch,
    encode_batch,
    encode_batch_columns,
)
from rocketlite.protocol.message import KEY_SEPARATOR, MessageConst, properties_to_string  # noqa: E402
from rocketlite.protocol.perm import PERM_READ  # noqa: E402
from rocketlite.spark import sink, sink_batches, sink_rows  # noqa: E402
from rocketlite.spark.options import SinkOptions  # noqa: E402
from tests.support.spark.session import wait_dispatched  # noqa: E402
from tests.support.topics import create_topic  # noqa: E402

texts = st.text(alphabet=st.characters(blacklist_characters="\x00\x01\x02", blacklist_categories=["Cs"]))
names = st.text(alphabet="abcKEYSTAG_", min_size=1, max_size=6)


# -- encode_batch_columns == encode_batch --------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=64), texts), max_size=12), st.integers(-(2**31), 2**31 - 1))
def test_columns_encoder_is_encode_batch(entries: list[tuple[bytes, str]], flag: int) -> None:
    bodies = [b for b, _ in entries]
    props = [p.encode("utf-8") for _, p in entries]
    expected = encode_batch([BatchEntry(flag, b, p) for b, p in entries])
    assert encode_batch_columns(bodies, props, flag) == expected
    assert decode_batch(expected) == [BatchEntry(flag, b, p) for b, p in entries]


def test_columns_encoder_refuses_what_encode_batch_refuses() -> None:
    long = "x" * 0x8000
    with pytest.raises(ProtocolError) as ref:
        encode_batch([BatchEntry(0, b"b", long)])
    with pytest.raises(ProtocolError) as fast:
        encode_batch_columns([b"b"], [long.encode()])
    assert str(ref.value) == str(fast.value)
    with pytest.raises(ValueError, match="bodies"):
        encode_batch_columns([b"a"], [])


# -- rows, ids and properties as the Message-based sink made them -------------------------------------
def _reference_message(options: SinkOptions, cols: dict[str, Any], i: int) -> Message:
    props = cols.get("properties")
    properties = (
        {k: v for k, v in (props[i] or []) if v is not None and k not in sink_rows.DROPPED_PROPERTIES}
        if props
        else {}
    )
    row_keys = cols["keys"][i] if "keys" in cols else None
    if isinstance(row_keys, list):
        row_keys = KEY_SEPARATOR.join(k for k in row_keys if k)
    return Message(
        options.topic or cols["topic"][i],
        cols["body"][i],
        tags=(cols["tags"][i] if "tags" in cols else None) or properties.pop(MessageConst.TAGS, None),
        keys=row_keys or properties.pop(MessageConst.KEYS, None),
        properties={k: v for k, v in properties.items() if k not in (MessageConst.TAGS, MessageConst.KEYS)},
    )


def _reference_digest(msg: Message, queue_id: int | None, broker: str | None) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for part in (msg.topic, str(queue_id), broker or ""):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    for k in sorted(msg.properties):
        h.update(k.encode("utf-8"))
        h.update(b"\1")
        h.update(msg.properties[k].encode("utf-8"))
        h.update(b"\2")
    h.update(b"\0")
    h.update(msg.body)
    return h.digest()


row_strategy = st.fixed_dictionaries(
    {
        "body": st.binary(min_size=1, max_size=40),
        "tags": st.one_of(st.none(), st.just(""), names),
        "keys": st.one_of(st.none(), st.lists(st.one_of(st.just(""), names), max_size=3)),
        "properties": st.one_of(
            st.none(),
            st.lists(
                st.tuples(st.one_of(names, st.sampled_from(["TAGS", "KEYS", "DELAY", "UNIQ_KEY"])), texts),
                max_size=4,
                unique_by=lambda kv: kv[0],
            ),
        ),
        "queueId": st.one_of(st.none(), st.integers(0, 3)),
    }
)


@settings(max_examples=100, deadline=None)
@given(st.lists(row_strategy, min_size=1, max_size=20))
def test_rows_and_ids_match_the_message_based_reference(rows: list[dict[str, Any]]) -> None:
    options = SinkOptions.parse({"nameServer": "x:1", "topic": "T"}, streaming=True)
    cols = {name: [r[name] for r in rows] for name in rows[0]}
    batch = pa.RecordBatch.from_pydict(
        cols,
        schema=pa.schema([
            ("body", pa.binary()), ("tags", pa.string()), ("keys", pa.list_(pa.string())),
            ("properties", pa.map_(pa.string(), pa.string())), ("queueId", pa.int32()),
        ]),
    )  # fmt: skip
    got = list(sink._rows(options, iter([batch])))
    expected_uniq = []
    seen: dict[bytes, int] = {}
    for i, row in enumerate(got):
        msg = _reference_message(options, cols, i)
        assert (row.topic, row.body, row.properties) == (msg.topic, msg.body, msg.properties)
        assert list(row.properties) == list(msg.properties)  # the order they are sent in
        digest = _reference_digest(msg, cols["queueId"][i], None)
        n = seen.get(digest, 0)
        seen[digest] = n + 1
        expected_uniq.append(sink_rows.uniq("q", "5", 2, digest + n.to_bytes(8, "big")))
    sink_rows.assign_ids(got, "content", "q", "5", 2)
    assert sorted(r.uniq for r in got) == sorted(expected_uniq)
    for row in got:
        row.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = row.uniq
    for row in got:  # chunking measures a row by its properties text: the same size as before
        text = sink_rows.properties_text(row)
        assert 64 + len(row.body) + (len(text) + 1 if text else 0) == sink_rows.entry_size(row)
        assert text == properties_to_string(row.message.properties)


# -- the column path (sink_batches) == the per-row reference (sink_rows) ------------------------------
def _reference_prepared(
    options: SinkOptions, batches: list[Any], mode: str
) -> tuple[list[Any], list[str], list[int], bytes]:
    rows = list(sink_rows.rows(options, iter(batches)))
    sink_rows.assign_ids(rows, mode, "query", "9", 4)
    if mode != "none":
        for row in rows:
            row.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = row.uniq
    entries = encode_batch([BatchEntry(0, r.body, sink_rows.properties_text(r)) for r in rows])
    return (
        [(r.topic, r.broker, r.queue_id) for r in rows],
        [r.uniq for r in rows],
        [sink_rows.entry_size(r) for r in rows],
        entries,
    )


column_rows = st.fixed_dictionaries(
    {
        "body": st.binary(max_size=300),
        "tags": st.one_of(st.none(), st.just(""), texts),
        "keys": st.one_of(st.none(), st.just(""), texts),
        "topic": st.sampled_from(["A", "B", "Ü"]),
        "queueId": st.one_of(st.none(), st.integers(0, 3)),
        "brokerName": st.one_of(st.none(), st.sampled_from(["b1", "b2"])),
    }
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(column_rows, min_size=1, max_size=30),
    st.sets(st.sampled_from(["tags", "keys", "topic", "queueId", "brokerName"])),
    st.sampled_from(["content", "order", "none"]),
    st.integers(1, 4),
    st.booleans(),
    st.booleans(),
)
def test_column_path_is_the_row_reference(
    rows: list[dict[str, Any]], columns: set[str], mode: str, pieces: int, text_body: bool, option_topic: bool
) -> None:
    """Targets, ids, order, chunking sizes and the encoded entries, over one task's batches of any
    of the column shapes (string or binary body, with or without each optional column; a keys
    array or a properties map goes through the reference's rows, covered above)."""
    if "topic" not in columns:
        option_topic = True
    options = SinkOptions.parse(
        {"nameServer": "x:1", **({"topic": "Opt"} if option_topic else {})}, streaming=True
    )
    types = {
        "body": pa.string() if text_body else pa.binary(), "tags": pa.string(), "keys": pa.string(),
        "topic": pa.string(), "queueId": pa.int32(), "brokerName": pa.string(),
    }  # fmt: skip
    names = ["body", *sorted(columns)]
    if text_body:
        for r in rows:
            r["body"] = r["body"].decode("latin-1")
    schema = pa.schema([(n, types[n]) for n in names])
    step = max(1, len(rows) // pieces)
    batches = [
        pa.RecordBatch.from_pydict({n: [r[n] for r in rows[i : i + step]] for n in names}, schema=schema)
        for i in range(0, len(rows), step)
    ]
    prepared = sink_batches.prepare(options, iter(batches), mode, "query", "9", 4)
    targets, uniq, estimates, entries = _reference_prepared(options, batches, mode)
    assert prepared.targets == targets
    assert prepared.uniq == uniq
    assert prepared.estimates == estimates
    assert prepared.body(0, len(prepared)) == entries
    assert decode_batch(prepared.body(0, len(prepared))) == decode_batch(entries)
    # chunks are cut where the reference cuts them (batchSize messages, batchBytes by entry_size)
    sender = sink._Sender.__new__(sink._Sender)
    sender.options = SinkOptions.parse(
        {"nameServer": "x:1", "batchSize": "4", "batchBytes": "1024"}, streaming=True
    )
    sender.prepared = prepared
    sender._queues = {t: [MessageQueue(t, "b1", q) for q in range(4)] for t in ("A", "B", "Ü", "Opt")}
    ref_rows = list(sink_rows.rows(options, iter(batches)))
    sink_rows.assign_ids(ref_rows, mode, "query", "9", 4)
    if mode != "none":
        for row in ref_rows:
            row.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = row.uniq
    queues = {q.queue_id for q in sender._queues["A"]}
    if all(r.queue_id in queues | {None} and r.broker in (None, "b1") for r in ref_rows):
        cuts = [c.start for c in sender.chunks(0)]
        assert cuts == sink_rows.chunk_cuts(ref_rows, 4, 1024)


def test_column_path_refuses_what_the_reference_refuses() -> None:
    options = SinkOptions.parse({"nameServer": "x:1"}, streaming=True)
    no_topic = pa.RecordBatch.from_pydict({"body": [b"a", b"b"], "topic": ["T", None]})
    with pytest.raises(ValueError, match="row 1 of a batch has no topic"):
        list(sink_rows.rows(options, iter([no_topic])))
    with pytest.raises(ValueError, match="row 1 of a batch has no topic"):
        sink_batches.prepare(options, iter([no_topic]), "content", "q", "1", 0)
    null_body = pa.RecordBatch.from_pydict({"body": pa.array([b"a", None], pa.binary()), "topic": ["T", "T"]})
    with pytest.raises(ValueError, match="row 1 of a batch has a null body"):
        list(sink_rows.rows(options, iter([null_body])))
    with pytest.raises(ValueError, match="row 1 of a batch has a null body"):
        sink_batches.prepare(options, iter([null_body]), "content", "q", "1", 0)
    long = pa.RecordBatch.from_pydict({"body": [b"a"], "topic": ["T"], "tags": ["x" * 0x8000]})
    prepared = sink_batches.prepare(options, iter([long]), "content", "q", "1", 0)
    with pytest.raises(ProtocolError) as fast:
        sink_batches.check_lengths(prepared, 0, 1)
    with pytest.raises(ProtocolError) as ref:
        encode_batch([BatchEntry(0, b"a", "TAGS\x01" + "x" * 0x8000 + "\x02UNIQ_KEY\x01" + prepared.uniq[0])])
    assert str(fast.value) == str(ref.value)


# -- against a real broker ------------------------------------------------------------------------------
def _batch(n: int, prefix: str = "m") -> Any:
    return pa.RecordBatch.from_pydict(
        {
            "body": pa.array([f"{prefix}-{i}".encode() * 8 for i in range(n)], pa.binary()),
            "tags": pa.array([f"t{i % 3}" for i in range(n)], pa.string()),
            "keys": pa.array([f"k{i}" for i in range(n)], pa.string()),
        }
    )


def _stored(cluster: EmbeddedCluster, topic: str) -> int:
    wait_dispatched(cluster)
    store = cluster.broker.store
    return sum(store.get_max_offset_in_queue(topic, q) for q in range(4))


def test_pipelined_sends_are_idempotent(
    spark_cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = spark_cluster
    create_topic(c, "SinkFastOut", 4)
    opts = SinkOptions.parse(
        {"nameServer": c.namesrv_addr, "topic": "SinkFastOut", "batchSize": "50"}, streaming=True
    )
    monkeypatch.setattr(sink, "_task_context", lambda: (1, "3", "query-fast"))
    first = sink.write_partition(opts, iter([_batch(700), _batch(300, "n")]), streaming=True)
    assert (first.sent, first.skipped, first.chunks) == (1000, 0, 20)
    assert _stored(c, "SinkFastOut") == 1000
    again = sink.write_partition(opts, iter([_batch(300, "n"), _batch(700)]), streaming=True)
    assert (again.sent, again.skipped) == (0, 1000)
    assert _stored(c, "SinkFastOut") == 1000


def test_refusals_fail_the_task_with_the_broker_error(
    spark_cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = spark_cluster
    create_topic(c, "SinkFastRefused", 4)
    opts = SinkOptions.parse({"nameServer": c.namesrv_addr, "topic": "SinkFastRefused"}, streaming=True)
    monkeypatch.setattr(sink, "_task_context", lambda: (0, "1", "query-refused"))
    empty = pa.RecordBatch.from_pydict({"body": pa.array([b"x", b""], pa.binary())})
    with pytest.raises(MessageIllegalError, match="body is empty"):
        sink.write_partition(opts, iter([empty]), streaming=True)
    sink.write_partition(opts, iter([_batch(10)]), streaming=True)  # routes cached: writable
    c.broker.topics.update(TopicConfig("SinkFastRefused", 4, 4, perm=PERM_READ))
    monkeypatch.setattr(sink, "_task_context", lambda: (0, "2", "query-refused"))
    with pytest.raises(ClientError, match="NO_PERMISSION"):  # after the sink's retries
        sink.write_partition(opts, iter([_batch(200)]), streaming=True)
