"""The operations requests of RocketMQ 5.x admin tools on the wire: request codes and custom headers.

mqadmin 5.3 and the dashboard send these to a broker; three of them the broker relays to a
consumer's own connection (RocketMQ's `Broker2Client`): INVOKE_BROKER_TO_RESET_OFFSET (222)
becomes a one-way RESET_CONSUMER_CLIENT_OFFSET (220) to every client of the group, and
GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309) go on, unchanged, to the one
client named by its clientId, whose answer is the broker's answer.

The 4.x codes among them are in `protocol.codes.RequestCode`; `AdminRequestCode` holds the 5.x
ones (4.x tools never send them). The headers are Java's, field for field (`ResetOffsetRequestHeader`
writes its flag as `isForce`, `GetConsumeStatsInBrokerHeader` as `isOrder`: Java's reflection uses
the field names).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import ClassVar, Final

from rocketlite.protocol.wire.custom_header import CustomHeader, Long
from rocketlite.protocol.wire.custom_header import header_dataclass as _header

# 5.x's answer to a bad argument of an admin request (4.x answered SYSTEM_ERROR); not in
# `ResponseCode`, which holds the 4.9 codes.
INVALID_PARAMETER: Final = 29


class AdminRequestCode(IntEnum):
    """5.x admin request codes a rocketlite broker serves (`RequestCode` of 5.3.3)."""

    UPDATE_AND_CREATE_TOPIC_LIST = 18
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST = 225
    QUERY_TOPICS_BY_CONSUMER = 343
    QUERY_SUBSCRIPTION_BY_CONSUMER = 345
    GET_TOPIC_CONFIG = 351
    GET_SUBSCRIPTIONGROUP_CONFIG = 352
    GET_BROKER_HA_STATUS = 907


@_header
class ResetOffsetRequestHeader(CustomHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET (222), and the RESET_CONSUMER_CLIENT_OFFSET (220) relayed on.

    `timestamp` -1 means "to the end of each queue" (mqadmin's skipAccumulatedMessage); `offset`
    and `queue_id` belong to the server-side reset (`useServerSideResetOffset`), not served here.
    """

    group: str
    topic: str
    queue_id: int = -1
    offset: Long | None = None
    timestamp: Long
    is_force: bool

    WIRE_NAMES: ClassVar[Mapping[str, str]] = {"is_force": "isForce"}


@_header
class GetConsumerRunningInfoRequestHeader(CustomHeader):
    """GET_CONSUMER_RUNNING_INFO (307): to the broker, and relayed as is to the client."""

    consumer_group: str
    client_id: str
    jstack_enable: bool = False


@_header
class ConsumeMessageDirectlyResultRequestHeader(CustomHeader):
    """CONSUME_MESSAGE_DIRECTLY (309). The broker adds brokerName, topicSysFlag and groupSysFlag
    before relaying it, and the stored message as the body."""

    consumer_group: str | None = None
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None
    topic: str | None = None
    topic_sys_flag: int | None = None
    group_sys_flag: int | None = None


@_header
class GetTopicConfigRequestHeader(CustomHeader):
    """GET_TOPIC_CONFIG (351); `lo` asks for the static-topic mapping too (none here)."""

    topic: str
    lo: bool | None = None


@_header
class GetSubscriptionGroupConfigRequestHeader(CustomHeader):
    """GET_SUBSCRIPTIONGROUP_CONFIG (352)."""

    group: str


@_header
class ViewBrokerStatsDataRequestHeader(CustomHeader):
    """VIEW_BROKER_STATS_DATA (315): one statistic (`TOPIC_PUT_NUMS`...) of one key (a topic,
    `topic@group`, the cluster name)."""

    stats_name: str
    stats_key: str


@_header
class GetConsumeStatsInBrokerHeader(CustomHeader):
    """GET_BROKER_CONSUME_STATS (317); `is_order` keeps only ordered topics."""

    is_order: bool

    WIRE_NAMES: ClassVar[Mapping[str, str]] = {"is_order": "isOrder"}


@_header
class QueryTopicsByConsumerRequestHeader(CustomHeader):
    """QUERY_TOPICS_BY_CONSUMER (343)."""

    group: str


@_header
class QuerySubscriptionByConsumerRequestHeader(CustomHeader):
    """QUERY_SUBSCRIPTION_BY_CONSUMER (345)."""

    group: str
    topic: str


@_header
class QueryConsumeQueueRequestHeader(CustomHeader):
    """QUERY_CONSUME_QUEUE (321): `count` units of one consume queue from `index`."""

    topic: str
    queue_id: int
    index: Long
    count: int
    consumer_group: str | None = None


ADMIN_HEADERS: Final[tuple[type[CustomHeader], ...]] = (
    ResetOffsetRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    GetTopicConfigRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    ViewBrokerStatsDataRequestHeader,
    GetConsumeStatsInBrokerHeader,
    QueryTopicsByConsumerRequestHeader,
    QuerySubscriptionByConsumerRequestHeader,
    QueryConsumeQueueRequestHeader,
)
for _cls in ADMIN_HEADERS:  # import-time schema check, as in `headers`
    _cls.field_specs()
