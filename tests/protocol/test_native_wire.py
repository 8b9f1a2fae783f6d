"""The compiled wire core (`protocol/wire/_native/_wire.pyx`) is pinned to the reference codecs.

Random commands (codes, flags, opaques, languages, remarks and ext fields with odd text, bodies)
in both serializations, encoded by both; random frame streams cut into random chunks, decoded by
both; and bad input (bad lengths, torn and garbled headers, malformed JSON, huge lengths), which
both must refuse with the same error type and message. Under `ROCKETLITE_NATIVE=0` the candidate
is the reference itself (the comparison then checks the harness); without a built `_wire` the
comparison is skipped, saying why.
"""

from __future__ import annotations

import itertools
import json
import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketlite.protocol.codes import LanguageCode, RequestCode, SerializeType
from rocketlite.protocol.wire import speedups
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.frame_codec import DEFAULT_MAX_FRAME_LENGTH, FRAME_PREFIX
from tests.support.native import compiled_or

REFERENCE = speedups.REFERENCE


NATIVE: Any = compiled_or(REFERENCE, "rocketlite.protocol.wire._native._wire")
FLIP = st.tuples(st.integers(0, 1 << 10), st.integers(0, 255))  # (where, new byte)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(fn: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    """What a call did: ("ok", comparable value) or ("raised", type, message)."""
    try:
        return ("ok", comparable(fn(*args)))
    except Exception as exc:
        return ("raised", type(exc), str(exc))


def comparable(value: Any) -> Any:
    """Commands as their fields with types (`1 == True` must not pass), recursively."""
    if isinstance(value, RemotingCommand):
        fields = ("code", "language", "version", "opaque", "flag", "remark", "body", "serialize_type")
        typed = tuple((f, type(getattr(value, f)), getattr(value, f)) for f in fields)
        ext = [(type(k), k, type(v), v) for k, v in value.ext_fields.items()]
        return (typed, ext)
    if isinstance(value, list | tuple):
        return type(value), [comparable(v) for v in value]
    return type(value), value


def same(fn_name: str, *args: Any) -> tuple[Any, ...]:
    expected = outcome(getattr(REFERENCE, fn_name), *args)
    assert outcome(getattr(NATIVE, fn_name), *args) == expected
    return expected


# ---------------------------------------------------------------------------------------- strategies

ODD_TEXT = st.text(
    st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=["Cs"])
    | st.sampled_from(
        ['"', "\\", "/", "\x01", "\x02", "\x7f", "\x80", "\x9f", "\xa0", "é", "中", "😀", "\u2028"]
    ),
    max_size=24,
)
PLAIN_TEXT = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=16)
TEXT = PLAIN_TEXT | ODD_TEXT
SURROGATE_TEXT = st.builds(lambda a, b: a + "\ud800" + b, PLAIN_TEXT, PLAIN_TEXT)
INT32 = st.integers(-(2**31), 2**31 - 1)
CODES = st.sampled_from([10, 11, 310, 320, 0, 1, 17, 25, 105]) | st.integers(-(2**15), 2**15 - 1)
LANGUAGES = st.sampled_from([*LanguageCode.__members__, "go", ""]) | TEXT


@st.composite
def commands(draw: st.DrawFn, serialize_type: SerializeType | None = None) -> RemotingCommand:
    wild = draw(st.integers(0, 19)) == 0  # now and then values no codec takes as they are
    ints = st.integers(-(2**70), 2**70) if wild else INT32
    # Not only text when wild: the codecs take what a caller puts in `ext_fields`, typed or not.
    ext_values: st.SearchStrategy[Any] = TEXT | SURROGATE_TEXT | st.none() | st.integers() if wild else TEXT
    return RemotingCommand(
        code=draw(st.integers(-(2**40), 2**40) if wild else CODES),
        language=draw(LANGUAGES),
        version=draw(st.sampled_from([409, 0, 317]) | ints),
        opaque=draw(ints),
        flag=draw(st.sampled_from([0, 1, 2, 3]) | ints),
        remark=draw(st.none() | TEXT | (SURROGATE_TEXT if wild else TEXT)),
        ext_fields=draw(st.dictionaries(TEXT, ext_values, max_size=14)),
        body=draw(st.none() | st.binary(max_size=300)),
        serialize_type=serialize_type or draw(st.sampled_from(SerializeType)),
    )


def send_v2_command(opaque: int) -> RemotingCommand:
    values = ["pg", "TopicTest", "TBW102", "4", "3", "0", "1700000000123", "0"]
    values += ["KEYS\x01k\x02TAGS\x01TagA\x02", "0", "false", "16", "false", "broker-a"]
    ext = dict(zip("abcdefghijklmn", values, strict=True))
    return RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque=opaque, ext_fields=ext, body=b"x" * 1024)


# ------------------------------------------------------------------------------------------- encoding


@SETTINGS
@given(commands())
def test_encode_command_matches_the_reference(cmd: RemotingCommand) -> None:
    same("encode_command", cmd)
    same("encode_json_header", cmd)
    same("encode_rocketmq_header", cmd)


def test_typical_send_and_response_frames_match() -> None:
    request = send_v2_command(7)
    for serialize_type in SerializeType:
        request.serialize_type = serialize_type
        assert same("encode_command", request)[0] == "ok"
        ext = {"msgId": "7F00000100002A9F0000000000000000", "queueId": "3", "queueOffset": "123456"}
        ext["MSG_REGION"] = "DefaultRegion"
        response = RemotingCommand(
            0, opaque=7, flag=1, remark="FOUND", serialize_type=serialize_type, ext_fields=ext
        )
        assert same("encode_command", response)[0] == "ok"


def test_oversized_header_is_refused_alike() -> None:
    cmd = RemotingCommand(10, ext_fields={"k": "v" * (1 << 24)})
    for serialize_type in SerializeType:
        cmd.serialize_type = serialize_type
        assert same("encode_command", cmd)[0] == "raised"


# ------------------------------------------------------------------------------------------- decoding


def stream_outcomes(decode_frames: Any, chunks: list[bytes], max_frame_length: int) -> list[tuple[Any, ...]]:
    """Feed the chunks the way `FrameDecoder` does, one outcome per chunk, stopping at an error."""
    buf = b""
    results: list[tuple[Any, ...]] = []
    for chunk in chunks:
        buf += chunk
        result = outcome(decode_frames, buf, max_frame_length)
        results.append(result)
        if result[0] == "raised":
            break
        buf = buf[result[1][1][1][1] :]  # ("ok", (tuple, [commands, (int, pos)]))
    return results


def cut(data: bytes, points: list[int]) -> list[bytes]:
    edges = sorted({0, len(data), *(p % (len(data) + 1) for p in points)})
    return [data[a:b] for a, b in itertools.pairwise(edges)] or [b""]


@SETTINGS
@given(st.lists(commands(), min_size=1, max_size=6), st.lists(st.integers(0, 1 << 16), max_size=8))
def test_random_streams_in_random_chunks_decode_alike(cmds: list[RemotingCommand], points: list[int]) -> None:
    frames = []
    for cmd in cmds:
        try:
            frames.append(REFERENCE.encode_command(cmd))
        except Exception:
            continue
    data = b"".join(frames)
    chunks = cut(data, points)
    assert stream_outcomes(NATIVE.decode_frames, chunks, DEFAULT_MAX_FRAME_LENGTH) == stream_outcomes(
        REFERENCE.decode_frames, chunks, DEFAULT_MAX_FRAME_LENGTH
    )


@SETTINGS
@given(
    st.lists(commands(), min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(0, 1 << 12), st.integers(0, 255)), min_size=1, max_size=6),
    st.lists(st.integers(0, 1 << 12), max_size=4),
    st.sampled_from([DEFAULT_MAX_FRAME_LENGTH, 64, 300, FRAME_PREFIX.size]),
)
def test_garbled_streams_are_refused_alike(
    cmds: list[RemotingCommand], flips: list[tuple[int, int]], points: list[int], max_frame_length: int
) -> None:
    data = bytearray()
    for cmd in cmds:
        try:
            data += REFERENCE.encode_command(cmd)
        except Exception:
            continue
    for at, byte in flips:
        if data:
            data[at % len(data)] = byte
    chunks = cut(bytes(data), points)
    assert stream_outcomes(NATIVE.decode_frames, chunks, max_frame_length) == stream_outcomes(
        REFERENCE.decode_frames, chunks, max_frame_length
    )


@pytest.mark.parametrize(
    "prefix",
    [
        struct.pack(">i", 3),
        struct.pack(">i", -1),
        struct.pack(">i", 2**31 - 1),
        struct.pack(">i", DEFAULT_MAX_FRAME_LENGTH - 3),
        struct.pack(">iI", 10, 7),
        struct.pack(">iI", 10, 0x00FFFFFF),
        struct.pack(">iI", 10, 2 << 24 | 6) + b"\0" * 6,
        struct.pack(">iI", 10, 0) + b"{}" + struct.pack(">i", -5),
    ],
)
def test_bad_lengths_are_refused_alike(prefix: bytes) -> None:
    for n in range(len(prefix) + 1):
        assert outcome(NATIVE.decode_frames, prefix[:n], DEFAULT_MAX_FRAME_LENGTH) == outcome(
            REFERENCE.decode_frames, prefix[:n], DEFAULT_MAX_FRAME_LENGTH
        )


HEADER_KEYS = st.sampled_from(["code", "opaque", "flag", "version", "language", "remark", "extFields",
                               "serializeTypeCurrentRPC", "other", "co\\u0064e"])  # fmt: skip
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def json_headers(draw: st.DrawFn) -> bytes:
    """Header texts around the shape clients send: right types mostly, sometimes anything."""
    members: dict[str, Any] = {}
    for key in draw(st.lists(HEADER_KEYS, max_size=9)):
        if key == "extFields":
            members[key] = draw(st.dictionaries(TEXT, TEXT | JSON_VALUES, max_size=6) | JSON_VALUES)
        elif key in ("code", "opaque", "flag", "version"):
            members[key] = draw(INT32 | JSON_VALUES)
        else:
            members[key] = draw(TEXT | JSON_VALUES)
    text = json.dumps(
        members,
        ensure_ascii=draw(st.booleans()),
        separators=draw(st.sampled_from([(",", ":"), (", ", ": ")])),
    )
    return text.encode("utf-8", "surrogatepass")


@SETTINGS
@given(json_headers(), st.lists(st.tuples(st.integers(0, 1 << 10), st.integers(0, 255)), max_size=3))
def test_json_headers_decode_alike(header: bytes, flips: list[tuple[int, int]]) -> None:
    data = bytearray(header)
    for at, byte in flips:
        data[at % len(data)] = byte
    same("decode_json_header", bytes(data))
    frame = FRAME_PREFIX.pack(4 + len(data), len(data)) + bytes(data)
    same("decode_frames", frame, DEFAULT_MAX_FRAME_LENGTH)


@pytest.mark.parametrize(
    "header",
    [
        b"",
        b"{",
        b"{}",
        b"[]",
        b'{"code":1}',
        b'{"code":1,"opaque":2,}',
        b'{"code":01,"opaque":2}',
        b'{"code":1.0,"opaque":2}',
        b'{"code":"7","opaque":2}',
        b'{"code":1,"opaque":2,"extFields":{"a":1,"b":true,"c":null}}',
        b'{"code":1,"opaque":2,"extFields":null,"remark":null}',
        b'{"code":1,"opaque":2,"extFields":{"a":"\\ud83d\\ude00\\ud800"}}',
        b'{"code":1,"opaque":2,"extFields":{"a":"\\x41"}}',
        b'{"code":1,"opaque":2,"remark":"\xff"}',
        b'{"code":1,"opaque":2,"\xc3\xa9":"\xc3"}',
        b'{"code":1,"opaque":2,"language":3}',
        b"{'code':1,'opaque':2}",
        b'{"code":1,"opaque":2,"x":"\x01"}',
        b'{"code":123456789012345678901234567890,"opaque":2}',
        b' {"code":1,"opaque":2}',
        b'{"code":1,"opaque":2} ',
        b'{"code":1,"opaque":2}x',
        b'{"code":-0,"opaque":-2,"version":NaN}',
        b'{"code":1,"opaque":2,"extFields":{"k":"a\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\u4e2d"}}',
    ],
)
def test_odd_json_headers_decode_alike(header: bytes) -> None:
    same("decode_json_header", header)


@SETTINGS
@given(commands(SerializeType.ROCKETMQ), st.lists(FLIP, max_size=3), st.integers(0, 1 << 10))
def test_binary_headers_decode_alike(cmd: RemotingCommand, flips: list[tuple[int, int]], cut_at: int) -> None:
    try:
        header = bytearray(REFERENCE.encode_rocketmq_header(cmd))
    except Exception:
        return
    same("decode_rocketmq_header", bytes(header))
    for at, byte in flips:
        header[at % len(header)] = byte
    same("decode_rocketmq_header", bytes(header))
    same("decode_rocketmq_header", bytes(header[: cut_at % (len(header) + 1)]))


def test_typical_send_frames_decode_alike_in_one_read() -> None:
    data = b"".join(REFERENCE.encode_command(send_v2_command(i)) for i in range(32))
    result = same("decode_frames", data, DEFAULT_MAX_FRAME_LENGTH)
    assert result[0] == "ok" and len(result[1][1][0][1]) == 32


@SETTINGS
@given(st.lists(st.text(max_size=40), min_size=1, max_size=600), st.randoms(use_true_random=False))
def test_recurring_short_texts_decode_alike(texts: list[str], rng: Any) -> None:
    """The compiled reader keeps recent short texts (one per hash slot) and hands the same str
    back for the same bytes: many texts, repeated in a shuffled order so that slots are reused
    and collide, must still decode to exactly the reference's values."""
    order = texts * 2
    rng.shuffle(order)
    for chunk in range(0, len(order), 50):
        ext = {f"k{n}": text for n, text in enumerate(order[chunk : chunk + 50])}
        cmd = RemotingCommand(code=int(RequestCode.SEND_MESSAGE_V2), opaque=chunk, ext_fields=ext)
        same("decode_json_header", REFERENCE.encode_json_header(cmd))
