"""Frame and command codec against the fact sheet's literal bytes, plus split/limit/round-trip checks."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.protocol.codes import CommandFlag, LanguageCode, RequestCode, ResponseCode, SerializeType
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.wire.command import (
    RemotingCommand,
    decode_rocketmq_header,
    make_request,
    make_response,
)
from rocketlite.protocol.wire.frame import (
    DEFAULT_MAX_FRAME_LENGTH,
    FrameDecoder,
    decode_frame,
    encode_command,
)
from rocketlite.protocol.wire.speedups import decode_json_header, encode_json_header

ROUTE_HEADER = (
    b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":1,'
    b'"serializeTypeCurrentRPC":"JSON","version":409}'
)
ROUTE_FRAME_JSON = bytes.fromhex("00000087 00000083") + ROUTE_HEADER
ROUTE_FRAME_BINARY = bytes.fromhex(
    "0000002d 01000029"  # length 45, type 1 | header length 41
    "0069 00 0199 00000001 00000000"  # code 105, JAVA, version 409, opaque 1, flag 0
    "00000000"  # remark length
    "00000014 0005 746f706963 00000009 546f70696354657374"  # ext: topic=TopicTest
)
JAVA_RESPONSE_HEADER = (
    b'{"code":0,"flag":1,"language":"JAVA","opaque":0,"serializeTypeCurrentRPC":"JSON","version":403}'
)


def route_request(serialize_type: SerializeType = SerializeType.JSON) -> RemotingCommand:
    return make_request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}, opaque=1, serialize_type=serialize_type
    )


def frame_of(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return struct.pack(">iI", 4 + len(header) + len(body), serialize_type << 24 | len(header)) + header + body


# ------------------------------------------------------------------------------------- literal bytes


def test_route_request_json_frame_is_byte_exact() -> None:
    assert len(ROUTE_HEADER) == 131
    frame = encode_command(route_request())
    assert frame == ROUTE_FRAME_JSON
    assert struct.unpack_from(">i", frame)[0] == 135


def test_route_request_json_frame_decodes() -> None:
    [cmd] = FrameDecoder().feed(ROUTE_FRAME_JSON)
    assert cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert (cmd.language, cmd.version, cmd.opaque, cmd.flag) == ("JAVA", 409, 1, 0)
    assert cmd.ext_fields == {"topic": "TopicTest"}
    assert cmd.remark is None and cmd.body is None
    assert cmd.serialize_type is SerializeType.JSON


def test_rocketmq_binary_example_both_ways() -> None:
    assert len(ROUTE_FRAME_BINARY) == 49
    assert encode_command(route_request(SerializeType.ROCKETMQ)) == ROUTE_FRAME_BINARY
    [cmd] = FrameDecoder().feed(ROUTE_FRAME_BINARY)
    assert cmd.serialize_type is SerializeType.ROCKETMQ
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (105, "JAVA", 409, 1, 0)
    assert cmd.ext_fields == {"topic": "TopicTest"}
    assert cmd.remark is None
    assert encode_command(cmd) == ROUTE_FRAME_BINARY


def test_java_response_header_round_trips_byte_for_byte() -> None:
    cmd = decode_json_header(JAVA_RESPONSE_HEADER)
    assert cmd.is_response and not cmd.is_oneway
    assert cmd.version == 403
    assert encode_json_header(cmd) == JAVA_RESPONSE_HEADER


def test_ali_ons_header_without_remark_or_serialize_type() -> None:
    header = (
        b'{"code":105,"language":"JAVA","opaque":1,"flag":0,"version":121,"extFields":{"topic":"SmokeTopic"}}'
    )
    [cmd] = FrameDecoder().feed(frame_of(header))
    assert (cmd.code, cmd.version, cmd.ext_fields) == (105, 121, {"topic": "SmokeTopic"})


def test_cpp_header_numbers_and_booleans_become_strings() -> None:
    header = (
        b'{"code":11,"extFields":{"AccessKey":"","Signature":"","queueId":0,"sysFlag":6,"maxMsgNums":32,'
        b'"unitMode":false,"batch":true,"commitOffset":-1,"nothing":null},"flag":0,"language":"CPP",'
        b'"opaque":7,"remark":"","version":63}'
    )
    cmd = decode_json_header(header)
    assert cmd.language == "CPP" and cmd.remark == ""
    assert cmd.ext_fields == {
        "AccessKey": "",
        "Signature": "",
        "queueId": "0",
        "sysFlag": "6",
        "maxMsgNums": "32",
        "unitMode": "false",
        "batch": "true",
        "commitOffset": "-1",
    }


def test_encoded_ext_values_are_always_json_strings() -> None:
    cmd = make_request(30, {"offset": "12", "b": "\x01"})
    cmd.ext_fields["n"] = 5  # type: ignore[assignment]  # a caller bug must still produce strings
    assert b'"extFields":{"b":"\\u0001","n":"5","offset":"12"}' in encode_json_header(cmd)


def test_response_echoes_opaque_flag_and_serialize_type() -> None:
    for serialize_type in SerializeType:
        request = make_request(14, {"topic": "t"}, opaque=4242, serialize_type=serialize_type)
        request.language, request.version = "CPP", 63
        response = make_response(request, ResponseCode.QUERY_NOT_FOUND, "not found", {"offset": "0"})
        assert response.opaque == 4242
        assert response.flag == CommandFlag.RESPONSE and response.is_response and not response.is_oneway
        assert response.serialize_type is serialize_type
        assert (response.language, response.version) == ("JAVA", 409)
        [decoded] = FrameDecoder().feed(encode_command(response))
        assert decoded.is_response and decoded.opaque == 4242 and decoded.serialize_type is serialize_type
        assert decoded.code == ResponseCode.QUERY_NOT_FOUND and decoded.remark == "not found"
    assert make_response(request, 0, version=401).version == 401


def test_oneway_request_flag() -> None:
    cmd = make_request(RequestCode.UPDATE_CONSUMER_OFFSET, oneway=True)
    assert cmd.flag == 2 and cmd.is_oneway and not cmd.is_response


def test_body_bytes_follow_header_and_empty_body_is_none() -> None:
    cmd = make_request(34, body=b'{"clientID":"x"}', opaque=3)
    [decoded] = FrameDecoder().feed(encode_command(cmd))
    assert decoded.body == b'{"clientID":"x"}'
    [empty] = FrameDecoder().feed(encode_command(make_request(34, body=b"")))
    assert empty.body is None


# ------------------------------------------------------------------------------------------- splitting


def test_feed_one_byte_at_a_time() -> None:
    frames = [
        encode_command(route_request()),
        encode_command(make_request(34, body=b"x" * 300, opaque=2)),
        ROUTE_FRAME_BINARY,
    ]
    stream = b"".join(frames)
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    for i in range(len(stream)):
        out += decoder.feed(stream[i : i + 1])
    assert [c.opaque for c in out] == [1, 2, 1]
    assert out[1].body == b"x" * 300
    assert decoder.buffered == 0


def test_every_split_point_gives_the_same_commands() -> None:
    stream = encode_command(route_request()) + encode_command(make_response(route_request(), 0, body=b"abc"))
    expected = FrameDecoder().feed(stream)
    assert len(expected) == 2
    for i in range(len(stream) + 1):
        decoder = FrameDecoder()
        got = decoder.feed(stream[:i]) + decoder.feed(stream[i:])
        assert [(c.code, c.flag, c.body) for c in got] == [(c.code, c.flag, c.body) for c in expected]


# ---------------------------------------------------------------------------------------------- limits


@pytest.mark.parametrize("length", [-1, 0, 3])
def test_undersized_frame_length_raises(length: int) -> None:
    with pytest.raises(ProtocolError, match="below the minimum"):
        FrameDecoder().feed(struct.pack(">i", length))


def test_oversized_frame_raises_as_soon_as_the_length_arrives() -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        decoder.feed(struct.pack(">i", DEFAULT_MAX_FRAME_LENGTH - 3))
    with pytest.raises(ProtocolError, match="already failed"):
        decoder.feed(b"\x00")


def test_frame_at_the_limit_is_accepted() -> None:
    limit = 1024
    header = encode_json_header(make_request(34))
    body = b"b" * (limit - 8 - len(header))
    frame = frame_of(header, body)
    assert len(frame) == limit
    [cmd] = FrameDecoder(max_frame_length=limit).feed(frame)
    assert cmd.body == body
    with pytest.raises(ProtocolError):
        FrameDecoder(max_frame_length=limit).feed(frame_of(header, body + b"!"))


def test_header_length_beyond_frame_raises_before_the_frame_completes() -> None:
    with pytest.raises(ProtocolError, match="header length"):
        FrameDecoder().feed(struct.pack(">iI", 10, 7))
    with pytest.raises(ProtocolError, match="header length"):
        decode_frame(struct.pack(">I", 50) + b"{}")


def test_unknown_serialize_type_raises() -> None:
    with pytest.raises(ProtocolError, match="serialize type"):
        FrameDecoder().feed(frame_of(b"{}", serialize_type=2))


@pytest.mark.parametrize(
    "header",
    [
        b"not json",
        b"[1,2]",
        b'{"opaque":1}',  # no code
        b'{"code":105}',  # no opaque
        b'{"code":"x","opaque":1}',
        b'{"code":1,"opaque":1,"extFields":[1]}',
        b'{"code":1,"opaque":1,"language":{}}',
        b"\xff\xfe",
    ],
)
def test_malformed_json_headers_raise(header: bytes) -> None:
    with pytest.raises(ProtocolError):
        FrameDecoder().feed(frame_of(header))


def test_lenient_json_header_is_accepted() -> None:
    cmd = decode_json_header(b"{code:105,'opaque':'9',flag:0,extFields:{topic:'T',},}")
    assert (cmd.code, cmd.opaque, cmd.ext_fields) == (105, 9, {"topic": "T"})


def test_language_ordinal_in_json_header() -> None:
    assert decode_json_header(b'{"code":1,"opaque":1,"language":9}').language == "GO"


@pytest.mark.parametrize(
    "header",
    [
        bytes.fromhex("0069000199000000010000000000000010"),  # remark length 16 overruns
        bytes.fromhex("006900019900000001000000000000000000000014"),  # ext length overruns
        bytes.fromhex("00690001990000000100000000000000000000000000"),  # trailing byte
        bytes.fromhex("006900019900000001000000000000000000000007 0005 746f706963 00"),  # torn entry
        bytes.fromhex("0069000199"),  # too short
    ],
)
def test_torn_binary_headers_raise(header: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_rocketmq_header(header)


def test_binary_empty_strings_decode_as_null() -> None:
    cmd = RemotingCommand(
        code=1, remark="", ext_fields={"a": "", "b": "x"}, serialize_type=SerializeType.ROCKETMQ
    )
    [decoded] = FrameDecoder().feed(encode_command(cmd))
    assert decoded.remark is None
    assert decoded.ext_fields == {"b": "x"}


def test_binary_unknown_language_is_sent_as_other() -> None:
    cmd = RemotingCommand(code=1, language="COBOL", serialize_type=SerializeType.ROCKETMQ)
    [decoded] = FrameDecoder().feed(encode_command(cmd))
    assert decoded.language == LanguageCode.OTHER.name


# ------------------------------------------------------------------------------------------ round trip

int32 = st.integers(-(2**31), 2**31 - 1)
int16 = st.integers(-(2**15), 2**15 - 1)
texts = st.text(max_size=24)


@st.composite
def commands(draw: st.DrawFn, serialize_type: SerializeType) -> RemotingCommand:
    binary = serialize_type is SerializeType.ROCKETMQ
    return RemotingCommand(
        code=draw(int16 if binary else int32),
        language=draw(st.sampled_from([c.name for c in LanguageCode]) if binary else texts),
        version=draw(int16 if binary else int32),
        opaque=draw(int32),
        flag=draw(int32),
        remark=draw(st.none() | texts),
        ext_fields=draw(st.dictionaries(st.text(min_size=1, max_size=12), texts, max_size=6)),
        body=draw(st.none() | st.binary(min_size=1, max_size=64)),
        serialize_type=serialize_type,
    )


def expected_after_round_trip(cmd: RemotingCommand) -> RemotingCommand:
    if cmd.serialize_type is SerializeType.JSON:
        return cmd
    return RemotingCommand(
        code=cmd.code,
        language=cmd.language,
        version=cmd.version,
        opaque=cmd.opaque,
        flag=cmd.flag,
        remark=cmd.remark or None,
        ext_fields={k: v for k, v in cmd.ext_fields.items() if v},
        body=cmd.body,
        serialize_type=cmd.serialize_type,
    )


@given(st.sampled_from(SerializeType).flatmap(lambda t: st.lists(commands(t), min_size=1, max_size=4)))
def test_commands_round_trip(cmds: list[RemotingCommand]) -> None:
    stream = b"".join(encode_command(c) for c in cmds)
    decoder = FrameDecoder()
    got = decoder.feed(stream[:7]) + decoder.feed(stream[7:])
    assert got == [expected_after_round_trip(c) for c in cmds]
    assert decoder.buffered == 0
