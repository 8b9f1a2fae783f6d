"""Verbs that move messages: sendMessage, consumeMessage, printMsg.

They send `protocol.requests` commands (SEND_MESSAGE_V2, PULL_MESSAGE) over `AdminClient`
instead of using the client SDK: an admin command sends or reads a handful of messages once, needs
no heartbeat, rebalance or offset store, and must work against any broker the name server lists.
What a producer would do is kept: the message gets a client UNIQ_KEY (so it can be found with
`queryMsgById -t`), WAIT=true, and a topic without a route is sent with the TBW102 route so a
broker with autoCreateTopicEnable creates it.

Reading never commits offsets: consumeMessage and printMsg pull as the tools group
(`TOOLS_CONSUMER` unless `-g`) with the subscription in the request, like mqadmin's pull
consumer.
"""

from __future__ import annotations

import random
import time
from typing import Any, Final

from rocketlite.admin.client import AdminClient, AdminError, UsageError
from rocketlite.admin.messages import (
    TOOLS_CONSUMER_GROUP,
    QueueRef,
    max_offset,
    message_json,
    min_offset,
    pull_range,
    readable_queues,
    route_queues,
    search_offset,
)
from rocketlite.protocol.message import MessageConst, properties_to_string
from rocketlite.protocol.no_route import no_route_reason
from rocketlite.protocol.perm import PERM_WRITE
from rocketlite.protocol.requests.send import DEFAULT_TOPIC_QUEUE_NUMS, build_send, parse_send
from rocketlite.protocol.reserved import DEFAULT_TOPIC
from rocketlite.protocol.uniq_key import UniqIdGenerator

PRODUCER_GROUP: Final = "TOOLS_PRODUCER"


async def _send_queues(admin: AdminClient, topic: str) -> tuple[list[QueueRef], bool]:
    """Writable queues of the topic, or of TBW102 (capped at 4 per broker) when it has no route."""
    route = await admin.topic_route_or_none(topic)
    auto = route is None
    if route is None:
        route = await admin.topic_route_or_none(DEFAULT_TOPIC)
    if route is None:
        clusters = await admin.cluster_info()
        raise AdminError(no_route_reason(topic, clusters, admin.namesrv_addrs[0]))
    cap = DEFAULT_TOPIC_QUEUE_NUMS if auto else None
    queues = route_queues(route, PERM_WRITE, lambda qd: min(qd.write_queue_nums, cap or qd.write_queue_nums))
    return queues, auto


async def send_message(
    admin: AdminClient,
    *,
    topic: str,
    body: bytes,
    keys: str | None = None,
    tags: str | None = None,
    broker_name: str | None = None,
    queue_id: int | None = None,
) -> dict[str, Any]:
    """SEND_MESSAGE_V2 (310) to a queue picked at random among those `-b` / `-i` allow."""
    queues, auto = await _send_queues(admin, topic)
    candidates = [
        q
        for q in queues
        if (broker_name is None or q.broker_name == broker_name)
        and (queue_id is None or q.queue_id == queue_id)
    ]
    if not candidates:
        where = f" on broker {broker_name}" if broker_name else ""
        which = f" with queue id {queue_id}" if queue_id is not None else ""
        raise AdminError(f"topic {topic} has no writable queue{where}{which}")
    queue = random.choice(candidates)
    unique_id = UniqIdGenerator(await admin.local_ip(queue.addr)).next_id()
    props = {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: unique_id, MessageConst.WAIT_STORE_MSG_OK: "true"}
    if keys:
        props[MessageConst.KEYS] = keys
    if tags:
        props[MessageConst.TAGS] = tags
    cmd = build_send(
        group=PRODUCER_GROUP,
        topic=topic,
        queue_id=queue.queue_id,
        body=body,
        properties=properties_to_string(props),
        born_timestamp=int(time.time() * 1000),
        broker_name=queue.broker_name,
    )
    result = await admin.ask(queue.addr, cmd, parse_send)
    return {
        "topic": topic,
        "brokerName": queue.broker_name,
        "queueId": result.queue_id,
        "queueOffset": result.queue_offset,
        "sendStatus": result.status.value,
        "msgId": unique_id,
        "offsetMsgId": result.offset_msg_id,
        "autoCreated": auto,
    }


async def _bounds(
    admin: AdminClient, queue: QueueRef, topic: str, begin: int | None, end: int | None
) -> tuple[int, int, int, int]:
    """(min, max, start, stop) of a queue: start/stop from the timestamps when given."""
    low = await min_offset(admin, queue.addr, topic, queue.queue_id)
    high = await max_offset(admin, queue.addr, topic, queue.queue_id)
    start = low if begin is None else await search_offset(admin, queue.addr, topic, queue.queue_id, begin)
    stop = high if end is None else await search_offset(admin, queue.addr, topic, queue.queue_id, end)
    return low, high, max(start, low), min(stop, high)


async def consume_message(
    admin: AdminClient,
    *,
    topic: str,
    broker_name: str | None = None,
    queue_id: int | None = None,
    offset: int | None = None,
    group: str = TOOLS_CONSUMER_GROUP,
    begin: int | None = None,
    end: int | None = None,
    count: int = 128,
) -> dict[str, Any]:
    """Read up to `count` messages: from one queue at `-o` (needs `-b` and `-i`), or from every
    readable queue of the topic, each limited to [begin, end) by store time when given."""
    if offset is not None and (broker_name is None or queue_id is None):
        raise UsageError("consuming from an offset (-o) needs the broker name (-b) and queue id (-i)")
    queues = await readable_queues(admin, topic, broker_name)
    if queue_id is not None:
        queues = [q for q in queues if q.queue_id == queue_id]
    if not queues:
        raise AdminError(f"topic {topic} has no readable queue matching the broker / queue id given")
    spans: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    with admin.reporter.task("Consuming", count) as advance:
        for queue in queues:
            if len(messages) >= count:
                break
            low, high, start, stop = await _bounds(admin, queue, topic, begin, end)
            if offset is not None:
                if not low <= offset <= high:
                    raise AdminError(f"offset {offset} is outside the queue's range [{low}, {high}]")
                start = offset
            records = await pull_range(
                admin, queue.addr, topic=topic, queue_id=queue.queue_id, start=start, end=stop,
                limit=count - len(messages), group=group,
            )  # fmt: skip
            messages += [{"brokerName": queue.broker_name, **message_json(r)} for r in records]
            advance(len(records))
            spans.append(
                {"brokerName": queue.broker_name, "queueId": queue.queue_id, "startOffset": start,
                 "endOffset": stop, "count": len(records)}
            )  # fmt: skip
    return {"topic": topic, "group": group, "queues": spans, "messages": messages}


async def print_msg(
    admin: AdminClient,
    *,
    topic: str,
    charset: str = "utf-8",
    expression: str = "*",
    begin: int | None = None,
    end: int | None = None,
    print_body: bool = True,
) -> dict[str, Any]:
    """Every message of every readable queue (within [begin, end) by store time), per queue."""
    queues = await readable_queues(admin, topic)
    plans = [(q, await _bounds(admin, q, topic, begin, end)) for q in queues]
    total = sum(max(stop - start, 0) for _, (_, _, start, stop) in plans)
    out: list[dict[str, Any]] = []
    with admin.reporter.task(f"Reading {topic}", total) as advance:
        for queue, (low, high, start, stop) in plans:
            records = await pull_range(
                admin, queue.addr, topic=topic, queue_id=queue.queue_id, start=start, end=stop,
                expression=expression, advance=advance,
            )  # fmt: skip
            out.append(
                {
                    "brokerName": queue.broker_name,
                    "queueId": queue.queue_id,
                    "minOffset": low,
                    "maxOffset": high,
                    "messages": [message_json(r, charset, with_body=print_body) for r in records],
                }
            )
    return {"topic": topic, "queues": out}
