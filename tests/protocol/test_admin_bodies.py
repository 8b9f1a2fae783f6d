"""The operations requests' headers and bodies: Java's wire names, fastjson's shapes, round trips.

The Java side of each is read by the real tools in tests/peers/mqadmin and the real clients in
tests/broker/test_ops_relays.py; here the exact text is pinned."""

from __future__ import annotations

from rocketlite.protocol.bodies.admin import (
    BrokerStatsData,
    BrokerStatsItem,
    ConsumeStatsList,
    ProducerInfo,
    ProducerTableInfo,
    ResetOffsetBody,
)
from rocketlite.protocol.bodies.message_queue import ConsumeStats, MessageQueue, OffsetWrapper
from rocketlite.protocol.bodies.running_info import (
    CMResult,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
)
from rocketlite.protocol.wire.admin import GetConsumeStatsInBrokerHeader, ResetOffsetRequestHeader

MQ = MessageQueue("T", "broker-a", 1)


def test_header_wire_names_are_javas_field_names() -> None:
    ext = ResetOffsetRequestHeader(group="g", topic="T", timestamp=-1, is_force=True).to_ext()
    assert ext == {"group": "g", "topic": "T", "queueId": "-1", "timestamp": "-1", "isForce": "true"}
    assert ResetOffsetRequestHeader.from_ext(ext).is_force
    assert GetConsumeStatsInBrokerHeader.from_ext({"isOrder": "false"}).is_order is False


def test_reset_offset_body_is_an_object_keyed_map() -> None:
    body = ResetOffsetBody({MQ: 7})
    assert body.to_json() == '{"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:7}}'
    assert ResetOffsetBody.from_json(body.to_json()) == body


def test_stats_bodies() -> None:
    data = BrokerStatsData(BrokerStatsItem(12, 0.2, 1.5))
    assert data.to_json() == (
        '{"statsDay":{"avgpt":0.0,"sum":0,"tps":0.0},"statsHour":{"avgpt":0.0,"sum":0,"tps":0.0},'
        '"statsMinute":{"avgpt":1.5,"sum":12,"tps":0.2}}'
    )
    assert BrokerStatsData.from_json(data.to_json()) == data
    stats = ConsumeStats({MQ: OffsetWrapper(9, 4, 7, 4)}, 0.5)
    listed = ConsumeStatsList(({"g": (stats,)},), "127.0.0.1:10911", 5, 0)
    assert '"pullOffset":4' in listed.to_json()
    assert ConsumeStatsList.from_json(listed.to_json()) == listed
    producers = ProducerTableInfo({"pg": (ProducerInfo("ip@1", "/127.0.0.1:5", "JAVA", 479, 1),)})
    assert ProducerTableInfo.from_json(producers.to_json()) == producers


def test_running_info_bodies() -> None:
    info = ConsumerRunningInfo(properties={"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY"}, jstack="x")
    text = info.to_json()
    assert text.startswith('{"jstack":"x","mqPopTable":{},"mqTable":{},"properties":')
    assert ConsumerRunningInfo.from_json(text) == info
    result = ConsumeMessageDirectlyResult(CMResult.CR_THROW_EXCEPTION, remark="E: x", spent_time_mills=3)
    assert result.to_json() == (
        '{"autoCommit":true,"consumeResult":"CR_THROW_EXCEPTION","order":false,"remark":"E: x",'
        '"spentTimeMills":3}'
    )
    assert ConsumeMessageDirectlyResult.from_json(result.to_json()) == result
