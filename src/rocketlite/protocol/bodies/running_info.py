"""What a consumer answers when the broker relays an admin's question to it (5.3's body classes).

- `ConsumerRunningInfo`: GET_CONSUMER_RUNNING_INFO (307). `properties` are the consumer's
  settings as strings plus RocketMQ's `PROP_*` keys (mqadmin's consumerStatus reads
  PROP_CONSUME_TYPE, PROP_CONSUMEORDERLY and PROP_CONSUMER_START_TIMESTAMP), `mqTable` one
  `ProcessQueueInfo` per queue the client holds (an object-keyed map, see `message_queue`),
  `statusTable` one `ConsumeStatus` per subscribed topic, `jstack` the threads when asked for.
- `ConsumeMessageDirectlyResult`: CONSUME_MESSAGE_DIRECTLY (309), the listener's verdict on
  one message handed to it outside the pull loop (`CMResult`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Self

from rocketlite.protocol.bodies.heartbeat import SubscriptionData
from rocketlite.protocol.bodies.json_body import (
    JsonBody,
    expect_obj,
    get_bool,
    get_int,
    get_list,
    get_opt_str,
)
from rocketlite.protocol.bodies.message_queue import MessageQueue

PROP_NAMESERVER_ADDR: Final = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE: Final = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUME_ORDERLY: Final = "PROP_CONSUMEORDERLY"
PROP_CONSUME_TYPE: Final = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION: Final = "PROP_CLIENT_VERSION"
PROP_CONSUMER_START_TIMESTAMP: Final = "PROP_CONSUMER_START_TIMESTAMP"


def _float(obj: Mapping[Any, Any], key: str) -> float:
    value = obj.get(key, 0.0)
    return float(value) if isinstance(value, int | float | str) else 0.0


@dataclass(frozen=True, slots=True)
class ProcessQueueInfo(JsonBody):
    """One held queue: the committed offset, what is cached, the lock, the last pull and consume."""

    commit_offset: int = 0
    cached_msg_min_offset: int = 0
    cached_msg_max_offset: int = 0
    cached_msg_count: int = 0
    cached_msg_size_in_mib: int = 0
    transaction_msg_min_offset: int = 0
    transaction_msg_max_offset: int = 0
    transaction_msg_count: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_timestamp: int = 0
    droped: bool = False  # sic: Java's field name
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "cachedMsgCount": self.cached_msg_count,
            "cachedMsgMaxOffset": self.cached_msg_max_offset,
            "cachedMsgMinOffset": self.cached_msg_min_offset,
            "cachedMsgSizeInMiB": self.cached_msg_size_in_mib,
            "commitOffset": self.commit_offset,
            "droped": self.droped,
            "lastConsumeTimestamp": self.last_consume_timestamp,
            "lastLockTimestamp": self.last_lock_timestamp,
            "lastPullTimestamp": self.last_pull_timestamp,
            "locked": self.locked,
            "transactionMsgCount": self.transaction_msg_count,
            "transactionMsgMaxOffset": self.transaction_msg_max_offset,
            "transactionMsgMinOffset": self.transaction_msg_min_offset,
            "tryUnlockTimes": self.try_unlock_times,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            commit_offset=get_int(obj, "commitOffset", 0),
            cached_msg_min_offset=get_int(obj, "cachedMsgMinOffset", 0),
            cached_msg_max_offset=get_int(obj, "cachedMsgMaxOffset", 0),
            cached_msg_count=get_int(obj, "cachedMsgCount", 0),
            cached_msg_size_in_mib=get_int(obj, "cachedMsgSizeInMiB", 0),
            transaction_msg_min_offset=get_int(obj, "transactionMsgMinOffset", 0),
            transaction_msg_max_offset=get_int(obj, "transactionMsgMaxOffset", 0),
            transaction_msg_count=get_int(obj, "transactionMsgCount", 0),
            locked=get_bool(obj, "locked"),
            try_unlock_times=get_int(obj, "tryUnlockTimes", 0),
            last_lock_timestamp=get_int(obj, "lastLockTimestamp", 0),
            droped=get_bool(obj, "droped"),
            last_pull_timestamp=get_int(obj, "lastPullTimestamp", 0),
            last_consume_timestamp=get_int(obj, "lastConsumeTimestamp", 0),
        )


@dataclass(frozen=True, slots=True)
class ConsumeStatus(JsonBody):
    """A topic's consumption over the last minute (RT in ms, TPS per second)."""

    pull_rt: float = 0.0
    pull_tps: float = 0.0
    consume_rt: float = 0.0
    consume_ok_tps: float = 0.0
    consume_failed_tps: float = 0.0
    consume_failed_msgs: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "consumeFailedMsgs": self.consume_failed_msgs,
            "consumeFailedTPS": float(self.consume_failed_tps),
            "consumeOKTPS": float(self.consume_ok_tps),
            "consumeRT": float(self.consume_rt),
            "pullRT": float(self.pull_rt),
            "pullTPS": float(self.pull_tps),
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            _float(obj, "pullRT"),
            _float(obj, "pullTPS"),
            _float(obj, "consumeRT"),
            _float(obj, "consumeOKTPS"),
            _float(obj, "consumeFailedTPS"),
            get_int(obj, "consumeFailedMsgs", 0),
        )


@dataclass(frozen=True, slots=True)
class ConsumerRunningInfo(JsonBody):
    """GET_CONSUMER_RUNNING_INFO (307) body."""

    properties: Mapping[str, str] = field(default_factory=dict)
    subscription_set: Sequence[SubscriptionData] = ()
    mq_table: Mapping[MessageQueue, ProcessQueueInfo] = field(default_factory=dict)
    status_table: Mapping[str, ConsumeStatus] = field(default_factory=dict)
    user_consumer_info: Mapping[str, str] = field(default_factory=dict)
    jstack: str | None = None

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "jstack": self.jstack,
            "mqPopTable": {},
            "mqTable": {mq: self.mq_table[mq].to_json_obj() for mq in sorted(self.mq_table)},
            "properties": dict(self.properties),
            "statusTable": {t: self.status_table[t].to_json_obj() for t in sorted(self.status_table)},
            "subscriptionSet": [s.to_json_obj() for s in self.subscription_set],
            "userConsumerInfo": dict(self.user_consumer_info),
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        mq_table = expect_obj(obj.get("mqTable") or {}, "mqTable")
        status = expect_obj(obj.get("statusTable") or {}, "statusTable")
        return cls(
            {str(k): str(v) for k, v in expect_obj(obj.get("properties") or {}, "properties").items()},
            tuple(
                SubscriptionData.from_json_obj(expect_obj(s, "SubscriptionData"))
                for s in get_list(obj, "subscriptionSet")
            ),
            {
                MessageQueue.from_json_obj(expect_obj(k, "MessageQueue key")): ProcessQueueInfo.from_json_obj(
                    expect_obj(v, "ProcessQueueInfo")
                )
                for k, v in mq_table.items()
            },
            {str(t): ConsumeStatus.from_json_obj(expect_obj(v, "ConsumeStatus")) for t, v in status.items()},
            {
                str(k): str(v)
                for k, v in expect_obj(obj.get("userConsumerInfo") or {}, "userConsumerInfo").items()
            },
            get_opt_str(obj, "jstack"),
        )


class CMResult(enum.Enum):
    """How a directly consumed message ended (`CMResult`)."""

    CR_SUCCESS = "CR_SUCCESS"
    CR_LATER = "CR_LATER"
    CR_ROLLBACK = "CR_ROLLBACK"
    CR_COMMIT = "CR_COMMIT"
    CR_THROW_EXCEPTION = "CR_THROW_EXCEPTION"
    CR_RETURN_NULL = "CR_RETURN_NULL"


@dataclass(frozen=True, slots=True)
class ConsumeMessageDirectlyResult(JsonBody):
    """CONSUME_MESSAGE_DIRECTLY (309) body."""

    consume_result: CMResult
    order: bool = False
    auto_commit: bool = True
    remark: str | None = None
    spent_time_mills: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "autoCommit": self.auto_commit,
            "consumeResult": self.consume_result.value,
            "order": self.order,
            "remark": self.remark,
            "spentTimeMills": self.spent_time_mills,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            CMResult(str(obj.get("consumeResult") or "CR_RETURN_NULL")),
            get_bool(obj, "order"),
            get_bool(obj, "autoCommit", True),
            get_opt_str(obj, "remark"),
            get_int(obj, "spentTimeMills", 0),
        )
