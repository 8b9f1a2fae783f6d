"""The per-request fast paths are pinned to their generic definitions.

Every fast path in the protocol package has a reference next to it (the code it replaced; the
codecs that `protocol.wire.speedups` chooses between are compared through its `CHOSEN` and
`REFERENCE` sets, the record codec's in `test_record.py`); these
property tests feed both the same input and demand the same outcome: the same value with the
same types, or the same exception type and message. Plus the framing and connection batching,
and the consume-queue allocator that no longer writes zeros.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import struct
from enum import IntEnum
from pathlib import Path
from typing import Any, ClassVar, get_type_hints

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite.protocol.codes import RequestCode, ResponseCode, SerializeType
from rocketlite.protocol.wire import custom_header as ch
from rocketlite.protocol.wire import fastjson, speedups
from rocketlite.protocol.wire import headers as h
from rocketlite.protocol.wire.command import RemotingCommand, make_request, make_response
from rocketlite.protocol.wire.frame import FRAME_PREFIX, FrameDecoder, decode_frame, encode_command
from rocketlite.protocol.wire.header_codec import encode_header
from rocketlite.remoting.connection import Connection, RequestTable
from rocketlite.store.consume_queue import ConsumeQueue
from rocketlite.store.mapped_file import create_segment, staging_path
from rocketlite.store.mapped_file_queue import direct_allocator

# The implementations `protocol.wire.speedups` chooses between: every fast one is pinned to the reference.
FAST = speedups.CHOSEN
REFERENCE = speedups.REFERENCE

# ------------------------------------------------------------------------------------------ helpers


def outcome(fn: Any, *args: Any) -> tuple[Any, ...]:
    """What a call did: ("ok", value) or ("raised", type, message, field, value)."""
    try:
        return ("ok", fn(*args))
    except Exception as exc:
        return ("raised", type(exc), str(exc), getattr(exc, "field", None), getattr(exc, "value", None))


def typed_fields(obj: Any) -> list[tuple[str, type, Any]]:
    """A dataclass's fields with their types: `1 == True` must not pass for a bool field."""
    return [(f.name, type(getattr(obj, f.name)), getattr(obj, f.name)) for f in dataclasses.fields(obj)]


def same_outcome(fast: tuple[Any, ...], generic: tuple[Any, ...]) -> None:
    assert fast[0] == generic[0], (fast, generic)
    if fast[0] == "ok":
        assert type(fast[1]) is type(generic[1])
        assert typed_fields(fast[1]) == typed_fields(generic[1])
    else:
        assert fast == generic


# ------------------------------------------------------------------------------------ custom headers


@dataclasses.dataclass(frozen=True, kw_only=True)  # no slots: built by calling the class
class _UnslottedHeader(ch.CustomHeader):
    topic: str
    queue_id: int
    offset: ch.Long | None = None
    flag: bool = False


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _PostInitHeader(ch.CustomHeader):
    """A `__post_init__` must run, so the decoder may not fill the slots itself."""

    seen: ClassVar[list[int]] = []
    count: int
    name: str | None = None

    def __post_init__(self) -> None:
        _PostInitHeader.seen.append(self.count)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _NoInitFieldHeader(ch.CustomHeader):
    """A field the constructor does not take: such a class is left to the generic decoder."""

    topic: str
    version: int = dataclasses.field(default=0, init=False)


HEADER_CLASSES: tuple[type[ch.CustomHeader], ...] = (
    *h.ALL_HEADERS,
    _UnslottedHeader,
    _PostInitHeader,
    _NoInitFieldHeader,
)

NUMBER_TEXTS = [
    "0", "1", "-1", "7", "16", "1024", "1025", "007", "+3", "-0", " 1", "1 ", "1_000", "0x10", "1.5", "",
    "abc", "\u0661", "\u00b2", "２", "2147483647", "2147483648", "-2147483648", "-2147483649",
    "999999999", "1000000000", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
    "-9223372036854775809", "999999999999999999", "1000000000000000000", "1" * 30,
]  # fmt: skip
BOOL_TEXTS = ["true", "false", "TRUE", "True", " true ", "1", "0", "", "yes", "t", "\ttrue\n"]


def _wire_value(kind: ch._Kind) -> st.SearchStrategy[Any]:
    texts = st.text(max_size=12)
    if kind is ch._Kind.STR:
        choices = texts
    elif kind is ch._Kind.BOOL:
        choices = st.sampled_from(BOOL_TEXTS) | texts
    else:
        limit = 2**31 if kind is ch._Kind.INT else 2**63
        choices = (
            st.sampled_from(NUMBER_TEXTS)
            | st.integers(-2 * limit, 2 * limit).map(str)
            | st.integers(0, 10**40).map(str)
            | texts
        )
    # Sometimes not text at all (a caller's dict): the fast decoder must defer to the generic one.
    return choices | st.sampled_from([0, 1, True, None, 2.5, b"1", ("x",)])


@st.composite
def header_ext(draw: st.DrawFn) -> tuple[type[ch.CustomHeader], dict[str, Any], dict[str, str] | None]:
    cls = draw(st.sampled_from(HEADER_CLASSES))
    names: dict[str, str] | None = None
    if cls is h.SendMessageRequestHeader and draw(st.booleans()):
        names = dict(h.SendMessageRequestHeader.V2_NAMES)
    ext: dict[str, Any] = {}
    for spec in cls.field_specs():
        wire = names[spec.attr] if names is not None else spec.wire
        if draw(st.integers(0, 9)) < 8:  # mostly present
            ext[wire] = draw(_wire_value(spec.kind))
    if draw(st.booleans()):
        ext[draw(st.text(max_size=5))] = draw(st.text(max_size=5))  # unknown keys are ignored
    return cls, ext, names


@settings(max_examples=600)
@given(header_ext())
def test_generated_decoder_matches_the_generic_one(
    case: tuple[type[ch.CustomHeader], dict[str, Any], Any],
) -> None:
    cls, ext, names = case
    same_outcome(outcome(cls._decode, ext, names), outcome(cls._decode_generic, ext, names))


@pytest.mark.parametrize("text", NUMBER_TEXTS)
@pytest.mark.parametrize("required", [True, False])
def test_every_number_spelling_decodes_like_the_generic_rule(text: str, required: bool) -> None:
    if required:
        ext = {"topic": "t", "queueId": text, "timestamp": text}
        cls: type[ch.CustomHeader] = h.SearchOffsetRequestHeader
    else:
        ext = {"topic": "t", "queueId": "1", "offset": text}
        cls = _UnslottedHeader
    same_outcome(outcome(cls.from_ext, ext), outcome(cls._decode_generic, ext))


@pytest.mark.parametrize("text", BOOL_TEXTS)
def test_every_boolean_spelling_decodes_like_the_generic_rule(text: str) -> None:
    ext = {"offset": "1", "group": "g", "delayLevel": "0", "unitMode": text}
    cls = h.ConsumerSendMsgBackRequestHeader
    same_outcome(outcome(cls.from_ext, ext), outcome(cls._decode_generic, ext))
    ext = {"changed": text}
    same_outcome(
        outcome(h.QueryDataVersionResponseHeader.from_ext, ext),
        outcome(h.QueryDataVersionResponseHeader._decode_generic, ext),
    )


def test_send_header_codes_pick_the_spelling_and_errors_name_the_key_sent() -> None:
    v2 = {"a": "g", "b": "t", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "5", "h": "0"}
    header = h.SendMessageRequestHeader.from_ext(v2, RequestCode.SEND_MESSAGE_V2)
    assert header == h.SendMessageRequestHeader._decode_generic(v2, h.SendMessageRequestHeader.V2_NAMES)
    with pytest.raises(ch.MissingHeaderFieldError, match="<producerGroup>"):
        h.SendMessageRequestHeader.from_ext(v2, RequestCode.SEND_MESSAGE)
    with pytest.raises(ch.BadHeaderFieldError) as bad:
        h.SendMessageRequestHeader.from_ext({**v2, "e": "x1"}, RequestCode.SEND_BATCH_MESSAGE)
    assert (bad.value.field, bad.value.value, bad.value.remark) == (
        "e",
        "x1",
        "the custom field <e> is not a valid int: 'x1'",
    )
    with pytest.raises(ch.MissingHeaderFieldError) as missing:
        h.SendMessageRequestHeader.from_ext({k: v for k, v in v2.items() if k != "d"}, 310)
    assert missing.value.remark == "the custom field <d> is null"


def test_post_init_and_unslotted_headers_are_built_by_their_constructor() -> None:
    _PostInitHeader.seen.clear()
    assert _PostInitHeader.from_ext({"count": "3"}) == _PostInitHeader(count=3)
    assert _PostInitHeader.seen == [3, 3]
    assert _UnslottedHeader.from_ext({"topic": "t", "queueId": "-1", "flag": "1"}) == _UnslottedHeader(
        topic="t", queue_id=-1, flag=True
    )


@st.composite
def header_instances(draw: st.DrawFn) -> ch.CustomHeader:
    cls = draw(st.sampled_from(HEADER_CLASSES))
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        kind = ch._kind_of(get_type_hints(cls, include_extras=True)[f.name], f.name)
        value = {
            ch._Kind.STR: st.text(max_size=10),
            ch._Kind.INT: st.integers(-(2**31), 2**31 - 1),
            ch._Kind.LONG: st.integers(-(2**63), 2**63 - 1),
            ch._Kind.BOOL: st.booleans(),
        }[kind]
        if f.init:
            values[f.name] = draw(value | st.none() if f.default is None else value)
    return cls(**values)


@given(header_instances())
def test_generated_encoder_matches_the_generic_one(header: ch.CustomHeader) -> None:
    assert header.to_ext() == header._encode_generic()
    assert list(header.to_ext()) == list(header._encode_generic())  # same order too
    if isinstance(header, h.SendMessageRequestHeader):
        v2 = h.SendMessageRequestHeader.V2_NAMES
        assert header.to_ext_v2() == header._encode_generic(v2)
        assert h.SendMessageRequestHeader.from_ext(header.to_ext_v2(), 310) == header


# ---------------------------------------------------------------------------------------------- quote


def test_quote_matches_fastjson_for_every_single_character() -> None:
    mismatches = [
        c for c in range(0x110000) if fastjson.quote_plain(chr(c)) != fastjson.quote_reference(chr(c))
    ]
    assert mismatches == []


@given(st.text(alphabet=st.characters(codec=None), max_size=40))
def test_quote_matches_fastjson_for_any_text(text: str) -> None:
    assert fastjson.quote(text) == fastjson.quote_plain(text) == fastjson.quote_reference(text)


@pytest.mark.parametrize(
    "text",
    ["", "plain", 'q"uote', "back\\slash", "TAGS\x01A\x02", "\x0b\x0e\x1f\x7f\x85\x9f", "é€😀", "\ud800"],
)
def test_quote_examples(text: str) -> None:
    assert fastjson.quote_plain(text) == fastjson.quote_reference(text)


def test_strict_loads_is_json_loads() -> None:
    for text in [
        '{"a":1}',
        ' {"a":1}',
        '{"a":1} ',
        "\ufeff{}",
        "[1,2]",
        "NaN",
        "1e400",
        '"x"',
        "",
        "{",
        '{"a":1}x',
    ]:
        strict = outcome(fastjson.loads_strict, text)
        reference = outcome(lambda t: json.loads(t, parse_constant=fastjson._reject_constant), text)
        assert strict[0] == reference[0], text
        if strict[0] == "ok":
            assert strict[1] == reference[1]
        assert outcome(fastjson.loads, text) == outcome(reference_loads, text)


def reference_loads(text: str) -> Any:
    """`fastjson.loads` as it was: `json.loads`, then the lenient reader."""
    try:
        return json.loads(text, parse_constant=fastjson._reject_constant)
    except (ValueError, RecursionError):
        return fastjson.loads_lenient(text)


# -------------------------------------------------------------------------------------- JSON headers


class _Code(IntEnum):
    SOME = 17


WEIRD_KEYS = ["a", "msgId", "MSG_REGION", "%s", "%(x)s", "a(b)", 'q"', "\\", "é", "\x01", " ", "k-y.z"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
numbers = st.integers(-(2**40), 2**40) | st.sampled_from([True, False, _Code.SOME, ResponseCode.SUCCESS])


@st.composite
def any_commands(draw: st.DrawFn) -> RemotingCommand:
    keys = st.sampled_from(WEIRD_KEYS) | st.text(max_size=8)
    values: st.SearchStrategy[Any] = st.text(max_size=12) | st.sampled_from(["TAGS\x01a\x02", "", "é"])
    if draw(st.integers(0, 5)) == 0:
        values = values | json_values  # numbers, booleans, None, lists and maps are written as text
    return RemotingCommand(
        code=draw(numbers),
        language=draw(st.sampled_from(["JAVA", "CPP", "GO"]) | st.text(max_size=6)),
        version=draw(numbers),
        opaque=draw(numbers),
        flag=draw(numbers),
        remark=draw(st.none() | st.sampled_from(["FOUND", "", "%s"]) | st.text(max_size=10)),
        ext_fields=draw(st.dictionaries(keys, values, max_size=7)),
    )


@settings(max_examples=500)
@given(any_commands())
def test_json_header_encoding_is_byte_exact(cmd: RemotingCommand) -> None:
    assert outcome(FAST.encode_json_header, cmd) == outcome(REFERENCE.encode_json_header, cmd)


@pytest.mark.parametrize(
    "change",
    [
        {"code": "5"},  # int() takes text: the fast path defers to the reference
        {"opaque": 2.7},
        {"flag": float("nan")},
        {"version": None},
        {"language": 3},
        {"remark": 5},
        {"remark": ["x"]},
        {"ext_fields": {1: "x"}},
        {"ext_fields": {"a": "x", 2: "y"}},
        {"ext_fields": {"a": b"x"}},
        {"ext_fields": {"a": None, "b": "c"}},
        {"ext_fields": {"\ud800": "x"}},
    ],
)
def test_json_header_encoding_of_odd_commands_matches(change: dict[str, Any]) -> None:
    cmd = make_request(RequestCode.SEND_MESSAGE_V2, {"a": "b"}, opaque=3)
    for name, value in change.items():
        setattr(cmd, name, value)
    assert outcome(FAST.encode_json_header, cmd) == outcome(REFERENCE.encode_json_header, cmd)


def test_send_response_header_bytes() -> None:
    request = make_request(RequestCode.SEND_MESSAGE_V2, {"a": "g"}, opaque=77)
    ext = {
        "msgId": "7F000001",
        "queueId": "3",
        "queueOffset": "12",
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }
    for _ in range(2):  # the second time from the cached template
        assert FAST.encode_json_header(make_response(request, ResponseCode.SUCCESS, None, ext)) == (
            b'{"code":0,"extFields":{"MSG_REGION":"DefaultRegion","TRACE_ON":"true","msgId":"7F000001",'
            b'"queueId":"3","queueOffset":"12"},"flag":1,"language":"JAVA","opaque":77,'
            b'"serializeTypeCurrentRPC":"JSON","version":409}'
        )


def decoded(fn: Any, data: bytes | memoryview) -> tuple[Any, ...]:
    result = outcome(fn, data)
    if result[0] == "ok":
        cmd = result[1]
        fields = [(type(getattr(cmd, f.name)), getattr(cmd, f.name)) for f in dataclasses.fields(cmd)]
        ext_types = [(type(k), type(v)) for k, v in cmd.ext_fields.items()]
        return ("ok", fields, list(cmd.ext_fields.items()), ext_types)
    return result


header_members = st.fixed_dictionaries(
    {},
    optional={
        "code": st.integers(-5, 500) | json_values,
        "opaque": st.integers(0, 2**31) | json_values,
        "flag": st.integers(0, 3) | json_values,
        "version": st.integers(0, 500) | json_values,
        "language": st.sampled_from(["JAVA", "CPP"]) | st.integers(-1, 20) | json_values,
        "remark": st.none() | st.text(max_size=6) | json_values,
        "extFields": st.dictionaries(st.text(max_size=4), st.text(max_size=6) | json_values, max_size=4)
        | json_values,
        "serializeTypeCurrentRPC": st.just("JSON"),
    },
)


@settings(max_examples=500)
@given(header_members, st.sampled_from(["plain", "spaced", "bom", "lenient", "truncated"]))
def test_json_header_decoding_matches_the_reference(members: dict[str, Any], form: str) -> None:
    text = json.dumps(members, separators=(",", ":"), allow_nan=True)
    if form == "spaced":
        text = f" {text}\n"
    elif form == "bom":
        text = "\ufeff" + text
    elif form == "lenient":
        text = text.replace('"code"', "code").replace("}", ",}", 1)
    elif form == "truncated":
        text = text[: len(text) // 2]
    data = text.encode("utf-8", "surrogatepass")
    assert decoded(FAST.decode_json_header, data) == decoded(REFERENCE.decode_json_header, data)


@given(any_commands())
def test_encoded_commands_decode_alike(cmd: RemotingCommand) -> None:
    data = outcome(REFERENCE.encode_json_header, cmd)
    if data[0] == "ok":
        assert decoded(FAST.decode_json_header, data[1]) == decoded(REFERENCE.decode_json_header, data[1])
        assert decoded(FAST.decode_json_header, memoryview(data[1])) == decoded(
            FAST.decode_json_header, data[1]
        )


@pytest.mark.parametrize(
    "data", [b"\xff{}", b"", b"[]", b'{"code":1}', b'{"code":1,"opaque":2,"extFields":[1]}']
)
def test_bad_json_headers_fail_alike(data: bytes) -> None:
    assert decoded(FAST.decode_json_header, data) == decoded(REFERENCE.decode_json_header, data)


# -------------------------------------------------------------------------------------------- frames


def reference_frame(cmd: RemotingCommand) -> bytes:
    header = encode_header(cmd)
    body = cmd.body or b""
    word = (int(cmd.serialize_type) << 24) | len(header)
    return FRAME_PREFIX.pack(4 + len(header) + len(body), word) + header + body


frame_commands = st.builds(
    RemotingCommand,
    code=st.integers(0, 400),
    opaque=st.integers(0, 2**31 - 1),
    remark=st.none() | st.text(max_size=6),
    ext_fields=st.dictionaries(st.text(min_size=1, max_size=5), st.text(min_size=1, max_size=8), max_size=4),
    body=st.none() | st.binary(min_size=1, max_size=300),
    serialize_type=st.sampled_from(SerializeType),
)


@given(
    st.lists(frame_commands, min_size=1, max_size=6), st.lists(st.integers(1, 200), max_size=12), st.data()
)
def test_frames_decode_alike_for_any_split(
    cmds: list[RemotingCommand], cuts: list[int], data: st.DataObject
) -> None:
    frames = [encode_command(c) for c in cmds]
    assert frames == [reference_frame(c) for c in cmds]
    stream = b"".join(frames)
    expected = [decode_frame(f[4:]) for f in frames]
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    pos = 0
    for cut in [*cuts, len(stream)]:
        chunk = stream[pos : pos + cut]
        kind = data.draw(st.sampled_from([bytes, bytearray, memoryview]))
        got += decoder.feed(kind(chunk))
        pos += cut
        if pos >= len(stream):
            break
    got += decoder.feed(stream[pos:])
    assert got == expected
    assert decoder.buffered == 0
    assert all(c.body is None or type(c.body) is bytes for c in got)


def test_torn_tail_is_kept_and_errors_stick() -> None:
    frame = encode_command(make_request(RequestCode.HEART_BEAT, {"k": "v"}, b"body", opaque=9))
    decoder = FrameDecoder()
    assert decoder.feed(frame + frame[:10]) == [decode_frame(frame[4:])]
    assert decoder.buffered == 10
    assert decoder.feed(frame[10:]) == [decode_frame(frame[4:])]
    assert decoder.buffered == 0
    bad = FrameDecoder()
    with pytest.raises(Exception, match="below the minimum"):
        bad.feed(frame + struct.pack(">i", 1))
    with pytest.raises(Exception, match="stream already failed"):
        bad.feed(frame)


# ---------------------------------------------------------------------------------------- connection


class _Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def writelines(self, items: list[bytes]) -> None:
        self.writes.append(b"".join(items))

    def get_extra_info(self, name: str) -> Any:
        return None

    def close(self) -> None:
        pass


def _connection(table: RequestTable) -> tuple[Connection, _Transport]:
    conn = Connection(table)
    transport = _Transport()
    conn.transport = transport  # type: ignore[assignment]
    return conn, transport


def test_one_batch_of_requests_is_answered_with_one_write() -> None:
    table = RequestTable()
    table.register(RequestCode.SEND_MESSAGE_V2, lambda _c, r: make_response(r, 0, None, {"queueId": "1"}))
    table.register(RequestCode.HEART_BEAT, lambda _c, r: None)
    conn, transport = _connection(table)
    requests = [make_request(RequestCode.SEND_MESSAGE_V2, {"a": "g"}, b"x", opaque=i) for i in range(5)]
    requests.append(make_request(RequestCode.HEART_BEAT, {}, opaque=99))
    requests.append(make_request(RequestCode.SEND_MESSAGE_V2, {}, b"y", opaque=100, oneway=True))
    conn.data_received(b"".join(encode_command(r) for r in requests))
    assert len(transport.writes) == 1
    answers = FrameDecoder().feed(transport.writes[0])
    assert [a.opaque for a in answers] == [0, 1, 2, 3, 4]
    assert transport.writes[0] == b"".join(
        encode_command(make_response(r, 0, None, {"queueId": "1"})) for r in requests[:5]
    )


def test_send_parts_writes_one_frame_equal_to_the_joined_body() -> None:
    conn, transport = _connection(RequestTable())
    request = make_request(RequestCode.PULL_MESSAGE, {}, opaque=5)
    parts = [memoryview(b"a" * 10), memoryview(b"bc"), memoryview(b"d" * 300)]
    response = make_response(request, ResponseCode.SUCCESS, "FOUND", {"nextBeginOffset": "3"})
    conn.send_parts(response, parts)
    whole = make_response(request, ResponseCode.SUCCESS, "FOUND", {"nextBeginOffset": "3"}, b"".join(parts))
    assert transport.writes == [encode_command(whole)]
    [decoded_cmd] = FrameDecoder().feed(transport.writes[0])
    assert decoded_cmd.body == b"".join(parts)


# ------------------------------------------------------------------------------ consume-queue files


def test_reserved_segment_reads_as_zeros_with_blocks_reserved(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000"
    create_segment(path, 6_000_000)
    assert path.stat().st_size == 6_000_000
    assert not staging_path(path).exists()
    assert path.read_bytes() == bytes(6_000_000)
    if path.stat().st_blocks * 512 < 6_000_000:  # pragma: no cover - file systems without fallocate
        pytest.skip("this file system leaves the file sparse")
    mf = direct_allocator(tmp_path / "00000000000006000000", 6_000_000, False)
    assert mf.wrote_position == 0 and mf.file_size == 6_000_000
    mf.close()


def test_consume_queue_files_are_reserved_not_prezeroed(tmp_path: Path) -> None:
    cq = ConsumeQueue("T", 0, tmp_path, 6_000_000)  # the default allocator reserves, never pre-zeroes
    assert cq._mfq.allocator is direct_allocator
    cq.put_units([(0, 100, 1), (100, 50, 2)], 0)
    cq.close()
    again = ConsumeQueue("T", 0, tmp_path, 6_000_000)
    again.load()
    again.recover()
    assert (again.min_offset, again.max_offset) == (0, 2)
    assert again.get_unit(1) == (100, 50, 2)
    assert again.max_physic_offset == 150
    again.close()
    assert [p.name for p in (tmp_path / "T" / "0").iterdir()] == ["00000000000000000000"]


def test_frames_sent_between_reads_are_written_together_at_the_next_loop_turn() -> None:
    async def scenario() -> tuple[list[bytes], list[bytes], list[bytes]]:
        conn, transport = _connection(RequestTable())
        conn.loop = asyncio.get_running_loop()
        answers = [make_response(make_request(RequestCode.PULL_MESSAGE, {}, opaque=i), 0) for i in range(3)]
        for answer in answers:
            conn.send(answer)
        before = list(transport.writes)
        await asyncio.sleep(0)
        after = list(transport.writes)
        conn.send(answers[0])
        conn.close()  # pending frames are written before the transport closes
        return before, after, transport.writes

    before, after, final = asyncio.run(scenario())
    request = make_request(RequestCode.PULL_MESSAGE, {}, opaque=0)
    expected = [
        encode_command(make_response(make_request(RequestCode.PULL_MESSAGE, {}, opaque=i), 0))
        for i in range(3)
    ]
    assert before == []
    assert after == [b"".join(expected)]
    assert final == [b"".join(expected), encode_command(make_response(request, 0))]
