"""JSON bodies built around `MessageQueue`: the queue itself, per-queue offset and stats tables,
and the lock requests' queue sets.

Kept apart from `route`, `heartbeat` and `lists` because these are the bodies where
fastjson writes **objects as map keys**: TopicStatsTable (GET_TOPIC_STATS_INFO, 202) and
ConsumeStats (GET_CONSUME_STATS, 208) are `Map<MessageQueue, X>` and come out as
`{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{...}}}`. `MessageQueue` implements
`to_json_obj`, so `fastjson.dumps` writes it as an object key; `fastjson.loads` returns such keys as
`ObjectKey`, which `MessageQueue.from_json_obj` accepts directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from rocketlite.protocol.bodies.json_body import JsonBody, expect_obj, get_int, get_list, get_str


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue(JsonBody):
    """(topic, brokerName, queueId); ordered like Java's `MessageQueue.compareTo`, hashable as a key."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json_obj(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            topic=get_str(obj, "topic"),
            broker_name=get_str(obj, "brokerName"),
            queue_id=get_int(obj, "queueId"),
        )


def _queue_key(key: Any) -> MessageQueue:
    return MessageQueue.from_json_obj(expect_obj(key, "MessageQueue key"))


@dataclass(frozen=True, slots=True)
class TopicOffset(JsonBody):
    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "lastUpdateTimestamp": self.last_update_timestamp,
            "maxOffset": self.max_offset,
            "minOffset": self.min_offset,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            min_offset=get_int(obj, "minOffset", 0),
            max_offset=get_int(obj, "maxOffset", 0),
            last_update_timestamp=get_int(obj, "lastUpdateTimestamp", 0),
        )


@dataclass(frozen=True, slots=True)
class TopicStatsTable(JsonBody):
    """GET_TOPIC_STATS_INFO (202) body."""

    offset_table: Mapping[MessageQueue, TopicOffset] = field(default_factory=dict)

    def to_json_obj(self) -> dict[str, Any]:
        return {"offsetTable": {mq: v.to_json_obj() for mq, v in self.offset_table.items()}}

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        table = expect_obj(obj.get("offsetTable") or {}, "offsetTable")
        return cls(
            {_queue_key(k): TopicOffset.from_json_obj(expect_obj(v, "TopicOffset")) for k, v in table.items()}
        )


@dataclass(frozen=True, slots=True)
class OffsetWrapper(JsonBody):
    """One queue of a ConsumeStats. `pull_offset` (5.x) is how far the group has pulled; mqadmin
    5.x prints `pullOffset - consumerOffset` as the queue's in-flight messages."""

    broker_offset: int = 0
    consumer_offset: int = 0
    last_timestamp: int = 0
    pull_offset: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "lastTimestamp": self.last_timestamp,
            "pullOffset": self.pull_offset,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            broker_offset=get_int(obj, "brokerOffset", 0),
            consumer_offset=get_int(obj, "consumerOffset", 0),
            last_timestamp=get_int(obj, "lastTimestamp", 0),
            pull_offset=get_int(obj, "pullOffset", 0),
        )


@dataclass(frozen=True, slots=True)
class ConsumeStats(JsonBody):
    """GET_CONSUME_STATS (208) body; consumeTps is a Java double (written `0.0`)."""

    offset_table: Mapping[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "consumeTps": float(self.consume_tps),
            "offsetTable": {mq: v.to_json_obj() for mq, v in self.offset_table.items()},
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        table = expect_obj(obj.get("offsetTable") or {}, "offsetTable")
        tps = obj.get("consumeTps", 0.0)
        return cls(
            {
                _queue_key(k): OffsetWrapper.from_json_obj(expect_obj(v, "OffsetWrapper"))
                for k, v in table.items()
            },
            float(tps) if isinstance(tps, int | float | str) else 0.0,
        )


@dataclass(frozen=True, slots=True)
class LockBatchRequestBody(JsonBody):
    """LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) bodies (Java's two classes have the same shape)."""

    consumer_group: str
    client_id: str
    mq_set: frozenset[MessageQueue] = frozenset()

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "clientId": self.client_id,
            "consumerGroup": self.consumer_group,
            "mqSet": sorted(self.mq_set),
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            consumer_group=get_str(obj, "consumerGroup"),
            client_id=get_str(obj, "clientId"),
            mq_set=frozenset(_queue_key(mq) for mq in get_list(obj, "mqSet")),
        )


UnlockBatchRequestBody = LockBatchRequestBody


@dataclass(frozen=True, slots=True)
class LockBatchResponseBody(JsonBody):
    lock_ok_mq_set: frozenset[MessageQueue] = frozenset()

    def to_json_obj(self) -> dict[str, Any]:
        return {"lockOKMQSet": sorted(self.lock_ok_mq_set)}

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(frozenset(_queue_key(mq) for mq in get_list(obj, "lockOKMQSet")))
