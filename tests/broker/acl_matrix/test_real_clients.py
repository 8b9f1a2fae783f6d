"""The ACL matrix's subset with the unmodified ali-ons and C++ clients (see the package docstring)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketlite.client import Message
from rocketlite.protocol.codes import RequestCode
from tests.broker.acl_matrix.matrix import (
    NORMAL,
    OK,
    REAL_CONSUMER_RUNS,
    REAL_KINDS,
    SDK_ADMIN,
    SEND_CODES,
    SIG,
    TOPIC,
    WRONG_SECRET,
    AclCluster,
    body_of,
    find_bodies,
    real_group,
    reason,
    refused,
    row,
    sdk_producer,
)
from tests.support.foreign_clients.real import ClientProc, Clients, Event, msg_spec, require

pytestmark = pytest.mark.timeout(120)


# -- the real clients: a representative subset ------------------------------------------------------------
@pytest.fixture
def real(tmp_path: Path) -> Iterator[Clients]:
    c = Clients(tmp_path)
    try:
        yield c
    finally:
        c.close()


def keys_for(keys: str) -> tuple[str, str]:
    return NORMAL if keys == "right" else (NORMAL[0], WRONG_SECRET)


def finish(cp: ClientProc) -> list[Event]:
    """Kill the client and read every line it printed (a "fatal" line is kept, not raised)."""
    cp.kill()
    while True:
        try:
            if cp.next_event(time.monotonic()) is None:
                return cp.events
        except AssertionError:
            continue


REAL_PRODUCER_TOPICS = ("T_PUB", "T_SUB", "T_DENY")
REAL_PRODUCER_MATRIX = {"right": (OK, TOPIC, TOPIC), "wrong": row(SIG)[:3]}


@pytest.mark.parametrize("keys", ["right", "wrong"])
@pytest.mark.parametrize("kind", REAL_KINDS)
def test_real_producer(acl_cluster: AclCluster, real: Clients, kind: str, keys: str) -> None:
    """One producer run sends one message to each of T_PUB, T_SUB, T_DENY."""
    require(kind)
    cluster, verdicts = acl_cluster.cluster, acl_cluster.verdicts
    ak, sk = keys_for(keys)
    bodies = [body_of(f"{kind}-{keys}-{t}").decode() for t in REAL_PRODUCER_TOPICS]
    spec = json.dumps(
        {"messages": [msg_spec(kind, t, b) for t, b in zip(REAL_PRODUCER_TOPICS, bodies, strict=True)]}
    )
    argv = ["--namesrv", cluster.namesrv_addr, "--group", f"PG_REAL_{kind}_{keys}", "--spec", spec,
            "--access-key", ak, "--secret-key", sk]  # fmt: skip
    argv += ["--timeout-ms", "30000"] if kind == "ons" else ["--timeout-s", "30"]
    since = verdicts.mark()
    cp = real._spawn(kind, "producer", argv)
    cp.drain(40)
    events = {int(e["i"]): e for e in cp.events if e.get("event") in ("sent", "send_error")}
    assert sorted(events) == [0, 1, 2], f"{cp.events}\n{cp.diagnostics()}"
    for i, (topic, outcome) in enumerate(zip(REAL_PRODUCER_TOPICS, REAL_PRODUCER_MATRIX[keys], strict=True)):
        if outcome == OK:
            assert events[i]["event"] == "sent", events[i]
            assert asyncio.run(find_bodies(cluster, topic)).count(bodies[i].encode()) == 1
            continue
        assert events[i]["event"] == "send_error", events[i]
        pattern = reason(outcome, topic=topic, access_key=ak)
        verdicts.wait_for(
            refused(ak, pattern, codes=SEND_CODES, topic=topic), since, 10, f"{kind}'s send to {topic}"
        )
        assert bodies[i].encode() not in asyncio.run(find_bodies(cluster, topic))
    assert cp.proc.wait(timeout=10) != 0  # some send failed in every run


REAL_CONSUMER_MATRIX = {("right", "T_SUB"): OK, ("right", "T_PUB"): TOPIC, ("right", "T_DENY"): TOPIC,
                        ("wrong", "T_SUB"): SIG}  # fmt: skip


@pytest.mark.parametrize(
    ("keys", "topic"), REAL_CONSUMER_RUNS, ids=[f"{k}-{t}" for k, t in REAL_CONSUMER_RUNS]
)
@pytest.mark.parametrize("kind", REAL_KINDS)
def test_real_consumer(acl_cluster: AclCluster, real: Clients, kind: str, keys: str, topic: str) -> None:
    """A push consumer of `topic`; the admin sends it a fresh message first."""
    require(kind)
    cluster, verdicts = acl_cluster.cluster, acl_cluster.verdicts
    ak, sk = keys_for(keys)
    group = real_group(kind, keys, topic)
    body = body_of(f"{kind}-consumer-{keys}-{topic}")

    async def send() -> None:
        async with sdk_producer(cluster, SDK_ADMIN) as producer:
            await producer.send(Message(topic, body))

    asyncio.run(send())
    if kind == "cpp":  # a new C++ group starts at the max offset: start from the head instead
        for queue_id in range(4):
            cluster.broker.offsets.commit(group, topic, queue_id, 0)
    argv = ["--namesrv", cluster.namesrv_addr, "--group", group, "--topic", topic,
            "--access-key", ak, "--secret-key", sk]  # fmt: skip
    argv += ["--timeout-ms", "60000"] if kind == "ons" else ["--timeout-s", "60"]
    since = verdicts.mark()
    cp = real._spawn(kind, "consumer", argv)
    outcome = REAL_CONSUMER_MATRIX[(keys, topic)]
    if outcome == OK:
        got = cp.collect(
            lambda evs: any(e["body"] == body.decode() for e in evs), 30, f"the message on {topic}"
        )
        assert [e["topic"] for e in got if e["body"] == body.decode()] == [topic]
        finish(cp)
        return
    pattern = reason(outcome, topic=topic, access_key=ak)
    heartbeat = frozenset({RequestCode.HEART_BEAT})
    verdicts.wait_for(
        refused(ak, pattern, codes=heartbeat), since, 30, f"{kind} consumer of {topic} with {keys} keys"
    )
    events = finish(cp)
    assert not [e for e in events if e.get("event") == "recv"], events
