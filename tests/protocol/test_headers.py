"""Custom headers (ext <-> dataclass) and the SEND_BATCH_MESSAGE body codec."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.formats.batch import BatchEntry, decode_batch, encode_batch
from rocketlite.protocol.wire import custom_header as ch
from rocketlite.protocol.wire import headers as h
from rocketlite.protocol.wire.frame import FrameDecoder
from rocketlite.protocol.wire.speedups import decode_json_header

# The SEND_MESSAGE_V2 capture from the fact sheet (section 1.3), opaque filled in.
CAPTURED_V2 = (
    b'{"code":310,"extFields":{"a":"yyzGroup2","b":"yyztest2","c":"TBW102","d":"4","e":"0","f":"0",'
    b'"g":"1491978653614","h":"0","i":"TAGS\\u0001TAG\\u0002WAIT\\u0001true\\u0002KEYS\\u0001ffff\\u0002",'
    b'"j":"0","k":"false"},"flag":0,"language":"JAVA","opaque":77,"serializeTypeCurrentRPC":"JSON","version":115}'
)


def test_captured_send_message_v2_header() -> None:
    frame = struct.pack(">iI", 4 + len(CAPTURED_V2), len(CAPTURED_V2)) + CAPTURED_V2
    [cmd] = FrameDecoder().feed(frame)
    header = h.SendMessageRequestHeader.from_ext(cmd.ext_fields, cmd.code)
    assert header == h.SendMessageRequestHeader(
        producer_group="yyzGroup2",
        topic="yyztest2",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=0,
        sys_flag=0,
        born_timestamp=1491978653614,
        flag=0,
        properties="TAGS\x01TAG\x02WAIT\x01true\x02KEYS\x01ffff\x02",
        reconsume_times=0,
        unit_mode=False,
    )
    assert header.max_reconsume_times is None and header.batch is False and header.bname is None
    assert header.to_ext_v2() == {**cmd.ext_fields, "m": "false"}


def test_cpp_send_message_v1_with_numeric_json_values() -> None:
    cmd = decode_json_header(
        b'{"code":10,"extFields":{"producerGroup":"pg","topic":"T","defaultTopic":"TBW102",'
        b'"defaultTopicQueueNums":4,"queueId":1,"sysFlag":0,"bornTimestamp":"1700000000000","flag":0,'
        b'"properties":"UNIQ_KEY\\u0001AB\\u0002WAIT\\u0001true","reconsumeTimes":"0","unitMode":"0",'
        b'"batch":"0","AccessKey":"","Signature":"x"},"flag":0,"language":"CPP","opaque":1,"remark":"","version":63}'
    )
    header = h.SendMessageRequestHeader.from_ext(cmd.ext_fields, cmd.code)
    assert (header.queue_id, header.default_topic_queue_nums, header.born_timestamp) == (1, 4, 1700000000000)
    assert header.unit_mode is False and header.batch is False and header.reconsume_times == 0
    assert header.properties == "UNIQ_KEY\x01AB\x02WAIT\x01true"


def test_v2_and_v1_spellings_are_selected_by_request_code() -> None:
    header = h.SendMessageRequestHeader(
        producer_group="g",
        topic="t",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=-1,
        sys_flag=769,
        born_timestamp=-5,
        flag=3,
        max_reconsume_times=16,
        batch=True,
        bname="broker-a",
    )
    v1, v2 = header.to_ext(), header.to_ext_v2()
    assert v1["producerGroup"] == "g" and v1["bname"] == "broker-a" and "reconsumeTimes" not in v1
    assert v2["l"] == "16" and v2["m"] == "true" and v2["n"] == "broker-a" and "j" not in v2
    assert h.SendMessageRequestHeader.from_ext(v1, RequestCode.SEND_MESSAGE) == header
    assert h.SendMessageRequestHeader.from_ext(v1, RequestCode.SEND_REPLY_MESSAGE) == header
    for code in (
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.SEND_REPLY_MESSAGE_V2,
    ):
        assert h.SendMessageRequestHeader.from_ext(v2, code) == header
    assert h.SendMessageRequestHeader.v2_to_v1({**v2, "x": "y"}) == {**v1, "x": "y"}


def test_missing_required_field_error_names_the_wire_key() -> None:
    with pytest.raises(ch.MissingHeaderFieldError) as v2_error:
        h.SendMessageRequestHeader.from_ext({"b": "t"}, RequestCode.SEND_MESSAGE_V2)
    assert v2_error.value.field == "a"
    assert v2_error.value.remark == "the custom field <a> is null"
    assert v2_error.value.code == ResponseCode.SYSTEM_ERROR
    assert isinstance(v2_error.value, ProtocolError)
    with pytest.raises(ch.MissingHeaderFieldError, match="<producerGroup>"):
        h.SendMessageRequestHeader.from_ext({"topic": "t"})
    with pytest.raises(ch.MissingHeaderFieldError, match="<clientID>"):
        h.UnregisterClientRequestHeader.from_ext(None)


@pytest.mark.parametrize("value", ["", "abc", "1.5", " 1", "0x10", "2147483648", "-2147483649", "1_000"])
def test_bad_int_raises(value: str) -> None:
    with pytest.raises(ch.BadHeaderFieldError) as error:
        h.GetMaxOffsetRequestHeader.from_ext({"topic": "t", "queueId": value})
    assert error.value.field == "queueId" and error.value.value == value


def test_long_range_and_signs() -> None:
    ext = {"topic": "t", "queueId": "+3", "timestamp": str(2**63 - 1)}
    assert h.SearchOffsetRequestHeader.from_ext(ext).timestamp == 2**63 - 1
    assert h.SearchOffsetRequestHeader.from_ext(ext).queue_id == 3
    with pytest.raises(ch.BadHeaderFieldError):
        h.SearchOffsetRequestHeader.from_ext({**ext, "timestamp": str(2**63)})


def test_optional_fields_tolerate_empty_and_booleans_are_lenient() -> None:
    base = {"offset": "100", "group": "g", "delayLevel": "0"}
    header = h.ConsumerSendMsgBackRequestHeader.from_ext({**base, "maxReconsumeTimes": "", "unitMode": "0"})
    assert header.max_reconsume_times is None and header.unit_mode is False
    for text, expected in [
        ("true", True),
        ("TRUE", True),
        ("1", True),
        ("false", False),
        ("0", False),
        ("x", False),
    ]:
        assert h.ConsumerSendMsgBackRequestHeader.from_ext({**base, "unitMode": text}).unit_mode is expected


def test_to_ext_formats_like_java_to_string() -> None:
    header = h.PullMessageResponseHeader(
        suggest_which_broker_id=0, next_begin_offset=5, min_offset=0, max_offset=-1
    )
    assert header.to_ext() == {
        "suggestWhichBrokerId": "0",
        "nextBeginOffset": "5",
        "minOffset": "0",
        "maxOffset": "-1",
    }
    send = h.SendMessageResponseHeader(
        msg_id="ID", queue_id=1, queue_offset=2, msg_region="DefaultRegion", trace_on="true"
    )
    assert send.to_ext() == {
        "msgId": "ID",
        "queueId": "1",
        "queueOffset": "2",
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }
    assert h.QueryDataVersionResponseHeader(changed=True).to_ext() == {"changed": "true"}
    assert h.UpdateConsumerOffsetResponseHeader().to_ext() == {}


def test_special_wire_names() -> None:
    query = h.QueryMessageRequestHeader.from_ext(
        {
            "topic": "t",
            "key": "k",
            "maxNum": "32",
            "beginTimestamp": "0",
            "endTimestamp": "9",
            "_UNIQUE_KEY_QUERY": "true",
        }
    )
    assert query.unique_key_query is True
    assert h.UnregisterClientRequestHeader(client_id="c").to_ext() == {"clientID": "c"}
    route = h.GetRouteInfoRequestHeader.from_ext({"topic": "T", "acceptStandardJsonOnly": "true"})
    assert route.accept_standard_json_only is True


def test_register_broker_defaults() -> None:
    ext = {"brokerName": "b", "brokerAddr": "1:1", "clusterName": "c", "haServerAddr": "1:2", "brokerId": "0"}
    header = h.RegisterBrokerRequestHeader.from_ext(ext)
    assert header.compressed is False and header.body_crc32 == 0
    assert header.to_ext() == {**ext, "compressed": "false", "bodyCrc32": "0"}


def test_unknown_ext_keys_are_ignored() -> None:
    header = h.GetConsumerListByGroupRequestHeader.from_ext(
        {"consumerGroup": "g", "Signature": "s", "AccessKey": ""}
    )
    assert header.consumer_group == "g"


def _value_strategy(spec: ch.FieldSpec) -> st.SearchStrategy[Any]:
    kinds: dict[str, st.SearchStrategy[Any]] = {
        "string": st.text(max_size=16),
        "int": st.integers(-(2**31), 2**31 - 1),
        "long": st.integers(-(2**63), 2**63 - 1),
        "boolean": st.booleans(),
    }
    value = kinds[spec.kind.value]
    return value if spec.required else st.none() | value


@st.composite
def any_header(draw: st.DrawFn) -> ch.CustomHeader:
    cls = draw(st.sampled_from(h.ALL_HEADERS))
    values = {spec.attr: draw(_value_strategy(spec)) for spec in cls.field_specs()}
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for name, value in list(values.items()):
        if value is None and defaults[name] is not None and defaults[name] is not dataclasses.MISSING:
            values[name] = defaults[name]  # a non-nullable field with a default (unitMode=false)
    return cls(**values)


@given(any_header())
def test_every_header_round_trips(header: ch.CustomHeader) -> None:
    ext = header.to_ext()
    assert all(isinstance(v, str) for v in ext.values())
    assert type(header).from_ext(ext) == header
    if isinstance(header, h.SendMessageRequestHeader):
        assert h.SendMessageRequestHeader.from_ext(header.to_ext_v2(), RequestCode.SEND_MESSAGE_V2) == header


def test_all_headers_cover_the_brief() -> None:
    names = {cls.__name__ for cls in h.ALL_HEADERS}
    assert len(names) >= 40
    assert {"SendMessageRequestHeader", "PullMessageRequestHeader", "RegisterBrokerRequestHeader"} <= names


# ------------------------------------------------------------------------------------------------ batch


def test_batch_entry_layout() -> None:
    body = encode_batch([BatchEntry(flag=7, body=b"hi", properties="TAGS\x01A")])
    assert body == struct.pack(">iiiii", 22 + 2 + 6, 0, 0, 7, 2) + b"hi" + struct.pack(">h", 6) + b"TAGS\x01A"
    assert decode_batch(body) == [BatchEntry(7, b"hi", "TAGS\x01A")]


def test_empty_batch_body_has_no_entries() -> None:
    assert decode_batch(b"") == []


entries = st.lists(
    st.builds(
        BatchEntry,
        flag=st.integers(-(2**31), 2**31 - 1),
        body=st.binary(max_size=64),
        properties=st.text(max_size=40),
    ),
    max_size=5,
)


@given(entries)
def test_batch_round_trip(batch: list[BatchEntry]) -> None:
    assert decode_batch(encode_batch(batch)) == batch


@given(entries.filter(bool))
def test_every_truncated_batch_raises(batch: list[BatchEntry]) -> None:
    body = encode_batch(batch)
    boundaries = set()
    pos = 0
    for entry in batch:
        pos += 22 + len(entry.body) + len(entry.properties.encode())
        boundaries.add(pos)
    for cut in range(1, len(body)):
        if cut in boundaries:
            continue
        with pytest.raises(ProtocolError):
            decode_batch(body[:cut])


@pytest.mark.parametrize(
    "body",
    [
        struct.pack(">iiiii", 22, 0, 0, 0, -1) + struct.pack(">h", 0),  # negative body length
        struct.pack(">iiiii", 22, 0, 0, 0, 0) + struct.pack(">h", -1),  # negative properties length
        struct.pack(">iiiii", 20, 0, 0, 0, 0) + struct.pack(">h", 0),  # TOTALSIZE without PROPLEN
        struct.pack(">iiiii", 23, 0, 0, 0, 0) + struct.pack(">h", 1) + b"\xff",  # properties not UTF-8
    ],
)
def test_inconsistent_batch_raises(body: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_batch(body)


def test_batch_properties_limit() -> None:
    with pytest.raises(ProtocolError):
        encode_batch([BatchEntry(0, b"", "x" * 40000)])
