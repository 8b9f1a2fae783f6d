"""JSON bodies of a client's HEARTBEAT (34): its producer groups and its consumer groups with their
subscriptions, and the enums they carry (`ConsumeType`, `MessageModel`, `ConsumeFromWhere`).

Each body is a frozen dataclass on `json_body.JsonBody`, read tolerantly (see `json_body`); the
enums are Java ordinals or names, as the clients send them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Self

from rocketlite.protocol.bodies.json_body import (
    JsonBody,
    expect_obj,
    get_bool,
    get_enum,
    get_int,
    get_list,
    get_str,
    to_int,
)


class ConsumeType(IntEnum):
    """Values are Java ordinals, which the C++ client sends instead of names."""

    CONSUME_ACTIVELY = 0  # pull
    CONSUME_PASSIVELY = 1  # push


class MessageModel(IntEnum):
    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(IntEnum):
    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1  # deprecated
    CONSUME_FROM_MIN_OFFSET = 2  # deprecated
    CONSUME_FROM_MAX_OFFSET = 3  # deprecated
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


@dataclass(frozen=True, slots=True)
class SubscriptionData(JsonBody):
    """One subscription. codeSet holds tag hashCodes as the client computed them (C++ sends zeros)."""

    topic: str
    sub_string: str
    tags_set: tuple[str, ...] = ()
    code_set: tuple[int, ...] = ()
    sub_version: int = 0
    expression_type: str = "TAG"
    class_filter_mode: bool = False

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": list(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": list(self.tags_set),
            "topic": self.topic,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            topic=get_str(obj, "topic"),
            sub_string=get_str(obj, "subString", "*"),
            tags_set=tuple(str(t) for t in get_list(obj, "tagsSet")),
            code_set=tuple(to_int(c, "codeSet") for c in get_list(obj, "codeSet")),
            sub_version=get_int(obj, "subVersion", 0),
            expression_type=get_str(obj, "expressionType", "TAG"),
            class_filter_mode=get_bool(obj, "classFilterMode"),
        )


@dataclass(frozen=True, slots=True)
class ProducerData(JsonBody):
    group_name: str

    def to_json_obj(self) -> dict[str, Any]:
        return {"groupName": self.group_name}

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(group_name=get_str(obj, "groupName"))


@dataclass(frozen=True, slots=True)
class ConsumerData(JsonBody):
    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscription_data_set: tuple[SubscriptionData, ...] = ()
    unit_mode: bool = False

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "consumeFromWhere": self.consume_from_where,
            "consumeType": self.consume_type,
            "groupName": self.group_name,
            "messageModel": self.message_model,
            "subscriptionDataSet": [s.to_json_obj() for s in self.subscription_data_set],
            "unitMode": self.unit_mode,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            group_name=get_str(obj, "groupName"),
            consume_type=get_enum(obj, "consumeType", ConsumeType, ConsumeType.CONSUME_PASSIVELY),
            message_model=get_enum(obj, "messageModel", MessageModel, MessageModel.CLUSTERING),
            consume_from_where=get_enum(
                obj, "consumeFromWhere", ConsumeFromWhere, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
            ),
            subscription_data_set=tuple(
                SubscriptionData.from_json_obj(expect_obj(s, "subscriptionData"))
                for s in get_list(obj, "subscriptionDataSet")
            ),
            unit_mode=get_bool(obj, "unitMode"),
        )


@dataclass(frozen=True, slots=True)
class HeartbeatData(JsonBody):
    """HEART_BEAT (34) body. `clientID` is the identity GET_CONSUMER_LIST_BY_GROUP must echo verbatim."""

    client_id: str
    producer_data_set: tuple[ProducerData, ...] = ()
    consumer_data_set: tuple[ConsumerData, ...] = ()

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "clientID": self.client_id,
            "consumerDataSet": [c.to_json_obj() for c in self.consumer_data_set],
            "producerDataSet": [p.to_json_obj() for p in self.producer_data_set],
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            client_id=get_str(obj, "clientID"),
            producer_data_set=tuple(
                ProducerData.from_json_obj(expect_obj(p, "producerData"))
                for p in get_list(obj, "producerDataSet")
            ),
            consumer_data_set=tuple(
                ConsumerData.from_json_obj(expect_obj(c, "consumerData"))
                for c in get_list(obj, "consumerDataSet")
            ),
        )
