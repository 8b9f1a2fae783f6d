"""The compiled pull lane calls (`wire/_native/_pull_lane.pxi`: `read_raw_pull`, `encode_pull_found`)
against their references (`pull_lane.read_raw_pull_over`, `encode_pull_found_over`).

Pull frames as clients write them (JSON and ROCKETMQ headers, every field's value drawn from the
spellings clients use and from odd ones: a number as "+5", "007", 19 digits, an empty optional
field, a missing required one, unknown keys, a one-way flag, another code), cut anywhere: the
compiled reader gives the reference's `PullAsk`, or None where the reference reads a spelling it
does not take (never another answer). The FOUND answer's frame is the same bytes for any values.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite.protocol.codes import RequestCode, SerializeType
from rocketlite.protocol.wire import speedups
from rocketlite.protocol.wire.command import make_request
from rocketlite.protocol.wire.frame import encode_command
from rocketlite.protocol.wire.frame_codec import peek_code

pytestmark = pytest.mark.skipif(
    speedups.read_raw_pull is speedups.REFERENCE.read_raw_pull, reason="the compiled pull lane is not built"
)

MAX_FRAME = 16 * 1024 * 1024
REF = speedups.REFERENCE
NUMBERS = ("0", "1", "-1", "32", "17", "4294967296", "1700000000000", "007", "+5", "-5", "", " 1", "x",
           "9" * 18, "9" * 19, "99999999999", "0" * 18 + "32", "0" * 9 + "9" * 10)  # fmt: skip
TEXTS = ("g", "TopicA", "*", "a || b", "TAG", "SQL92", "", "日本", "%RETRY%g")
NAMES = (
    "consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset",
    "suspendTimeoutMillis", "subscription", "subVersion", "expressionType",
)  # fmt: skip
NUMBER_NAMES = set(NAMES[2:8]) | {"subVersion"}


@st.composite
def pull_frames(draw: st.DrawFn) -> bytes:
    ext: dict[str, str] = {}
    for name in NAMES:
        if draw(st.integers(0, 15)) == 0:
            continue  # missing
        if name in NUMBER_NAMES:
            ext[name] = draw(st.sampled_from(NUMBERS) if draw(st.booleans()) else st.just("3"))
        else:
            ext[name] = draw(st.sampled_from(TEXTS))
    if draw(st.booleans()):
        ext["bname"] = "broker-a"
    if draw(st.integers(0, 4)) == 0:
        ext["lo"] = "true"
    code = draw(st.sampled_from([RequestCode.PULL_MESSAGE] * 6 + [RequestCode.SEND_MESSAGE_V2, 361]))
    serialize = draw(st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]))
    cmd = make_request(code, ext, None, draw(st.integers(0, 2**31 - 1)), serialize_type=serialize)
    cmd.flag |= draw(st.sampled_from([0, 0, 0, 2]))  # a one-way request now and then
    return encode_command(cmd)


@settings(max_examples=400, deadline=None)
@given(st.lists(pull_frames(), min_size=1, max_size=4), st.data())
def test_read_raw_pull_is_the_reference_or_leaves_the_frame(frames: list[bytes], data: st.DataObject) -> None:
    src = b"".join(frames)
    if data.draw(st.booleans()):
        src = src[: data.draw(st.integers(0, len(src)))]  # torn
    pos = 0
    for frame in frames:
        ref = REF.read_raw_pull(src, pos, MAX_FRAME)
        got = speedups.read_raw_pull(src, pos, MAX_FRAME)
        assert got is None or got == ref
        if ref is not None and got is None:  # only an odd spelling is left to the handler
            assert any(v in frame for v in (b"+5", b"-5", b'"9999999999999999999"', b"\x00\x00\x00\x1399999"))
        pos += len(frame)
        if pos > len(src):
            break


def test_a_client_pull_is_read_in_both_serializations() -> None:
    """The property above cannot pass by the reader always giving None."""
    ext = {
        "consumerGroup": "g", "topic": "T", "queueId": "1", "queueOffset": "12", "maxMsgNums": "32",
        "sysFlag": "3", "commitOffset": "11", "suspendTimeoutMillis": "15000", "subscription": "*",
        "subVersion": "1700000000000", "expressionType": "TAG",
    }  # fmt: skip
    for serialize in (SerializeType.JSON, SerializeType.ROCKETMQ):
        frame = encode_command(make_request(RequestCode.PULL_MESSAGE, ext, None, 9, serialize_type=serialize))
        got = speedups.read_raw_pull(frame, 0, MAX_FRAME)
        assert got == (len(frame), 9, serialize, "g", "T", 1, 12, 32, 3, 11, "*", 1700000000000, "TAG")
        assert got == REF.read_raw_pull(frame, 0, MAX_FRAME)


LONGS = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-1, 10**6))


@settings(max_examples=300, deadline=None)
@given(
    st.integers(-(2**31), 2**31 - 1), st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]),
    st.integers(0, 3), LONGS, LONGS, LONGS, st.integers(0, 2**24),
)  # fmt: skip
def test_encode_pull_found_is_the_reference(
    opaque: int, serialize: SerializeType, suggest: int, next_begin: int, lo: int, hi: int, body: int
) -> None:
    args = (opaque, serialize, suggest, next_begin, lo, hi, body)
    assert speedups.encode_pull_found(*args) == REF.encode_pull_found(*args)


@settings(max_examples=200, deadline=None)
@given(pull_frames(), st.integers(0, 24))
def test_peek_code_is_the_frames_code_or_none(frame: bytes, cut: int) -> None:
    """`chain_raw` chooses a lane by `peek_code`: never another code than the frame's."""
    (cmd,), _ = speedups.decode_frames(frame, MAX_FRAME)
    assert peek_code(frame, 0) == cmd.code  # how every client writes it
    torn = frame[: min(cut, len(frame))]
    assert peek_code(torn, 0) in (None, cmd.code)
