"""ACL matrix: which credentials may do what on which topic, checked end to end with real clients.

One broker (module-scoped, `aclEnable=true`) with this `plain_acl.yml`:

* `aclNormalUser`: not admin, `defaultTopicPerm: DENY`, `defaultGroupPerm: DENY`, topics
  T_DENY=DENY, T_PUB=PUB, T_SUB=SUB, T_PUBSUB=PUB|SUB (T_OTHER is not listed: the default applies),
  groups G_SUB=SUB, G_DENY=DENY (and one SUB group per real-client consumer run);
* `aclAdminUser`: `admin: true`, no topic or group perms (so everything is allowed);
* `aclWhiteUser`: `whiteRemoteAddress: 127.0.0.1`, so its requests from 127.0.0.1 skip the
  signature and permission checks (its secret is never needed);
* `globalWhiteRemoteAddresses: [127.0.0.2]`: requests from 127.0.0.2 need no keys at all.

Credentials (rows of the matrix): the normal account with the right keys, with a wrong secret,
an unknown access key, no keys, the admin account, the white-listed account (wrong secret, from
127.0.0.1), and no keys from the globally white-listed 127.0.0.2.

`test_sdk_resource_matrix` drives rocketlite.client (AsyncProducer.send, AsyncPullConsumer.fetch)
for every credentials row × {send, pull as G_SUB, pull as G_DENY} × the five topics, and
`test_sdk_admin_matrix` sends the admin-only UPDATE_AND_CREATE_TOPIC (17) and
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) through the SDK's client instance. Each row's clients
get its keys the SDK's way (`access_key=` / `secret_key=` on the producer and consumer, or in
`ClientConfig`), and the SDK signs every request as Java's `AclClientRPCHook` does; they run as
client instance `acl-<row>`. Only the 127.0.0.2 row needs a test-side hook (`bind_global_white`):
its instance's sockets are bound to that address. An allowed send is read back with the admin
keys (same body at the offset the send returned); an allowed pull returns the body the admin
seeded; a refused one raises NoPermissionError with code 16 and the broker's remark, matched
whole (see `reason()`).

`test_real_producer` / `test_real_consumer` run the unmodified ali-ons and C++ (rocketmq==0.4.4)
clients with the right and a wrong secret on a subset (producers: T_PUB, T_SUB, T_DENY; consumers:
T_SUB, T_PUB, T_DENY). The clients do not print the broker's remark for a refused send (ali-ons
says "Send [4] times, still failed", the C++ client "No route info of this topic"), so the
broker's verdicts are recorded (the validator is wrapped, nothing else changes) and the test
waits for the refusal of that client's request, with its remark. A consumer is refused at its
HEART_BEAT (the subscription needs SUB on the topic, and the signature must check); not
registered, neither client ever pulls (ali-ons gives up with "no consumer for this group", the
C++ client idles), and nothing is received.

The expected outcomes are the literal tables RESOURCE_MATRIX and ADMIN_MATRIX below.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocketlite.broker.acl import AclError, AclValidator
from rocketlite.broker.subscription_group import SubscriptionGroupConfig
from rocketlite.client import (
    AsyncProducer,
    AsyncPullConsumer,
    ClientConfig,
    Message,
    MessageQueue,
    NoPermissionError,
    PullStatus,
)
from rocketlite.client.instance import ClientInstance, ProducerFactory
from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.wire.acl_signature import ACCESS_KEY
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.headers import CreateTopicRequestHeader
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import Connection
from tests.support.foreign_clients.real import ClientProc, Clients, Event, msg_spec, require
from tests.support.topics import create_topic

pytestmark = pytest.mark.timeout(120)

# -- the accounts ---------------------------------------------------------------------------------
NORMAL = ("aclNormalUser", "aclNormalSecret")
ADMIN = ("aclAdminUser", "aclAdminSecret")
WHITE = ("aclWhiteUser", "aclWhiteSecret")
UNKNOWN_KEY = "aclNobodyUser"
WRONG_SECRET = "notTheSecret"
GLOBAL_WHITE_IP = "127.0.0.2"

TOPICS = ("T_DENY", "T_PUB", "T_SUB", "T_PUBSUB", "T_OTHER")
G_SUB, G_DENY = "G_SUB", "G_DENY"
REAL_KINDS = ("ons", "cpp")
REAL_CONSUMER_RUNS = (("right", "T_SUB"), ("right", "T_PUB"), ("right", "T_DENY"), ("wrong", "T_SUB"))


def real_group(kind: str, keys: str, topic: str) -> str:
    return f"G_REAL_{kind}_{keys}_{topic}"


REAL_GROUPS = [real_group(k, keys, t) for k in REAL_KINDS for keys, t in REAL_CONSUMER_RUNS]

ACL_YML = f"""\
globalWhiteRemoteAddresses:
  - {GLOBAL_WHITE_IP}
accounts:
  - accessKey: {NORMAL[0]}
    secretKey: {NORMAL[1]}
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: ["T_DENY=DENY", "T_PUB=PUB", "T_SUB=SUB", "T_PUBSUB=PUB|SUB"]
    groupPerms: {json.dumps([f"{G_SUB}=SUB", f"{G_DENY}=DENY"] + [f"{g}=SUB" for g in REAL_GROUPS])}
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
  - accessKey: {WHITE[0]}
    secretKey: {WHITE[1]}
    whiteRemoteAddress: 127.0.0.1
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
"""


@dataclass(frozen=True)
class Creds:
    """One row of the matrix: the keys a client signs with, and where it connects from."""

    name: str
    access_key: str | None = None
    secret_key: str | None = None
    source_ip: str | None = None

    @property
    def instance_name(self) -> str:
        return f"acl-{self.name}"


CREDS = {
    c.name: c
    for c in (
        Creds("normal", *NORMAL),
        Creds("wrong-secret", NORMAL[0], WRONG_SECRET),
        Creds("unknown-key", UNKNOWN_KEY, NORMAL[1]),
        Creds("no-keys"),
        Creds("admin", *ADMIN),
        Creds("white-account", WHITE[0], WRONG_SECRET),
        Creds("global-white", source_ip=GLOBAL_WHITE_IP),
    )
}
SDK_ADMIN = CREDS["admin"]

# -- the expected outcomes -------------------------------------------------------------------------
# ok: allowed and round-trips; the others are NO_PERMISSION (16) with the remark of `reason()`.
# A pull needs SUB on the topic and on the group; when both are refused the broker names the topic
# (it checks the topic first; RocketMQ walks a HashMap, so its choice is arbitrary).
OK, TOPIC, DEFAULT, GROUP, SIG, UNKNOWN, NOKEY, NEED_ADMIN = (
    "ok", "topic", "default", "group", "sig", "unknown", "nokey", "admin",
)  # fmt: skip


def row(outcome: str) -> tuple[str, ...]:
    return (outcome,) * len(TOPICS)


RESOURCE_MATRIX: dict[tuple[str, str], tuple[str, ...]] = {
    # credentials       operation             T_DENY  T_PUB  T_SUB  T_PUBSUB  T_OTHER (unlisted)
    ("normal",        "send"):               (TOPIC, OK,    TOPIC, OK,    DEFAULT),
    ("normal",        "pull G_SUB"):         (TOPIC, TOPIC, OK,    OK,    DEFAULT),
    ("normal",        "pull G_DENY"):        (TOPIC, TOPIC, GROUP, GROUP, DEFAULT),
    ("wrong-secret",  "send"):               row(SIG),
    ("wrong-secret",  "pull G_SUB"):         row(SIG),
    ("wrong-secret",  "pull G_DENY"):        row(SIG),
    ("unknown-key",   "send"):               row(UNKNOWN),
    ("unknown-key",   "pull G_SUB"):         row(UNKNOWN),
    ("unknown-key",   "pull G_DENY"):        row(UNKNOWN),
    ("no-keys",       "send"):               row(NOKEY),
    ("no-keys",       "pull G_SUB"):         row(NOKEY),
    ("no-keys",       "pull G_DENY"):        row(NOKEY),
    ("admin",         "send"):               row(OK),
    ("admin",         "pull G_SUB"):         row(OK),
    ("admin",         "pull G_DENY"):        row(OK),
    ("white-account", "send"):               row(OK),
    ("white-account", "pull G_SUB"):         row(OK),
    ("white-account", "pull G_DENY"):        row(OK),
    ("global-white",  "send"):               row(OK),
    ("global-white",  "pull G_SUB"):         row(OK),
    ("global-white",  "pull G_DENY"):        row(OK),
}  # fmt: skip

ADMIN_OPS = {
    "create topic": RequestCode.UPDATE_AND_CREATE_TOPIC,
    "create group": RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
}
ADMIN_MATRIX: dict[str, str] = {
    "normal": NEED_ADMIN,
    "wrong-secret": SIG,
    "unknown-key": UNKNOWN,
    "no-keys": NOKEY,
    "admin": OK,
    "white-account": OK,
    "global-white": OK,
}


def reason(outcome: str, *, topic: str = "", group: str = "", code: int = 0, access_key: str = "") -> str:
    """The broker's remark for a refusal, as a regular expression.

    Resources print as RocketMQ's PlainAccessResource.printStr does: "topic:X" / "group:X".
    """
    sep = ":"
    remarks = {
        TOPIC: f"No permission for topic{sep}{re.escape(topic)}",
        DEFAULT: f"No default permission for topic{sep}{re.escape(topic)}",
        GROUP: f"No permission for group{sep}{re.escape(group)}",
        SIG: f"Check signature failed for accessKey={re.escape(access_key)}",
        UNKNOWN: f"No acl config for {re.escape(access_key)}",
        NOKEY: "No accessKey is configured",
        NEED_ADMIN: (
            f"Need admin permission for request code={code}, but accessKey={re.escape(access_key)} is not"
        ),
    }
    return remarks[outcome]


def resource_cases() -> list[Any]:
    cases = []
    for (creds, op), outcomes in RESOURCE_MATRIX.items():
        assert len(outcomes) == len(TOPICS)
        for topic, outcome in zip(TOPICS, outcomes, strict=True):
            cases.append(
                pytest.param(creds, op, topic, outcome, id=f"{creds}-{op.replace(' ', '_')}-{topic}")
            )
    return cases


def admin_cases() -> list[Any]:
    return [
        pytest.param(creds, op, outcome, id=f"{creds}-{op.replace(' ', '_')}")
        for creds, outcome in ADMIN_MATRIX.items()
        for op in ADMIN_OPS
    ]


# -- the broker's verdicts ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    code: int
    remote: str
    access_key: str | None
    topic: str | None
    remark: str | None  # None: allowed


class VerdictLog:
    """Wraps the broker's AclValidator.validate to record every decision (behaviour unchanged)."""

    def __init__(self, validator: AclValidator) -> None:
        self.verdicts: list[Verdict] = []
        self._cond = threading.Condition()
        inner = validator.validate

        def validate(remote_address: str, request: RemotingCommand) -> None:
            ext = request.ext_fields
            remark: str | None = None
            try:
                inner(remote_address, request)
            except AclError as exc:
                remark = str(exc)
                raise
            finally:
                v = Verdict(
                    request.code, remote_address, ext.get(ACCESS_KEY), ext.get("b", ext.get("topic")), remark
                )
                with self._cond:
                    self.verdicts.append(v)
                    self._cond.notify_all()

        validator.validate = validate  # type: ignore[method-assign]

    def mark(self) -> int:
        with self._cond:
            return len(self.verdicts)

    def wait_for(self, pred: Callable[[Verdict], bool], since: int, timeout: float, what: str) -> Verdict:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for v in self.verdicts[since:]:
                    if pred(v):
                        return v
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = "\n".join(map(str, self.verdicts[since:][-20:]))
                    raise AssertionError(
                        f"the broker never refused {what} within {timeout:.0f}s; saw:\n{seen}"
                    )
                self._cond.wait(left)


def refused(ak: str | None, pattern: str, *, codes: frozenset[int] | None = None,
            topic: str | None = None) -> Callable[[Verdict], bool]:  # fmt: skip
    def pred(v: Verdict) -> bool:
        return (
            v.remark is not None
            and v.access_key == ak
            and re.fullmatch(pattern, v.remark) is not None
            and (codes is None or v.code in codes)
            and (topic is None or v.topic == topic)
        )

    return pred


NO_PERMISSION = 16  # ResponseCode.NO_PERMISSION, the only code a refusal may carry
SEND_CODES = frozenset(
    {RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE}
)


# -- the global white-list row: connections from 127.0.0.2 --------------------------------------------
class BoundRemotingClient(RemotingClient):
    """RemotingClient whose connections leave from `source_ip` (the global white-list row)."""

    def __init__(self, inner: RemotingClient, source_ip: str) -> None:
        super().__init__(inner.table, connect_timeout=inner.connect_timeout)
        self.source_ip = source_ip

    async def connection(self, addr: str) -> Connection:
        async with self._locks.setdefault(addr, asyncio.Lock()):
            conn = self._conns.get(addr)
            if conn is not None and not conn.closed:
                return conn
            host, _, port = addr.rpartition(":")
            _transport, protocol = await asyncio.wait_for(
                asyncio.get_running_loop().create_connection(
                    lambda: Connection(self.table), host, int(port), local_addr=(self.source_ip, 0)
                ),
                self.connect_timeout,
            )
            self._conns[addr] = protocol
            return protocol


@pytest.fixture(scope="module")
def bind_global_white() -> Iterator[None]:
    """The global white-list row's client instance connects from 127.0.0.2 (nothing else changes)."""
    orig_init = ClientInstance.__init__
    source_ip = CREDS["global-white"].source_ip
    assert source_ip is not None

    def init(
        self: ClientInstance,
        config: ClientConfig,
        key: tuple[int, str, str],
        producer_factory: ProducerFactory | None = None,
    ) -> None:
        orig_init(self, config, key, producer_factory)
        if self.instance_name == CREDS["global-white"].instance_name:
            self.remoting = BoundRemotingClient(self.remoting, source_ip)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ClientInstance, "__init__", init)
        yield


@contextlib.asynccontextmanager
async def sdk_producer(cluster: EmbeddedCluster, creds: Creds) -> AsyncIterator[AsyncProducer]:
    producer = AsyncProducer(
        f"PG_{creds.name}", cluster.namesrv_addr, instance_name=creds.instance_name,
        access_key=creds.access_key, secret_key=creds.secret_key,
    )  # fmt: skip
    await producer.start()
    try:
        yield producer
    finally:
        await producer.close()


@contextlib.asynccontextmanager
async def sdk_puller(cluster: EmbeddedCluster, creds: Creds, group: str) -> AsyncIterator[AsyncPullConsumer]:
    consumer = AsyncPullConsumer(
        group, cluster.namesrv_addr, instance_name=creds.instance_name,
        access_key=creds.access_key, secret_key=creds.secret_key, heartbeat=False, auto_commit=False,
    )  # fmt: skip
    await consumer.start()
    try:
        yield consumer
    finally:
        await consumer.close()


async def dispatched(cluster: EmbeddedCluster) -> None:
    """Wait until what the broker stored so far is in its consume queues (readable by pulls)."""
    assert await asyncio.to_thread(cluster.broker.store.wait_dispatched, 10)


async def read_back(cluster: EmbeddedCluster, queue: MessageQueue, offset: int) -> bytes:
    """The body stored at (queue, offset), pulled with the admin keys."""
    await dispatched(cluster)
    async with sdk_puller(cluster, SDK_ADMIN, G_SUB) as admin:
        result = await admin.fetch(queue, offset, 1)
    assert result.status is PullStatus.FOUND and len(result.messages) == 1, result
    return result.messages[0].body


async def find_bodies(cluster: EmbeddedCluster, topic: str) -> list[bytes]:
    """Every body in every queue of `topic`, pulled with the admin keys."""
    await dispatched(cluster)
    bodies: list[bytes] = []
    async with sdk_puller(cluster, SDK_ADMIN, G_SUB) as admin:
        for queue in await admin.fetch_queues(topic):
            offset = await admin.get_min_offset(queue)
            while True:
                result = await admin.fetch(queue, offset, 32)
                if result.status is not PullStatus.FOUND:
                    break
                bodies += [m.body for m in result.messages]
                offset = result.next_begin_offset
    return bodies


def body_of(label: str) -> bytes:
    return f"{label}-{uuid.uuid4().hex[:8]}".encode()


# -- the broker --------------------------------------------------------------------------------------
@dataclass
class AclCluster:
    cluster: EmbeddedCluster
    verdicts: VerdictLog
    seeds: dict[str, tuple[MessageQueue, int, bytes]]  # topic -> (queue 0, offset, body) sent by admin


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory, bind_global_white: None) -> Iterator[AclCluster]:
    del bind_global_white
    root = tmp_path_factory.mktemp("acl_matrix")
    acl_file = root / "plain_acl.yml"
    acl_file.write_text(ACL_YML, encoding="utf-8")
    with embedded(root / "store", acl_enable=True, acl_config_file=str(acl_file)) as cluster:
        assert isinstance(cluster.broker.acl, AclValidator)
        verdicts = VerdictLog(cluster.broker.acl)
        for topic in TOPICS:
            create_topic(cluster, topic)

        async def seed() -> dict[str, tuple[MessageQueue, int, bytes]]:
            out = {}
            async with sdk_producer(cluster, SDK_ADMIN) as producer:
                for topic in TOPICS:
                    body = body_of(f"seed-{topic}")
                    queue = MessageQueue(topic, cluster.broker.broker.broker_name, 0)
                    result = await producer.send(Message(topic, body), queue=queue)
                    out[topic] = (result.queue, result.queue_offset, body)
            await dispatched(cluster)
            return out

        yield AclCluster(cluster, verdicts, asyncio.run(seed()))


# -- rocketlite.client: the full matrix ----------------------------------------------------------------
def expect_refusal(exc: NoPermissionError, pattern: str) -> None:
    assert exc.response_code == NO_PERMISSION
    remark = str(exc).removeprefix("NO_PERMISSION (16): ")
    assert re.fullmatch(pattern, remark), f"remark {remark!r} does not match {pattern!r}"


@pytest.mark.parametrize(("creds_name", "op", "topic", "outcome"), resource_cases())
def test_sdk_resource_matrix(
    acl_cluster: AclCluster, creds_name: str, op: str, topic: str, outcome: str
) -> None:
    cluster = acl_cluster.cluster
    creds = CREDS[creds_name]
    group = G_DENY if op == "pull G_DENY" else G_SUB
    pattern = (
        "" if outcome == OK else reason(outcome, topic=topic, group=group, access_key=creds.access_key or "")
    )

    async def scenario() -> None:
        if op == "send":
            body = body_of(f"{creds_name}-{topic}")
            async with sdk_producer(cluster, creds) as producer:
                if outcome != OK:
                    with pytest.raises(NoPermissionError) as info:
                        await producer.send(Message(topic, body))
                    expect_refusal(info.value, pattern)
                    return
                result = await producer.send(Message(topic, body))
            assert await read_back(cluster, result.queue, result.queue_offset) == body
            return
        queue, offset, seeded = acl_cluster.seeds[topic]
        async with sdk_puller(cluster, creds, group) as consumer:
            if outcome != OK:
                with pytest.raises(NoPermissionError) as info:
                    await consumer.fetch(queue, offset, 1)
                expect_refusal(info.value, pattern)
                return
            pulled = await consumer.fetch(queue, offset, 1)
        assert pulled.status is PullStatus.FOUND, pulled
        assert [m.body for m in pulled.messages] == [seeded]

    asyncio.run(scenario())


@pytest.mark.parametrize(("creds_name", "op", "outcome"), admin_cases())
def test_sdk_admin_matrix(acl_cluster: AclCluster, creds_name: str, op: str, outcome: str) -> None:
    cluster = acl_cluster.cluster
    creds = CREDS[creds_name]
    code = ADMIN_OPS[op]
    name = f"NEW_{creds_name.replace('-', '_')}_{uuid.uuid4().hex[:6]}"
    if code == RequestCode.UPDATE_AND_CREATE_TOPIC:
        ext = CreateTopicRequestHeader(
            topic=name, default_topic="TBW102", read_queue_nums=4, write_queue_nums=4, perm=6,
            topic_filter_type="SINGLE_TAG", topic_sys_flag=0, order=False,
        ).to_ext()  # fmt: skip
        body = None
    else:
        ext = {}
        body = json.dumps(SubscriptionGroupConfig(name).to_json_obj()).encode()

    async def scenario() -> RemotingCommand:
        config = ClientConfig(
            cluster.namesrv_addr, instance_name=creds.instance_name,
            access_key=creds.access_key, secret_key=creds.secret_key,
        )  # fmt: skip
        instance = await ClientInstance.acquire(config)
        try:
            return await instance.invoke(cluster.broker_addr, instance.command(code, ext, body))
        finally:
            await instance.release()

    response = asyncio.run(scenario())
    broker = cluster.broker
    created = (
        broker.topics.select(name)
        if code == RequestCode.UPDATE_AND_CREATE_TOPIC
        else broker.groups.table.get(name)
    )
    if outcome == OK:
        assert response.code == ResponseCode.SUCCESS, response
        assert created is not None
        return
    assert response.code == NO_PERMISSION, response
    pattern = reason(outcome, code=code, access_key=creds.access_key or "")
    assert re.fullmatch(pattern, response.remark or ""), f"remark {response.remark!r} != {pattern!r}"
    assert created is None


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
