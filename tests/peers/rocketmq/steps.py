"""Requests the differential scenarios send, with everything a client would fix chosen here, so
both brokers get byte-identical requests: born timestamps, UNIQ_KEYs, groups and client ids."""

from __future__ import annotations

from collections.abc import Mapping

from rocketlite.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
)
from rocketlite.protocol.codes import PullSysFlag, RequestCode
from rocketlite.protocol.formats.batch import BatchEntry, encode_batch
from rocketlite.protocol.formats.record import StoredRecord, decode_records
from rocketlite.protocol.message import java_string_hash, properties_to_string
from rocketlite.protocol.requests.pull import build_pull
from rocketlite.protocol.requests.send import build_send, build_send_batch
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import CreateTopicRequestHeader
from tests.peers.rocketmq.differential import Side

BORN = 1_700_000_000_000  # every message's born timestamp (a client's clock, so both get the same)
PG = "diff_pg"
CLIENT_ID = "127.0.0.1@differential"


def props(
    tags: str | None = None,
    keys: str | None = None,
    uniq: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> str:
    """A client's property string: TAGS, KEYS, UNIQ_KEY (as the Java client orders them), extra."""
    p: dict[str, str] = {}
    if tags:
        p["TAGS"] = tags
    if keys:
        p["KEYS"] = keys
    if uniq:
        p["UNIQ_KEY"] = uniq
    p.update(extra or {})
    return properties_to_string(p)


def send(
    topic: str,
    body: bytes,
    *,
    queue_id: int = 0,
    tags: str | None = None,
    keys: str | None = None,
    uniq: str | None = None,
    extra: Mapping[str, str] | None = None,
    sys_flag: int = 0,
    flag: int = 0,
    reconsume_times: int = 0,
    max_reconsume_times: int | None = None,
    group: str = PG,
    default_topic: str = "TBW102",
) -> RemotingCommand:
    return build_send(
        group=group,
        topic=topic,
        queue_id=queue_id,
        body=body,
        properties=props(tags, keys, uniq, extra),
        born_timestamp=BORN,
        sys_flag=sys_flag,
        flag=flag,
        reconsume_times=reconsume_times,
        max_reconsume_times=max_reconsume_times,
        default_topic=default_topic,
    )


def send_v1(
    topic: str, body: bytes, *, queue_id: int = 0, tags: str | None = None, uniq: str | None = None
) -> RemotingCommand:
    """SEND_MESSAGE (10): the same header, long field names (as 3.x clients and ons send it)."""
    v2 = send(topic, body, queue_id=queue_id, tags=tags, uniq=uniq)
    long_names = {
        "a": "producerGroup",
        "b": "topic",
        "c": "defaultTopic",
        "d": "defaultTopicQueueNums",
        "e": "queueId",
        "f": "sysFlag",
        "g": "bornTimestamp",
        "h": "flag",
        "i": "properties",
        "j": "reconsumeTimes",
        "k": "unitMode",
        "l": "maxReconsumeTimes",
        "m": "batch",
        "n": "bname",
    }
    ext = {long_names[k]: v for k, v in v2.ext_fields.items()}
    return make_request(RequestCode.SEND_MESSAGE, ext, body)


def batch(
    topic: str, bodies: list[bytes], *, queue_id: int = 0, uniq_prefix: str = "B", header_props: str = ""
) -> RemotingCommand:
    entries = [
        BatchEntry(0, b, props(keys=f"k{i}", uniq=f"{uniq_prefix}{i:04d}")) for i, b in enumerate(bodies)
    ]
    return build_send_batch(
        group=PG,
        topic=topic,
        queue_id=queue_id,
        body=encode_batch(entries),
        properties=header_props,
        born_timestamp=BORN,
    )


def create_topic(
    topic: str,
    queues: int = 4,
    *,
    perm: int = 6,
    order: bool = False,
    filter_type: str = "SINGLE_TAG",
    read_queues: int | None = None,
) -> RemotingCommand:
    header = CreateTopicRequestHeader(
        topic=topic,
        default_topic="TBW102",
        read_queue_nums=queues if read_queues is None else read_queues,
        write_queue_nums=queues,
        perm=perm,
        topic_filter_type=filter_type,
        order=order,
    )
    return make_request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())


def pull(
    group: str,
    topic: str,
    offset: int,
    *,
    queue_id: int = 0,
    expression: str = "*",
    expression_type: str = "TAG",
    sys_flag: int = PullSysFlag.SUBSCRIPTION,
    max_nums: int = 32,
    sub_version: int = 0,
) -> RemotingCommand:
    return build_pull(
        group=group,
        topic=topic,
        queue_id=queue_id,
        offset=offset,
        max_nums=max_nums,
        sys_flag=sys_flag,
        expression=expression,
        expression_type=expression_type,
        sub_version=sub_version,
    )


def heartbeat(
    group: str,
    topic: str,
    expression: str = "*",
    *,
    expression_type: str = "TAG",
    sub_version: int = 1,
    producer_group: str | None = PG,
) -> RemotingCommand:
    tags = (
        tuple(t.strip() for t in expression.split("||"))
        if expression_type == "TAG" and expression != "*"
        else ()
    )
    sub = SubscriptionData(
        topic, expression, tags, tuple(java_string_hash(t) for t in tags), sub_version, expression_type
    )
    consumer = ConsumerData(
        group_name=group,
        consume_type=ConsumeType.CONSUME_PASSIVELY,
        message_model=MessageModel.CLUSTERING,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        subscription_data_set=(sub,),
        unit_mode=False,
    )
    producers = [ProducerData(producer_group)] if producer_group else []
    data = HeartbeatData(
        client_id=CLIENT_ID, producer_data_set=tuple(producers), consumer_data_set=(consumer,)
    )
    return make_request(RequestCode.HEART_BEAT, body=data.to_bytes())


async def setup_topic(side: Side, topic: str, queues: int = 4, **kw: object) -> None:
    """Create `topic` on the broker and wait until the name server routes it (not recorded)."""
    side.expect(await side.call("create topic (setup)", create_topic(topic, queues, **kw), record=False))  # type: ignore[arg-type]
    await side.wait_route(topic)


async def records(side: Side, group: str, topic: str, queue_id: int = 0) -> list[StoredRecord]:
    """Every record of a queue (one pull of up to 32; not recorded): for offsets a scenario needs."""
    r = await side.call("pull (setup)", pull(group, topic, 0, queue_id=queue_id), record=False)
    return decode_records(r.body or b"") if r.code == 0 else []
