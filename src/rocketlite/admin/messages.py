"""Message lookup verbs: queryMsgById, queryMsgByKey, queryMsgByOffset, and the shared pieces the
pull-based verbs use (`pull`, `message_json`, queue discovery).

Ids: RocketMQ has two. The offsetMsgId (what the broker returns from a send, and what mqadmin's
queryMsgById takes) encodes the broker address and commit-log offset, so it is answered by
VIEW_MESSAGE_BY_ID (33) on that broker. The client-made UNIQ_KEY (what producers show as
"msgId") is opaque; it is found through the index with QUERY_MESSAGE (12) and
`_UNIQUE_KEY_QUERY=true`, which needs the topic. Both are 32 hex digits, so queryMsgById decodes
the id and only connects to the address inside it when that address is a broker the name server
knows; otherwise, given `-t`, it treats the id as a UNIQ_KEY. This avoids dialling whatever
address a UNIQ_KEY happens to decode to.

Messages are read by pulling (PULL_MESSAGE with the subscription in the header and no suspend, so
no heartbeat or long poll is involved) as the tools consumer group; nothing is committed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from rocketlite.admin.client import AdminClient, AdminError, UsageError
from rocketlite.protocol.bodies.route import QueueData, TopicRouteData
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.formats.record import StoredRecord, inflate_body
from rocketlite.protocol.message import (
    MessageConst,
    parse_msg_id,
    string_to_properties,
)
from rocketlite.protocol.perm import PERM_READ
from rocketlite.protocol.requests import offsets
from rocketlite.protocol.requests.pull import PullResult, PullStatus, build_pull, parse_pull
from rocketlite.protocol.requests.query import (
    QUERY_END_MS,
    build_query_message,
    build_view_message,
    matches_key,
    parse_query_message,
    parse_view_message,
)

TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"  # MixAll.TOOLS_CONSUMER_GROUP
PULL_BATCH: Final = 32
MAX_TIMESTAMP: Final = QUERY_END_MS
UNIQUE_QUERY_MAX: Final = 32


def message_json(rec: StoredRecord, charset: str = "utf-8", *, with_body: bool = True) -> dict[str, Any]:
    """A stored record as the tools print it: ids, position, times, hosts, properties, body text."""
    props = string_to_properties(rec.properties_string)
    body = inflate_body(rec.body, rec.sys_flag)  # undecodable: shown as stored
    out: dict[str, Any] = {
        "msgId": props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, rec.msg_id),
        "offsetMsgId": rec.msg_id,
        "topic": rec.topic,
        "tags": props.get(MessageConst.TAGS),
        "keys": props.get(MessageConst.KEYS),
        "queueId": rec.queue_id,
        "queueOffset": rec.queue_offset,
        "commitLogOffset": rec.physical_offset,
        "reconsumeTimes": rec.reconsume_times,
        "bornTimestamp": rec.born_timestamp,
        "storeTimestamp": rec.store_timestamp,
        "bornHost": str(rec.born_host),
        "storeHost": str(rec.store_host),
        "sysFlag": rec.sys_flag,
        "properties": props,
        "bodyLength": len(body),
    }
    if with_body:
        out["body"] = body.decode(charset, "replace")
    return out


def tag_filter(expression: str) -> frozenset[str] | None:
    """Tags of a `TagA || TagB` expression; None for `*` (everything)."""
    tags = frozenset(t.strip() for t in expression.split("||") if t.strip())
    return None if not tags or "*" in tags else tags


# -- pulling ---------------------------------------------------------------------------------------


async def pull(
    admin: AdminClient,
    addr: str,
    *,
    topic: str,
    queue_id: int,
    offset: int,
    group: str = TOOLS_CONSUMER_GROUP,
    expression: str = "*",
    max_nums: int = PULL_BATCH,
) -> PullResult:
    """One PULL_MESSAGE without suspend or commit; the status codes 19/20/21 are normal answers."""
    cmd = build_pull(
        group=group, topic=topic, queue_id=queue_id, offset=offset, max_nums=max_nums, expression=expression
    )
    return await admin.ask(addr, cmd, parse_pull)


async def pull_range(
    admin: AdminClient,
    addr: str,
    *,
    topic: str,
    queue_id: int,
    start: int,
    end: int,
    limit: int | None = None,
    group: str = TOOLS_CONSUMER_GROUP,
    expression: str = "*",
    advance: Callable[[int], None] | None = None,
) -> list[StoredRecord]:
    """Records of one queue with offsets in [start, end), tag-filtered, at most `limit`."""
    wanted = tag_filter(expression)
    out: list[StoredRecord] = []
    offset = start
    while offset < end and (limit is None or len(out) < limit):
        batch = await pull(
            admin, addr, topic=topic, queue_id=queue_id, offset=offset, group=group, expression=expression
        )
        for rec in batch.records():
            if rec.queue_offset >= end or (limit is not None and len(out) >= limit):
                break
            if wanted is None or (rec.get_property(MessageConst.TAGS) or "") in wanted:
                out.append(rec)
        if batch.status is PullStatus.NO_NEW_MSG or batch.next_begin_offset <= offset:
            break
        if advance is not None:
            advance(min(batch.next_begin_offset, end) - offset)
        offset = batch.next_begin_offset
    return out


async def min_offset(admin: AdminClient, addr: str, topic: str, queue_id: int) -> int:
    return await admin.ask(addr, offsets.build_get_min_offset(topic, queue_id), offsets.parse_get_min_offset)


async def max_offset(admin: AdminClient, addr: str, topic: str, queue_id: int) -> int:
    return await admin.ask(addr, offsets.build_get_max_offset(topic, queue_id), offsets.parse_get_max_offset)


async def search_offset(admin: AdminClient, addr: str, topic: str, queue_id: int, timestamp: int) -> int:
    cmd = offsets.build_search_offset(topic, queue_id, timestamp)
    return await admin.ask(addr, cmd, offsets.parse_search_offset)


@dataclass(frozen=True, slots=True)
class QueueRef:
    broker_name: str
    addr: str
    queue_id: int


def route_queues(
    route: TopicRouteData, perm: int, count: Callable[[QueueData], int], broker_name: str | None = None
) -> list[QueueRef]:
    """The queues of a route whose broker has a master and whose perm has `perm`, `count(qd)` per
    broker (of `broker_name` only, when given), sorted by broker name."""
    masters = {b.broker_name: b.master_addr for b in route.broker_datas}
    out: list[QueueRef] = []
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        addr = masters.get(qd.broker_name)
        if addr is None or not qd.perm & perm:
            continue
        if broker_name is not None and qd.broker_name != broker_name:
            continue
        out += [QueueRef(qd.broker_name, addr, qid) for qid in range(count(qd))]
    return out


async def readable_queues(admin: AdminClient, topic: str, broker_name: str | None = None) -> list[QueueRef]:
    """Readable queues of a topic from its route (master addresses), sorted."""
    route = await admin.topic_route(topic)
    return route_queues(route, PERM_READ, lambda qd: qd.read_queue_nums, broker_name)


# -- lookups ---------------------------------------------------------------------------------------


async def view_by_offset_id(admin: AdminClient, msg_id: str, *, any_address: bool) -> StoredRecord | None:
    """VIEW_MESSAGE_BY_ID (33) at the broker the offsetMsgId names. None if the id does not decode,
    or names an address the name server does not list and `any_address` is off. A broker without a
    record there answers SYSTEM_ERROR, raised as an AdminError."""
    try:
        decoded = parse_msg_id(msg_id)
    except ValueError:
        return None
    addr = str(decoded.address)
    if not any_address and addr not in await admin.known_broker_addrs():
        return None
    record = await admin.ask(addr, build_view_message(decoded.offset), parse_view_message)
    if record is None:
        raise AdminError(f"can not decode the message at {addr} offset {decoded.offset}")
    return record


async def query_index(
    admin: AdminClient, topic: str, key: str, *, begin: int, end: int, max_num: int, unique: bool
) -> list[StoredRecord]:
    """QUERY_MESSAGE (12) on every master of the topic's route; hash collisions filtered out as
    the Java client does (keys must match exactly, or UNIQ_KEY for a unique-key query)."""
    route = await admin.topic_route(topic)
    found: dict[str, StoredRecord] = {}
    for data in sorted(route.broker_datas, key=lambda b: b.broker_name):
        if data.master_addr is None:
            continue
        cmd = build_query_message(topic, key, max_num=max_num, begin_ms=begin, end_ms=end, unique=unique)
        for rec in await admin.ask(data.master_addr, cmd, parse_query_message):
            if matches_key(rec, topic, key, unique=unique):
                found[rec.msg_id] = rec
    return sorted(found.values(), key=lambda r: (r.store_timestamp, r.physical_offset))


async def query_msg_by_id(
    admin: AdminClient, *, msg_ids: list[str], topic: str | None = None, charset: str = "utf-8"
) -> dict[str, Any]:
    """Each id as an offsetMsgId first, then (with a topic) as a UNIQ_KEY."""
    messages: list[dict[str, Any]] = []
    hint = "if it is a client message id (UNIQ_KEY), give the topic with -t"
    for msg_id in msg_ids:
        failure: AdminError | None = None
        try:
            rec = await view_by_offset_id(admin, msg_id, any_address=topic is None)
        except AdminError as exc:
            rec, failure = None, exc
        if rec is not None:
            messages.append(message_json(rec, charset))
            continue
        if topic is None:
            if failure is not None:
                raise AdminError(f"{failure}; {hint}") from failure
            raise UsageError(f"{msg_id} is not an offsetMsgId; {hint}")
        records = await query_index(
            admin, topic, msg_id, begin=0, end=MAX_TIMESTAMP, max_num=UNIQUE_QUERY_MAX, unique=True
        )
        if not records:
            raise failure or AdminError(
                f"message {msg_id} not found in topic {topic}", ResponseCode.NO_MESSAGE
            )
        messages += [message_json(r, charset) for r in records]
    return {"messages": messages}


async def query_msg_by_key(
    admin: AdminClient, *, topic: str, key: str, begin: int = 0, end: int = MAX_TIMESTAMP, max_num: int = 64
) -> dict[str, Any]:
    records = await query_index(admin, topic, key, begin=begin, end=end, max_num=max_num, unique=False)
    if not records:
        raise AdminError("query message by key finished, but no message.", ResponseCode.NO_MESSAGE)
    return {"topic": topic, "key": key, "messages": [message_json(r) for r in records[:max_num]]}


async def query_msg_by_offset(
    admin: AdminClient, *, topic: str, broker_name: str, queue_id: int, offset: int
) -> dict[str, Any]:
    """Pull the one message at (broker, queue, offset), as mqadmin does."""
    addr = await admin.broker_addr(broker_name)
    batch = await pull(admin, addr, topic=topic, queue_id=queue_id, offset=offset, max_nums=1)
    records = [r for r in batch.records() if r.queue_offset == offset]
    if not records:
        raise AdminError(
            f"no message at offset {offset} of {topic}/{broker_name}/{queue_id} "
            f"(queue holds [{batch.min_offset}, {batch.max_offset}))",
            ResponseCode.NO_MESSAGE,
        )
    return {"messages": [message_json(records[0])]}
