"""The batch path without message objects: `speedups.encode_batch_records` (a SEND_BATCH_MESSAGE
body straight to commit-log records) and `speedups.stamp_batch` (such a batch placed under the
lock) give exactly what their references give, byte for byte, on random, delayed, oversized,
torn and corrupt batch bodies, raising the same errors; and the reference is what the old path
made (`send_batch_messages`, then `encode_records`).

Under `ROCKETLITE_NATIVE=0` the chosen codecs are the references, so the differential tests
compare the reference to itself; the example tests pin the reference's own answers either way.
"""

from __future__ import annotations

import copy
import tracemalloc
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.formats import record_ref, speedups
from rocketlite.protocol.formats.batch import (
    BATCH_DELAY_PROPERTY,
    BATCH_DELAYED_ENTRY,
    BATCH_OK,
    BATCH_TOO_LARGE,
    BatchEntry,
    BatchTarget,
    encode_batch,
    encode_batch_records,
    send_batch_messages,
)
from rocketlite.protocol.formats.record import decode_records
from rocketlite.protocol.message import HostAddress
from tests.support.properties import outcome, property_strategies

V4 = HostAddress(b"\x7f\x00\x00\x01", 4000)
V6 = HostAddress(bytes(15) + b"\x01", 10911)
KNOWN = ["WAIT", "TAGS", "DELAY", "UNIQ_KEY", "KEYS", "CLUSTER", "XDELAY", "PGROUP"]

text, segment = property_strategies(KNOWN, ["true", "3", "TagA", "k1 k2", "DELAY\x01"], extra_chars="D")
properties = st.lists(segment, max_size=10).map("\x02".join)
header_properties = st.one_of(
    properties, st.just("\ud800"), st.lists(segment, min_size=60, max_size=90).map("\x02".join)
)
entries = st.lists(
    st.builds(BatchEntry, st.integers(-(2**31), 2**31 - 1), st.binary(max_size=300), properties),
    max_size=6,
)
topics = st.sampled_from(["TopicA", "T", "é" * 70, "x" * 128])
hosts = st.sampled_from([V4, V6])
max_sizes = st.sampled_from([4 * 1024 * 1024, 400, 200, 100])


def old_path(body: bytes, target: BatchTarget) -> Any:
    """What the broker made of a batch before: messages, then records (reference codecs)."""
    msgs, delayed = send_batch_messages(body, target)
    if delayed or not msgs:
        return delayed, 0
    return record_ref.encode_records(msgs, target.max_message_size), len(msgs)


def both(*args: Any) -> Any:
    ref = outcome(encode_batch_records, *args)
    assert outcome(speedups.encode_batch_records, *args) == ref
    return ref


@settings(max_examples=500)
@given(entries, header_properties, st.sampled_from(["DefaultCluster", ""]), topics, hosts, hosts, max_sizes)
def test_encode_batch_records_matches_reference(
    batch: list[BatchEntry], header_props: str, cluster: str, topic: str, born: HostAddress,
    store: HostAddress, max_size: int,
) -> None:  # fmt: skip
    body = encode_batch(batch)
    args = (
        body,
        BatchTarget(header_props, cluster, topic, born, store, 3, 0, 1_700_000_000_000, 2, max_size),
    )
    ref = both(*args)
    if isinstance(ref, tuple) and len(ref) == 5 and ref[3] == BATCH_OK and ref[1]:
        (buf, first_flag), count = old_path(*args)
        assert (ref[0], ref[1], ref[2]) == (buf, count, first_flag)


@settings(max_examples=300)
@given(entries.filter(bool), st.data())
def test_corrupt_batches_fail_alike(batch: list[BatchEntry], data: st.DataObject) -> None:
    body = bytearray(encode_batch(batch))
    cut = data.draw(st.integers(0, len(body)))
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(body) - 1), st.integers(0, 255)), max_size=3))
    for pos, byte in flips:
        body[pos] = byte
    both(bytes(body[:cut]), BatchTarget("WAIT\x01true", "C", "T", V4, V4, 1, 0, 5, 0, 1 << 22))
    both(bytes(body), BatchTarget("", "C", "T", V4, V4, 1, 0, 5, 0, 1 << 22))


@settings(max_examples=200)
@given(st.binary(max_size=80))
def test_random_bytes_fail_alike(raw: bytes) -> None:
    both(raw, BatchTarget("", "C", "T", V4, V4, 1, 0, 5, 0, 1 << 22))


def test_odd_numbers_go_to_the_reference() -> None:
    body = encode_batch([BatchEntry(1, b"one", "")])
    for sys_flag, queue_id, born_ts in ((1 << 40, 1, 5), (0, 1 << 33, 5), (0, 1, 1 << 70)):
        both(body, BatchTarget("", "C", "T", V4, V4, queue_id, sys_flag, born_ts, 0, 1 << 22))


def test_encode_batch_records_examples() -> None:
    body = encode_batch([
        BatchEntry(1, b"one", "TAGS\x01a\x02WAIT\x01true\x02CLUSTER\x01mine"),
        BatchEntry(2, b"two", ""),
    ])  # fmt: skip
    for fn in (encode_batch_records, speedups.encode_batch_records):
        buf, count, sys_flag, result, remark = fn(
            body, BatchTarget("WAIT\x01x\x02KEYS\x01k", "C", "T", V4, V4, 1, 0, 5, 0, 1 << 22)
        )
        assert (count, sys_flag, result, remark) == (2, 0, BATCH_OK, "")
        recs = decode_records(bytes(buf))
        assert [(r.flag, r.body, r.properties_string, r.queue_id, r.topic) for r in recs] == [
            (1, b"one", "TAGS\x01a\x02CLUSTER\x01mine\x02KEYS\x01k", 1, "T"),
            (2, b"two", "KEYS\x01k\x02CLUSTER\x01C", 1, "T"),
        ]
        assert fn(b"", BatchTarget("", "C", "T", V4, V4, 1, 0, 5, 0, 1 << 22)) == (
            bytearray(),
            0,
            0,
            BATCH_OK,
            "",
        )
        delayed = encode_batch([BatchEntry(0, b"a", "DELAY\x012"), BatchEntry(0, b"b", "")])
        assert fn(delayed, BatchTarget("", "C", "T", V4, V4, 1, 0, 5, 0, 1 << 22))[3] == BATCH_DELAYED_ENTRY
        # the header's DELAY (or any key ending in DELAY) is stored: the store refuses the batch
        refused = fn(body, BatchTarget("DELAY\x013", "C", "T", V4, V4, 1, 0, 5, 0, 1 << 22))
        assert refused[1:4] == (2, 0, BATCH_DELAY_PROPERTY)
        assert (
            fn(body, BatchTarget("MYDELAY\x01x", "C", "T", V4, V4, 1, 0, 5, 0, 1 << 22))[3]
            == BATCH_DELAY_PROPERTY
        )
        big = fn(body, BatchTarget("", "C", "T", V4, V4, 1, 0, 5, 0, 100))
        assert big[:4] == (bytearray(), 2, 0, BATCH_TOO_LARGE) and "100" in big[4]
        err = outcome(fn, delayed[:-1] + b"\x00\x00", BatchTarget("", "C", "T", V4, V4, 1, 0, 5, 0, 1 << 22))
        assert err[0] is ProtocolError and "torn" in err[1]


# -- stamp_batch ------------------------------------------------------------------------------------
@settings(max_examples=200)
@given(
    entries.filter(bool), hosts, st.integers(0, 2**40), st.booleans(), st.integers(0, 2**50),
    st.integers(0, 2**41), st.sampled_from(["7F00000100002A9F", "", "é"]), st.integers(-1, 1),
)  # fmt: skip
def test_stamp_batch_matches_reference(
    batch: list[BatchEntry], host: HostAddress, qoff: int, advances: bool, base: int, now: int,
    prefix: str, count_delta: int,
) -> None:  # fmt: skip
    body = encode_batch(batch)
    buf, count, _, result, _ = encode_batch_records(
        body, BatchTarget("", "C", "T", host, V4, 1, 0, 5, 0, 1 << 22)
    )
    assume(result == BATCH_OK)  # not delayed
    count += count_delta
    mine, ref = copy.copy(buf), copy.copy(buf)
    got = outcome(speedups.stamp_batch, mine, count, qoff, advances, base, now, prefix)
    want = outcome(record_ref.stamp_batch, ref, count, qoff, advances, base, now, prefix)
    assert got == want and mine == ref
    if count_delta == 0:  # every record stamped where the batch lands
        recs = decode_records(bytes(ref))
        step = 1 if advances else 0
        assert [(r.queue_offset, r.physical_offset, r.store_timestamp) for r in recs] == [
            (qoff + i * step, base + sum(x.total_size for x in recs[:i]), now) for i in range(len(recs))
        ]
        assert want == ",".join(f"{prefix}{r.physical_offset:016X}" for r in recs)


# -- a batch over maxMessageSize as a whole -----------------------------------------------------------
def test_batch_over_max_message_size_is_refused_before_its_records_are_made() -> None:
    """The reviewer's shape: a body of empty entries and a long header property string, which
    every entry's record would copy. Records of entries x header bytes used to be made (and the
    buffer allocated) before the refusal; now the walk stops at the first record past the limit,
    so neither path holds much more than maxMessageSize, natively or in the reference."""
    max_size = 1 << 20
    body = encode_batch([BatchEntry(0, b"", "")]) * (max_size // 22)  # 47,662 entries, 1 MiB
    header = "\x02".join(f"k{i}\x01" + "v" * 500 for i in range(20))  # ~10 KB, ~480 MB x entries
    args = (body, BatchTarget(header, "C", "T", V4, V4, 1, 0, 5, 0, max_size))
    for fn in (encode_batch_records, speedups.encode_batch_records):
        tracemalloc.start()
        try:
            refused = fn(*args)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert refused[:4] == (bytearray(), max_size // 22, 0, BATCH_TOO_LARGE)
        assert refused[4].startswith("message size ")
        assert refused[4].endswith(f"exceeds maxMessageSize {max_size}")
        assert peak < 32 * max_size, (fn, peak)
    assert both(*args) == refused


def test_batch_total_is_checked_in_entry_order() -> None:
    """Each record fits but together they do not: refused with the size reached; a DELAY needle
    in an entry before the limit is reached is what refuses it, one after it is never looked at."""
    fits = [BatchEntry(0, bytes(100), "")] * 3
    single = encode_batch_records(
        encode_batch(fits[:1]), BatchTarget("", "C", "T", V4, V4, 1, 0, 5, 0, 1 << 22)
    )
    record = len(single[0])
    for fn in (encode_batch_records, speedups.encode_batch_records):
        ok = fn(encode_batch(fits[:2]), BatchTarget("", "C", "T", V4, V4, 1, 0, 5, 0, 2 * record))
        assert ok[1:4] == (2, 0, BATCH_OK) and len(ok[0]) == 2 * record
        over = fn(encode_batch(fits), BatchTarget("", "C", "T", V4, V4, 1, 0, 5, 0, 2 * record))
        remark = f"message size {3 * record} exceeds maxMessageSize {2 * record}"
        assert over == (bytearray(), 3, 0, BATCH_TOO_LARGE, remark)
        needle = [*fits, BatchEntry(0, b"", "XDELAY\x01x")]
        assert (
            fn(encode_batch(needle), BatchTarget("", "C", "T", V4, V4, 1, 0, 5, 0, 2 * record))[3]
            == BATCH_TOO_LARGE
        )
        needle = [fits[0], BatchEntry(0, b"", "XDELAY\x01x"), *fits]
        assert (
            fn(encode_batch(needle), BatchTarget("", "C", "T", V4, V4, 1, 0, 5, 0, 2 * record))[3]
            == BATCH_DELAY_PROPERTY
        )
