"""The store's read-side codecs are pinned to their references, byte for byte.

`store.codec.speedups` chooses the compiled `_native/_dispatch` over `scan_ref` and
`dispatch_ref`; these property tests feed the chosen implementation the same input as the
reference and demand the same outcome: the same results
(every `DispatchRequest` field) and the same stop, or the same exception. Inputs are random record
streams (IPv4/IPv6 hosts, transactions, schedule-topic messages with DELAY levels, tricky
properties, non-ASCII text) ending in blanks, zeros or garbage, with bytes corrupted at random;
random consume-queue unit runs with padding under every kind of tag filter; random keys.
Under `ROCKETLITE_NATIVE=0` the chosen codecs are the references, so the comparison is trivial
there.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketlite.protocol.formats.consume_queue_unit import CQ_UNIT, PADDING_UNIT
from rocketlite.protocol.formats.record import (
    BLANK_MAGIC_CODE,
    DispatchRequest,
    MessageInner,
    pack_head,
    prepare_record,
)
from rocketlite.protocol.message import HostAddress, MessageConst
from rocketlite.protocol.reserved import SCHEDULE_TOPIC
from rocketlite.store.codec import speedups

REFERENCE = speedups.REFERENCE
IMPLS = [speedups.CHOSEN]
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DELAYS = (1000, 5000, 10_000, 30_000)

V4 = HostAddress(bytes([127, 0, 0, 1]), 10911)
V6 = HostAddress(bytes(range(16)), 10911)

texts = st.text(max_size=12) | st.sampled_from(["", "a", "TagA", "ü", "\U0001f600x", "k1 k2  k3"])
prop_names = st.sampled_from(
    [MessageConst.KEYS, MessageConst.TAGS, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
     MessageConst.DELAY_TIME_LEVEL, "XKEYS", "WAIT", "a"]
)  # fmt: skip
delay_values = st.sampled_from(["1", "3", "0", "99", "-1", "x", "", "²"]) | st.text(max_size=3)


@st.composite
def properties(draw: st.DrawFn) -> str:
    pairs = draw(st.lists(st.tuples(prop_names, texts | delay_values), max_size=5))
    if draw(st.booleans()):  # a needle inside a value must not count as a property
        pairs.insert(0, ("WAIT", f"{MessageConst.KEYS}\x01inside"))
    return "\x02".join(f"{k}\x01{v}" for k, v in pairs)


@st.composite
def records(draw: st.DrawFn, pos: int) -> bytes:
    msg = MessageInner(
        topic=draw(st.sampled_from(["T", "TopicA", SCHEDULE_TOPIC, "tö", "%RETRY%g"]) | st.text(max_size=8)),
        body=draw(st.binary(max_size=64)),
        born_host=draw(st.sampled_from([V4, V6])),
        store_host=draw(st.sampled_from([V4, V6])),
        queue_id=draw(st.integers(-2, 8)),
        sys_flag=draw(st.sampled_from([0, 1, 2, 4, 8, 0xC, 0x10, 0x20, 0x30, 0x104])),
        born_timestamp=draw(st.integers(0, 1 << 41)),
        properties_string=draw(properties()),
    )
    rec = prepare_record(msg, 1 << 20)
    phys = pos if draw(st.integers(0, 9)) else draw(st.integers(-1, 1 << 40))
    store_ts = draw(st.integers(0, 1 << 41))
    return pack_head(rec, draw(st.integers(0, 1 << 40)), phys, store_ts) + rec.tail


@st.composite
def streams(draw: st.DrawFn) -> bytearray:
    """Records back to back (PHYSICALOFFSET = position, mostly), then a blank, zeros or garbage,
    then a few bytes overwritten at random."""
    buf = bytearray()
    for _ in range(draw(st.integers(0, 6))):
        buf += draw(records(len(buf)))
    tail = draw(st.sampled_from(["none", "blank", "zeros", "garbage", "short"]))
    if tail == "blank":
        size = draw(st.integers(8, 64))
        buf += struct.pack(">ii", size, BLANK_MAGIC_CODE) + bytes(size - 8)
    elif tail == "zeros":
        buf += bytes(draw(st.integers(1, 100)))
    elif tail == "garbage":
        buf += draw(st.binary(min_size=1, max_size=100))
    elif tail == "short":
        buf += draw(st.binary(min_size=1, max_size=7))
    for _ in range(draw(st.integers(0, 2))):
        if buf:
            at = draw(st.integers(0, len(buf) - 1))
            buf[at] = draw(st.integers(0, 255))
    return buf


def outcome(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as exc:
        return ("raised", type(exc), str(exc))


@SETTINGS
@given(streams(), st.booleans(), st.sampled_from([(), DELAYS]), st.data())
def test_scan_messages(
    buf: bytearray, verify_crc: bool, delays: tuple[int, ...], data: st.DataObject
) -> None:
    limit = data.draw(st.integers(0, len(buf) + 8) | st.just(1 << 70))
    view = memoryview(bytes(buf))
    expected: list[DispatchRequest] = []
    want = outcome(
        REFERENCE.scan_messages, view, 0, limit, expected, verify_crc=verify_crc, delay_levels_ms=delays
    )
    for impl in IMPLS:
        out: list[DispatchRequest] = []
        got = outcome(impl.scan_messages, view, 0, limit, out, verify_crc=verify_crc, delay_levels_ms=delays)
        assert (got, out) == (want, expected), impl.name


@SETTINGS
@given(streams(), st.booleans(), st.sampled_from([(), DELAYS]), st.data())
def test_scan_record_anywhere(
    buf: bytearray, verify_crc: bool, delays: tuple[int, ...], data: st.DataObject
) -> None:
    pos = data.draw(st.integers(0, len(buf) + 2))
    view = memoryview(bytes(buf))
    want = outcome(REFERENCE.scan_record, view, pos, verify_crc=verify_crc, delay_levels_ms=delays)
    for impl in IMPLS:
        assert outcome(impl.scan_record, view, pos, verify_crc=verify_crc, delay_levels_ms=delays) == want


@SETTINGS
@given(streams(), st.booleans(), st.sampled_from([0, 0, 4096, -5]))
def test_check_records(buf: bytearray, verify_crc: bool, base: int) -> None:
    view = memoryview(bytes(buf))
    want = outcome(REFERENCE.check_records, view, 0, base, verify_crc=verify_crc)
    for impl in IMPLS:
        assert outcome(impl.check_records, view, 0, base, verify_crc=verify_crc) == want


def test_scan_a_mapping_and_an_empty_buffer() -> None:
    """Writable buffers (the segments are writable mappings) and empty ones scan alike."""
    buf = bytearray(bytes(100))
    for impl in [REFERENCE, *IMPLS]:
        out: list[DispatchRequest] = []
        assert impl.scan_messages(memoryview(buf), 0, 1000, out, verify_crc=True)[0] == 0
        assert impl.scan_messages(memoryview(b""), 0, 1000, out, verify_crc=True) == (0, None)
        assert impl.check_records(memoryview(b""), 0, 0, verify_crc=True)[:2] == (0, 0)
        assert out == []


tag_pool = st.sampled_from([0, 1, -1, 7, 1 << 40, -(1 << 63), (1 << 63) - 1])
units = st.lists(
    st.tuples(st.integers(-3, 1 << 20), st.integers(-5, 4096), tag_pool) | st.just(PADDING_UNIT), max_size=60
)


def filters(codes: frozenset[int], kind: int) -> Callable[[int], bool] | None:
    if kind == 0:
        return None
    if kind == 1:
        return set(codes).__contains__
    if kind == 2:
        return codes.__contains__
    if kind == 3:
        return {*codes, 1.5, "x"}.__contains__
    return lambda tag: tag % 2 == 0


@SETTINGS
@given(
    units,
    st.frozensets(tag_pool | st.integers(), max_size=4),
    st.integers(0, 4),
    st.integers(0, 62),
    st.integers(1, 40) | st.just(1 << 70),
    st.integers(0, 20_000) | st.just(1 << 70),
    st.integers(0, 3),
    st.integers(0, 5000),
    st.integers(-1, 1 << 19),
)
def test_select_units(
    run: list[tuple[int, int, int]],
    codes: frozenset[int],
    kind: int,
    start: int,
    max_count: int,
    max_bytes: int,
    count: int,
    total: int,
    skip_below: int,
) -> None:
    view = memoryview(b"".join(CQ_UNIT.pack(*u) for u in run))
    args = (view, start, max_count, max_bytes, filters(codes, kind), count, total, skip_below)
    want = REFERENCE.select_units(*args)
    for impl in IMPLS:
        assert impl.select_units(*args) == want


@st.composite
def back_to_back(draw: st.DrawFn) -> list[tuple[int, int, int]]:
    """Units mostly of records that follow each other in the log (runs), with gaps, overlaps,
    sizes <= 0, padding and offsets next to Long.MAX_VALUE, where a run's end would overflow."""
    phy = draw(st.sampled_from([0, 1000, (1 << 63) - 5000, (1 << 63) - 300, -10]))
    run = []
    for _ in range(draw(st.integers(0, 40))):
        size = draw(st.sampled_from([100, 100, 100, 1, 0, -4]) | st.integers(1, 2000))
        run.append(draw(st.just((phy, size, 0)) | st.just(PADDING_UNIT)))
        step = draw(st.sampled_from([size, size, size, size + 7, -size, 0]))
        phy = min(phy + step, (1 << 63) - 1)
    return run


@SETTINGS
@given(back_to_back(), st.integers(0, 5), st.integers(1, 50), st.integers(0, 10_000) | st.just(1 << 70))
def test_select_units_runs(
    run: list[tuple[int, int, int]], start: int, max_count: int, max_bytes: int
) -> None:
    view = memoryview(b"".join(CQ_UNIT.pack(*u) for u in run))
    want = REFERENCE.select_units(view, start, max_count, max_bytes, None, 0, 0, -1)
    for impl in IMPLS:
        assert impl.select_units(view, start, max_count, max_bytes, None, 0, 0, -1) == want
    picked, runs, _ = want
    k = 0
    for lo, nbytes, end in zip(*[iter(runs)] * 3, strict=True):
        assert picked[3 * k] == lo and sum(picked[3 * j + 1] for j in range(k, end)) == nbytes
        for j in range(k + 1, end):  # within a run each record starts where the one before ends
            assert picked[3 * j - 2] > 0 and picked[3 * j] == picked[3 * j - 3] + picked[3 * j - 2]
        k = end
    assert k == len(picked) // 3


def test_select_units_runs_example() -> None:
    units = [(0, 100, 1), (100, 100, 2), PADDING_UNIT, (250, 50, 1), (300, 10, 1), (310, 0, 1), (310, 5, 1)]
    view = memoryview(b"".join(CQ_UNIT.pack(*u) for u in units))
    for impl in IMPLS:
        picked, runs, end = impl.select_units(view, 0, 32, 1 << 40, {1, 2}.__contains__, 0, 0, -1)
        assert list(picked) == [0, 100, 0, 100, 100, 1, 250, 50, 3, 300, 10, 4, 310, 0, 5, 310, 5, 6]
        assert list(runs) == [0, 200, 2, 250, 60, 4, 310, 0, 5, 310, 5, 6] and end == 7


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, (1 << 63) - 1), st.integers(1, (1 << 31) - 2), tag_pool), max_size=40)
)
def test_pack_units(run: list[tuple[int, int, int]]) -> None:
    want = REFERENCE.pack_units(run)
    for impl in IMPLS:
        assert impl.pack_units(run) == want


surrogates = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3)
key_texts = texts | surrogates | st.text() | st.sampled_from([" ", "a  b ", " k"])


@st.composite
def dispatch_requests(draw: st.DrawFn) -> list[DispatchRequest]:
    reqs = []
    offset = draw(st.integers(0, 100))
    for _ in range(draw(st.integers(0, 12))):
        offset += draw(st.integers(-30, 200))  # mostly increasing, sometimes not
        reqs.append(DispatchRequest(
            draw(st.sampled_from(["T", "TopicA"]) | texts | surrogates), 0, offset, 100, 0,
            draw(st.integers(0, 1 << 41)), 0, draw(key_texts), draw(st.none() | key_texts),
            draw(st.sampled_from([0, 4, 8, 0xC, 0x1C, 0x30])), 0,
        ))  # fmt: skip
    return reqs


@SETTINGS
@given(dispatch_requests(), st.integers(-1, 600))
def test_index_entries(reqs: list[DispatchRequest], end_offset: int) -> None:
    want = REFERENCE.index_entries(reqs, end_offset)
    for impl in IMPLS:
        assert impl.index_entries(reqs, end_offset) == want


def test_index_entries_grow_past_two_keys_per_record() -> None:
    reqs = [DispatchRequest("T", 0, i, 10, 0, 5, 0, "a b c d e", "u", 0, 0) for i in range(100)]
    want = REFERENCE.index_entries(reqs, 0)
    assert len(want[0]) == 600
    for impl in IMPLS:
        assert impl.index_entries(reqs, 0) == want


@st.composite
def queue_requests(draw: st.DrawFn) -> list[DispatchRequest]:
    reqs = []
    cq = {0: 0, 1: 5}
    for i in range(draw(st.integers(0, 30))):
        q = draw(st.integers(0, 1))
        cq[q] += draw(st.sampled_from([1, 1, 1, 0, 2, -3]))
        phy = draw(st.sampled_from([i * 100, i * 100, -1, 1 << 63, (1 << 63) - 1]))
        size = draw(st.sampled_from([100, 100, 0, -4, 0x7FFF_FFFF, 0x7FFF_FFFE]))
        tags = draw(st.sampled_from([0, 7, -(1 << 63), 1 << 63]))
        offset = draw(st.sampled_from([cq[q], cq[q], 1 << 62, 1 << 64]))
        topic = draw(st.sampled_from(["T", "U"]))
        sys_flag = draw(st.sampled_from([0, 0, 4, 8, 0xC]))
        reqs.append(DispatchRequest(topic, q, phy, size, tags, 5, offset, "", None, sys_flag, 0))
    return reqs


@SETTINGS
@given(queue_requests())
def test_queue_runs(reqs: list[DispatchRequest]) -> None:
    want = REFERENCE.queue_runs(reqs)
    for impl in IMPLS:
        assert impl.queue_runs(reqs) == want


Entries = tuple[list[int], list[int], list[int]]


def drive(
    impl: speedups.Codecs, view: memoryview, limit: int, crc: bool, delays: tuple[int, ...], index: int | None
) -> tuple[Any, ...]:
    """What the dispatcher makes of `view`: `dispatch_batch` calls, each record one leaves over
    read with `scan_messages` and applied with `queue_runs` and `index_entries`; the units by
    queue and offset, the last unit per queue, the index entries, records and the stop."""
    units: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
    lasts: dict[tuple[str, int], tuple[int, int, int]] = {}
    entries: Entries = ([], [], [])
    records = last_ts = 0

    def absorb(queues: list[Any], found: Any) -> None:
        nonlocal index
        for topic, qid, runs, _count, last_offset, last_tags, last_ts_q in queues:
            for first, data in runs:
                got = units.setdefault((topic, qid), [])
                got += [(first + i, data[i * 20 : i * 20 + 20]) for i in range(len(data) // 20)]
            lasts[(topic, qid)] = (last_offset, last_tags, last_ts_q)
        for column, values in zip(entries, found, strict=True):
            column.extend(values)
        if found[1]:
            index = found[1][-1]

    pos = 0
    while True:
        pos, res, count, ts, queues, found = impl.dispatch_batch(
            view, pos, limit, verify_crc=crc, delay_levels_ms=delays, index_start=index
        )
        absorb(queues, found)
        records += count
        last_ts = ts if count else last_ts
        if res is not None or pos >= len(view) or pos >= limit:
            return pos, res, records, last_ts, units, lasts, entries
        reqs: list[DispatchRequest] = []
        pos, res = impl.scan_messages(view, pos, pos + 1, reqs, verify_crc=crc, delay_levels_ms=delays)
        absorb(impl.queue_runs(reqs), impl.index_entries(reqs, index) if index is not None else ([], [], []))
        records += len(reqs)
        last_ts = reqs[-1].store_timestamp if reqs else last_ts
        if res is not None:
            return pos, res, records, last_ts, units, lasts, entries


@SETTINGS
@given(
    streams(), st.booleans(), st.sampled_from([(), DELAYS]), st.sampled_from([None, 0, 150, -1]), st.data()
)
def test_dispatch_batch(
    buf: bytearray, crc: bool, delays: tuple[int, ...], index: int | None, data: st.DataObject
) -> None:
    limit = data.draw(st.integers(0, len(buf) + 8) | st.just(1 << 70))
    view = memoryview(bytes(buf))
    reqs: list[DispatchRequest] = []
    try:
        REFERENCE.scan_messages(view, 0, limit, reqs, verify_crc=crc, delay_levels_ms=delays)
    except ValueError:
        return  # a DELAY level int() refuses: the reference raises, as scan_messages tests pin
    if any(r.commit_log_offset < 0 for r in reqs):
        return  # a run with a unit no queue stores is refused whole: its split may differ
    want = drive(REFERENCE, view, limit, crc, delays, index)
    for impl in IMPLS:
        assert drive(impl, view, limit, crc, delays, index) == want, impl.name


def test_dispatch_batch_past_a_chunk() -> None:
    """More records than one compiled batch takes (4096), over several queues and topics."""
    buf = bytearray()
    for i in range(5000):
        msg = MessageInner(
            topic=f"T{i % 3}", body=b"x" * (i % 50), born_host=V4, store_host=V4, queue_id=i % 4,
            properties_string=f"TAGS\x01t{i % 7}\x02KEYS\x01k{i} j{i}\x02UNIQ_KEY\x01u{i}",
        )  # fmt: skip
        rec = prepare_record(msg, 1 << 20)
        buf += pack_head(rec, i // 12, len(buf), 1000 + i) + rec.tail
    view = memoryview(bytes(buf))
    want = drive(REFERENCE, view, 1 << 40, True, (), 0)
    assert want[2] == 5000 and len(want[6][0]) == 15000
    for impl in IMPLS:
        assert drive(impl, view, 1 << 40, True, (), 0) == want


@SETTINGS
@given(
    st.data(),
    st.integers(1, 9),  # hash slots
    st.integers(0, 12),  # entries in the file already (indexCount)
    st.integers(0, 40),  # room for more
    st.sampled_from([0, -5, 1_000, 1 << 40]),  # beginTimestamp
)
def test_index_put(data: st.DataObject, slot_num: int, count: int, room: int, begin_ts: int) -> None:
    """Entries into an index file's bytes: the same bytes, count and new slots from each
    implementation, whatever the slots held before (stale, negative, past indexCount)."""
    n = data.draw(st.integers(0, 30))
    start = data.draw(st.integers(0, n))
    i32 = st.integers(-(1 << 31), (1 << 31) - 1)
    hashes = array(
        "q", data.draw(st.lists(st.integers(0, (1 << 31) - 1) | st.integers(-50, -1), min_size=n, max_size=n))
    )
    offsets = array("q", data.draw(st.lists(st.integers(-(1 << 63), (1 << 63) - 1), min_size=n, max_size=n)))
    stamps = array("q", data.draw(st.lists(st.integers(-(1 << 50), 1 << 50), min_size=n, max_size=n)))
    slots = data.draw(st.lists(i32, min_size=slot_num, max_size=slot_num))
    base = 40 + 4 * slot_num
    size = base + 20 * (count + room)
    image = bytearray(data.draw(st.binary(min_size=size, max_size=size)))
    struct.pack_into(f">{slot_num}i", image, 40, *slots)
    args = (40, slot_num, base, count, count + room, begin_ts, hashes, offsets, stamps, start)
    want_buf = bytearray(image)
    want = REFERENCE.index_put(want_buf, *args)
    for impl in IMPLS:
        buf = bytearray(image)
        assert impl.index_put(buf, *args) == want
        assert buf == want_buf
