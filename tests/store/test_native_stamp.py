"""`speedups.stamp_batch` (a batch placed under the commit log's lock) pinned to its reference.

Hypothesis encodes random batches (IPv4 and IPv6 hosts, transaction flags, bodies up to 2 KiB)
with the reference encoder, then hands two copies of the buffer to the compiled `stamp_batch` and
to `record_ref.stamp_batch`: the patched bytes and the msg ids must be the same, and the bytes
must decode to records carrying the expected queue offsets, commit-log offsets and store time.
Buffers that do not hold exactly the count of records are refused by both with `ValueError`,
before anything is patched.

With `ROCKETLITE_NATIVE=0` the reference is compared with itself; without the compiled module
the comparison is skipped.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite import native
from rocketlite.protocol.formats import record_ref
from rocketlite.protocol.formats.record import MessageInner, decode_records
from rocketlite.protocol.message import MessageSysFlag, make_msg_id
from tests.support.store import V4, inner_messages

NATIVE: Any
if native.REFERENCE_ONLY:
    NATIVE = record_ref  # ROCKETLITE_NATIVE=0: the reference against itself
else:
    NATIVE = pytest.importorskip(
        "rocketlite.protocol.formats._native._record", reason="the compiled data plane is not built"
    )

messages = inner_messages(
    sys_flags=(0, MessageSysFlag.TRANSACTION_PREPARED_TYPE, MessageSysFlag.COMPRESSED_FLAG)
)


def stamped(fn: Any, buf: bytearray, count: int, *args: Any) -> tuple[Any, ...]:
    try:
        ids = fn(buf, count, *args)
    except Exception as exc:
        return ("raised", type(exc), bytes(buf))
    return ("ok", ids, bytes(buf))


@settings(max_examples=150, deadline=None)
@given(
    msgs=st.lists(messages, min_size=1, max_size=12),
    queue_offset=st.integers(0, 2**40),
    advances=st.booleans(),
    base=st.integers(0, 2**50),
    now=st.integers(0, 2**42),
)
def test_stamp_matches_the_reference(
    msgs: list[MessageInner], queue_offset: int, advances: bool, base: int, now: int
) -> None:
    buf, _flag = record_ref.encode_records(msgs, 1 << 22)
    starts = [0]  # each record's start, from the TOTALSIZE fields
    while starts[-1] + int.from_bytes(buf[starts[-1] : starts[-1] + 4], "big") < len(buf):
        starts.append(starts[-1] + int.from_bytes(buf[starts[-1] : starts[-1] + 4], "big"))
    prefix = msgs[0].store_host.msg_id_prefix()
    args = (queue_offset, advances, base, now, prefix)
    ref = stamped(record_ref.stamp_batch, bytearray(buf), len(msgs), *args)
    nat = stamped(NATIVE.stamp_batch, bytearray(buf), len(msgs), *args)
    assert nat == ref
    assert ref[0] == "ok"
    assert ref[1].split(",") == [make_msg_id(msgs[0].store_host, base + s) for s in starts]
    records = decode_records(ref[2])
    assert len(records) == len(msgs)
    for i, (rec, start) in enumerate(zip(records, starts, strict=True)):
        assert rec.physical_offset == base + start
        assert rec.queue_offset == (queue_offset + i if advances else queue_offset)
        assert rec.store_timestamp == now


@settings(max_examples=60, deadline=None)
@given(msgs=st.lists(messages, min_size=1, max_size=4), cut=st.integers(1, 200))
def test_bad_buffers_are_refused_alike(msgs: list[MessageInner], cut: int) -> None:
    buf = record_ref.encode_records(msgs, 1 << 22)[0]
    prefix = msgs[0].store_host.msg_id_prefix()
    cases: list[tuple[bytearray, int]] = [
        (bytearray(buf[: max(0, len(buf) - cut)]), len(msgs)),  # torn
        (buf + bytearray(cut), len(msgs)),  # trailing bytes
        (bytearray(buf), len(msgs) - 1),  # a record too few
        (bytearray(buf), len(msgs) + 1),  # a record too many
    ]
    for damaged, count in cases:
        args = (5, True, 4096, 77, prefix)
        ref = stamped(record_ref.stamp_batch, bytearray(damaged), count, *args)
        nat = stamped(NATIVE.stamp_batch, bytearray(damaged), count, *args)
        assert nat == ref
        assert ref[0] == "raised" and ref[1] is ValueError and ref[2] == bytes(damaged)


def test_odd_arguments_go_to_the_reference() -> None:
    msgs = [MessageInner(topic="T", body=b"x", born_host=V4, store_host=V4)]
    buf = record_ref.encode_records(msgs, 1 << 22)[0]
    for args in [
        (0, True, 0, 1, "ÄÖ"),  # a prefix that is not ASCII
        (2**63, False, 0, 1, "AB"),  # a queue offset beyond a Java long
        (0, True, -8, 1, "AB"),  # a negative commit-log offset
    ]:
        ref = stamped(record_ref.stamp_batch, bytearray(buf), len(msgs), *args)
        nat = stamped(NATIVE.stamp_batch, bytearray(buf), len(msgs), *args)
        assert nat == ref


def test_empty_batch() -> None:
    assert NATIVE.stamp_batch(bytearray(), 0, 0, True, 0, 0, "AB") == ""
    assert record_ref.stamp_batch(bytearray(), 0, 0, True, 0, 0, "AB") == ""
