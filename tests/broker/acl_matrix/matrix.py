"""The ACL matrix's broker, accounts and expected outcomes, shared by its two test modules
(test_sdk.py: rocketlite.client over the full matrix; test_real_clients.py: ali-ons and the C++
client on a subset). The package docstring says what the matrix is."""

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
from typing import Any

import pytest

from rocketlite.broker.acl import AclError, AclValidator
from rocketlite.client import (
    AsyncProducer,
    AsyncPullConsumer,
    ClientConfig,
    Message,
    MessageQueue,
    PullStatus,
)
from rocketlite.client.instance import ClientInstance, ProducerFactory
from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.wire.acl_signature import ACCESS_KEY
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import Connection
from tests.support.topics import create_topic

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


@pytest.fixture(scope="package")
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


@pytest.fixture(scope="package")
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
