"""The small list and table bodies: a group's consumer ids, topic lists, KV tables.

Each body is a frozen dataclass on `json_body.JsonBody`, read tolerantly (see `json_body`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from rocketlite.protocol.bodies.json_body import (
    JsonBody,
    expect_obj,
    get_list,
    get_opt_str,
    get_str,
)


@dataclass(frozen=True, slots=True)
class ConsumerListBody(JsonBody):
    """GET_CONSUMER_LIST_BY_GROUP (38) answer (`GetConsumerListByGroupResponseBody`)."""

    consumer_id_list: tuple[str, ...] = ()

    def to_json_obj(self) -> dict[str, Any]:
        return {"consumerIdList": list(self.consumer_id_list)}

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(tuple(str(c) for c in get_list(obj, "consumerIdList")))


@dataclass(frozen=True, slots=True)
class TopicList(JsonBody):
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206), GET_TOPICS_BY_CLUSTER (224), system topic lists."""

    topic_list: tuple[str, ...] = ()
    broker_addr: str | None = None

    def to_json_obj(self) -> dict[str, Any]:
        return {"brokerAddr": self.broker_addr, "topicList": list(self.topic_list)}

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(tuple(str(t) for t in get_list(obj, "topicList")), get_opt_str(obj, "brokerAddr"))


@dataclass(frozen=True, slots=True)
class KVTable(JsonBody):
    """`{"table":{...}}`: GET_KVLIST_BY_NAMESPACE, GET_BROKER_RUNTIME_INFO, REGISTER_BROKER's answer."""

    table: Mapping[str, str] = field(default_factory=dict)

    def to_json_obj(self) -> dict[str, Any]:
        return {"table": dict(self.table)}

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        table = expect_obj(obj.get("table") or {}, "table")
        return cls({str(k): get_str(table, k) for k in table})
