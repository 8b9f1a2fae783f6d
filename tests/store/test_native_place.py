"""`speedups.place_record` (a single record placed under the commit log's lock) pinned to its
reference, `protocol.record.place_record`.

Hypothesis encodes random messages (IPv4 and IPv6 hosts, bodies up to 2 KiB) with the reference
encoder and hands two copies of the header, and of a target (a bytearray or a writable mapping),
to the compiled twin and to the reference: the patched header, the target's bytes and the msg id
must be the same, and the placed bytes must decode to a record carrying the expected queue
offset, commit-log offset and store time. Bad input (a record that does not fit, offsets out of
the Java range, a read-only target, a bytes header) gets the same error type from both.

With `ROCKETLITE_NATIVE=0` the reference is compared with itself; without the compiled module
the comparison is skipped.
"""

from __future__ import annotations

import mmap
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite.protocol.formats import record as record_format
from rocketlite.protocol.formats import record_ref
from rocketlite.protocol.formats.record import MessageInner, decode_records
from rocketlite.protocol.message import make_msg_id
from tests.support.native import compiled_or
from tests.support.store import V4, inner_messages

NATIVE: Any = compiled_or(record_format, "rocketlite.protocol.formats._native._record")

messages = inner_messages()


def placed(fn: Any, target: Any, head: Any, *args: Any) -> tuple[Any, ...]:
    try:
        msg_id = fn(target, args[0], head, *args[1:])
    except Exception as exc:
        return ("raised", type(exc), bytes(head), bytes(target))
    return ("ok", msg_id, bytes(head), bytes(target))


@settings(max_examples=150, deadline=None)
@given(
    msg=messages,
    pos=st.integers(0, 4096),
    room=st.integers(-64, 64),
    qoff=st.integers(0, 2**40),
    base=st.integers(0, 2**40),
    now=st.integers(0, 2**42),
    prefix=st.sampled_from(["", "7F00000100002A9F", "C0A8"]),
)
def test_place_record_matches_reference(
    msg: MessageInner, pos: int, room: int, qoff: int, base: int, now: int, prefix: str
) -> None:
    head, tail, stamp_pos, _sys_flag = record_ref.encode_record(msg, 1 << 20)
    size = len(head) + len(tail)
    target_size = max(pos + size + room, 0)
    phys = base + pos
    args = (pos, tail, stamp_pos, qoff, phys, now, prefix)
    ours = placed(NATIVE.place_record, bytearray(target_size), bytearray(head), *args)
    ref = placed(record_format.place_record, bytearray(target_size), bytearray(head), *args)
    assert ours == ref
    if room >= 0:
        assert ours[0] == "ok"
        assert ours[1] == prefix + format(phys, "016X")
        [rec] = decode_records(ours[3][pos : pos + size])
        assert (rec.queue_offset, rec.physical_offset, rec.store_timestamp) == (qoff, phys, now)
        assert rec.body == msg.body and rec.topic == msg.topic
    else:
        assert ours[0] == "raised"


def test_place_record_into_a_mapping() -> None:
    msg = MessageInner("TopicTest", b"x" * 1024, V4, V4, 3, properties_string="TAGS\x01a\x02")
    head, tail, stamp_pos, _ = record_ref.encode_record(msg, 1 << 20)
    size = len(head) + len(tail)
    results = []
    for fn in (NATIVE.place_record, record_format.place_record):
        mm = mmap.mmap(-1, 8192)
        try:
            msg_id = fn(mm, 100, bytearray(head), tail, stamp_pos, 7, 4196, 1234, V4.msg_id_prefix())
            results.append((msg_id, bytes(mm)))
        finally:
            mm.close()
    assert results[0] == results[1]
    [rec] = decode_records(results[0][1][100 : 100 + size])
    assert (rec.queue_offset, rec.physical_offset, rec.store_timestamp) == (7, 4196, 1234)
    assert results[0][0] == make_msg_id(V4, 4196)


@pytest.mark.parametrize(
    "change",
    [
        {"qoff": 2**63},  # outside a Java long
        {"phys": -1},
        {"phys": 2**64},
        {"now": -(2**63) - 1},
        {"stamp_pos": 10_000},
        {"head": b"bytes"},
        {"target": b"\x00" * 4096},  # read-only
        {"prefix": 5},
        {"pos": -1},
    ],
)
def test_bad_input_same_error(change: dict[str, Any]) -> None:
    msg = MessageInner("T", b"body", V4, V4, 0)
    head, tail, stamp_pos, _ = record_ref.encode_record(msg, 1 << 20)
    outcomes = []
    for fn in (NATIVE.place_record, record_format.place_record):
        kw: dict[str, Any] = {
            "target": bytearray(4096), "pos": 0, "head": bytearray(head), "tail": tail,
            "stamp_pos": stamp_pos, "qoff": 0, "phys": 0, "now": 1, "prefix": "AB",
        }  # fmt: skip
        kw.update(change)
        head_arg = kw["head"]
        if isinstance(head_arg, bytes) and head_arg == b"bytes":
            head_arg = bytes(head)
        try:
            out: Any = fn(kw["target"], kw["pos"], head_arg, kw["tail"], kw["stamp_pos"], kw["qoff"],
                          kw["phys"], kw["now"], kw["prefix"])  # fmt: skip
        except Exception as exc:
            out = type(exc)
        outcomes.append(out)
    assert outcomes[0] == outcomes[1]
