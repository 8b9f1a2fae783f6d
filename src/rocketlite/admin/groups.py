"""Group verbs: updateSubGroup, deleteSubGroup, consumerProgress, consumerConnection,
producerConnection, resetOffsetByTime.

Where mqadmin finds a group's brokers through the route of its `%RETRY%` topic, these ask every
master the name server knows: a group whose offsets were committed by a client that never sent a
heartbeat (or whose retry topic is gone) still shows up, and on a small cluster the extra requests
cost nothing.

resetOffsetByTime is the broker-side half of mqadmin's. RocketMQ sends
INVOKE_BROKER_TO_RESET_OFFSET (222) and the broker asks every online consumer to jump
(RESET_CONSUMER_CLIENT_OFFSET); the consumers then commit the new offsets. Here the new offset of
each queue is found with SEARCH_OFFSET_BY_TIMESTAMP (29) and written with UPDATE_CONSUMER_OFFSET
(15). Consumers that are running keep their in-memory offsets and will overwrite the reset with
their next commit (every 5 s): stop the group's consumers first and start them after the reset.
"""

from __future__ import annotations

import time
from typing import Any

from rocketlite.admin.client import AdminClient, AdminError, BrokerTarget, NotOnlineError
from rocketlite.admin.topics import delete_topic
from rocketlite.protocol.bodies.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel
from rocketlite.protocol.bodies.message_queue import ConsumeStats, MessageQueue, OffsetWrapper
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.perm import PERM_READ
from rocketlite.protocol.requests import offsets
from rocketlite.protocol.reserved import DLQ_GROUP_TOPIC_PREFIX as DLQ_PREFIX
from rocketlite.protocol.reserved import RETRY_GROUP_TOPIC_PREFIX as RETRY_PREFIX
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.headers import (
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
)


def _enum_name(value: Any, enum: type[ConsumeType | MessageModel | ConsumeFromWhere]) -> str:
    """fastjson writes enums by name; the C++ client's ordinals are turned into names too."""
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return enum(value).name
        except ValueError:
            return str(value)
    return "" if value is None else str(value)


def subscription_group_json(
    group: str,
    *,
    consume_enable: bool = True,
    consume_from_min_enable: bool = True,
    consume_broadcast_enable: bool = True,
    retry_queue_nums: int = 1,
    retry_max_times: int = 16,
    broker_id: int = 0,
    which_broker_when_consume_slowly: int = 1,
    notify_consumer_ids_changed_enable: bool = True,
) -> dict[str, Any]:
    """`SubscriptionGroupConfig` as the broker reads it; defaults are Java's."""
    return {
        "brokerId": broker_id,
        "consumeBroadcastEnable": consume_broadcast_enable,
        "consumeEnable": consume_enable,
        "consumeFromMinEnable": consume_from_min_enable,
        "groupName": group,
        "notifyConsumerIdsChangedEnable": notify_consumer_ids_changed_enable,
        "retryMaxTimes": retry_max_times,
        "retryQueueNums": retry_queue_nums,
        "whichBrokerWhenConsumeSlowly": which_broker_when_consume_slowly,
    }


async def update_sub_group(
    admin: AdminClient, *, broker_addr: str | None, cluster: str | None, config: dict[str, Any]
) -> dict[str, Any]:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) on one broker or every master of a cluster."""
    targets = await admin.targets(broker_addr, cluster)
    body = fastjson.dumps(config).encode("utf-8")
    for target in targets:
        await admin.call(target.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
    return {"subscriptionGroupConfig": config, "brokers": [t.to_json() for t in targets]}


async def delete_sub_group(
    admin: AdminClient, *, group: str, broker_addr: str | None, cluster: str | None, remove_offset: bool
) -> dict[str, Any]:
    """DELETE_SUBSCRIPTIONGROUP (207); for a cluster also the group's %RETRY% and %DLQ% topics."""
    targets = await admin.targets(broker_addr, cluster)
    ext = {"groupName": group, "removeOffset": "true" if remove_offset else "false"}
    for target in targets:
        await admin.call(target.addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, ext)
    deleted_topics: list[str] = []
    if cluster is not None:
        for topic in (RETRY_PREFIX + group, DLQ_PREFIX + group):
            await delete_topic(admin, topic=topic, cluster=cluster)
            deleted_topics.append(topic)
    return {
        "group": group,
        "removeOffset": remove_offset,
        "brokers": [t.to_json() for t in targets],
        "deletedTopics": deleted_topics,
    }


async def consume_stats(admin: AdminClient, group: str, topic: str | None = None) -> ConsumeStats:
    """GET_CONSUME_STATS (208) from every master, merged (mqadmin's `examineConsumeStats`)."""
    table: dict[MessageQueue, OffsetWrapper] = {}
    tps = 0.0
    ext = GetConsumeStatsRequestHeader(consumer_group=group, topic=topic).to_ext()
    for target in await admin.masters():
        response = await admin.call(target.addr, RequestCode.GET_CONSUME_STATS, ext)
        stats = ConsumeStats.from_json(response.body or b"{}")
        table.update(stats.offset_table)
        tps += stats.consume_tps
    return ConsumeStats(table, tps)


async def consumer_connection_or_none(admin: AdminClient, group: str) -> dict[str, Any] | None:
    """GET_CONSUMER_CONNECTION_LIST (203) from every master, merged; None if nobody is online."""
    merged: dict[str, Any] | None = None
    clients: dict[str, dict[str, Any]] = {}
    ext = GetConsumerConnectionListRequestHeader(consumer_group=group).to_ext()
    for target in await admin.masters():
        response = await admin.call(
            target.addr,
            RequestCode.GET_CONSUMER_CONNECTION_LIST,
            ext,
            ok=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE),
        )
        if response.code != ResponseCode.SUCCESS:
            continue
        body = fastjson.loads(response.body or b"{}")
        if not isinstance(body, dict):
            continue
        for conn in body.get("connectionSet") or ():
            if isinstance(conn, dict):
                clients[str(conn.get("clientId"))] = {
                    "clientId": str(conn.get("clientId", "")),
                    "clientAddr": str(conn.get("clientAddr", "")),
                    "language": str(conn.get("language", "")),
                    "version": conn.get("version", 0),
                }
        if merged is None:
            merged = {
                "consumeType": _enum_name(body.get("consumeType"), ConsumeType),
                "messageModel": _enum_name(body.get("messageModel"), MessageModel),
                "consumeFromWhere": _enum_name(body.get("consumeFromWhere"), ConsumeFromWhere),
                "subscriptions": {},
            }
        for topic, sub in (body.get("subscriptionTable") or {}).items():
            if isinstance(sub, dict):
                merged["subscriptions"][str(topic)] = str(sub.get("subString", "*"))
    if merged is None:
        return None
    subs = merged.pop("subscriptions")
    return {
        "group": group,
        "connections": [clients[c] for c in sorted(clients)],
        "subscriptions": [{"topic": t, "subExpression": subs[t]} for t in sorted(subs)],
        **merged,
    }


async def consumer_connection(admin: AdminClient, *, group: str) -> dict[str, Any]:
    found = await consumer_connection_or_none(admin, group)
    if found is None:
        raise NotOnlineError(f"no consumer of group {group} is online")
    return found


async def producer_connection(admin: AdminClient, *, group: str, topic: str) -> dict[str, Any]:
    """GET_PRODUCER_CONNECTION_LIST (204) on the masters of the topic's route, merged."""
    route = await admin.topic_route(topic)
    clients: dict[str, dict[str, Any]] = {}
    last_error: AdminError | None = None
    for data in sorted(route.broker_datas, key=lambda b: b.broker_name):
        if data.master_addr is None:
            continue
        try:
            response = await admin.call(
                data.master_addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group}
            )
        except AdminError as exc:
            if exc.response_code is None:
                raise
            last_error = exc
            continue
        body = fastjson.loads(response.body or b"{}")
        for conn in (body.get("connectionSet") if isinstance(body, dict) else None) or ():
            if isinstance(conn, dict):
                clients[str(conn.get("clientId"))] = {
                    "clientId": str(conn.get("clientId", "")),
                    "clientAddr": str(conn.get("clientAddr", "")),
                    "language": str(conn.get("language", "")),
                    "version": conn.get("version", 0),
                }
    if not clients:
        if last_error is not None and last_error.response_code != ResponseCode.SYSTEM_ERROR:
            raise last_error  # a real refusal (NO_PERMISSION, ...); SYSTEM_ERROR is "not exist"
        raise NotOnlineError(f"no producer of group {group} is online (asked the brokers of topic {topic})")
    return {"group": group, "topic": topic, "connections": [clients[c] for c in sorted(clients)]}


def _progress_rows(stats: ConsumeStats) -> list[dict[str, Any]]:
    rows = []
    for mq, w in sorted(
        stats.offset_table.items(), key=lambda i: (i[0].topic, i[0].broker_name, i[0].queue_id)
    ):
        rows.append(
            {
                "topic": mq.topic,
                "brokerName": mq.broker_name,
                "queueId": mq.queue_id,
                "brokerOffset": w.broker_offset,
                "consumerOffset": w.consumer_offset,
                "diff": w.broker_offset - w.consumer_offset,
                "lastTimestamp": w.last_timestamp,
            }
        )
    return rows


async def consumer_progress(admin: AdminClient, *, group: str | None) -> dict[str, Any]:
    """With a group: per-queue broker offset, consumer offset and lag (diff). Without: one line per
    group that has a %RETRY% topic (clients online, their version/type/model, TPS, total lag)."""
    if group is not None:
        stats = await consume_stats(admin, group)
        rows = _progress_rows(stats)
        result: dict[str, Any] = {
            "group": group,
            "consumeTps": stats.consume_tps,
            "diffTotal": sum(r["diff"] for r in rows),
            "queues": rows,
        }
        if not rows:  # mqadmin fails with code 206 here; an idle group is a state, not an error
            result["note"] = (
                f"group {group} has no committed offset on any broker yet: no consumer of it has "
                "consumed; the lag per queue shows once one commits"
            )
        return result
    groups = [t[len(RETRY_PREFIX) :] for t in await admin.all_topics() if t.startswith(RETRY_PREFIX)]
    out: list[dict[str, Any]] = []
    with admin.reporter.task("Groups", len(groups)) as advance:
        for name in groups:
            stats = await consume_stats(admin, name)
            conn = await consumer_connection_or_none(admin, name)
            versions = sorted({str(c["version"]) for c in conn["connections"]}) if conn else []
            out.append(
                {
                    "group": name,
                    "count": len(conn["connections"]) if conn else 0,
                    "version": ",".join(versions),
                    "consumeType": conn["consumeType"] if conn else "",
                    "messageModel": conn["messageModel"] if conn else "",
                    "consumeTps": stats.consume_tps,
                    "diffTotal": sum(r["diff"] for r in _progress_rows(stats)),
                }
            )
            advance(1)
    return {"groups": out}


async def reset_offset_by_time(
    admin: AdminClient, *, group: str, topic: str, timestamp: int, force: bool = True
) -> dict[str, Any]:
    """Move the group's committed offset of every readable queue of `topic` to the first message
    stored at or after `timestamp` (-1: the end of the queue). Without `force` an offset only
    moves back, never forward (Java's `resetOffset` rule)."""
    route = await admin.topic_route(topic)
    queues: list[tuple[BrokerTarget, int]] = []
    masters = {b.broker_name: b for b in route.broker_datas}
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        data = masters.get(qd.broker_name)
        if data is None or data.master_addr is None or not qd.perm & PERM_READ:
            continue
        target = BrokerTarget(data.cluster, qd.broker_name, data.master_addr)
        queues += [(target, qid) for qid in range(qd.read_queue_nums)]
    rows: list[dict[str, Any]] = []
    with admin.reporter.task("Queues", len(queues)) as advance:
        for target, qid in queues:
            query = offsets.build_query_consumer_offset(group, topic, qid)
            old = await admin.ask(target.addr, query, offsets.parse_query_consumer_offset)
            if timestamp == -1:
                cmd = offsets.build_get_max_offset(topic, qid)
                found = await admin.ask(target.addr, cmd, offsets.parse_get_max_offset)
            else:
                cmd = offsets.build_search_offset(topic, qid, timestamp)
                found = await admin.ask(target.addr, cmd, offsets.parse_search_offset)
            new = max(found, 0)
            if not force and old is not None and new > old:
                new = old
            commit = offsets.build_update_consumer_offset(group, topic, qid, new)
            await admin.ask(target.addr, commit, offsets.parse_update_consumer_offset)
            rows.append({"brokerName": target.broker_name, "queueId": qid, "oldOffset": old, "offset": new})
            advance(1)
    return {
        "group": group,
        "topic": topic,
        "timestamp": timestamp,
        "force": force,
        "resetAt": int(time.time() * 1000),
        "offsets": rows,
    }
