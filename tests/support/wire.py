"""Raw-wire helpers shared by the reliability tests: a free port, a send request with a unique
key, a full read of a queue by PULL_MESSAGE, and a lookup by key with QUERY_MESSAGE. They speak
the remoting protocol directly, so what they see is what any client would."""

from __future__ import annotations

import socket
import time

from rocketlite.protocol.codes import PullSysFlag, RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand, make_request
from rocketlite.protocol.headers import (
    PullMessageRequestHeader,
    QueryMessageRequestHeader,
    SendMessageRequestHeader,
)
from rocketlite.protocol.record import decode_records
from rocketlite.remoting.client import RemotingClient

TOPIC = "CrashTopic"
QUEUES = 4
GROUP = "crash_cg"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def send_request(key: str, queue_id: int, body: bytes | None = None) -> RemotingCommand:
    """SEND_MESSAGE_V2 to TOPIC with KEYS=key; the body defaults to ``body-<key>``."""
    header = SendMessageRequestHeader(
        producer_group="crash_pg", topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=QUEUES,
        queue_id=queue_id, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
        properties=f"KEYS\x01{key}\x02TAGS\x01t", reconsume_times=0,
    )  # fmt: skip
    return make_request(RequestCode.SEND_MESSAGE_V2, header.to_ext_v2(), body or f"body-{key}".encode())


async def pull_queue(
    client: RemotingClient, addr: str, queue_id: int, start: int = 0
) -> list[tuple[int, str]]:
    """(queue offset, KEYS) of every message in the queue from `start`, checked contiguous."""
    out: list[tuple[int, str]] = []
    offset = start
    while True:
        ext = PullMessageRequestHeader(
            consumer_group=GROUP, topic=TOPIC, queue_id=queue_id, queue_offset=offset, max_msg_nums=32,
            sys_flag=PullSysFlag.SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=0,
            subscription="*", sub_version=0,
        ).to_ext()  # fmt: skip
        r = await client.invoke(addr, make_request(RequestCode.PULL_MESSAGE, ext), timeout=10.0)
        if r.code != ResponseCode.SUCCESS:
            # Past the end: NOT_FOUND one past it, OFFSET_MOVED further (a start a cut removed).
            ends = (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY)
            assert r.code in (*ends, ResponseCode.PULL_OFFSET_MOVED), (r.code, r.remark)
            assert int(r.ext_fields.get("maxOffset", "0")) <= offset, (queue_id, offset, r.ext_fields)
            return out
        records = decode_records(r.body or b"")
        assert records, (queue_id, offset)
        for rec in records:
            assert rec.queue_offset == start + len(out), f"queue {queue_id} offsets not contiguous"
            out.append((rec.queue_offset, rec.get_property("KEYS") or ""))
        offset = int(r.ext_fields["nextBeginOffset"])


async def query_key(client: RemotingClient, addr: str, key: str) -> list[str]:
    """Bodies of the messages with `key`. The index is by hash of topic#key, so the answer can hold
    other keys with the same hash: they are dropped here, as RocketMQ's client does."""
    ext = QueryMessageRequestHeader(
        topic=TOPIC, key=key, max_num=32, begin_timestamp=0, end_timestamp=int(time.time() * 1000) + 60_000
    ).to_ext()
    r = await client.invoke(addr, make_request(RequestCode.QUERY_MESSAGE, ext), timeout=10.0)
    if r.code != ResponseCode.SUCCESS:
        return []
    records = decode_records(r.body or b"")
    return [rec.body.decode() for rec in records if key in (rec.get_property("KEYS") or "").split(" ")]
