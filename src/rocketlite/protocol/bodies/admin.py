"""JSON bodies of the operations requests (RocketMQ 5.3's `remoting.protocol.body` classes).

- `ResetOffsetBody`: `{"offsetTable":{<MessageQueue>:offset}}`, the answer to
  INVOKE_BROKER_TO_RESET_OFFSET (222) and the body of the RESET_CONSUMER_CLIENT_OFFSET (220) the
  broker relays to the group's clients (an object-keyed map, see `message_queue`);
- `BrokerStatsData`: VIEW_BROKER_STATS_DATA (315), one statistic over the last minute, hour and
  day, each `{"avgpt":..,"sum":..,"tps":..}`;
- `ConsumeStatsList`: GET_BROKER_CONSUME_STATS (317), `{"brokerAddr", "consumeStatsList":
  [{group: [ConsumeStats per topic]}], "totalDiff", "totalInflightDiff"}`;
- `ProducerTableInfo`: GET_ALL_PRODUCER_INFO (328), `{"data":{group:[ProducerInfo]}}`;
- `QuerySubscriptionResponseBody` (345), `QueryConsumeQueueResponseBody` (321);
- `CreateTopicListRequestBody` (18) and `SubscriptionGroupList` (225), the batch requests'
  bodies: lists of Java's TopicConfig / SubscriptionGroupConfig beans;
- `HARuntimeInfo`: GET_BROKER_HA_STATUS (907), a master's slaves or a slave's master.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from rocketlite.protocol.bodies.heartbeat import SubscriptionData
from rocketlite.protocol.bodies.json_body import (
    JsonBody,
    expect_obj,
    get_bool,
    get_int,
    get_list,
    get_opt_str,
    get_str,
    to_int,
)
from rocketlite.protocol.bodies.message_queue import ConsumeStats, MessageQueue
from rocketlite.protocol.bodies.route import TopicConfig


def _float(obj: Mapping[Any, Any], key: str) -> float:
    value = obj.get(key, 0.0)
    return float(value) if isinstance(value, int | float | str) else 0.0


@dataclass(frozen=True, slots=True)
class ResetOffsetBody(JsonBody):
    """INVOKE_BROKER_TO_RESET_OFFSET's answer and RESET_CONSUMER_CLIENT_OFFSET's body."""

    offset_table: Mapping[MessageQueue, int] = field(default_factory=dict)

    def to_json_obj(self) -> dict[str, Any]:
        return {"offsetTable": dict(self.offset_table)}

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        table = expect_obj(obj.get("offsetTable") or {}, "offsetTable")
        return cls(
            {
                MessageQueue.from_json_obj(expect_obj(k, "MessageQueue key")): to_int(v, "offset")
                for k, v in table.items()
            }
        )


@dataclass(frozen=True, slots=True)
class BrokerStatsItem(JsonBody):
    """One window of a statistic: its sum, per-second rate and average per call (`avgpt`)."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0

    def to_json_obj(self) -> dict[str, Any]:
        return {"avgpt": float(self.avgpt), "sum": self.sum, "tps": float(self.tps)}

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(get_int(obj, "sum", 0), _float(obj, "tps"), _float(obj, "avgpt"))


@dataclass(frozen=True, slots=True)
class BrokerStatsData(JsonBody):
    """VIEW_BROKER_STATS_DATA (315) body."""

    stats_minute: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_hour: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_day: BrokerStatsItem = field(default_factory=BrokerStatsItem)

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "statsDay": self.stats_day.to_json_obj(),
            "statsHour": self.stats_hour.to_json_obj(),
            "statsMinute": self.stats_minute.to_json_obj(),
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        def item(key: str) -> BrokerStatsItem:
            return BrokerStatsItem.from_json_obj(expect_obj(obj.get(key) or {}, key))

        return cls(item("statsMinute"), item("statsHour"), item("statsDay"))


@dataclass(frozen=True, slots=True)
class ConsumeStatsList(JsonBody):
    """GET_BROKER_CONSUME_STATS (317) body: every group's ConsumeStats, one per topic."""

    consume_stats_list: Sequence[Mapping[str, Sequence[ConsumeStats]]] = ()
    broker_addr: str | None = None
    total_diff: int = 0
    total_inflight_diff: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "brokerAddr": self.broker_addr,
            "consumeStatsList": [
                {group: [s.to_json_obj() for s in stats] for group, stats in entry.items()}
                for entry in self.consume_stats_list
            ],
            "totalDiff": self.total_diff,
            "totalInflightDiff": self.total_inflight_diff,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        entries = [
            {
                str(group): tuple(ConsumeStats.from_json_obj(expect_obj(s, "ConsumeStats")) for s in stats)
                for group, stats in expect_obj(entry, "consumeStatsList entry").items()
            }
            for entry in get_list(obj, "consumeStatsList")
        ]
        return cls(
            tuple(entries),
            get_opt_str(obj, "brokerAddr"),
            get_int(obj, "totalDiff", 0),
            get_int(obj, "totalInflightDiff", 0),
        )


@dataclass(frozen=True, slots=True)
class ProducerInfo(JsonBody):
    """One producer of a group (`ProducerInfo`); `language` is a `LanguageCode` name."""

    client_id: str
    remote_ip: str
    language: str
    version: int
    last_update_timestamp: int

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "clientId": self.client_id,
            "language": self.language,
            "lastUpdateTimestamp": self.last_update_timestamp,
            "remoteIP": self.remote_ip,
            "version": self.version,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            get_str(obj, "clientId"),
            get_str(obj, "remoteIP", ""),
            get_str(obj, "language", "JAVA"),
            get_int(obj, "version", 0),
            get_int(obj, "lastUpdateTimestamp", 0),
        )


@dataclass(frozen=True, slots=True)
class ProducerTableInfo(JsonBody):
    """GET_ALL_PRODUCER_INFO (328) body."""

    data: Mapping[str, Sequence[ProducerInfo]] = field(default_factory=dict)

    def to_json_obj(self) -> dict[str, Any]:
        return {"data": {group: [p.to_json_obj() for p in infos] for group, infos in self.data.items()}}

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        data = expect_obj(obj.get("data") or {}, "data")
        return cls(
            {
                str(group): tuple(ProducerInfo.from_json_obj(expect_obj(p, "ProducerInfo")) for p in infos)
                for group, infos in data.items()
            }
        )


@dataclass(frozen=True, slots=True)
class QuerySubscriptionResponseBody(JsonBody):
    """QUERY_SUBSCRIPTION_BY_CONSUMER (345) body; no subscription when the group is offline."""

    group: str
    topic: str
    subscription_data: SubscriptionData | None = None

    def to_json_obj(self) -> dict[str, Any]:
        sub = self.subscription_data
        return {
            "group": self.group,
            "subscriptionData": sub.to_json_obj() if sub is not None else None,
            "topic": self.topic,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        sub = obj.get("subscriptionData")
        return cls(
            get_str(obj, "group"),
            get_str(obj, "topic"),
            SubscriptionData.from_json_obj(expect_obj(sub, "subscriptionData")) if sub is not None else None,
        )


@dataclass(frozen=True, slots=True)
class ConsumeQueueData(JsonBody):
    """One consume-queue unit as QUERY_CONSUME_QUEUE shows it."""

    physic_offset: int
    physic_size: int
    tags_code: int
    extend_data_json: str | None = None
    bit_map: str | None = None
    eval: bool = False
    msg: str | None = None

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "bitMap": self.bit_map,
            "eval": self.eval,
            "extendDataJson": self.extend_data_json,
            "msg": self.msg,
            "physicOffset": self.physic_offset,
            "physicSize": self.physic_size,
            "tagsCode": self.tags_code,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            get_int(obj, "physicOffset"),
            get_int(obj, "physicSize"),
            get_int(obj, "tagsCode"),
            get_opt_str(obj, "extendDataJson"),
            get_opt_str(obj, "bitMap"),
            get_bool(obj, "eval"),
            get_opt_str(obj, "msg"),
        )


@dataclass(frozen=True, slots=True)
class QueryConsumeQueueResponseBody(JsonBody):
    """QUERY_CONSUME_QUEUE (321) body."""

    queue_data: Sequence[ConsumeQueueData] = ()
    max_queue_index: int = 0
    min_queue_index: int = 0
    subscription_data: SubscriptionData | None = None
    filter_data: str | None = None

    def to_json_obj(self) -> dict[str, Any]:
        sub = self.subscription_data
        return {
            "filterData": self.filter_data,
            "maxQueueIndex": self.max_queue_index,
            "minQueueIndex": self.min_queue_index,
            "queueData": [q.to_json_obj() for q in self.queue_data],
            "subscriptionData": sub.to_json_obj() if sub is not None else None,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        sub = obj.get("subscriptionData")
        return cls(
            tuple(
                ConsumeQueueData.from_json_obj(expect_obj(q, "ConsumeQueueData"))
                for q in get_list(obj, "queueData")
            ),
            get_int(obj, "maxQueueIndex", 0),
            get_int(obj, "minQueueIndex", 0),
            SubscriptionData.from_json_obj(expect_obj(sub, "subscriptionData")) if sub is not None else None,
            get_opt_str(obj, "filterData"),
        )


@dataclass(frozen=True, slots=True)
class CreateTopicListRequestBody(JsonBody):
    """UPDATE_AND_CREATE_TOPIC_LIST (18) body."""

    topic_config_list: Sequence[TopicConfig] = ()

    def to_json_obj(self) -> dict[str, Any]:
        return {"topicConfigList": [t.to_json_obj() for t in self.topic_config_list]}

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            tuple(
                TopicConfig.from_json_obj(expect_obj(t, "TopicConfig"))
                for t in get_list(obj, "topicConfigList")
            )
        )


@dataclass(frozen=True, slots=True)
class SubscriptionGroupList(JsonBody):
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (225) body: the groups as JSON objects, each read
    by the broker's own `SubscriptionGroupConfig` (the bean lives in the broker layer)."""

    group_config_list: Sequence[Mapping[str, Any]] = ()

    def to_json_obj(self) -> dict[str, Any]:
        return {"groupConfigList": [dict(g) for g in self.group_config_list]}

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            tuple(dict(expect_obj(g, "SubscriptionGroupConfig")) for g in get_list(obj, "groupConfigList"))
        )


@dataclass(frozen=True, slots=True)
class HAConnectionRuntimeInfo(JsonBody):
    """One slave as its master sees it."""

    addr: str
    slave_ack_offset: int
    diff: int
    in_sync: bool
    transferred_byte_in_second: int = 0
    transfer_from_where: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "addr": self.addr,
            "diff": self.diff,
            "inSync": self.in_sync,
            "slaveAckOffset": self.slave_ack_offset,
            "transferFromWhere": self.transfer_from_where,
            "transferredByteInSecond": self.transferred_byte_in_second,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            get_str(obj, "addr", ""),
            get_int(obj, "slaveAckOffset", 0),
            get_int(obj, "diff", 0),
            get_bool(obj, "inSync"),
            get_int(obj, "transferredByteInSecond", 0),
            get_int(obj, "transferFromWhere", 0),
        )


@dataclass(frozen=True, slots=True)
class HAClientRuntimeInfo(JsonBody):
    """A slave's view of its master."""

    master_addr: str | None = None
    max_offset: int = 0
    last_read_timestamp: int = 0
    last_write_timestamp: int = 0
    master_flush_offset: int = 0
    transferred_byte_in_second: int = 0
    activated: bool = False

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "activated": self.activated,
            "lastReadTimestamp": self.last_read_timestamp,
            "lastWriteTimestamp": self.last_write_timestamp,
            "masterAddr": self.master_addr,
            "masterFlushOffset": self.master_flush_offset,
            "maxOffset": self.max_offset,
            "transferredByteInSecond": self.transferred_byte_in_second,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            get_opt_str(obj, "masterAddr"),
            get_int(obj, "maxOffset", 0),
            get_int(obj, "lastReadTimestamp", 0),
            get_int(obj, "lastWriteTimestamp", 0),
            get_int(obj, "masterFlushOffset", 0),
            get_int(obj, "transferredByteInSecond", 0),
            get_bool(obj, "activated"),
        )


@dataclass(frozen=True, slots=True)
class HARuntimeInfo(JsonBody):
    """GET_BROKER_HA_STATUS (907) body: a master's slaves, or a slave's master."""

    master: bool
    master_commit_log_max_offset: int = 0
    in_sync_slave_nums: int = 0
    ha_connection_info: Sequence[HAConnectionRuntimeInfo] = ()
    ha_client_runtime_info: HAClientRuntimeInfo = field(default_factory=HAClientRuntimeInfo)

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "haClientRuntimeInfo": self.ha_client_runtime_info.to_json_obj(),
            "haConnectionInfo": [c.to_json_obj() for c in self.ha_connection_info],
            "inSyncSlaveNums": self.in_sync_slave_nums,
            "master": self.master,
            "masterCommitLogMaxOffset": self.master_commit_log_max_offset,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        client = obj.get("haClientRuntimeInfo")
        return cls(
            get_bool(obj, "master"),
            get_int(obj, "masterCommitLogMaxOffset", 0),
            get_int(obj, "inSyncSlaveNums", 0),
            tuple(
                HAConnectionRuntimeInfo.from_json_obj(expect_obj(c, "HAConnectionRuntimeInfo"))
                for c in get_list(obj, "haConnectionInfo")
            ),
            HAClientRuntimeInfo.from_json_obj(expect_obj(client, "haClientRuntimeInfo"))
            if client is not None
            else HAClientRuntimeInfo(),
        )
