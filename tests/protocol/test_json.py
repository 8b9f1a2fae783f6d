"""fastjson writing/reading quirks and the JSON bodies built on them."""

from __future__ import annotations

import enum
import math
import zlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
)
from rocketlite.protocol.bodies.json_body import BodyError
from rocketlite.protocol.bodies.lists import ConsumerListBody, KVTable, TopicList
from rocketlite.protocol.bodies.message_queue import (
    ConsumeStats,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    OffsetWrapper,
    TopicOffset,
    TopicStatsTable,
)
from rocketlite.protocol.bodies.route import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.wire import fastjson

BROKER_A = BrokerData("DefaultCluster", "broker-a", {0: "127.0.0.1:10911"})

# ------------------------------------------------------------------------------------------- writing


def test_broker_addrs_keys_are_unquoted() -> None:
    assert BROKER_A.to_json() == (
        '{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}'
    )


def test_standard_mode_quotes_keys() -> None:
    assert BROKER_A.to_json(standard=True) == (
        '{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}'
    )


def test_route_data_matches_the_real_namesrv_output() -> None:
    route = TopicRouteData(
        queue_datas=(QueueData("broker-a", 4, 4, 6),),
        broker_datas=(BrokerData("DefaultCluster", "broker-a", {1: "10.0.0.2:10911", 0: "10.0.0.1:10911"}),),
    )
    assert route.to_json() == (
        '{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a",'
        '"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,'
        '"readQueueNums":4,"topicSynFlag":0,"topicSysFlag":0,"writeQueueNums":4}]}'
    )
    assert TopicRouteData.from_json(route.to_json()) == route
    assert TopicRouteData.from_json(route.to_json(standard=True)) == route


def test_cluster_info_matches_the_fact_sheet() -> None:
    info = ClusterInfo(
        {"broker-a": BrokerData("DefaultCluster", "broker-a", {0: "192.168.1.111:10911"})},
        {"DefaultCluster": ("broker-a",)},
    )
    text = (
        '{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"192.168.1.111:10911"},"brokerName":"broker-a",'
        '"cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
    )
    assert info.to_json() == text
    assert ClusterInfo.from_json(text) == info


def test_string_escaping() -> None:
    assert fastjson.quote('a"b\\c\n\x01\x7f\u00e9') == '"a\\"b\\\\c\\n\\u0001\\u007F\u00e9"'
    assert fastjson.quote("\u4e2d\U0001f600\x1f", standard=True) == '"\\u4E2D\\uD83D\\uDE00\\u001F"'


class Color(enum.Enum):
    RED = 1


def test_dumps_rules() -> None:
    assert fastjson.dumps({"b": None, "a": [1, None, True], "c": Color.RED, "d": 0.0}) == (
        '{"a":[1,null,true],"c":"RED","d":0.0}'
    )
    assert fastjson.dumps({2: "x", 10: "y", -1: "z"}) == '{-1:"z",2:"x",10:"y"}'
    assert fastjson.dumps({"s": {3, 1, 2}}) == '{"s":[1,2,3]}'
    assert fastjson.dumps(float("nan")) == "null"
    with pytest.raises(TypeError):
        fastjson.dumps({"body": b"raw"})
    with pytest.raises(TypeError):
        fastjson.dumps(object())


def test_object_keys_are_written_as_objects() -> None:
    stats = TopicStatsTable({MessageQueue("TopicTest", "broker-a", 0): TopicOffset(0, 10, 1700000000000)})
    assert stats.to_json() == (
        '{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:'
        '{"lastUpdateTimestamp":1700000000000,"maxOffset":10,"minOffset":0}}}'
    )
    assert fastjson.dumps({(("topic", "t"), ("queueId", 1)): 5}) == '{{"queueId":1,"topic":"t"}:5}'


# ------------------------------------------------------------------------------------------- reading


def test_loads_unquoted_numeric_keys() -> None:
    assert fastjson.loads('{"brokerAddrs":{0:"a",1:"b"}}') == {"brokerAddrs": {0: "a", 1: "b"}}


def test_loads_object_keys() -> None:
    text = (
        '{"consumeTps":0.5,"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:'
        '{"brokerOffset":9,"consumerOffset":4,"lastTimestamp":7},'
        '{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"brokerOffset":3,"consumerOffset":3,"lastTimestamp":0}}}'
    )
    parsed = fastjson.loads(text)
    key = next(iter(parsed["offsetTable"]))
    assert isinstance(key, fastjson.ObjectKey)
    assert key.get("queueId") == 1 and key.get("missing", "d") == "d"
    stats = ConsumeStats.from_json(text)
    assert stats.consume_tps == 0.5
    assert stats.offset_table[MessageQueue("T", "broker-a", 1)] == OffsetWrapper(9, 4, 7)
    assert ConsumeStats.from_json(stats.to_json()) == stats


def test_loads_lenient_syntax() -> None:
    text = "{'a':'it\\'s', b : [1, 2.5e1, -3L,], \"c\":{},, 'd':'\\x41\\v', [1,2]:true}"
    assert fastjson.loads(text) == {"a": "it's", "b": [1, 25.0, -3], "c": {}, "d": "A\v", (1, 2): True}
    assert fastjson.loads(b'\xef\xbb\xbf{"a":1}'.decode("utf-8")) == {"a": 1}
    assert fastjson.loads('{"k":"\\uD83D\\uDE00"}') == {"k": "\U0001f600"}
    assert fastjson.loads("{0:'\\uD83D\\uDE00'}") == {0: "\U0001f600"}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        '{"a":}',
        '{"a" 1}',
        '{"a":1} x',
        "[1 2]",
        '"open',
        "{0:1",
        "nope",
        "{@:1}",
        "1e99999999999x",
        "NaN",
    ],
)
def test_loads_rejects_malformed(text: str) -> None:
    with pytest.raises(fastjson.JsonDecodeError):
        fastjson.loads(text)


def test_loads_rejects_deep_nesting_and_bad_utf8() -> None:
    with pytest.raises(ProtocolError):
        fastjson.loads("{0:" * 1000 + "1" + "}" * 1000)
    with pytest.raises(ProtocolError):
        fastjson.loads(b"\xff")


json_scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=12)
json_floats = st.floats(allow_nan=False, allow_infinity=False)


def json_values(keys: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        json_scalars | json_floats,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(keys, inner.filter(lambda v: v is not None), max_size=4)
        ),
        max_leaves=20,
    )


@given(json_values(st.text(max_size=8) | st.integers(-(2**40), 2**40)))
def test_fastjson_round_trip(value: Any) -> None:
    assert fastjson.loads(fastjson.dumps(value)) == value


@given(json_values(st.text(max_size=8)))
def test_standard_output_is_ascii_json(value: Any) -> None:
    text = fastjson.dumps(value, standard=True)
    assert text.isascii()
    assert fastjson.loads(text) == value


# -------------------------------------------------------------------------------------------- bodies


def test_java_heartbeat() -> None:
    text = (
        '{"clientID":"192.168.1.5@12345#9130419338912",'
        '"consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY",'
        '"groupName":"cg1","messageModel":"CLUSTERING","subscriptionDataSet":['
        '{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG","subString":"TagA",'
        '"subVersion":1690000000000,"tagsSet":["TagA"],"topic":"TopicTest"},'
        '{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*",'
        '"subVersion":1690000000001,"tagsSet":[],"topic":"%RETRY%cg1"}],"unitMode":false}],'
        '"producerDataSet":[{"groupName":"pg1"},{"groupName":"CLIENT_INNER_PRODUCER"}]}'
    )
    hb = HeartbeatData.from_json(text)
    assert hb.client_id == "192.168.1.5@12345#9130419338912"
    assert hb.producer_data_set == (ProducerData("pg1"), ProducerData("CLIENT_INNER_PRODUCER"))
    [consumer] = hb.consumer_data_set
    assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert consumer.message_model is MessageModel.CLUSTERING
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    assert consumer.subscription_data_set[0] == SubscriptionData(
        "TopicTest", "TagA", ("TagA",), (2598919,), 1690000000000, "TAG", False
    )
    assert hb.to_json() == text
    assert HeartbeatData.from_json(hb.to_json()) == hb


def test_cpp_heartbeat_with_ordinals_and_string_versions() -> None:
    text = (
        '{"clientID":"123-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,'
        '"groupName":"G","messageModel":1,"subscriptionDataSet":[{"subString":"*","subVersion":"1795303223557",'
        '"topic":"%RETRY%G"},{"codeSet":[0,0],"subString":"TagA || TagB","subVersion":"5",'
        '"tagsSet":["TagA","TagB"],"topic":"T"}]}]}'
    )
    [consumer] = HeartbeatData.from_json(text).consumer_data_set
    assert consumer == ConsumerData(
        group_name="G",
        consume_type=ConsumeType.CONSUME_PASSIVELY,
        message_model=MessageModel.CLUSTERING,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        subscription_data_set=(
            SubscriptionData("%RETRY%G", "*", sub_version=1795303223557),
            SubscriptionData("T", "TagA || TagB", ("TagA", "TagB"), (0, 0), 5),
        ),
    )


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '{"producerDataSet":[]}',  # no clientID
        '{"clientID":"c","consumerDataSet":{}}',
        '{"clientID":"c","consumerDataSet":[{"groupName":"g","messageModel":"SIDEWAYS"}]}',
        '{"clientID":"c","consumerDataSet":[{"groupName":"g","consumeType":7}]}',
        '{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"t","subVersion":"x"}]}]}',
    ],
)
def test_malformed_heartbeats_raise(text: str) -> None:
    with pytest.raises(BodyError):
        HeartbeatData.from_json(text)


def test_old_queue_data_spelling_and_string_numbers() -> None:
    queue = QueueData.from_json(
        '{"brokerName":"b","perm":"6","readQueueNums":8,"topicSynFlag":1,"writeQueueNums":8}'
    )
    assert queue == QueueData("b", 8, 8, 6, 1)


TOPICS = TopicConfigSerializeWrapper(
    {
        "TopicTest": TopicConfig("TopicTest", 4, 4),
        "TBW102": TopicConfig("TBW102", 8, 8, perm=7),
    },
    DataVersion(timestamp=1690000000000, counter=3),
)


def test_register_broker_body_json() -> None:
    body = RegisterBrokerBody(TOPICS)
    text = body.to_json()
    assert text.startswith('{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":')
    assert '"dataVersion":{"counter":3,"timestamp":1690000000000}' in text
    assert (
        '"TopicTest":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",'
        '"topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}'
    ) in text
    assert RegisterBrokerBody.decode(body.encode()) == body


def test_register_broker_body_compressed() -> None:
    body = RegisterBrokerBody(TOPICS, ("10.0.0.9:8080",))
    raw = zlib.decompress(body.encode(compressed=True))
    assert raw.startswith(b'\x00\x00\x00\x27{"counter":3,"timestamp":1690000000000}\x00\x00\x00\x02')
    assert b"TopicTest 4 4 6 SINGLE_TAG" in raw
    assert RegisterBrokerBody.decode(body.encode(compressed=True), compressed=True) == body
    with pytest.raises(BodyError):
        RegisterBrokerBody.decode(zlib.compress(raw[:-3]), compressed=True)
    with pytest.raises(BodyError):
        RegisterBrokerBody.decode(b"not zlib", compressed=True)


def test_small_bodies_round_trip() -> None:
    mqs = frozenset({MessageQueue("T", "b", 1), MessageQueue("T", "a", 0)})
    lock = LockBatchRequestBody("g", "c", mqs)
    assert lock.to_json() == (
        '{"clientId":"c","consumerGroup":"g","mqSet":[{"brokerName":"a","queueId":0,"topic":"T"},'
        '{"brokerName":"b","queueId":1,"topic":"T"}]}'
    )
    bodies = [
        lock,
        LockBatchResponseBody(mqs),
        ConsumerListBody(("127.0.0.1@1", "127.0.0.1@2")),
        TopicList(("a", "b")),
        KVTable({"brokerVersion": "409"}),
        DataVersion(5, 6),
    ]
    for body in bodies:
        assert type(body).from_json(body.to_bytes()) == body
    assert ConsumerListBody(("x",)).to_json() == '{"consumerIdList":["x"]}'
    assert TopicList(("a",)).to_json() == '{"topicList":["a"]}'


def test_data_version_next() -> None:
    assert DataVersion(1, 2).next_version(9) == DataVersion(9, 3)
    assert not math.isnan(ConsumeStats().consume_tps)


# Inputs atheris found escaping the JSON decoders with errors other than ProtocolError.
@pytest.mark.parametrize(
    ("header", "remark", "ext"),
    [
        (b'{"code":1,"opaque":1,"remark":{[1]:1}}', "{[1]:1}", {}),  # an array as a map key
        (b'{"code":1,"opaque":1,"extFields":{"a":{[1]:1}}}', None, {"a": "{[1]:1}"}),
    ],
)
def test_array_keys_are_written_back_as_arrays(
    header: bytes, remark: str | None, ext: dict[str, str]
) -> None:
    from rocketlite.protocol.wire.speedups import decode_json_header  # noqa: PLC0415

    cmd = decode_json_header(header)
    assert (cmd.remark, cmd.ext_fields) == (remark, ext)


@pytest.mark.parametrize("depth", [496, 5000, 100_000])
def test_objects_nested_in_key_position_are_refused(depth: int) -> None:
    from rocketlite.protocol.wire.speedups import decode_json_header  # noqa: PLC0415

    with pytest.raises(ProtocolError, match="nesting too deep"):
        decode_json_header(b"{" * depth)
    with pytest.raises(ProtocolError, match="nesting too deep"):
        fastjson.loads(b"{" * depth)
