"""Index files and the index service: RocketMQ 4.x byte layout, hash chains, rolling, recovery."""

from __future__ import annotations

import random
import struct
import threading
import time
from array import array
from datetime import datetime
from pathlib import Path

import pytest

from rocketlite.clock import ManualClock
from rocketlite.protocol.formats.index_layout import ENTRY, HEADER, index_file_size
from rocketlite.protocol.formats.record import DispatchRequest
from rocketlite.protocol.message import index_key_hash
from rocketlite.store.index.file import IndexFile, index_file_name, next_index_file_name
from rocketlite.store.index.service import IndexService

T0 = 1_700_000_000_000
SLOTS = 100
ENTRIES = 400
FOREVER = 2**62


# -- independent reference ----------------------------------------------------------------------
def ref_hash_code(s: str) -> int:
    """Java String.hashCode, written independently of rocketlite.protocol.message."""
    units = struct.unpack(
        f">{len(s.encode('utf-16-be', 'surrogatepass')) // 2}H", s.encode("utf-16-be", "surrogatepass")
    )
    h = 0
    for u in units:
        h = (h * 31 + u) % 2**32
    return h - 2**32 if h >= 2**31 else h


def ref_index_hash(s: str) -> int:
    h = abs(ref_hash_code(s))
    return 0 if h == 2**31 else h


class RefIndexFile:
    """IndexFile.putKey transcribed from the Java source onto a bytearray."""

    def __init__(self, slots: int, entries: int, end_off: int = 0, end_ts: int = 0) -> None:
        self.slots, self.entries = slots, entries
        self.buf = bytearray(40 + slots * 4 + entries * 20)
        self.begin_ts = self.end_ts = end_ts
        self.begin_off = self.end_off = end_off
        self.slot_count, self.count = 0, 1

    def put(self, key: str, off: int, ts: int) -> bool:
        if self.count >= self.entries:
            return False
        kh = ref_index_hash(key)
        abs_slot = 40 + (kh % self.slots) * 4
        slot_value = struct.unpack_from(">i", self.buf, abs_slot)[0]
        if slot_value <= 0 or slot_value > self.count:
            slot_value = 0
        diff = int((ts - self.begin_ts) / 1000)  # Java truncating division
        if self.begin_ts <= 0:
            diff = 0
        elif diff > 2**31 - 1:
            diff = 2**31 - 1
        elif diff < 0:
            diff = 0
        pos = 40 + self.slots * 4 + self.count * 20
        struct.pack_into(">i", self.buf, pos, kh)
        struct.pack_into(">q", self.buf, pos + 4, off)
        struct.pack_into(">i", self.buf, pos + 12, diff)
        struct.pack_into(">i", self.buf, pos + 16, slot_value)
        struct.pack_into(">i", self.buf, abs_slot, self.count)
        if self.count <= 1:
            self.begin_off, self.begin_ts = off, ts
        if slot_value == 0:
            self.slot_count += 1
        self.count += 1
        self.end_off, self.end_ts = off, ts
        return True

    def image(self) -> bytes:
        struct.pack_into(
            ">qqqqii",
            self.buf,
            0,
            self.begin_ts,
            self.end_ts,
            self.begin_off,
            self.end_off,
            self.slot_count,
            self.count,
        )
        return bytes(self.buf)


def min_value_suffix(prefix: str) -> str:
    """A key k with (prefix + k).hashCode() == Integer.MIN_VALUE (index hash 0)."""
    rng = random.Random(1)
    while True:
        head = "".join(rng.choice("abcdefgh") for _ in range(6))
        rest = (-(2**31) - ref_hash_code(prefix + head) * 31**2) % 2**32
        hi, lo = divmod(rest, 31)
        if hi <= 0xFFFF and not 0xD800 <= hi <= 0xDFFF:
            key = head + chr(hi) + chr(lo)
            assert ref_hash_code(prefix + key) == -(2**31)
            return key


def req(
    offset: int,
    ts: int,
    *,
    keys: str = "",
    uniq: str | None = None,
    topic: str = "TopicTest",
    sys_flag: int = 0,
) -> DispatchRequest:
    return DispatchRequest(topic, 0, offset, 100, 0, ts, offset // 100, keys, uniq, sys_flag, 0)


def service(
    tmp_path: Path, clock: ManualClock | None = None, slots: int = SLOTS, entries: int = ENTRIES
) -> IndexService:
    svc = IndexService(tmp_path / "index", slots, entries, clock or ManualClock(T0))
    svc.load(True, 0)
    return svc


def query(
    svc: IndexService, key: str, begin: int = 0, end: int = FOREVER, topic: str = "TopicTest"
) -> list[int]:
    return svc.query_offset(topic, key, 64, begin, end).phy_offsets


# -- hash facts ---------------------------------------------------------------------------------
def test_java_hash_facts() -> None:
    assert ref_hash_code("TopicTest#key1") == -1655984460
    assert index_key_hash("TopicTest#key1") == 1655984460
    assert index_key_hash("polygenelubricants") == 0  # hashCode is Integer.MIN_VALUE
    assert ref_hash_code("Aa") == ref_hash_code("BB") == 2112


@pytest.mark.parametrize("batch", [1, 50])
def test_service_hash_matches_java(tmp_path: Path, batch: int) -> None:
    """Scalar (small batches) and numpy paths hash `topic#key` exactly as String.hashCode does."""
    rng = random.Random(7)
    alphabet = "abcXYZ09-_#  \u00e9\u4e2d\U0001f600"
    keys = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(300)]
    keys += ["key1", "x" * 500, min_value_suffix("T0#"), "lone\ud800surrogate"]
    svc = service(tmp_path, slots=1, entries=10_000)
    reqs = [req(100 * i, T0, keys=k, topic=f"T{i % 3}") for i, k in enumerate(keys)]
    for i in range(0, len(reqs), batch):
        svc.build_index_batch(reqs[i : i + batch])
    f = svc.files[-1]
    expected = [ref_index_hash(f"{r.topic}#{k}") for r in reqs for k in r.keys.split(" ") if k]
    got = [ENTRY.unpack_from(f._mm, 40 + 4 + n * 20)[0] for n in range(1, f.index_count)]
    assert got == expected
    svc.close()


# -- IndexFile ----------------------------------------------------------------------------------
def test_file_bytes_after_one_key(tmp_path: Path) -> None:
    path = tmp_path / "20231114221320000"
    f = IndexFile(path, SLOTS, ENTRIES)
    assert f.put_key("TopicTest#key1", 4242, T0 + 1234)
    f.flush()
    data = path.read_bytes()
    assert len(data) == 40 + SLOTS * 4 + ENTRIES * 20 == index_file_size(SLOTS, ENTRIES)
    kh = 1655984460
    assert data[:40] == struct.pack(">qqqqii", T0 + 1234, T0 + 1234, 4242, 4242, 1, 2)
    slot_pos = 40 + (kh % SLOTS) * 4
    assert data[slot_pos : slot_pos + 4] == struct.pack(">i", 1)
    entry_pos = 40 + SLOTS * 4 + 1 * 20
    assert data[entry_pos : entry_pos + 20] == struct.pack(">iqii", kh, 4242, 0, 0)
    rest = bytearray(data)
    rest[:40] = bytes(40)
    rest[slot_pos : slot_pos + 4] = bytes(4)
    rest[entry_pos : entry_pos + 20] = bytes(20)
    assert not any(rest)
    f.close()


def test_file_matches_java_transcription(tmp_path: Path) -> None:
    rng = random.Random(3)
    slots, entries = 7, 300
    f = IndexFile(tmp_path / "a", slots, entries, end_phy_offset=999, end_timestamp=T0 - 5000)
    ref = RefIndexFile(slots, entries, end_off=999, end_ts=T0 - 5000)
    ts = T0
    for i in range(entries + 5):
        key = f"T#{rng.randint(0, 60)}"
        ts += rng.randint(-1500, 4000)
        assert f.put_key(key, 1000 + i, ts) == ref.put(key, 1000 + i, ts)
    f.flush()
    assert (tmp_path / "a").read_bytes() == ref.image()
    f.close()


def test_run_put_matches_scalar(tmp_path: Path) -> None:
    """`put_run` (one `speedups.index_put` call; tests/store/test_native_dispatch.py pins the
    compiled one to its reference) writes the bytes and header that repeated `put_hash` calls
    do, in runs of any length, slot chains inside a run and corrupt slot values (past
    indexCount, negative: empty, as Java takes them) included."""
    rng = random.Random(5)
    slots, entries = 13, 500
    hashes = array("q", [index_key_hash(f"k{rng.randint(0, 40)}") for _ in range(600)])
    offs = array("q", range(0, 6000, 10))
    stamps = array("q", [T0])
    for _ in range(599):
        stamps.append(stamps[-1] + rng.randint(-900, 3000))
    a = IndexFile(tmp_path / "a", slots, entries)
    b = IndexFile(tmp_path / "b", slots, entries)
    for f in (a, b):
        struct.pack_into(">i", f._mm, 40 + 4 * 3, 77)
        struct.pack_into(">i", f._mm, 40 + 4 * 5, -3)
    for i in range(600):
        a.put_hash(hashes[i], offs[i], stamps[i])
    pos = 0
    for size in (1, 2, 50, 200, 400):
        pos += b.put_run(hashes[: pos + size], offs[: pos + size], stamps[: pos + size], pos)
    assert pos == entries - 1 and b.put_run(hashes, offs, stamps, pos) == 0
    a.flush()
    b.flush()
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()
    assert (a.hash_slot_count, a.index_count) == (b.hash_slot_count, b.index_count)
    assert (a.end_phy_offset, a.end_timestamp) == (b.end_phy_offset, b.end_timestamp)
    a.close()
    b.close()


def test_file_full_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "f"
    f = IndexFile(path, 10, 5)
    for i in range(4):
        assert f.put_key(f"T#k{i}", i * 10, T0 + i * 1000)
    assert f.is_write_full
    assert not f.put_key("T#x", 99, T0)
    f.close()
    with pytest.raises(ValueError, match="size"):
        IndexFile(path, 11, 5)
    g = IndexFile(path, 10, 5)
    assert (g.index_count, g.begin_phy_offset, g.end_phy_offset) == (5, 0, 30)
    assert (g.begin_timestamp, g.end_timestamp, g.hash_slot_count) == (T0, T0 + 3000, 4)
    assert g.select_phy_offsets("T#k2", 10, 0, FOREVER) == [20]
    g.destroy()
    assert not path.exists()


def test_unflushed_header_reads_as_empty(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "f", 10, 5)
    f.put_key("T#a", 1, T0)
    g = IndexFile(tmp_path / "f", 10, 5)  # the header was never flushed
    assert g.index_count == 1 and g.end_timestamp == 0
    assert g.select_phy_offsets("T#a", 10, 0, FOREVER) == []
    g.destroy()
    f.destroy()


def test_time_matched(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "f", 10, 5)
    f.put_key("T#a", 1, 100)
    f.put_key("T#b", 2, 200)
    assert f.is_time_matched(50, 250)
    assert f.is_time_matched(150, 300)
    assert f.is_time_matched(0, 100)
    assert f.is_time_matched(200, 300)
    assert not f.is_time_matched(201, 300)
    assert not f.is_time_matched(0, 99)
    f.close()


def test_file_names() -> None:
    ms = T0 + 123
    expected = datetime.fromtimestamp(ms / 1000).strftime("%Y%m%d%H%M%S") + "123"
    assert index_file_name(ms) == expected
    assert len(expected) == 17
    assert next_index_file_name(ms, None) == expected
    assert next_index_file_name(ms, expected) > expected
    assert next_index_file_name(ms, "20991231235959999") == "21000101000000000"


# -- IndexService -------------------------------------------------------------------------------
def test_put_and_query_many(tmp_path: Path) -> None:
    svc = service(tmp_path, entries=5000)
    reqs = [req(i * 100, T0 + i, keys=f"k{i} shared", uniq=f"U{i:032X}") for i in range(1000)]
    svc.build_index_batch(reqs[:500])
    for r in reqs[500:]:
        svc.build_index(r)
    for i in range(0, 1000, 37):
        assert i * 100 in query(svc, f"k{i}")
        assert i * 100 in query(svc, f"U{i:032X}")
    shared = query(svc, "shared")
    assert shared == [i * 100 for i in range(999, 999 - 64, -1)]  # newest first, capped at 64
    res = svc.query_offset("TopicTest", "shared", 10, 0, FOREVER)
    assert len(res.phy_offsets) == 10
    assert (res.index_last_update_timestamp, res.index_last_update_phyoffset) == (T0 + 999, 99_900)
    assert query(svc, "k5", topic="Other") == []
    svc.close()


def test_hash_collisions_return_both(tmp_path: Path) -> None:
    svc = service(tmp_path)
    svc.build_index(req(100, T0, keys="Aa"))
    svc.build_index(req(200, T0, keys="BB"))
    svc.build_index(req(300, T0, keys="Ab"))
    assert sorted(query(svc, "Aa")) == [100, 200]
    assert sorted(query(svc, "BB")) == [100, 200]
    assert query(svc, "Ab") == [300]
    svc.close()


def test_time_range_filter(tmp_path: Path) -> None:
    svc = service(tmp_path)
    for i in range(10):
        svc.build_index(req(i * 100, T0 + i * 10_000, keys="k"))
    assert sorted(query(svc, "k", T0 + 20_000, T0 + 50_000)) == [200, 300, 400, 500]
    assert query(svc, "k", T0 + 90_001, FOREVER) == []
    assert query(svc, "k", 0, T0 - 1) == []
    svc.close()


def test_skips_rollback_and_already_indexed(tmp_path: Path) -> None:
    svc = service(tmp_path)
    svc.build_index_batch(
        [
            req(100, T0, keys="a"),
            req(200, T0, keys="rb", sys_flag=0xC),
            req(300, T0, keys="prep", sys_flag=0x4),
            req(400, T0, keys="commit", sys_flag=0x8),
            req(50, T0, keys="old"),  # below endPhyOffset: already indexed
            req(500, T0, keys=" x  y "),
        ]
    )
    svc.build_index(req(450, T0, keys="late"))
    assert query(svc, "rb") == [] and query(svc, "old") == [] and query(svc, "late") == []
    assert query(svc, "prep") == [300] and query(svc, "commit") == [400]
    assert query(svc, "x") == [500] and query(svc, "y") == [500]
    assert svc.files[-1].index_count == 1 + 5
    svc.close()


def test_roll_when_full_and_query_across_files(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    svc = service(tmp_path, clock, slots=10, entries=21)  # 20 entries per file
    for i in range(50):
        clock.advance(1)
        svc.build_index(req(i * 100, T0 + i * 1000, keys=f"k{i} same"))
    files = svc.files
    assert len(files) == 5  # 100 entries, 20 per file
    assert [f.name for f in files] == sorted(f.name for f in files)
    assert files[1].begin_phy_offset == 1000 and files[0].end_phy_offset == 900
    assert query(svc, "k3") == [300] and query(svc, "k47") == [4700]
    assert query(svc, "same") == [i * 100 for i in range(49, -1, -1)]
    assert sorted(query(svc, "same", T0 + 12_000, T0 + 14_000)) == [1200, 1300, 1400]
    svc.close()


def test_rolled_file_begins_where_previous_ended(tmp_path: Path) -> None:
    svc = service(tmp_path, slots=10, entries=3)
    svc.build_index(req(100, T0 + 1000, keys="a b"))
    svc.build_index(req(200, T0 + 5000, keys="c"))  # creates the second file before putting
    first, second = svc.files
    assert first.is_write_full and second.index_count == 2
    assert (second.begin_phy_offset, second.begin_timestamp) == (200, T0 + 5000)
    # Java computes the first entry's timeDiff against the inherited begin (T0+1000): 4 seconds
    entry = ENTRY.unpack_from(second._mm, 40 + 10 * 4 + 20)
    assert entry == (index_key_hash("TopicTest#c"), 200, 4, 0)
    svc.close()


def test_batch_equals_one_by_one(tmp_path: Path) -> None:
    rng = random.Random(11)
    reqs = []
    off = 0
    for i in range(700):
        off += rng.randint(50, 300)
        keys = " ".join(f"k{rng.randint(0, 80)}" for _ in range(rng.randint(0, 3)))
        uniq = None if i % 5 == 0 else ("" if i % 97 == 0 else f"{i:032X}")
        topic = rng.choice(["A", "BB", "\u4e3b\u9898"])
        reqs.append(req(off, T0 + i * 300 + rng.randint(-500, 500), keys=keys, uniq=uniq, topic=topic))
        if i % 50 == 0:
            reqs.append(req(off - 1, T0, keys="behind"))
    one = IndexService(tmp_path / "one", 17, 97, ManualClock(T0))
    many = IndexService(tmp_path / "many", 17, 97, ManualClock(T0))
    one.load(True, 0)
    many.load(True, 0)
    for r in reqs:
        one.build_index(r)
    pos = 0
    while pos < len(reqs):
        n = rng.randint(1, 120)
        many.build_index_batch(reqs[pos : pos + n])
        pos += n
    assert one.flush() == many.flush() > 0
    names = [f.name for f in one.files]
    assert names == [f.name for f in many.files] and len(names) > 5
    for name in names:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "many" / name).read_bytes()
    one.close()
    many.close()


def test_reopen_keeps_data(tmp_path: Path) -> None:
    svc = service(tmp_path, slots=10, entries=21)
    for i in range(30):
        svc.build_index(req(i * 100, T0 + i * 1000, keys=f"k{i}"))
    svc.close()
    again = service(tmp_path, slots=10, entries=21)
    assert len(again.files) == 2
    assert query(again, "k5") == [500] and query(again, "k29") == [2900]
    again.build_index(req(2900, T0, keys="dup"))  # == endPhyOffset: Java indexes it again
    again.build_index(req(2800, T0, keys="older"))
    assert query(again, "dup") == [2900] and query(again, "older") == []
    again.close()


def test_abnormal_load_drops_files_newer_than_checkpoint(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    svc = service(tmp_path, clock, slots=10, entries=11)  # 10 entries per file
    for i in range(25):
        clock.advance(1)
        svc.build_index(req(i * 100, T0 + i * 1000, keys=f"k{i}"))
    assert svc.flush() == T0 + 24_000
    checkpoint = svc.files[0].end_timestamp  # T0 + 9000
    svc.close()
    (tmp_path / "index" / "20991231235959999.alloc").write_bytes(b"torn")
    kept = service(tmp_path, slots=10, entries=11)
    assert len(kept.files) == 3
    kept.close()
    svc2 = IndexService(tmp_path / "index", 10, 11, clock)
    svc2.load(False, checkpoint)
    assert len(svc2.files) == 1 and len(list((tmp_path / "index").iterdir())) == 1
    assert query(svc2, "k3") == [300] and query(svc2, "k15") == []
    svc2.build_index(req(1000, T0 + 10_000, keys="k10"))  # the reput rebuilds from there
    assert query(svc2, "k10") == [1000]
    svc2.close()


def test_delete_expired(tmp_path: Path) -> None:
    svc = service(tmp_path, slots=10, entries=11)
    for i in range(35):
        svc.build_index(req(i * 100, T0 + i, keys=f"k{i}"))
    assert [f.end_phy_offset for f in svc.files] == [900, 1900, 2900, 3400]
    assert svc.delete_expired(900) == 0
    assert svc.delete_expired(2000) == 2
    assert [f.end_phy_offset for f in svc.files] == [2900, 3400]
    assert svc.delete_expired(10**9) == 1  # never the last file
    assert len(svc.files) == 1 and len(list((tmp_path / "index").iterdir())) == 1
    assert query(svc, "k34") == [3400] and query(svc, "k1") == []
    svc.close()


def test_truncate(tmp_path: Path) -> None:
    svc = service(tmp_path, slots=10, entries=11)
    for i in range(25):
        svc.build_index(req(i * 100, T0 + i, keys=f"k{i}"))
    assert svc.truncate(1500) == 1  # the third file begins at 2000
    assert [f.begin_phy_offset for f in svc.files] == [0, 1000]
    assert svc.files[-1].end_phy_offset == 1500
    svc.build_index(req(1500, T0 + 100, keys="new"))  # rewritten records are indexed again
    assert query(svc, "new") == [1500]
    assert len(svc.files) == 3  # the second file was full: "new" went to a new one
    assert svc.truncate(0) == 3
    assert not svc.files
    svc.close()


def test_flush_and_destroy(tmp_path: Path) -> None:
    svc = service(tmp_path)
    assert svc.flush() == 0
    assert not svc.has_files() and svc.end_phy_offset() == svc.end_timestamp() == 0
    svc.build_index(req(100, T0 + 7, keys="a"))
    assert svc.has_files() and (svc.end_phy_offset(), svc.end_timestamp()) == (100, T0 + 7)
    assert svc.flush() == T0 + 7
    assert svc.flush() == T0 + 7  # nothing dirty: same answer
    raw = next((tmp_path / "index").iterdir()).read_bytes()
    assert HEADER.unpack_from(raw) == (T0 + 7, T0 + 7, 100, 100, 1, 2)
    svc.destroy()
    assert list((tmp_path / "index").iterdir()) == []


def test_queries_during_build(tmp_path: Path) -> None:
    svc = service(tmp_path, slots=50, entries=200)
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not stop.is_set():
                for off in query(svc, "k"):
                    assert off % 100 == 0
                svc.flush()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=reader)
    t.start()
    deadline = time.monotonic() + 10
    for i in range(3000):
        svc.build_index_batch([req((i * 3 + j) * 100, T0 + i, keys="k") for j in range(3)])
        if i % 500 == 0:
            svc.delete_expired(i * 300)
        assert time.monotonic() < deadline
    stop.set()
    t.join()
    assert not errors
    assert query(svc, "k") == [i * 100 for i in range(8999, 8999 - 64, -1)]
    svc.close()
