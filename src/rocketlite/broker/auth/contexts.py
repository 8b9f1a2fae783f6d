"""Which resources, with which actions, a request needs: RocketMQ 5.3's
`DefaultAuthorizationContextBuilder`, for remoting requests and for gRPC RPCs.

Remoting: the requests clients send most are read by hand, as Java does (a send needs Pub on its
topic, or Sub on the group for a retry topic; a pull Sub on topic and group; a heartbeat Sub on
each consumer group and its subscribed topics; offsets Sub+Get or Sub+Update; lock/unlock Sub on
the group and its queues' topics). Every other code is read from `ANNOTATED`, the
`@RocketMQAction` / `@RocketMQResource` annotations of Java's request headers: an action list, a
resource type for the whole request (Cluster: the broker's cluster), and the header fields that
name topics, groups or clusters. A retry topic in a topic field names its group. A code with no
annotated header (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, UPDATE_BROKER_CONFIG,
GET_BROKER_RUNTIME_INFO...) needs nothing beyond authentication, as in RocketMQ 5.3.

gRPC (`grpc_needs`): SendMessage, EndTransaction and RecallMessage Pub on the topic; QueryRoute
Pub or Sub on it; ReceiveMessage, AckMessage, ForwardMessageToDeadLetterQueue and QueryAssignment
Sub on group and topic; ChangeInvisibleDuration and a consumer's Heartbeat or
NotifyClientTermination Sub on the group; Telemetry's settings Pub on each published topic and
Sub on the subscription's group and topics. The others need nothing beyond authentication.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from rocketlite.broker.auth.model import Action, Resource, ResourcePattern, ResourceType, is_retry_topic
from rocketlite.protocol.bodies.heartbeat import HeartbeatData
from rocketlite.protocol.bodies.message_queue import LockBatchRequestBody
from rocketlite.protocol.codes import RequestCode as C
from rocketlite.protocol.wire.command import RemotingCommand

Need = tuple[Resource, tuple[Action, ...]]

PUB: Final = (Action.PUB,)
SUB: Final = (Action.SUB,)
GET: Final = (Action.GET,)
UPDATE: Final = (Action.UPDATE,)
CREATE: Final = (Action.CREATE,)
DELETE: Final = (Action.DELETE,)
LIST: Final = (Action.LIST,)
T, G, K = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER

# code: (actions, resource type of the request (Cluster or None), (field, type, splitter)...)
Annotation = tuple[tuple[Action, ...], ResourceType | None, tuple[tuple[str, ResourceType, str], ...]]
ANNOTATED: Final[Mapping[int, Annotation]] = {
    12: ((Action.SUB, Action.GET), None, (("topic", T, ""),)),  # QUERY_MESSAGE
    17: (CREATE, None, (("topic", T, ""),)),  # UPDATE_AND_CREATE_TOPIC
    18: (CREATE, None, ()),  # UPDATE_AND_CREATE_TOPIC_LIST: no named resource, nothing checked
    21: (LIST, ResourceType.TOPIC, ()),  # GET_ALL_TOPIC_CONFIG: type Topic, no name: nothing
    29: (GET, None, (("topic", T, ""),)),  # SEARCH_OFFSET_BY_TIMESTAMP
    30: (GET, None, (("topic", T, ""),)),  # GET_MAX_OFFSET
    31: (GET, None, (("topic", T, ""),)),  # GET_MIN_OFFSET
    32: (GET, None, (("topic", T, ""),)),  # GET_EARLIEST_MSG_STORETIME
    33: (GET, None, (("topic", T, ""),)),  # VIEW_MESSAGE_BY_ID
    37: (PUB, None, (("topic", T, ""),)),  # END_TRANSACTION
    39: (PUB, None, (("topic", T, ""),)),  # CHECK_TRANSACTION_STATE
    40: (SUB, None, (("consumerGroup", G, ""),)),  # NOTIFY_CONSUMER_IDS_CHANGED
    202: (GET, None, (("topic", T, ""),)),  # GET_TOPIC_STATS_INFO
    203: (GET, None, (("consumerGroup", G, ""),)),  # GET_CONSUMER_CONNECTION_LIST
    204: (GET, K, ()),  # GET_PRODUCER_CONNECTION_LIST
    205: (UPDATE, K, ()),  # WIPE_WRITE_PERM_OF_BROKER
    207: (DELETE, None, (("groupName", G, ""),)),  # DELETE_SUBSCRIPTIONGROUP
    208: (
        GET,
        None,
        (("consumerGroup", G, ""), ("topic", T, ""), ("topicList", T, ";")),
    ),  # GET_CONSUME_STATS
    215: (DELETE, None, (("topic", T, ""),)),  # DELETE_TOPIC_IN_BROKER
    222: (UPDATE, None, (("group", G, ""), ("topic", T, ""))),  # INVOKE_BROKER_TO_RESET_OFFSET
    223: (GET, None, (("topic", T, ""), ("group", G, ""))),  # INVOKE_BROKER_TO_GET_CONSUMER_STATUS
    224: (LIST, ResourceType.TOPIC, ()),  # GET_TOPICS_BY_CLUSTER
    300: (GET, None, (("topic", T, ""),)),  # QUERY_TOPIC_CONSUME_BY_WHO
    303: (GET, None, (("topic", T, ""), ("group", G, ""))),  # QUERY_CONSUME_TIME_SPAN
    307: (GET, None, (("consumerGroup", G, ""),)),  # GET_CONSUMER_RUNNING_INFO
    308: (GET, None, (("filterGroups", G, ","), ("compareGroup", G, ""), ("topic", T, ""))),
    309: (SUB, None, (("consumerGroup", G, ""), ("topic", T, ""))),  # CONSUME_MESSAGE_DIRECTLY
    314: (UPDATE, None, (("destGroup", G, ""), ("topic", T, ""))),  # CLONE_GROUP_OFFSET
    315: (GET, K, ()),  # VIEW_BROKER_STATS_DATA
    317: (GET, K, ()),  # GET_BROKER_CONSUME_STATS
    321: (GET, None, (("topic", T, ""), ("consumerGroup", G, ""))),  # QUERY_CONSUME_QUEUE
    323: (UPDATE, None, (("topic", T, ""),)),  # RESUME_CHECK_HALF_MESSAGE
    326: (SUB, None, (("producerGroup", G, ""), ("topic", T, ""))),  # PUSH_REPLY_MESSAGE_TO_CLIENT
    327: (UPDATE, K, ()),  # ADD_WRITE_PERM_OF_BROKER
    328: (GET, K, ()),  # GET_ALL_PRODUCER_INFO
    343: (GET, None, (("group", G, ""),)),  # QUERY_TOPICS_BY_CONSUMER
    345: (GET, None, (("group", G, ""), ("topic", T, ""))),  # QUERY_SUBSCRIPTION_BY_CONSUMER
    351: (GET, None, (("topic", T, ""),)),  # GET_TOPIC_CONFIG
    352: (GET, None, (("group", G, ""),)),  # GET_SUBSCRIPTIONGROUP_CONFIG
    353: (UPDATE, None, (("group", G, ""), ("topic", T, ""))),  # UPDATE_AND_GET_GROUP_FORBIDDEN
    370: (PUB, None, (("topic", T, ""),)),  # RECALL_MESSAGE
    901: (GET, None, (("clusterName", K, ""),)),  # GET_BROKER_MEMBER_GROUP
    906: (UPDATE, K, ()),  # EXCHANGE_BROKER_HA_INFO
    908: (UPDATE, K, ()),  # RESET_MASTER_FLUSH_OFFSET
    **dict.fromkeys((3001, 3002, 3003, 3006, 3007, 3008), (UPDATE, K, ())),  # AUTH_* writes
    **dict.fromkeys((3004, 3005, 3009, 3010), (GET, K, ())),  # AUTH_* reads
    200050: (SUB, None, (("consumerGroup", G, ""), ("topic", T, ""))),  # POP_MESSAGE
    200051: (SUB, None, (("consumerGroup", G, ""), ("topic", T, ""))),  # ACK_MESSAGE
    200052: (SUB, None, (("topic", T, ""), ("consumerGroup", G, ""))),  # PEEK_MESSAGE
    200053: (SUB, None, (("consumerGroup", G, ""), ("topic", T, ""))),  # CHANGE_MESSAGE_INVISIBLETIME
    200054: (SUB, None, (("consumerGroup", G, ""), ("topic", T, ""))),  # NOTIFICATION
    200055: (GET, None, (("consumerGroup", G, ""), ("topic", T, ""))),  # POLLING_INFO
}


def _topic_or_retry_group(name: str | None, actions: tuple[Action, ...]) -> Need:
    if is_retry_topic(name):
        return (Resource.group(name), actions)
    return (Resource.topic(name), actions)


def _annotated(code: int, ext: Mapping[str, str], cluster: str) -> list[Need]:
    spec = ANNOTATED.get(code)
    if spec is None:
        return []
    actions, request_type, fields = spec
    out: list[Need] = []
    for name, rtype, splitter in fields:
        value = ext.get(name)
        if value is None:
            continue
        values = [v for v in value.split(splitter) if v] if splitter else [value]
        for item in values:
            if rtype is ResourceType.TOPIC:
                out.append(_topic_or_retry_group(item, actions))
            else:
                out.append((Resource(rtype, item, ResourcePattern.LITERAL), actions))
    if not out and request_type is ResourceType.CLUSTER:
        out.append((Resource.cluster(cluster), actions))
    return out


def remoting_needs(request: RemotingCommand, cluster: str) -> list[Need]:
    """The (resource, actions) pairs a remoting request needs on a broker of `cluster`."""
    ext = request.ext_fields
    if not ext:
        return []
    code = request.code
    if code == C.GET_ROUTEINFO_BY_TOPIC:
        topic = ext.get("topic")
        if is_retry_topic(topic):
            return [(Resource.group(topic), (Action.SUB, Action.GET))]
        return [(Resource.topic(topic), (Action.PUB, Action.SUB, Action.GET))]
    if code == C.SEND_MESSAGE:
        topic = ext.get("topic")
        if is_retry_topic(topic):
            return [(Resource.group(ext.get("group") or topic), SUB)]
        return [(Resource.topic(topic), PUB)]
    if code in (C.SEND_MESSAGE_V2, C.SEND_BATCH_MESSAGE):
        topic = ext.get("b")
        if is_retry_topic(topic):
            return [(Resource.group(ext.get("a") or topic), SUB)]
        return [(Resource.topic(topic), PUB)]
    if code == C.END_TRANSACTION:
        return [(Resource.topic(ext["topic"]), PUB)] if ext.get("topic") else []
    if code == C.CONSUMER_SEND_MSG_BACK:
        return [(Resource.group(ext.get("group")), SUB)]
    if code == C.PULL_MESSAGE:
        topic = ext.get("topic")
        needs: list[Need] = [] if is_retry_topic(topic) else [(Resource.topic(topic), SUB)]
        return [*needs, (Resource.group(ext.get("consumerGroup")), SUB)]
    if code == C.QUERY_MESSAGE:
        return [(Resource.topic(ext.get("topic")), (Action.SUB, Action.GET))]
    if code == C.HEART_BEAT:
        return _heartbeat(request.body)
    if code == C.UNREGISTER_CLIENT:
        group = ext.get("consumerGroup")
        return [(Resource.group(group), SUB)] if group else []
    if code == C.GET_CONSUMER_LIST_BY_GROUP:
        return [(Resource.group(ext.get("consumerGroup")), (Action.SUB, Action.GET))]
    if code in (C.QUERY_CONSUMER_OFFSET, C.UPDATE_CONSUMER_OFFSET):
        second = Action.GET if code == C.QUERY_CONSUMER_OFFSET else Action.UPDATE
        actions: tuple[Action, ...] = (Action.SUB, second)
        topic = ext.get("topic")
        found: list[Need] = [] if is_retry_topic(topic) else [(Resource.topic(topic), actions)]
        return [*found, (Resource.group(ext.get("consumerGroup")), actions)]
    if code in (C.LOCK_BATCH_MQ, C.UNLOCK_BATCH_MQ):
        body = LockBatchRequestBody.from_json(request.body or b"{}")
        topics = sorted({q.topic for q in body.mq_set if not is_retry_topic(q.topic)})
        return [(Resource.group(body.consumer_group), SUB), *((Resource.topic(t), SUB) for t in topics)]
    return _annotated(code, ext, cluster)


def _heartbeat(body: bytes | None) -> list[Need]:
    if not body:
        return []
    out: list[Need] = []
    for consumer in HeartbeatData.from_json(body).consumer_data_set:
        out.append((Resource.group(consumer.group_name), SUB))
        out.extend(
            (Resource.topic(sub.topic), SUB)
            for sub in consumer.subscription_data_set
            if not is_retry_topic(sub.topic)
        )
    return out


# -- gRPC --------------------------------------------------------------------------------------------

CONSUMER_TYPES: Final = frozenset({2, 3, 4})  # ClientType PUSH_CONSUMER, SIMPLE_CONSUMER, PULL_CONSUMER


class ContextError(Exception):
    """A request that names no resource where one is needed ("topic is null.")."""


def _named(resource: Any, what: str) -> str:
    if resource is None or not resource.name.strip():
        raise ContextError(f"{what} is null.")
    return str(resource.name)


def _sub(group: Any, topic: Any) -> list[Need]:
    return [(Resource.group(_named(group, "group")), SUB), (Resource.topic(_named(topic, "topic")), SUB)]


def grpc_needs(rpc: str, r: Any) -> list[Need]:
    """The (resource, actions) pairs a gRPC request needs (namespaces already applied)."""
    if rpc == "SendMessage":
        if not r.messages:
            raise ContextError("message is null.")
        return [(Resource.topic(_named(r.messages[0].topic, "topic")), PUB)]
    if rpc in ("EndTransaction", "RecallMessage"):
        return [(Resource.topic(_named(r.topic, "topic")), PUB)]
    if rpc == "Heartbeat":
        if r.client_type not in CONSUMER_TYPES:
            return []
        return [(Resource.group(_named(r.group, "group")), SUB)]
    if rpc == "ReceiveMessage":
        if not r.HasField("message_queue"):
            raise ContextError("messageQueue is null.")
        return _sub(r.group, r.message_queue.topic)
    if rpc in ("AckMessage", "ForwardMessageToDeadLetterQueue", "QueryAssignment"):
        return _sub(r.group, r.topic)
    if rpc == "NotifyClientTermination":
        return [(Resource.group(r.group.name), SUB)] if r.group.name.strip() else []
    if rpc == "ChangeInvisibleDuration":
        return [(Resource.group(_named(r.group, "group")), SUB)]
    if rpc == "QueryRoute":
        return [(Resource.topic(_named(r.topic, "topic")), (Action.PUB, Action.SUB))]
    if rpc == "Telemetry" and r.WhichOneof("command") == "settings":
        settings = r.settings
        if not settings.HasField("publishing") and not settings.HasField("subscription"):
            raise ContextError("settings command doesn't have publishing or subscription.")
        out: list[Need] = [(Resource.topic(_named(t, "topic")), PUB) for t in settings.publishing.topics]
        if settings.HasField("subscription"):
            sub = settings.subscription
            out.append((Resource.group(_named(sub.group, "group")), SUB))
            out.extend((Resource.topic(_named(e.topic, "topic")), SUB) for e in sub.subscriptions)
        return out
    return []
