"""The custom headers of RocketMQ 4.x: the `extFields` of each request and response.

Each is a frozen dataclass whose annotations are its schema; `custom_header` says how they map to
the wire (camelCase names, Java's number and boolean texts, required fields).

SEND_MESSAGE has two spellings: V1 long names (codes 10, 324) and the V2 one-letter names a..n
(codes 310, 320, 325); `SendMessageRequestHeader.from_ext` takes the request code to pick.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final, Self

from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.wire.custom_header import CustomHeader, Long, camel_case, decoder_for
from rocketlite.protocol.wire.custom_header import header_dataclass as _header

_V2_DECODERS: dict[type, Callable[[Mapping[str, str] | None], Any]] = {}  # V2 decoder per class


# ------------------------------------------------------------------------------------------ send / pull


@_header
class SendMessageRequestHeader(CustomHeader):
    """SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320), SEND_REPLY_MESSAGE(_V2)."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: Long
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None
    batch: bool = False
    bname: str | None = None  # 4.9.4+ brokerName; V1 spells it `bname` too

    V2_CODES: ClassVar[frozenset[int]] = frozenset(
        {RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2}
    )
    # SendMessageRequestHeaderV2: field order a..n (`createSendMessageRequestHeaderV2`).
    V2_NAMES: ClassVar[Mapping[str, str]] = dict(
        zip(
            (
                "producer_group", "topic", "default_topic", "default_topic_queue_nums", "queue_id",
                "sys_flag", "born_timestamp", "flag", "properties", "reconsume_times", "unit_mode",
                "max_reconsume_times", "batch", "bname",
            ),
            "abcdefghijklmn",
            strict=True,
        )
    )  # fmt: skip

    @classmethod
    def from_ext(cls, ext: Mapping[str, str] | None, request_code: int = RequestCode.SEND_MESSAGE) -> Self:
        """Long names for codes 10/324, letters a..n for 310/320/325 (errors name the key sent)."""
        if request_code in cls.V2_CODES:
            fn = _V2_DECODERS.get(cls)
            if fn is None:
                fn = _V2_DECODERS[cls] = decoder_for(cls, cls.V2_NAMES)
        else:
            fn = decoder_for(cls, None)
        header: Self = fn(ext)
        return header

    def to_ext_v2(self) -> dict[str, str]:
        """The one-letter form of SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE."""
        return self._encode(self.V2_NAMES)

    @classmethod
    def v2_to_v1(cls, ext: Mapping[str, str]) -> dict[str, str]:
        """Rename letter keys to long names (other keys kept), for code that only knows V1."""
        long_names = {letter: camel_case(attr) for attr, letter in cls.V2_NAMES.items()}
        return {long_names.get(k, k): v for k, v in ext.items()}


@_header
class SendMessageResponseHeader(CustomHeader):
    """msgId is the offsetMsgId (comma-joined for batches); MSG_REGION/TRACE_ON ride along in ext."""

    msg_id: str
    queue_id: int
    queue_offset: Long
    transaction_id: str | None = None
    msg_region: str | None = None
    trace_on: str | None = None
    WIRE_NAMES: ClassVar[Mapping[str, str]] = {"msg_region": "MSG_REGION", "trace_on": "TRACE_ON"}


@_header
class PullMessageRequestHeader(CustomHeader):
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: Long
    max_msg_nums: int
    sys_flag: int
    commit_offset: Long
    suspend_timeout_millis: Long
    subscription: str | None = None
    sub_version: Long
    expression_type: str | None = None
    bname: str | None = None


@_header
class PullMessageResponseHeader(CustomHeader):
    """All four fields on every pull answer, errors 19/20/21 included (the Java client unboxes them)."""

    suggest_which_broker_id: Long
    next_begin_offset: Long
    min_offset: Long
    max_offset: Long


# --------------------------------------------------------------------------------------------- offsets


@_header
class QueryConsumerOffsetRequestHeader(CustomHeader):
    consumer_group: str
    topic: str
    queue_id: int


@_header
class QueryConsumerOffsetResponseHeader(CustomHeader):
    offset: Long


@_header
class UpdateConsumerOffsetRequestHeader(CustomHeader):
    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: Long


@_header
class UpdateConsumerOffsetResponseHeader(CustomHeader):
    """No fields; exists so every request code has a response header class."""


@_header
class GetMaxOffsetRequestHeader(CustomHeader):
    topic: str
    queue_id: int


@_header
class GetMaxOffsetResponseHeader(CustomHeader):
    offset: Long


@_header
class GetMinOffsetRequestHeader(CustomHeader):
    topic: str
    queue_id: int


@_header
class GetMinOffsetResponseHeader(CustomHeader):
    offset: Long


@_header
class GetEarliestMsgStoretimeRequestHeader(CustomHeader):
    topic: str
    queue_id: int


@_header
class GetEarliestMsgStoretimeResponseHeader(CustomHeader):
    timestamp: Long


@_header
class SearchOffsetRequestHeader(CustomHeader):
    topic: str
    queue_id: int
    timestamp: Long


@_header
class SearchOffsetResponseHeader(CustomHeader):
    offset: Long


# ------------------------------------------------------------------------------------- messages by key


@_header
class QueryMessageRequestHeader(CustomHeader):
    """`_UNIQUE_KEY_QUERY` is not a Java field but an extra ext entry the client adds."""

    topic: str
    key: str
    max_num: int
    begin_timestamp: Long
    end_timestamp: Long
    unique_key_query: bool | None = None
    WIRE_NAMES: ClassVar[Mapping[str, str]] = {"unique_key_query": "_UNIQUE_KEY_QUERY"}


@_header
class QueryMessageResponseHeader(CustomHeader):
    index_last_update_timestamp: Long
    index_last_update_phyoffset: Long


@_header
class ViewMessageRequestHeader(CustomHeader):
    offset: Long  # commit-log offset decoded from an offsetMsgId


# ------------------------------------------------------------------------------ retry and transactions


@_header
class ConsumerSendMsgBackRequestHeader(CustomHeader):
    offset: Long
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None


@_header
class EndTransactionRequestHeader(CustomHeader):
    """commitOrRollback: 0 NOT_TYPE (unknown), 8 COMMIT, 12 ROLLBACK; the remark carries client errors."""

    producer_group: str
    tran_state_table_offset: Long
    commit_log_offset: Long
    commit_or_rollback: int
    from_transaction_check: bool = False
    msg_id: str
    transaction_id: str | None = None
    bname: str | None = None


@_header
class CheckTransactionStateRequestHeader(CustomHeader):
    tran_state_table_offset: Long
    commit_log_offset: Long
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None


# ------------------------------------------------------------------------------------------- clients


@_header
class GetConsumerListByGroupRequestHeader(CustomHeader):
    consumer_group: str


@_header
class NotifyConsumerIdsChangedRequestHeader(CustomHeader):
    consumer_group: str


@_header
class UnregisterClientRequestHeader(CustomHeader):
    client_id: str
    producer_group: str | None = None
    consumer_group: str | None = None
    WIRE_NAMES: ClassVar[Mapping[str, str]] = {"client_id": "clientID"}


# ------------------------------------------------------------------------------------------- namesrv


@_header
class RegisterBrokerRequestHeader(CustomHeader):
    """bodyCrc32 0 means "do not check"; Java sends `UtilAll.crc32(body)`."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: Long
    compressed: bool = False
    body_crc32: int = 0


@_header
class RegisterBrokerResponseHeader(CustomHeader):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@_header
class UnregisterBrokerRequestHeader(CustomHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Long


@_header
class QueryDataVersionRequestHeader(CustomHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Long


@_header
class QueryDataVersionResponseHeader(CustomHeader):
    changed: bool


@_header
class GetRouteInfoRequestHeader(CustomHeader):
    """acceptStandardJsonOnly (4.9.4+) asks for quoted brokerAddrs keys (see bodies.route.TopicRouteData)."""

    topic: str
    accept_standard_json_only: bool | None = None


@_header
class PutKVConfigRequestHeader(CustomHeader):
    namespace: str
    key: str
    value: str


@_header
class GetKVConfigRequestHeader(CustomHeader):
    namespace: str
    key: str


@_header
class GetKVConfigResponseHeader(CustomHeader):
    value: str | None = None


@_header
class DeleteKVConfigRequestHeader(CustomHeader):
    namespace: str
    key: str


@_header
class GetKVListByNamespaceRequestHeader(CustomHeader):
    namespace: str


@_header
class DeleteTopicFromNamesrvRequestHeader(CustomHeader):
    """DELETE_TOPIC_IN_NAMESRV (216)."""

    topic: str
    cluster_name: str | None = None


# --------------------------------------------------------------------------------------------- admin


@_header
class CreateTopicRequestHeader(CustomHeader):
    """UPDATE_AND_CREATE_TOPIC (17). topicFilterType is "SINGLE_TAG" or "MULTI_TAG"."""

    topic: str
    default_topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str
    topic_sys_flag: int | None = None
    order: bool
    attributes: str | None = None  # 5.x: signed changes, "+message.type=FIFO,-key" (topic_attributes)


@_header
class DeleteTopicRequestHeader(CustomHeader):
    """DELETE_TOPIC_IN_BROKER (215)."""

    topic: str


@_header
class GetTopicStatsInfoRequestHeader(CustomHeader):
    topic: str


@_header
class GetConsumeStatsRequestHeader(CustomHeader):
    """GET_CONSUME_STATS (208); `topic_list` (5.x) names several topics, ";"-separated."""

    consumer_group: str
    topic: str | None = None
    topic_list: str | None = None


@_header
class GetConsumerConnectionListRequestHeader(CustomHeader):
    consumer_group: str


# ------------------------------------------------------------------------------ name-server admin


@_header
class WipeWritePermOfBrokerRequestHeader(CustomHeader):
    broker_name: str


@_header
class WipeWritePermOfBrokerResponseHeader(CustomHeader):
    wipe_topic_count: int


@_header
class AddWritePermOfBrokerRequestHeader(CustomHeader):
    broker_name: str


@_header
class AddWritePermOfBrokerResponseHeader(CustomHeader):
    add_topic_count: int


@_header
class GetTopicsByClusterRequestHeader(CustomHeader):
    cluster: str


ALL_HEADERS: Final[tuple[type[CustomHeader], ...]] = tuple(
    obj for obj in list(globals().values()) if isinstance(obj, type) and issubclass(obj, CustomHeader)
    and obj is not CustomHeader
)  # fmt: skip
for _cls in ALL_HEADERS:  # import-time schema check: a bad annotation fails here, not on first request
    _cls.field_specs()
