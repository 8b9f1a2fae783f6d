"""`format("rocketmq-store")`: raw reads of a store written by our broker (with a torn tail), and of
the real RocketMQ 4.x commit log in shared/testdata, on the run's one Spark session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from rocketlite.embedded import embedded
from rocketlite.protocol.formats.record import SIZE_MAGIC, decode_record
from tests.support.spark.session import produce
from tests.support.store import REAL_STORE
from tests.support.topics import create_topic

SEGMENT = 64 * 1024


def _write_store(root: Path) -> list[tuple[str, str, bytes]]:
    """Messages on 3 topics through a real broker with 64 KiB segments; (topic, msgId, body) each."""
    sent: list[tuple[str, str, bytes]] = []
    with embedded(root, store_maped_file_size_commit_log=SEGMENT) as cluster:
        for topic, queues, n in (("StoreA", 2, 150), ("StoreB", 1, 60), ("StoreC", 3, 90)):
            create_topic(cluster, topic, queues)
            bodies = [f"{topic}-{i}-".encode() + bytes(100 + i * 7 % 400) for i in range(n)]
            results = produce(cluster, topic, bodies, tags=[f"t{i % 2}" for i in range(n)])
            sent.extend((topic, r.msg_id, b) for r, b in zip(results, bodies, strict=True))
    return sent


def _tear_tail(commitlog: Path) -> int:
    """Half-write one more record after the last one of the last segment holding data."""
    segments = sorted(p for p in commitlog.iterdir() if p.name.isdigit())
    for seg in reversed(segments):
        data = bytearray(seg.read_bytes())
        pos, last = 0, None
        while pos + 8 <= len(data):
            total, magic = SIZE_MAGIC.unpack_from(data, pos)
            if total <= 0 or magic != -626843481:
                break
            last = pos
            pos += total
        if last is None:
            continue
        record = bytearray(data[last:pos])
        record[28:36] = (int(seg.name) + pos).to_bytes(8, "big")  # it names its own offset
        data[pos : pos + 70] = record[:70]  # the header made it to disk, the rest did not
        seg.write_bytes(bytes(data))
        assert decode_record(bytes(record)).topic.startswith("Store")
        return pos
    raise AssertionError("no data in the commit log")


def _rows(spark: Any, path: Path, **options: str) -> list[Any]:
    reader = spark.read.format("rocketmq-store")
    for k, v in options.items():
        reader = reader.option(k, v)
    rows: list[Any] = reader.load(str(path)).collect()
    return rows


def test_store_reader_over_our_broker_store_with_torn_tail(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "store"
    sent = _write_store(root)
    expected = sorted(sent)
    _tear_tail(root / "commitlog")
    rows = _rows(spark, root, brokerName="broker-a")
    assert sorted((r.topic, r.msgId, r.body) for r in rows) == expected
    assert {r.brokerName for r in rows} == {"broker-a"}
    segments = [p for p in (root / "commitlog").iterdir() if p.name.isdigit()]
    assert len(segments) >= 3  # the data crossed segments (end-of-file blank records)
    # Byte ranges far smaller than a segment: the same rows, once each.
    small = _rows(spark, root, maxBytesPerPartition="4096", verifyCrc="false")
    assert sorted((r.topic, r.msgId, r.body) for r in small) == expected
    # Consume-queue order: per queue, queue offsets 0..n-1 in order.
    by_queue = _rows(spark, root, useConsumeQueue="true", topicPattern="Store[AC]")
    assert sorted((r.topic, r.msgId, r.body) for r in by_queue) == [e for e in expected if e[0] != "StoreB"]
    queues: dict[tuple[str, int], list[int]] = {}
    for r in by_queue:
        queues.setdefault((r.topic, r.queueId), []).append(r.queueOffset)
    assert all(offs == list(range(len(offs))) for offs in queues.values()) and len(queues) == 5
    # Topic filter; the commit-log directory itself as the path.
    only_b = _rows(spark, root / "commitlog", topic="StoreB")
    assert sorted((r.topic, r.msgId, r.body) for r in only_b) == [e for e in expected if e[0] == "StoreB"]


@pytest.mark.skipif(not REAL_STORE.is_dir(), reason="shared/testdata not present")
def test_store_reader_over_the_real_rocketmq_store(spark: Any) -> None:
    df = spark.read.format("rocketmq-store").option("brokerName", "real-broker").load(str(REAL_STORE))
    rows = df.orderBy("queueOffset").collect()
    assert len(rows) == 47
    assert [r.queueOffset for r in rows] == list(range(47)) and {r.queueId for r in rows} == {0}
    assert {(r.topic, r.tags, r.body) for r in rows} == {("abc", "TAG1", b"Once, there was a chance for me!")}
    assert rows[0].properties == {"0": "imagoodperson0", "KEYS": "1632821159368", "TAGS": "TAG1"}
    assert rows[0].msgId == "C0A8470100001FBB0000000000000000" and rows[46].commitLogOffset == 46 * 172
    assert rows[0].brokerName == "real-broker" and rows[0].storeTimestamp.year == 2021
