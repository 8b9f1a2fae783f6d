"""The send answer codec (`speedups.encode_send_ok`) is pinned to its reference byte for byte.

The reference builds the answer command as the send processor always did and encodes it with the
reference frame encoder; the compiled twin (`_native/_wire.pyx`) writes the frame from the values.
Random opaques, queue ids and offsets (int32 and beyond, negative), msg ids (single and a batch's
comma-joined list), regions and transaction ids with odd text (quotes, controls, non-ASCII, lone
surrogates), both serializations, and values of the wrong type: both must give the same bytes or
raise the same error. The frame must also decode to the command `send_ok_command` builds. Under
`ROCKETLITE_NATIVE=0` the candidate is the reference itself; without a built `_wire` the native
comparison is skipped, saying why.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketlite.protocol.codes import SerializeType
from rocketlite.protocol.wire import speedups
from rocketlite.protocol.wire.send_response import send_ok_command
from tests.support.native import compiled_or_none

REFERENCE = speedups.REFERENCE
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


NATIVE: Any = compiled_or_none(REFERENCE, "rocketlite.protocol.wire._native._wire")
native_only = pytest.mark.skipif(NATIVE is None, reason="the compiled _wire module is not built")

TEXT = st.text(
    st.characters(codec="utf-8") | st.sampled_from('"\\\x00\x1f\x7f\x80\x9f\xa0é€\ud800'), max_size=40
)
INTS = st.integers(-(2**31), 2**31 - 1) | st.integers(-(2**70), 2**70)
MSG_IDS = st.lists(st.text("0123456789ABCDEF", min_size=32, max_size=32), min_size=1, max_size=5).map(
    ",".join
)
ODD = st.none() | st.booleans() | st.floats(allow_nan=False) | st.binary(max_size=4)


def outcome(fn: Any, *args: Any) -> tuple[Any, ...]:
    try:
        return ("ok", fn(*args))
    except Exception as exc:
        return ("raised", type(exc), str(exc))


@native_only
@SETTINGS
@given(
    opaque=INTS,
    serialize=st.sampled_from(SerializeType),
    msg_id=MSG_IDS | TEXT,
    queue_id=INTS,
    queue_offset=INTS,
    region=TEXT | st.just("DefaultRegion"),
    trace_on=st.sampled_from(["true", "false"]) | TEXT,
    transaction_id=st.none() | TEXT,
)
def test_same_bytes_as_the_reference(
    opaque: int,
    serialize: SerializeType,
    msg_id: str,
    queue_id: int,
    queue_offset: int,
    region: str,
    trace_on: str,
    transaction_id: str | None,
) -> None:
    args = (opaque, serialize, msg_id, queue_id, queue_offset, region, trace_on, transaction_id)
    assert outcome(NATIVE.encode_send_ok, *args) == outcome(REFERENCE.encode_send_ok, *args)


@native_only
@SETTINGS
@given(
    position=st.integers(0, 7),
    odd=ODD,
)
def test_values_of_other_types_are_handled_as_the_reference(position: int, odd: Any) -> None:
    args: list[Any] = [7, SerializeType.JSON, "AB" * 16, 3, 42, "DefaultRegion", "true", None]
    args[position] = odd
    assert outcome(NATIVE.encode_send_ok, *args) == outcome(REFERENCE.encode_send_ok, *args)


@SETTINGS
@given(
    opaque=st.integers(-(2**31), 2**31 - 1),
    serialize=st.sampled_from(SerializeType),
    msg_id=MSG_IDS,
    queue_id=st.integers(0, 1023),
    queue_offset=st.integers(0, 2**62),
    transaction_id=st.none() | MSG_IDS,
)
def test_the_frame_decodes_to_the_answer_command(
    opaque: int,
    serialize: SerializeType,
    msg_id: str,
    queue_id: int,
    queue_offset: int,
    transaction_id: str | None,
) -> None:
    args = (opaque, serialize, msg_id, queue_id, queue_offset, "DefaultRegion", "false", transaction_id)
    commands, used = speedups.decode_frames(speedups.encode_send_ok(*args), 1 << 24)
    assert used == len(speedups.encode_send_ok(*args)) and len(commands) == 1
    got, want = commands[0], send_ok_command(*args)
    assert (got.code, got.flag, got.opaque, got.language, got.version, got.remark, got.serialize_type) == (
        want.code, want.flag, want.opaque, want.language, want.version, want.remark, want.serialize_type,
    )  # fmt: skip
    assert got.ext_fields == want.ext_fields
    assert not got.body
