"""Columnar record decoding and the raw-store reader's scanning, without a Spark session."""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

import numpy as np
import pyarrow as pa

from rocketlite.protocol.formats.record import MessageInner, blank_record, encode_record
from rocketlite.protocol.message import HostAddress, MessageSysFlag, make_msg_id
from rocketlite.spark.options import StoreOptions
from rocketlite.spark.records import (
    ARROW_SCHEMA,
    Stop,
    decode_batch,
    decode_batch_py,
    scan_positions,
    validate_positions,
)
from rocketlite.spark.store_source import SegmentRange, read_segment_range, resync
from tests.support.store import REAL_STORE

V4 = HostAddress.parse("10.1.2.3:10911")
V6 = HostAddress.parse("[fe80::1]:10911")


def record(
    i: int,
    props: str,
    *,
    body: bytes | None = None,
    topic: str = "T",
    offset: int = 0,
    sys_flag: int = 0,
    born: HostAddress = V4,
    store: HostAddress = V4,
) -> bytes:
    msg = MessageInner(
        topic, body if body is not None else f"body-{i}".encode() * (i % 5 + 1), born, store,
        queue_id=i % 3, sys_flag=sys_flag, born_timestamp=1_700_000_000_000 + i,
        store_timestamp=1_700_000_000_500 + i, reconsume_times=i % 2, properties_string=props,
        queue_offset=i, commit_log_offset=offset,
    )  # fmt: skip
    return encode_record(msg)


def log_of(records: Sequence[tuple[str, Mapping[str, Any]]]) -> tuple[bytes, list[int]]:
    """Records back to back with their PHYSICALOFFSET set to their position."""
    out = bytearray()
    starts = []
    for i, (props, kw) in enumerate(records):
        starts.append(len(out))
        out += record(i, props, offset=len(out), **kw)
    return bytes(out), starts


PROPS = [
    "UNIQ_KEY\x01AABBCC\x02TAGS\x01TagA\x02KEYS\x01k1 k2\x02WAIT\x01true",  # 4.9 style: no trailing separator
    "KEYS\x011632821159368\x02TAGS\x01TAG1\x02",  # older clients: trailing separator
    "",  # no properties at all: msgId falls back to the offsetMsgId
    "TAGS\x01A\x02TAGS\x01B\x02TAGS\x01C",  # repeated names: the last one wins
    "\x02\x02novalue\x02=\x01x\x02k\x01\x02\x01v\x02real\x01yes",  # junk items are dropped
    "a\x01b\x01c\x02ünïcødé\x01✓",  # value holding the name/value separator; multi-byte text
    "LONGER_THAN_8_BYTES\x011\x02LONGER_THAN_8_BYTEZ\x012\x02LONGER_THAN_8_BYTES\x013",
    "UNIQ_KEY\x01X\x02" + "\x02".join(f"p{j}\x01{j}" for j in range(40)) + "\x02p3\x01again",  # many items
]


def test_fast_decoder_matches_the_record_by_record_decoder() -> None:
    buf, starts = log_of([(p, {}) for p in PROPS] * 3)
    scan = scan_positions(buf, 0, len(buf), max_count=1000, base_offset=0, verify_crc=True)
    assert scan.stop is Stop.END and scan.positions.tolist() == starts and scan.next_pos == len(buf)
    fast = decode_batch(buf, scan.positions, "broker-x")
    slow = decode_batch_py(buf, scan.positions, "broker-x")
    assert fast.schema == ARROW_SCHEMA
    assert fast.to_pylist() == slow.to_pylist()
    rows = fast.to_pylist()
    assert rows[0]["msgId"] == "AABBCC" and rows[0]["tags"] == "TagA" and rows[0]["keys"] == "k1 k2"
    assert dict(rows[0]["properties"]) == {
        "UNIQ_KEY": "AABBCC",
        "TAGS": "TagA",
        "KEYS": "k1 k2",
        "WAIT": "true",
    }
    assert rows[1]["tags"] == "TAG1" and rows[1]["keys"] == "1632821159368"
    assert rows[2]["msgId"] == make_msg_id(V4, starts[2]) and rows[2]["properties"] == []
    assert rows[3]["tags"] == "C" and rows[3]["properties"] == [("TAGS", "C")]
    assert rows[4]["properties"] == [("=", "x"), ("real", "yes")]
    assert dict(rows[5]["properties"]) == {"a": "b\x01c", "ünïcødé": "✓"}
    assert dict(rows[6]["properties"]) == {"LONGER_THAN_8_BYTES": "3", "LONGER_THAN_8_BYTEZ": "2"}
    assert len(rows[7]["properties"]) == 41 and dict(rows[7]["properties"])["p3"] == "again"
    assert rows[0]["brokerName"] == "broker-x" and rows[0]["queueOffset"] == 0
    assert rows[5]["commitLogOffset"] == starts[5]
    assert rows[4]["bornTimestamp"].timestamp() * 1000 == 1_700_000_000_004
    assert rows[4]["storeTimestamp"].timestamp() * 1000 == 1_700_000_000_504


def test_unusual_records_take_the_slow_path_with_the_same_rows() -> None:
    payload = b"compress me " * 20
    buf, _ = log_of(
        [
            ("TAGS\x01v4", {}),
            ("TAGS\x01v6", {"born": V6, "store": V6}),
            ("TAGS\x01zip", {"body": zlib.compress(payload), "sys_flag": MessageSysFlag.COMPRESSED_FLAG}),
        ]
    )
    scan = scan_positions(buf, 0, len(buf), max_count=10, base_offset=0, verify_crc=True)
    assert len(scan.positions) == 3
    rows = decode_batch(buf, scan.positions).to_pylist()
    assert [r["tags"] for r in rows] == ["v4", "v6", "zip"]
    assert rows[2]["body"] == payload
    assert rows[1]["msgId"] == make_msg_id(V6, int(scan.positions[1]))
    # Properties that are not UTF-8 are decoded with replacement characters, like the broker does.
    bad = record(0, "", offset=0)
    raw = bytearray(record(0, "TAGS\x01ok\x02K\x01" + "x" * 4, offset=0))
    raw[-1] = 0xFF
    rows2 = decode_batch(bytes(raw), np.array([0])).to_pylist()
    assert rows2[0]["properties"][1] == ("K", "xxx\ufffd")
    assert decode_batch(bad, [0]).num_rows == 1


def test_scan_stops_at_blank_zeros_torn_tail_and_corruption() -> None:
    buf, starts = log_of([("TAGS\x01a", {})] * 5)
    # An end-of-file blank after the records.
    seg = buf + blank_record(64) + bytes(56)
    scan = scan_positions(seg, 0, len(seg), max_count=100, base_offset=0)
    assert scan.stop is Stop.BLANK and len(scan.positions) == 5 and scan.next_pos == len(buf)
    # Zeros after the records: the end of written data.
    scan = scan_positions(buf + bytes(100), 0, len(buf) + 100, max_count=100, base_offset=0)
    assert scan.stop is Stop.END and len(scan.positions) == 5
    # A torn tail: the last record cut short (runs past the data).
    torn = buf[: starts[4] + 50]
    scan = scan_positions(torn, 0, len(torn), max_count=100, base_offset=0)
    assert scan.stop is Stop.CORRUPT and len(scan.positions) == 4 and scan.next_pos == starts[4]
    # A torn tail in a pre-zeroed segment: the header made it, the rest is zeros.
    zeroed = bytearray(buf + bytes(300))
    zeroed[starts[4] + 40 : len(buf)] = bytes(len(buf) - starts[4] - 40)
    scan = scan_positions(bytes(zeroed), 0, len(zeroed), max_count=100, base_offset=0)
    assert scan.stop is Stop.CORRUPT and len(scan.positions) == 4 and "inconsistent" in scan.reason
    # A flipped body byte: only the CRC check sees it.
    flipped = bytearray(buf)
    flipped[starts[2] + 90] ^= 0xFF
    assert len(scan_positions(bytes(flipped), 0, len(buf), max_count=100, base_offset=0).positions) == 5
    scan = scan_positions(bytes(flipped), 0, len(buf), max_count=100, base_offset=0, verify_crc=True)
    assert scan.stop is Stop.CORRUPT and scan.next_pos == starts[2] and scan.reason == "body CRC mismatch"
    # A record that is not where its PHYSICALOFFSET says.
    scan = scan_positions(buf, 0, len(buf), max_count=100, base_offset=1000)
    assert scan.stop is Stop.CORRUPT and len(scan.positions) == 0 and "PHYSICALOFFSET" in scan.reason
    # Bad magic; and the limits.
    scan = scan_positions(b"\x00\x00\x00\x10\x12\x34\x56\x78" + bytes(8), 0, 16, max_count=10)
    assert scan.stop is Stop.CORRUPT and "magic" in scan.reason
    scan = scan_positions(buf, 0, len(buf), max_count=2)
    assert scan.stop is Stop.LIMIT and scan.next_pos == starts[2]
    scan = scan_positions(buf, starts[1], starts[3], max_count=100)
    assert scan.positions.tolist() == starts[1:3] and scan.stop is Stop.LIMIT


def test_validate_positions_and_resync() -> None:
    buf, starts = log_of([("TAGS\x01a", {})] * 6)
    assert validate_positions(buf, np.array(starts), 0, True) is None
    bad = validate_positions(buf, np.array([starts[0], starts[1] + 3, starts[2]]), 0, False)
    assert bad is not None and bad[0] == 1
    assert validate_positions(buf, np.array([starts[0], len(buf) - 10]), 0, False) == (
        1, "record runs past the end of the data",
    )  # fmt: skip
    assert resync(buf, 0, 0, len(buf)) == 0
    assert resync(buf, 0, 1, len(buf)) == starts[1]
    assert resync(buf, 0, starts[3] - 5, len(buf)) == starts[3]
    assert resync(buf, 0, starts[5] + 1, len(buf)) is None
    assert resync(buf, 7, 0, len(buf)) is None  # nothing is at the offsets it names


def _read(path: Path, base: int, ranges: list[tuple[int, int]], **opts: str) -> list[dict[str, Any]]:
    options = StoreOptions.parse({"path": str(path), **opts})
    rows: list[dict[str, Any]] = []
    for start, end in ranges:
        for batch in read_segment_range(options, SegmentRange(str(path), base, start, end)):
            rows.extend(batch.to_pylist())
    return rows


def test_segment_ranges_split_exactly_and_survive_damage(tmp_path: Path) -> None:
    buf, starts = log_of([(f"TAGS\x01t{i % 4}\x02KEYS\x01k{i}", {}) for i in range(200)])
    seg = tmp_path / "00000000000000000000"
    seg.write_bytes(buf + bytes(4096))
    whole = _read(seg, 0, [(0, len(buf) + 4096)])
    assert [r["queueOffset"] for r in whole] == list(range(200))
    # Byte ranges that cut records anywhere give every record exactly once.
    for step in (97, 1000, 4096, 7777):
        cuts = list(range(0, len(buf) + 4096, step))
        ranges = [(a, min(a + step, len(buf) + 4096)) for a in cuts]
        assert _read(seg, 0, ranges, rowsPerBatch="13") == whole
    # A topic filter.
    assert len(_read(seg, 0, [(0, len(buf))], topic="other")) == 0
    # Damage in the middle: that record is skipped, reading resumes at the next valid one.
    damaged = bytearray(buf + bytes(4096))
    damaged[starts[50] + 4 : starts[50] + 8] = b"\x00\x00\x00\x01"
    seg.write_bytes(bytes(damaged))
    rows = _read(seg, 0, [(0, len(damaged))])
    assert [r["queueOffset"] for r in rows] == [i for i in range(200) if i != 50]
    with pytest.raises(RuntimeError, match="damaged record"):
        _read(seg, 0, [(0, len(damaged))], failOnCorruption="true")
    # A torn tail: the last record half written, zeros after it: everything before it, cleanly.
    torn = bytearray(buf + bytes(4096))
    torn[starts[199] + 60 : len(buf)] = bytes(len(buf) - starts[199] - 60)
    seg.write_bytes(bytes(torn))
    rows = _read(seg, 0, [(0, len(torn) // 2), (len(torn) // 2, len(torn))])
    assert [r["queueOffset"] for r in rows] == list(range(199))


@pytest.mark.skipif(not REAL_STORE.is_dir(), reason="shared/testdata not present")
def test_real_rocketmq_commit_log_decodes() -> None:
    path = REAL_STORE / "commitlog" / "00000000000000000000"
    rows = _read(path, 0, [(0, path.stat().st_size)], brokerName="real")
    assert len(rows) == 47
    assert {r["topic"] for r in rows} == {"abc"} and [r["queueOffset"] for r in rows] == list(range(47))
    assert {r["body"] for r in rows} == {b"Once, there was a chance for me!"}
    assert {r["tags"] for r in rows} == {"TAG1"} and all(r["keys"] and r["keys"].isdigit() for r in rows)
    assert rows[0]["brokerName"] == "real" and rows[0]["msgId"] == "C0A8470100001FBB0000000000000000"
    assert rows[1]["commitLogOffset"] == 172


def test_empty_inputs() -> None:
    assert decode_batch(b"", []).num_rows == 0
    assert decode_batch(b"", []).schema == ARROW_SCHEMA
    scan = scan_positions(b"", 0, 0, max_count=10)
    assert scan.stop is Stop.END and len(scan.positions) == 0
    assert pa.Table.from_batches([decode_batch(b"", [])]).num_rows == 0


_PROPERTY_TEXT = st.lists(
    st.sampled_from(["\x01", "\x02", "a", "b", "TAGS", "KEYS", "UNIQ_KEY", "ü", "LONG_NAME_12345", "=", " "]),
    max_size=30,
).map("".join)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(_PROPERTY_TEXT, st.binary(max_size=40)), min_size=1, max_size=25))
def test_fast_and_slow_decoders_agree_on_any_properties(items: list[tuple[str, bytes]]) -> None:
    buf, _ = log_of([(props, {"body": body}) for props, body in items])
    scan = scan_positions(buf, 0, len(buf), max_count=1000, base_offset=0, verify_crc=True)
    assert len(scan.positions) == len(items)
    assert (
        decode_batch(buf, scan.positions).to_pylist() == decode_batch_py(buf, scan.positions, "").to_pylist()
    )
