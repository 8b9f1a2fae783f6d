"""Server-side assignment bodies: QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401).

A consumer that leaves rebalancing to the broker (Java's `setClientRebalance(false)`) sends
QUERY_ASSIGNMENT with a `QueryAssignmentRequestBody` and gets the queues it should read, each with
the mode to read it in (PULL or POP). `mqadmin setConsumeMode` sets that mode per topic and group
with SET_MESSAGE_REQUEST_MODE; the broker keeps the settings in `config/messageRequestMode.json`
(`MessageRequestModeTable`, the shape of Java's `MessageRequestModeManager`).

    QueryAssignmentRequestBody   {"clientId","consumerGroup","messageModel":"CLUSTERING",
                                  "strategyName":"AVG","topic"}
    QueryAssignmentResponseBody  {"messageQueueAssignments":[{"messageQueue":{"brokerName",
                                  "queueId","topic"},"mode":"PULL"}, ...]}   (null: skip this round)
    SetMessageRequestModeRequestBody {"consumerGroup","mode":"POP","popShareQueueNum":0,"topic"}
    messageRequestMode.json      {"messageRequestModeMap":{topic:{group:<SetMessageRequestMode...>}}}

A POP assignment with queueId -1 means "POP from every queue of that broker" (RocketMQ's
`popShareQueueNum <= 0`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Self

from rocketlite.protocol.bodies.heartbeat import MessageModel
from rocketlite.protocol.bodies.json_body import JsonBody, expect_obj, get_enum, get_int, get_list, get_str
from rocketlite.protocol.bodies.message_queue import MessageQueue


class MessageRequestMode(IntEnum):
    """How a consumer reads an assigned queue (Java's `MessageRequestMode`)."""

    PULL = 0
    POP = 1


@dataclass(frozen=True, slots=True)
class QueryAssignmentRequestBody(JsonBody):
    topic: str
    consumer_group: str
    client_id: str
    strategy_name: str = "AVG"
    message_model: MessageModel = MessageModel.CLUSTERING

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "clientId": self.client_id,
            "consumerGroup": self.consumer_group,
            "messageModel": self.message_model,
            "strategyName": self.strategy_name,
            "topic": self.topic,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            topic=get_str(obj, "topic"),
            consumer_group=get_str(obj, "consumerGroup"),
            client_id=get_str(obj, "clientId", ""),
            strategy_name=get_str(obj, "strategyName", ""),
            message_model=get_enum(obj, "messageModel", MessageModel, MessageModel.CLUSTERING),
        )


@dataclass(frozen=True, slots=True)
class MessageQueueAssignment(JsonBody):
    message_queue: MessageQueue
    mode: MessageRequestMode = MessageRequestMode.PULL
    attachments: Mapping[str, str] = field(default_factory=dict)

    def to_json_obj(self) -> dict[str, Any]:
        out: dict[str, Any] = {"messageQueue": self.message_queue.to_json_obj(), "mode": self.mode}
        if self.attachments:
            out["attachments"] = dict(self.attachments)
        return out

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        attachments = expect_obj(obj.get("attachments") or {}, "attachments")
        return cls(
            MessageQueue.from_json_obj(expect_obj(obj.get("messageQueue"), "messageQueue")),
            get_enum(obj, "mode", MessageRequestMode, MessageRequestMode.PULL),
            {str(k): str(v) for k, v in attachments.items()},
        )


@dataclass(frozen=True, slots=True)
class QueryAssignmentResponseBody(JsonBody):
    """`assignments` None is Java's null set: "no valid answer, keep what you have"."""

    assignments: tuple[MessageQueueAssignment, ...] | None = None

    def to_json_obj(self) -> dict[str, Any]:
        if self.assignments is None:
            return {}
        return {"messageQueueAssignments": [a.to_json_obj() for a in self.assignments]}

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        if obj.get("messageQueueAssignments") is None:
            return cls(None)
        items = get_list(obj, "messageQueueAssignments")
        return cls(tuple(MessageQueueAssignment.from_json_obj(expect_obj(i, "assignment")) for i in items))


@dataclass(frozen=True, slots=True)
class SetMessageRequestModeRequestBody(JsonBody):
    topic: str
    consumer_group: str
    mode: MessageRequestMode = MessageRequestMode.PULL
    pop_share_queue_num: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "consumerGroup": self.consumer_group,
            "mode": self.mode,
            "popShareQueueNum": self.pop_share_queue_num,
            "topic": self.topic,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            topic=get_str(obj, "topic"),
            consumer_group=get_str(obj, "consumerGroup"),
            mode=get_enum(obj, "mode", MessageRequestMode, MessageRequestMode.PULL),
            pop_share_queue_num=get_int(obj, "popShareQueueNum", 0),
        )


@dataclass(slots=True)
class MessageRequestModeTable(JsonBody):
    """messageRequestMode.json: the mode set per topic and group."""

    modes: dict[str, dict[str, SetMessageRequestModeRequestBody]] = field(default_factory=dict)

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "messageRequestModeMap": {
                topic: {group: body.to_json_obj() for group, body in groups.items()}
                for topic, groups in self.modes.items()
            }
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        table = expect_obj(obj.get("messageRequestModeMap") or {}, "messageRequestModeMap")
        return cls(
            {
                str(topic): {
                    str(group): SetMessageRequestModeRequestBody.from_json_obj(expect_obj(body, "mode"))
                    for group, body in expect_obj(groups, "groups").items()
                }
                for topic, groups in table.items()
            }
        )
