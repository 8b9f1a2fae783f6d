"""ACL 2.0 end to end: mqadmin 5.3.3 (unmodified, signed with `conf/tools.yml` as it reads it) is
the admin tool, and the matrix users x resources x actions x ports is driven with real clients.

One embedded cluster with `authenticationEnabled`, `authorizationEnabled` and
`initAuthenticationUser` (the super user `rocketmq`). mqadmin, signed as that super user, creates
the topics and groups and the users and ACLs below (createUser, updateUser, createAcl, updateAcl);
`test_mqadmin_*` check what each of its ten user and ACL sub-commands prints or changes against
the broker's users and ACLs (`AuthMetadata`, the same the broker checks with, and config/auth.json).

The users (rows): `admin` (Super), `alice` (Normal, with the ACL below), `bob` (Normal, no ACL),
alice with a wrong password, an unknown user, `carol` (disabled by updateUser), and no keys.
alice's ACL (all Custom): Topic:T_PUB Pub Allow; Topic:T_SUB Sub Allow; Topic:T_ALL* All Allow;
Topic:T_DENY All Deny; Topic:T_IP Pub,Sub Allow from 10.0.0.0/8 only; Group:G_OK Sub Allow.

Actions (columns, per topic): `pub` (a send), `sub G_OK` and `sub G_NO` (a pull / a
QueryAssignment as that group). Ports: remoting through rocketlite's SDK (AsyncProducer.send,
AsyncPullConsumer.fetch with access_key / secret_key), gRPC through raw signed stubs for every
cell (SendMessage, QueryAssignment) and the unmodified Python 5.x client (rocketmq 5.1.2, Producer
and SimpleConsumer with Credentials) for a subset. A refusal must carry NO_PERMISSION (remoting)
or UNAUTHORIZED (gRPC) and the remark of `REMARKS`; a pull asks topic then group, a gRPC
subscription group then topic (Java's order), so a cell refused on both names a different
resource per port (the `sub G_NO` rows differ).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketlite.broker.auth.model import subject_key
from rocketlite.client import AsyncProducer, AsyncPullConsumer, Message, NoPermissionError, PullStatus
from rocketlite.embedded import EmbeddedCluster, embedded
from tests.support.foreign_clients.grpc5 import PYTHON5, require_endpoint, require_python5
from tests.support.foreign_clients.mqadmin import MqAdmin, Result, mqadmin_shell

pytestmark = pytest.mark.timeout(300)

CLUSTER = "DefaultCluster"
ADMIN = ("rocketmq", "12345678")
ALICE = ("alice", "alice-secret")
BOB = ("bob", "bob-secret")
CAROL = ("carol", "carol-secret")
TOPICS = ("T_PUB", "T_SUB", "T_ALL1", "T_DENY", "T_IP", "T_OTHER")
GROUPS = ("G_OK", "G_NO")
ALICE_ACL = [  # mqadmin createAcl / updateAcl arguments: resources, actions, decision, source IPs
    ("Topic:T_PUB,Topic:T_SUB", "Pub", "Allow", None),
    ("Topic:T_ALL*", "All", "Allow", None),
    ("Topic:T_DENY", "All", "Deny", None),
    ("Topic:T_IP", "Pub,Sub", "Allow", "10.0.0.0/8"),
    ("Group:G_OK", "Sub", "Allow", None),
]
ALICE_UPDATE = ("Topic:T_SUB", "Sub", "Allow", None)  # updateAcl turns T_SUB from Pub to Sub

USERS: dict[str, tuple[str, str] | None] = {
    "admin": ADMIN,
    "alice": ALICE,
    "bob": BOB,
    "wrong-secret": (ALICE[0], "not-the-secret"),
    "unknown": ("nobody", "whatever"),
    "disabled": CAROL,
    "no-keys": None,
}

# -- the expected outcomes -------------------------------------------------------------------------
# ok; none:T / none:G (no matched policies on the topic / group); deny:T (the decision is deny);
# sig, unknown, disabled, nokey (authentication).
OK = "ok"
ROW_OK = (OK,) * len(TOPICS)


def row(outcome: str) -> tuple[str, ...]:
    return (outcome,) * len(TOPICS)


#                                   T_PUB     T_SUB     T_ALL1  T_DENY    T_IP      T_OTHER
MATRIX: dict[tuple[str, str, str], tuple[str, ...]] = {
    ("admin", "pub", "any"): ROW_OK,
    ("admin", "sub G_OK", "any"): ROW_OK,
    ("admin", "sub G_NO", "any"): ROW_OK,
    ("alice", "pub", "any"): (OK, "none:T", OK, "deny:T", "none:T", "none:T"),
    ("alice", "sub G_OK", "any"): ("none:T", OK, OK, "deny:T", "none:T", "none:T"),
    ("alice", "sub G_NO", "remoting"): ("none:T", "none:G", "none:G", "deny:T", "none:T", "none:T"),
    ("alice", "sub G_NO", "grpc"): row("none:G"),
    ("bob", "pub", "any"): row("none:T"),
    ("bob", "sub G_OK", "remoting"): row("none:T"),
    ("bob", "sub G_OK", "grpc"): row("none:G"),
    **{(u, a, "any"): row(o) for u, o in (("wrong-secret", "sig"), ("unknown", "unknown"),
                                          ("disabled", "disabled"), ("no-keys", "nokey"))
       for a in ("pub", "sub G_OK")},
}  # fmt: skip


def expected(user: str, action: str, port: str) -> tuple[str, ...] | None:
    return MATRIX.get((user, action, port), MATRIX.get((user, action, "any")))


def remark(outcome: str, user: str, topic: str, group: str) -> str:
    name = (USERS[user] or ("", ""))[0]
    resource = f"Topic:{topic}" if outcome.endswith(":T") else f"Group:{group}"
    denied = f"{subject_key(name)} has no permission to access {resource} from 127.0.0.1, "
    return {
        "none:T": denied + "no matched policies.",
        "none:G": denied + "no matched policies.",
        "deny:T": denied + "the decision is deny.",
        "sig": "check signature failed.",
        "unknown": f"User:{name} is not found.",
        "disabled": f"User:{name} is disabled.",
        "nokey": "username cannot be null.",
    }[outcome]


def cells(port: str) -> Iterator[tuple[str, str, str, str]]:
    """(user, action, topic, outcome) of every cell for `port`."""
    for user in USERS:
        for action in ("pub", "sub G_OK", "sub G_NO"):
            outcomes = expected(user, action, port)
            if outcomes is None:
                continue
            for topic, outcome in zip(TOPICS, outcomes, strict=True):
                yield user, action, topic, outcome


# -- the cluster and mqadmin ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    init = json.dumps({"username": ADMIN[0], "password": ADMIN[1]})
    with embedded(
        tmp_path_factory.mktemp("acl2") / "store",
        authentication_enabled=True,
        authorization_enabled=True,
        init_authentication_user=init,
    ) as c:
        yield c


@pytest.fixture(scope="module")
def mq(cluster: EmbeddedCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MqAdmin]:
    with mqadmin_shell(tmp_path_factory.mktemp("mqadmin-acl2"), cluster.namesrv_addr) as shell:
        shell.use_keys(*ADMIN)
        yield shell


def ok(result: Result) -> Result:
    assert result.ok, result.describe()
    return result


def acl_rows(result: Result) -> set[tuple[str, ...]]:
    """getAcl / listAcl's table: (#Subject, #PolicyType, #Resource, #Actions, #SourceIp, #Decision),
    the lists as Java prints them ("[Pub, Sub]", "null")."""
    rows = set()
    for line in result.lines():
        if line.startswith("#Subject"):
            continue
        m = re.fullmatch(r"\s*(\S+)\s+(\S+)\s+(\S+)\s+(\[.*?\]|null)\s+(\[.*?\]|null)\s+(\S+)\s*", line)
        assert m, f"not an ACL row: {line!r}\n{result.describe()}"
        rows.add(m.groups())
    return rows


def state_rows(cluster: EmbeddedCluster, subject_filter: str | None = None) -> set[tuple[str, ...]]:
    """The same table from the broker's own ACLs."""
    rows: set[tuple[str, ...]] = set()
    for acl in cluster.broker.auth_metadata.list_acls(subject_filter, None):
        for policy in acl.policies:
            for e in policy.entries:
                ips = f"[{', '.join(e.source_ips)}]" if e.source_ips else "null"
                actions = f"[{', '.join(a.value for a in e.actions)}]"
                rows.add(
                    (acl.subject, policy.policy_type.value, e.resource.key, actions, ips, e.decision.value)
                )
    return rows


@pytest.fixture(scope="module")
def prepared(cluster: EmbeddedCluster, mq: MqAdmin) -> MqAdmin:
    """Topics, groups, users and alice's ACL, all made with mqadmin signed as the super user."""
    addr = cluster.broker_addr
    argvs = [mq.argv("updateTopic", "-b", addr, "-t", t, "-r", 1, "-w", 1) for t in TOPICS]
    argvs += [mq.argv("updateSubGroup", "-b", addr, "-g", g) for g in GROUPS]
    argvs += [mq.argv("createUser", "-b", addr, "-u", u, "-p", p) for u, p in (ALICE, BOB, CAROL)]
    argvs.append(mq.argv("updateUser", "-b", addr, "-u", CAROL[0], "-s", "disable"))
    for resources, actions, decision, ips in ALICE_ACL:
        extra = ["-i", ips] if ips else []
        argvs.append(mq.argv("createAcl", "-b", addr, "-s", "User:alice", "-r", resources, "-a", actions,
                             "-d", decision, *extra))  # fmt: skip
    resources, actions, decision, _ = ALICE_UPDATE
    argvs.append(
        mq.argv("updateAcl", "-b", addr, "-s", "User:alice", "-r", resources, "-a", actions, "-d", decision)
    )
    for result in mq.run_all(*argvs):
        ok(result)
    return mq


# -- mqadmin's sub-commands, checked against the broker's state --------------------------------------


def test_mqadmin_creates_and_updates_users(cluster: EmbeddedCluster, prepared: MqAdmin) -> None:
    meta = cluster.broker.auth_metadata
    assert {u.username: (u.user_type.value, u.user_status.value) for u in meta.list_users(None)} == {
        "rocketmq": ("Super", "enable"), "alice": ("Normal", "enable"), "bob": ("Normal", "enable"),
        "carol": ("Normal", "disable"),
    }  # fmt: skip
    out = ok(
        prepared.run(
            "createUser", "-b", cluster.broker_addr, "-u", "dave", "-p", "dave-secret", "-t", "Super"
        )
    )
    assert out.lines() == [f"create user to {cluster.broker_addr} success."]
    dave = meta.get_user("dave")
    assert dave is not None and dave.is_super and dave.password == "dave-secret"
    ok(prepared.run("updateUser", "-c", CLUSTER, "-u", "dave", "-p", "new-secret"))
    assert (meta.get_user("dave") or dave).password == "new-secret"
    got = ok(prepared.run("getUser", "-b", cluster.broker_addr, "-u", "dave"))
    assert [line.split() for line in got.lines()] == [
        ["#UserName", "#Password", "#UserType", "#UserStatus"], ["dave", "new-secret", "Super", "enable"],
    ]  # fmt: skip
    listed = ok(prepared.run("listUser", "-c", CLUSTER))
    rows = [line.split() for line in listed.lines()[1:-1]]
    assert {r[0]: r[1:] for r in rows} == {
        u.username: [u.password, u.user_type.value, u.user_status.value] for u in meta.list_users(None)
    }
    assert listed.lines()[-1] == f"get user from {cluster.broker_addr} success."
    ok(prepared.run("deleteUser", "-b", cluster.broker_addr, "-u", "dave"))
    assert meta.get_user("dave") is None
    stored = json.loads((cluster.store_dir / "config" / "auth.json").read_text())
    assert sorted(u["username"] for u in stored["users"]) == ["alice", "bob", "carol", "rocketmq"]


def test_mqadmin_acl_commands_match_the_brokers_acls(cluster: EmbeddedCluster, prepared: MqAdmin) -> None:
    got = ok(prepared.run("getAcl", "-b", cluster.broker_addr, "-s", "User:alice"))
    assert acl_rows(got) == state_rows(cluster, "User:alice")
    assert ("User:alice", "Custom", "Topic:T_SUB", "[Sub]", "null", "Allow") in acl_rows(got)  # updated
    assert ("User:alice", "Custom", "Topic:T_IP", "[Pub, Sub]", "[10.0.0.0/8]", "Allow") in acl_rows(got)
    listed = ok(prepared.run("listAcl", "-c", CLUSTER, "-s", "alice"))
    assert acl_rows(listed) == state_rows(cluster, "alice")
    addr = cluster.broker_addr
    ok(
        prepared.run(
            "createAcl", "-b", addr, "-s", "User:bob", "-r", "Topic:T_TMP", "-a", "Pub", "-d", "Allow"
        )
    )
    assert ("User:bob", "Custom", "Topic:T_TMP", "[Pub]", "null", "Allow") in state_rows(cluster, "bob")
    ok(prepared.run("deleteAcl", "-b", addr, "-s", "User:bob", "-r", "Topic:T_TMP"))
    assert cluster.broker.auth_metadata.acl_of("bob") is None
    assert ok(prepared.run("listAcl", "-b", addr, "-s", "bob")).lines() == []


def test_mqadmin_needs_a_super_user_or_a_grant(
    cluster: EmbeddedCluster, mq: MqAdmin, prepared: MqAdmin
) -> None:
    del prepared
    addr = cluster.broker_addr
    try:
        for keys, why in (
            (
                ALICE,
                f"User:alice has no permission to access Cluster:{CLUSTER} from 127.0.0.1,"
                " no matched policies.",
            ),
            ((ALICE[0], "bad"), "check signature failed."),
            (None, "username cannot be null."),
        ):
            mq.use_keys(*(keys or (None, None)))
            result = mq.run("createUser", "-b", addr, "-u", "eve", "-p", "eve-secret")
            assert result.error is not None and result.error.get("responseCode") == 16, result.describe()
            assert result.error.get("remark") == why
        assert cluster.broker.auth_metadata.get_user("eve") is None
    finally:
        mq.use_keys(*ADMIN)


# -- remoting: rocketlite's SDK ----------------------------------------------------------------------


async def _remoting_cell(cluster: EmbeddedCluster, user: str, action: str, topic: str) -> str:
    keys = USERS[user] or (None, None)
    if action == "pub":
        producer = AsyncProducer(
            f"PG_{user}", cluster.namesrv_addr, instance_name=f"acl2-{user}",
            access_key=keys[0], secret_key=keys[1], retry_times_when_send_failed=0,
        )  # fmt: skip
        await producer.start()
        try:
            await producer.send(Message(topic, f"{user}->{topic}".encode()))
        except NoPermissionError as exc:
            return str(exc)
        finally:
            await producer.close()
        return OK
    group = action.split()[1]
    consumer = AsyncPullConsumer(
        group, cluster.namesrv_addr, instance_name=f"acl2-{user}-c",
        access_key=keys[0], secret_key=keys[1], heartbeat=False, auto_commit=False,
    )  # fmt: skip
    await consumer.start()
    try:
        queue = (await consumer.fetch_queues(topic))[0]
        result = await consumer.fetch(queue, 0, 1)
        assert result.status in (PullStatus.FOUND, PullStatus.NO_NEW_MSG, PullStatus.OFFSET_ILLEGAL), result
    except NoPermissionError as exc:
        return str(exc)
    finally:
        await consumer.close()
    return OK


def _check(port: str, results: dict[tuple[str, str, str], str]) -> None:
    wrong = []
    for user, action, topic, outcome in cells(port):
        got = results[(user, action, topic)]
        want = (
            OK
            if outcome == OK
            else f"({16 if port == 'remoting' else 40100}): "
            + remark(outcome, user, topic, action.split()[-1])
        )
        if not (got == OK if outcome == OK else got.endswith(want)):
            wrong.append(f"{user:13} {action:9} {topic:8} expected {outcome}: {want!r}, got {got!r}")
    assert not wrong, "\n".join(wrong)


def test_matrix_over_remoting_with_the_sdk(cluster: EmbeddedCluster, prepared: MqAdmin) -> None:
    del prepared

    async def all_cells() -> dict[tuple[str, str, str], str]:
        return {(u, a, t): await _remoting_cell(cluster, u, a, t) for u, a, t, _ in cells("remoting")}

    _check("remoting", asyncio.run(all_cells()))


# -- gRPC: raw signed stubs and the Python 5.x client ------------------------------------------------

DATE = "20260101T000000Z"


def _grpc_port(cluster: EmbeddedCluster) -> int:
    endpoint = cluster.broker.parts.grpc if cluster.broker.parts else None
    assert endpoint is not None and endpoint.port > 0, "the gRPC endpoint is not serving"
    return endpoint.port


def _metadata(keys: tuple[str, str] | None) -> tuple[tuple[str, str], ...]:
    meta: tuple[tuple[str, str], ...] = (("x-mq-client-id", "acl2@1@0@x"), ("x-mq-date-time", DATE))
    if keys is None:
        return meta
    import hmac  # noqa: PLC0415

    signature = hmac.new(keys[1].encode(), DATE.encode(), hashlib.sha1).hexdigest()
    credential = f"MQv2-HMAC-SHA1 Credential={keys[0]}, SignedHeaders=x-mq-date-time, Signature={signature}"
    return (*meta, ("authorization", credential))


def test_matrix_over_grpc_with_signed_stubs(cluster: EmbeddedCluster, prepared: MqAdmin) -> None:
    require_endpoint()
    del prepared
    import grpc  # noqa: PLC0415

    from rocketlite.protocol.proto.v2 import definition_pb2 as pb  # noqa: PLC0415
    from rocketlite.protocol.proto.v2 import service_pb2 as spb  # noqa: PLC0415
    from rocketlite.protocol.proto.v2 import service_pb2_grpc  # noqa: PLC0415

    async def all_cells() -> dict[tuple[str, str, str], str]:
        out: dict[tuple[str, str, str], str] = {}
        async with grpc.aio.insecure_channel(f"127.0.0.1:{_grpc_port(cluster)}") as channel:
            stubs: Any = service_pb2_grpc
            stub = stubs.MessagingServiceStub(channel)
            for user, action, topic, _ in cells("grpc"):
                meta = _metadata(USERS[user])
                if action == "pub":
                    body = f"{user}->{topic}".encode()
                    message = pb.Message(
                        topic=pb.Resource(name=topic),
                        system_properties=pb.SystemProperties(
                            message_id=f"ACL2{abs(hash((user, topic))):X}",
                            body_digest=pb.Digest(
                                type=pb.DigestType.MD5, checksum=hashlib.md5(body).hexdigest()
                            ),
                            message_type=pb.MessageType.NORMAL,
                        ),
                        body=body,
                    )
                    answer = await stub.SendMessage(
                        spb.SendMessageRequest(messages=[message]), metadata=meta, timeout=5
                    )
                else:
                    request = spb.QueryAssignmentRequest(
                        topic=pb.Resource(name=topic), group=pb.Resource(name=action.split()[1])
                    )
                    answer = await stub.QueryAssignment(request, metadata=meta, timeout=5)
                status = answer.status
                out[(user, action, topic)] = (
                    OK if status.code == 20000 else f"({status.code}): {status.message}"
                )
        return out

    _check("grpc", asyncio.run(all_cells()))


PY_CLIENT = """
import json, sys, time
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

endpoint, cases = sys.argv[1], json.loads(sys.argv[2])
for ak, sk, action, topic, group in cases:
    config = ClientConfiguration(endpoint, Credentials(ak, sk), request_timeout=3)
    try:
        if action == "pub":
            client = Producer(config, (topic,))
            client.startup()
            message = Message()
            message.topic = topic
            message.body = b"from the python 5.x client"
            client.send(message)
        else:
            client = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=5)
            client.startup()
            client.receive(1, 10)
        print(json.dumps({"case": [ak, action, topic], "ok": True}), flush=True)
    except Exception as exc:
        print(json.dumps({"case": [ak, action, topic], "ok": False, "error": str(exc)}), flush=True)
    finally:
        try:
            client.shutdown()
        except Exception:
            pass
"""

# (user, action, topic, outcome): a subset where the client's start (its QueryRoute, which needs
# Pub or Sub on the topic) passes, so the refusal reaches the client with its remark (the client
# reports a refused route only as "failed to fetch topic:T route.")
PY_CASES = [
    ("alice", "pub", "T_PUB", OK),
    ("alice", "pub", "T_SUB", "none:T"),
    ("wrong-secret", "pub", "T_PUB", "sig"),
    ("alice", "sub G_OK", "T_SUB", OK),
    ("alice", "sub G_OK", "T_PUB", "none:T"),
    ("alice", "sub G_NO", "T_SUB", "none:G"),
]


def test_python_5x_client_is_held_to_the_same_acl(
    cluster: EmbeddedCluster, prepared: MqAdmin, tmp_path: Path
) -> None:
    require_python5()
    del prepared
    cases = [[*(USERS[u] or ("", "")), a.split()[0], t, a.split()[-1]] for u, a, t, _ in PY_CASES]
    endpoint = f"127.0.0.1:{_grpc_port(cluster)}"

    async def client() -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            str(PYTHON5), "-c", PY_CLIENT, endpoint, json.dumps(cases),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "HOME": str(tmp_path)},
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        return proc.returncode or 0, out.decode(), err.decode()

    code, out, err = asyncio.run(client())
    assert code == 0, err
    results = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert len(results) == len(PY_CASES), out + err
    logs = "\n".join(p.read_text(errors="replace") for p in tmp_path.rglob("*.log"))
    for (user, action, topic, outcome), got in zip(PY_CASES, results, strict=True):
        case = (user, action, topic, got)
        if outcome == OK:
            assert got["ok"], case
            continue
        assert not got["ok"], case
        why = remark(outcome, user, topic, action.split()[-1])
        if outcome == "sig":  # refused at the client's first request, its route: the cause is logged
            assert got["error"] == f"failed to fetch topic:{topic} route.", case
            assert why in logs, logs[-3000:]
        else:
            assert why in got["error"], case
