"""Topic verbs: updateTopic, deleteTopic, topicList, topicRoute, topicStatus.

Each function does what the mqadmin sub-command of the same name does and returns plain
JSON-able data (the `--json` output as is; `render.py` draws the tables from it), so the
operations can be reused and tested without the command line.

Differences from mqadmin, and why:

- updateTopic waits (up to 3 s) until the name server shows the new queue counts: the broker
  re-registers right after the change, and a script that runs `topicRoute` or a producer next
  should not race it. The output says whether the route was seen (`routeReady`).
- deleteTopic also removes the topic's order configuration from the name servers, as mqadmin
  does, and reports every broker and name server it touched.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Final

from rocketlite.admin.client import AdminClient, AdminError, BrokerTarget, RoutePredicate
from rocketlite.protocol.bodies.message_queue import TopicStatsTable
from rocketlite.protocol.bodies.route import TopicConfig, TopicRouteData
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.reserved import DEFAULT_TOPIC
from rocketlite.protocol.reserved import DLQ_GROUP_TOPIC_PREFIX as DLQ_PREFIX
from rocketlite.protocol.reserved import RETRY_GROUP_TOPIC_PREFIX as RETRY_PREFIX
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.headers import (
    CreateTopicRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader,
    GetTopicStatsInfoRequestHeader,
)

ORDER_TOPIC_NAMESPACE: Final = "ORDER_TOPIC_CONFIG"  # NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG
FLAG_UNIT: Final = 1  # TopicSysFlag
FLAG_UNIT_SUB: Final = 2


def route_json(route: TopicRouteData) -> dict[str, Any]:
    """`TopicRouteData` as mqadmin's `topicRoute` prints it (brokerAddrs keys become strings)."""
    out: dict[str, Any] = {
        "brokerDatas": [
            {
                "brokerAddrs": {str(k): v for k, v in sorted(b.broker_addrs.items())},
                "brokerName": b.broker_name,
                "cluster": b.cluster,
            }
            for b in sorted(route.broker_datas, key=lambda b: b.broker_name)
        ],
        "queueDatas": [
            {
                "brokerName": q.broker_name,
                "perm": q.perm,
                "readQueueNums": q.read_queue_nums,
                "topicSysFlag": q.topic_sys_flag,
                "writeQueueNums": q.write_queue_nums,
            }
            for q in sorted(route.queue_datas, key=lambda q: q.broker_name)
        ],
        "filterServerTable": {k: list(v) for k, v in route.filter_server_table.items()},
    }
    if route.order_topic_conf:
        out["orderTopicConf"] = route.order_topic_conf
    return out


def _route_matches(config: TopicConfig) -> RoutePredicate:
    def matches(route: TopicRouteData | None, brokers: Collection[str]) -> bool:
        if route is None:
            return False
        seen = {
            q.broker_name
            for q in route.queue_datas
            if (q.read_queue_nums, q.write_queue_nums, q.perm)
            == (config.read_queue_nums, config.write_queue_nums, config.perm)
        }
        return all(b in seen for b in brokers)

    return matches


def _route_gone(route: TopicRouteData | None, brokers: Collection[str]) -> bool:
    """None of `brokers` serves the topic any more (other clusters may still)."""
    return route is None or not {q.broker_name for q in route.queue_datas} & set(brokers)


async def _update_order_conf(
    admin: AdminClient, topic: str, targets: list[BrokerTarget], write_queue_nums: int, whole_cluster: bool
) -> str:
    """`createOrUpdateOrderConf`: "brokerA:8;brokerB:8" under ORDER_TOPIC_CONFIG/<topic>.

    For one broker the entry is merged into the existing value; for a cluster it replaces it.
    """
    entries: dict[str, str] = {}
    if not whole_cluster:
        old = await admin.get_kv(ORDER_TOPIC_NAMESPACE, topic)
        for part in (old or "").split(";"):
            name, sep, count = part.partition(":")
            if sep and name:
                entries[name] = count
    for target in targets:
        entries[target.broker_name] = str(write_queue_nums)
    value = ";".join(f"{name}:{count}" for name, count in entries.items())
    await admin.each_namesrv(
        RequestCode.PUT_KV_CONFIG, {"namespace": ORDER_TOPIC_NAMESPACE, "key": topic, "value": value}
    )
    return value


async def update_topic(
    admin: AdminClient,
    *,
    topic: str,
    broker_addr: str | None,
    cluster: str | None,
    read_queue_nums: int = 8,
    write_queue_nums: int = 8,
    perm: int = 6,
    order: bool = False,
    unit: bool = False,
    has_unit_sub: bool = False,
) -> dict[str, Any]:
    """UPDATE_AND_CREATE_TOPIC (17) on one broker or every master of a cluster."""
    targets = await admin.targets(broker_addr, cluster)
    sys_flag = (FLAG_UNIT if unit else 0) | (FLAG_UNIT_SUB if has_unit_sub else 0)
    config = TopicConfig(topic, read_queue_nums, write_queue_nums, perm, "SINGLE_TAG", sys_flag, order)
    header = CreateTopicRequestHeader(
        topic=topic,
        default_topic=DEFAULT_TOPIC,
        read_queue_nums=read_queue_nums,
        write_queue_nums=write_queue_nums,
        perm=perm,
        topic_filter_type=config.topic_filter_type,
        topic_sys_flag=sys_flag,
        order=order,
    )
    unknown = [] if not order else [t.addr for t in targets if not t.cluster]
    if unknown:
        raise AdminError(
            f"broker {unknown[0]} is not registered with the name server: no name for the order conf"
        )
    for target in targets:
        await admin.call(target.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
    order_conf = None
    if order:
        order_conf = await _update_order_conf(admin, topic, targets, write_queue_nums, cluster is not None)
    names = [t.broker_name for t in targets if t.cluster]  # brokers the name server knows
    ready = await admin.wait_for_route(topic, names, _route_matches(config)) if names else False
    return {
        "topicConfig": config.to_json_obj(),
        "brokers": [t.to_json() for t in targets],
        "orderConf": order_conf,
        "routeReady": ready,
    }


async def delete_topic(admin: AdminClient, *, topic: str, cluster: str) -> dict[str, Any]:
    """DELETE_TOPIC_IN_BROKER (215) on the cluster's masters, then DELETE_TOPIC_IN_NAMESRV (216)
    and the order configuration on every name server."""
    targets = await admin.masters(cluster)
    if not targets:
        raise AdminError(f"cluster {cluster!r} has no master broker")
    for target in targets:
        ext = DeleteTopicRequestHeader(topic=topic).to_ext()
        await admin.call(target.addr, RequestCode.DELETE_TOPIC_IN_BROKER, ext)
    ns_ext = DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster).to_ext()
    namesrvs = await admin.each_namesrv(RequestCode.DELETE_TOPIC_IN_NAMESRV, ns_ext)
    await admin.each_namesrv(RequestCode.DELETE_KV_CONFIG, {"namespace": ORDER_TOPIC_NAMESPACE, "key": topic})
    await admin.wait_for_route(topic, [t.broker_name for t in targets], _route_gone)
    return {
        "topic": topic,
        "cluster": cluster,
        "brokers": [t.to_json() for t in targets],
        "nameServers": namesrvs,
    }


async def consumer_groups_of(admin: AdminClient, route: TopicRouteData, topic: str) -> list[str]:
    """QUERY_TOPIC_CONSUME_BY_WHO (300) on every master of the route, merged."""
    groups: set[str] = set()
    for data in route.broker_datas:
        addr = data.master_addr
        if addr is None:
            continue
        response = await admin.call(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
        body = fastjson.loads(response.body or b"{}")
        if isinstance(body, dict):
            groups.update(str(g) for g in body.get("groupList") or ())
    return sorted(groups)


async def topic_list(admin: AdminClient, *, cluster_mode: bool = False) -> dict[str, Any]:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206); with `-c`, each topic's cluster and consumer
    groups (retry and DLQ topics left out, as mqadmin does)."""
    topics = await admin.all_topics()
    if not cluster_mode:
        return {"topics": topics}
    info = await admin.cluster_info()
    cluster_of = {name: data.cluster for name, data in info.broker_addr_table.items()}
    shown = [t for t in topics if not t.startswith((RETRY_PREFIX, DLQ_PREFIX))]
    rows: list[dict[str, Any]] = []
    with admin.reporter.task("Topics", len(shown)) as advance:
        for topic in shown:
            route = await admin.topic_route_or_none(topic)
            clusters: list[str] = []
            groups: list[str] = []
            if route is not None:
                clusters = sorted({cluster_of.get(q.broker_name, "") for q in route.queue_datas} - {""})
                groups = await consumer_groups_of(admin, route, topic)
            rows.append({"cluster": ",".join(clusters), "topic": topic, "consumerGroups": groups})
            advance(1)
    return {"topics": rows}


async def topic_route(admin: AdminClient, *, topic: str) -> dict[str, Any]:
    """GET_ROUTEINFO_BY_TOPIC (105)."""
    return route_json(await admin.topic_route(topic))


async def topic_status(admin: AdminClient, *, topic: str) -> dict[str, Any]:
    """GET_TOPIC_STATS_INFO (202) on every master of the topic's route, merged and sorted."""
    route = await admin.topic_route(topic)
    queues: list[dict[str, Any]] = []
    for data in sorted(route.broker_datas, key=lambda b: b.broker_name):
        addr = data.master_addr
        if addr is None:
            continue
        ext = GetTopicStatsInfoRequestHeader(topic=topic).to_ext()
        response = await admin.call(addr, RequestCode.GET_TOPIC_STATS_INFO, ext)
        table = TopicStatsTable.from_json(response.body or b"{}")
        for mq, off in sorted(table.offset_table.items()):
            queues.append(
                {
                    "brokerName": mq.broker_name,
                    "queueId": mq.queue_id,
                    "minOffset": off.min_offset,
                    "maxOffset": off.max_offset,
                    "lastUpdateTimestamp": off.last_update_timestamp,
                }
            )
    queues.sort(key=lambda q: (q["brokerName"], q["queueId"]))
    return {"topic": topic, "queues": queues}
