"""The tests' one raw-wire helper set, on the sans-IO request layer (`rocketlite.protocol.requests`).

Tests that must see exactly what any client would (the in-process broker harness, the HA process
harness, the crash and fault harnesses) speak the remoting protocol directly: the requests are
built by `build_send` / `build_pull` / `build_query_message` and the answers read by their parsers,
so the only policy here is the tests' own (which group, when a read is complete, what to check).

- `raw_request`: one synchronous request on its own connection and loop.
- `send_command`: SEND_MESSAGE_V2 for a body, tags, keys and properties.
- `pull_until_end`: every record of a queue from an offset, until the first answer that is not FOUND.
- `query_by_key`: QUERY_MESSAGE for a key, index hash collisions dropped as RocketMQ's client does.
- `send_request` / `pull_queue` / `query_key`: the crash and fault harnesses' uses of those, on
  `TOPIC` with one unique KEYS value per message.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.formats.batch import BatchEntry, encode_batch
from rocketlite.protocol.formats.record import StoredRecord
from rocketlite.protocol.message import properties_to_string
from rocketlite.protocol.requests.pull import PullResult, PullStatus, build_pull, parse_pull
from rocketlite.protocol.requests.query import build_query_message, matches_key, parse_query_message
from rocketlite.protocol.requests.response import ResponseError
from rocketlite.protocol.requests.send import build_send
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import SendMessageRequestHeader
from rocketlite.remoting.client import RemotingClient

TOPIC = "CrashTopic"
QUEUES = 4
GROUP = "crash_cg"
PULL_BATCH = 32


async def _invoke(addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
    client = RemotingClient()
    try:
        return await client.invoke(addr, cmd, timeout)
    finally:
        await client.close()


def raw_request(addr: str, code: int, ext: dict[str, str], timeout: float = 5.0) -> RemotingCommand:
    """One request on its own connection and loop, for synchronous tests (a fresh client each time)."""
    return asyncio.run(_invoke(addr, make_request(code, ext), timeout))


def send_command(topic: str, body: bytes, *, queue_id: int, group: str, tags: str | None = None,
                 keys: str | None = None, props: Mapping[str, str] | None = None,
                 reconsume_times: int = 0, born_timestamp: int | None = None) -> RemotingCommand:  # fmt: skip
    """SEND_MESSAGE_V2 of one message; properties TAGS, KEYS, then `props`, in that order."""
    properties: dict[str, str] = {}
    if tags:
        properties["TAGS"] = tags
    if keys:
        properties["KEYS"] = keys
    properties.update(props or {})
    return build_send(
        group=group,
        topic=topic,
        queue_id=queue_id,
        body=body,
        properties=properties_to_string(properties),
        born_timestamp=int(time.time() * 1000) if born_timestamp is None else born_timestamp,
        reconsume_times=reconsume_times,
    )


def batch_request(keys: list[str], queue_id: int) -> RemotingCommand:
    """SEND_BATCH_MESSAGE to TOPIC of one message per key (KEYS=key, body ``body-<key>``), as a
    Java producer's `send(Collection)` writes it."""
    entries = [
        BatchEntry(0, f"body-{key}".encode(), properties_to_string({"TAGS": "t", "KEYS": key}))
        for key in keys
    ]
    header = SendMessageRequestHeader(
        producer_group="crash_pg", topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=queue_id, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0, properties="",
        batch=True,
    )  # fmt: skip
    return make_request(RequestCode.SEND_BATCH_MESSAGE, header.to_ext_v2(), encode_batch(entries))


async def pull_until_end(
    client: RemotingClient,
    addr: str,
    topic: str,
    queue_id: int,
    *,
    group: str,
    start: int = 0,
    timeout: float = 10.0,
) -> tuple[list[StoredRecord], PullResult]:
    """The records of a queue from `start`, pulled until an answer is not FOUND; and that answer."""
    out: list[StoredRecord] = []
    offset = start
    while True:
        request = build_pull(group=group, topic=topic, queue_id=queue_id, offset=offset, max_nums=PULL_BATCH)
        result = parse_pull(await client.invoke(addr, request, timeout))
        if result.status is not PullStatus.FOUND:
            return out, result
        records = result.records()
        assert records, (topic, queue_id, offset)
        out.extend(records)
        offset = result.next_begin_offset


async def query_by_key(client: RemotingClient, addr: str, topic: str, key: str,
                       timeout: float = 10.0) -> list[StoredRecord]:  # fmt: skip
    """The records with KEYS `key`: the index is by hash of topic#key, so the answer can hold other
    keys with the same hash; they are dropped, as RocketMQ's client does. Empty on an error answer."""
    request = build_query_message(
        topic, key, max_num=32, end_ms=int(time.time() * 1000) + 60_000, unique=False
    )
    try:
        records = parse_query_message(await client.invoke(addr, request, timeout))
    except ResponseError:
        return []
    return [rec for rec in records if matches_key(rec, topic, key, unique=False)]


# -- the crash and fault harnesses ----------------------------------------------------------------
def send_request(key: str, queue_id: int, body: bytes | None = None) -> RemotingCommand:
    """SEND_MESSAGE_V2 to TOPIC with KEYS=key; the body defaults to ``body-<key>``."""
    body = body or f"body-{key}".encode()
    return send_command(TOPIC, body, queue_id=queue_id, group="crash_pg", keys=key, tags="t")


async def pull_queue(
    client: RemotingClient, addr: str, queue_id: int, start: int = 0
) -> list[tuple[int, str]]:
    """(queue offset, KEYS) of every message in the queue from `start`, checked contiguous."""
    records, end = await pull_until_end(client, addr, TOPIC, queue_id, group=GROUP, start=start)
    # Past the end: NOT_FOUND one past it, OFFSET_MOVED further (a start a cut removed).
    assert end.max_offset <= start + len(records), (queue_id, start + len(records), end)
    out: list[tuple[int, str]] = []
    for rec in records:
        assert rec.queue_offset == start + len(out), f"queue {queue_id} offsets not contiguous"
        out.append((rec.queue_offset, rec.get_property("KEYS") or ""))
    return out


async def query_key(client: RemotingClient, addr: str, key: str) -> list[str]:
    """Bodies of the messages on TOPIC with `key`."""
    return [rec.body.decode() for rec in await query_by_key(client, addr, TOPIC, key)]
