"""The gRPC endpoint's edge (broker/grpc/auth.py, names.py): with aclEnable, the 5.x MQv2-HMAC-SHA1
signature and the plain_acl.yml permissions of each RPC, answered UNAUTHORIZED / FORBIDDEN in the
status (streams included) with the cause named; namespaces stored as `<namespace>%<name>` and shown
back without it. Raw stubs over 127.0.0.1 for each refusal; the unmodified Python and Node 5.x
clients with a right and a wrong secret key."""

from __future__ import annotations

import asyncio
import hashlib
import os
import platform
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from rocketlite.broker.grpc import names
from rocketlite.broker.grpc.auth import AuthError, parse_authorization, sign
from rocketlite.protocol.proto import available
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test, stored_by_uniq_key
from tests.support.foreign_clients.grpc5 import NODE5_MODULE as NODE5
from tests.support.foreign_clients.grpc5 import PYTHON5

if available() is not None and os.environ.get("CI") == "true":
    raise RuntimeError(f"CI=true needs the gRPC endpoint: {available()}")
pytestmark = pytest.mark.skipif(available() is not None, reason=f"{available()}")

if available() is None:
    import grpc

    from rocketlite.protocol.proto.v2 import definition_pb2 as pb
    from rocketlite.protocol.proto.v2 import service_pb2 as spb
    from rocketlite.protocol.proto.v2 import service_pb2_grpc


OK = 20000
DATE = "20260101T000000Z"
ACL = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: rocketmq2
    secretKey: "12345678"
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [AuthT=PUB|SUB, ReadT=SUB, "ns1%NsT=PUB"]
    groupPerms: [GoodG=SUB]
  - accessKey: whiteuser
    secretKey: whitesecret
    whiteRemoteAddress: 127.0.0.1
  - accessKey: admin01
    secretKey: adminsecret
    admin: true
"""
WHITE = "globalWhiteRemoteAddresses: [127.0.0.1]\naccounts: []\n"


def signed(access_key: str, secret_key: str, *, upper: bool = False) -> tuple[tuple[str, str], ...]:
    signature = sign(secret_key, DATE)
    return (
        ("x-mq-client-id", "auth-test@1@0@x"),
        ("x-mq-date-time", DATE),
        (
            "authorization",
            f"MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, "
            f"Signature={signature.upper() if upper else signature}",
        ),
    )


GOOD = signed("rocketmq2", "12345678")
UNSIGNED = (("x-mq-client-id", "auth-test@1@0@x"), ("x-mq-date-time", DATE))


def _port(broker: BrokerUnderTest) -> int:
    endpoint = broker.controller.parts.grpc if broker.controller.parts else None
    assert endpoint is not None and endpoint.port > 0
    return endpoint.port


def _stub(broker: BrokerUnderTest) -> tuple[Any, Any]:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{_port(broker)}")
    stubs: Any = service_pb2_grpc  # generated without types
    return channel, stubs.MessagingServiceStub(channel)


def _send_request(topic: str, *, namespace: str = "", message_id: str = "01AUTH") -> Any:
    body = b"auth body"
    return spb.SendMessageRequest(
        messages=[
            pb.Message(
                topic=pb.Resource(name=topic, resource_namespace=namespace),
                system_properties=pb.SystemProperties(
                    message_id=message_id,
                    body_digest=pb.Digest(type=pb.DigestType.MD5, checksum=hashlib.md5(body).hexdigest()),
                    message_type=pb.MessageType.NORMAL,
                ),
                body=body,
            )
        ]
    )


async def _acl_broker(root: Path) -> Any:
    (root / "plain_acl.yml").parent.mkdir(parents=True, exist_ok=True)
    (root / "plain_acl.yml").write_text(ACL)
    return broker_under_test(root / "store", acl_enable=True, acl_config_file=str(root / "plain_acl.yml"))


async def _create_topics(broker: BrokerUnderTest, *topics: tuple[str, str]) -> None:
    """(namespace, topic) created by a signed send, before a client asks for its route."""
    channel, stub = _stub(broker)
    async with channel:
        for namespace, topic in topics:
            sent = await stub.SendMessage(_send_request(topic, namespace=namespace), metadata=GOOD, timeout=5)
            assert sent.status.code == OK, sent


def _status(response: Any) -> tuple[int, str]:
    return response.status.code, response.status.message


# -- the authorization metadata ------------------------------------------------------------------


def test_authorization_metadata_of_both_clients_parses() -> None:
    python = "MQv2-HMAC-SHA1 Credential=ak1234, SignedHeaders=x-mq-date-time, Signature=0aff"
    node = "MQv2-HMAC-SHA1 Credential=ak1234, SignedHeaders=x-mq-date-time, Signature=0AFF"
    assert parse_authorization(python) == parse_authorization(node) == ("ak1234", b"\x0a\xff")
    assert parse_authorization("MQv2-HMAC-SHA1 Credential=ak1234/region/x, Signature=00")[0] == "ak1234"
    with pytest.raises(AuthError, match="not hex"):
        parse_authorization("MQv2-HMAC-SHA1 Credential=ak1234, Signature=xyz")
    with pytest.raises(AuthError, match="must start with MQv2-HMAC-SHA1"):
        parse_authorization("Bearer abc")
    # HMAC-SHA1("12345678", DATE), as `openssl dgst -sha1 -hmac 12345678` prints it
    assert sign("12345678", DATE) == "744d438196af86606d44b8c9a7c8e0e0b2ffb22b"


def test_namespace_names_as_java() -> None:
    assert names.wrap("ns1", "T") == "ns1%T"
    assert names.wrap("ns1", "%RETRY%G") == "%RETRY%ns1%G"
    assert names.wrap("ns1", "%DLQ%G") == "%DLQ%ns1%G"
    assert names.wrap("ns1", "ns1%T") == "ns1%T"  # already inside
    assert names.wrap("ns1", "rmq_sys_wheel_timer") == "rmq_sys_wheel_timer"  # system topics stay
    assert names.wrap("ns1", "CID_RMQ_SYS_X") == "CID_RMQ_SYS_X"
    assert names.wrap("", "T") == "T"
    assert names.unwrap("ns1", "ns1%T") == "T"
    assert names.unwrap("ns1", "%RETRY%ns1%G") == "%RETRY%G"
    assert names.unwrap("ns1", "ns2%T") == "ns2%T"  # another namespace is not this client's


# -- signatures ----------------------------------------------------------------------------------


def test_unsigned_unknown_and_wrong_signatures_are_unauthorized(tmp_path: Path) -> None:
    route = spb.QueryRouteRequest(topic=pb.Resource(name="AuthT"))

    async def scenario() -> None:
        async with await _acl_broker(tmp_path) as broker:
            channel, stub = _stub(broker)
            async with channel:
                unsigned = await stub.QueryRoute(route, metadata=UNSIGNED, timeout=5)
                unknown = await stub.QueryRoute(route, metadata=signed("nobody1", "12345678"), timeout=5)
                wrong = await stub.QueryRoute(route, metadata=signed("rocketmq2", "wrong-secret"), timeout=5)
                bad_hex = await stub.QueryRoute(
                    route,
                    metadata=(
                        *UNSIGNED,
                        ("authorization", "MQv2-HMAC-SHA1 Credential=rocketmq2, Signature=zz"),
                    ),
                    timeout=5,
                )
                empty = await stub.QueryRoute(route, metadata=signed("", ""), timeout=5)
                lower = await stub.SendMessage(
                    _send_request("AuthT", message_id="L"), metadata=GOOD, timeout=5
                )
                upper = await stub.SendMessage(
                    _send_request("AuthT", message_id="U"),
                    metadata=signed("rocketmq2", "12345678", upper=True),
                    timeout=5,
                )
                routed = await stub.QueryRoute(route, metadata=GOOD, timeout=5)
                # an account whose white address matches needs no signature (as Java)
                white = await stub.QueryRoute(
                    route, metadata=signed("whiteuser", "not-its-secret"), timeout=5
                )
        code = pb.Code.UNAUTHORIZED
        assert _status(unsigned)[0] == code and "no authorization metadata" in _status(unsigned)[1]
        assert _status(unknown) == (code, "no account for access key 'nobody1' in the ACL config")
        assert (
            _status(wrong)[0] == code and "signature mismatch for access key 'rocketmq2'" in _status(wrong)[1]
        )
        assert _status(bad_hex)[0] == code and "not hex" in _status(bad_hex)[1]
        assert _status(empty)[0] == code and "no access key" in _status(empty)[1]
        assert [_status(r)[0] for r in (lower, upper, routed, white)] == [OK] * 4, [
            lower,
            upper,
            routed,
            white,
        ]

    run(scenario())


# -- permissions ---------------------------------------------------------------------------------


async def _ack_refusal(stub: Any, group: str) -> int | None:
    """The status code an AckMessage got, or None when it passed the ACL (whatever it got next)."""
    request = spb.AckMessageRequest(group=pb.Resource(name=group), topic=pb.Resource(name="AuthT"))
    try:
        answer = await stub.AckMessage(request, metadata=GOOD, timeout=5)
    except grpc.aio.AioRpcError:
        return None  # past the guard: the consume module answered (or is not served yet)
    code: int = answer.status.code
    return code if code in (pb.Code.UNAUTHORIZED, pb.Code.FORBIDDEN) else None


def test_each_rpc_needs_its_permissions(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with await _acl_broker(tmp_path) as broker:
            channel, stub = _stub(broker)
            async with channel:
                read_only = await stub.SendMessage(_send_request("ReadT"), metadata=GOOD, timeout=5)
                unlisted = await stub.SendMessage(_send_request("OtherT"), metadata=GOOD, timeout=5)
                admin = await stub.SendMessage(
                    _send_request("OtherT"), metadata=signed("admin01", "adminsecret"), timeout=5
                )
                # QueryRoute needs PUB or SUB: SUB on ReadT passes the ACL (the topic does not exist)
                route_read = await stub.QueryRoute(
                    spb.QueryRouteRequest(topic=pb.Resource(name="ReadT")), metadata=GOOD, timeout=5
                )
                route_other = await stub.QueryRoute(
                    spb.QueryRouteRequest(topic=pb.Resource(name="OtherT")), metadata=GOOD, timeout=5
                )
                in_ns = await stub.SendMessage(
                    _send_request("NsT", namespace="ns1"), metadata=GOOD, timeout=5
                )
                other_ns = await stub.SendMessage(
                    _send_request("NsT", namespace="ns2"), metadata=GOOD, timeout=5
                )
                ack_bad_group = await _ack_refusal(stub, "BadG")
                ack_good_group = await _ack_refusal(stub, "GoodG")
        forbidden = pb.Code.FORBIDDEN
        assert _status(read_only) == (
            forbidden,
            "access key 'rocketmq2' has no PUB permission for topic 'ReadT'",
        )
        assert _status(unlisted)[0] == forbidden
        assert (
            "topic 'OtherT' (not listed, and the default topic permission denies it)" in _status(unlisted)[1]
        )
        assert _status(admin)[0] == OK  # an admin account without resource perms may do anything
        assert _status(route_read)[0] == pb.Code.TOPIC_NOT_FOUND
        assert _status(route_other)[0] == forbidden
        assert _status(in_ns)[0] == OK  # ns1%NsT=PUB: the namespaced name is what is checked
        assert _status(other_ns) == (forbidden, _status(other_ns)[1]) and "'ns2%NsT'" in _status(other_ns)[1]
        assert ack_bad_group == forbidden
        assert ack_good_group is None

    run(scenario())


def test_streams_answer_the_refusal_then_end(tmp_path: Path) -> None:
    receive = spb.ReceiveMessageRequest(
        group=pb.Resource(name="BadG"),
        message_queue=pb.MessageQueue(topic=pb.Resource(name="AuthT"), id=-1),
    )
    allowed = pb.Settings(
        client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name="AuthT")])
    )
    refused = pb.Settings(
        client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name="ReadT")])
    )

    async def commands(*settings: Any) -> AsyncIterator[Any]:
        for s in settings:
            yield spb.TelemetryCommand(settings=s)
        await asyncio.Event().wait()  # a client keeps its stream open: the server must end it

    async def scenario() -> None:
        async with await _acl_broker(tmp_path) as broker:
            channel, stub = _stub(broker)
            async with channel:
                no_group = [r async for r in stub.ReceiveMessage(receive, metadata=GOOD, timeout=5)]
                unsigned = [r async for r in stub.ReceiveMessage(receive, metadata=UNSIGNED, timeout=5)]
                telemetry = [
                    r
                    async for r in stub.Telemetry(
                        commands(allowed, refused, allowed), metadata=GOOD, timeout=5
                    )
                ]
                telemetry_unsigned = [
                    r async for r in stub.Telemetry(commands(allowed), metadata=UNSIGNED, timeout=5)
                ]
        assert [(r.WhichOneof("content"), r.status.code) for r in no_group] == [("status", pb.Code.FORBIDDEN)]
        assert "group 'BadG'" in no_group[0].status.message
        assert [r.status.code for r in unsigned] == [pb.Code.UNAUTHORIZED]
        assert [r.status.code for r in telemetry] == [OK, pb.Code.FORBIDDEN]
        assert "PUB permission for topic 'ReadT'" in telemetry[1].status.message
        assert [r.status.code for r in telemetry_unsigned] == [pb.Code.UNAUTHORIZED]

    run(scenario())


# -- namespaces ----------------------------------------------------------------------------------


def test_namespaced_resources_are_stored_wrapped_and_shown_bare(tmp_path: Path) -> None:
    settings = pb.Settings(
        client_type=pb.ClientType.PRODUCER,
        publishing=pb.Publishing(topics=[pb.Resource(name="NsT", resource_namespace="ns1")]),
    )

    async def commands() -> AsyncIterator[Any]:
        yield spb.TelemetryCommand(settings=settings)

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as broker:
            channel, stub = _stub(broker)
            meta = (("x-mq-client-id", "ns-test@1@0@x"), ("x-mq-namespace", "ns1"))
            async with channel:
                sent = await stub.SendMessage(
                    _send_request("NsT", namespace="ns1", message_id="NS1"), timeout=5
                )
                route = await stub.QueryRoute(
                    spb.QueryRouteRequest(topic=pb.Resource(name="NsT", resource_namespace="ns1")), timeout=5
                )
                replies = [r async for r in stub.Telemetry(commands(), metadata=meta, timeout=5)]
            assert _status(sent)[0] == OK, sent
            assert broker.controller.topics.select("ns1%NsT") is not None
            assert broker.controller.topics.select("NsT") is None
            assert "NS1" in await stored_by_uniq_key(broker, "ns1%NsT")
            assert _status(route)[0] == OK and route.message_queues
            shown = {(q.topic.resource_namespace, q.topic.name) for q in route.message_queues}
            assert shown == {("ns1", "NsT")}
            assert [(t.resource_namespace, t.name) for t in replies[0].settings.publishing.topics] == [
                ("ns1", "NsT")
            ]

    run(scenario())


# -- the unmodified 5.x clients ------------------------------------------------------------------

PY_PRODUCER = """
import sys
from rocketmq import ClientConfiguration, Credentials, Message, Producer

endpoint, topic, ak, sk, namespace = sys.argv[1:6]
config = ClientConfiguration(endpoint, Credentials(ak, sk), namespace, request_timeout=3)
producer = Producer(config, (topic,))
producer.startup()
try:
    message = Message()
    message.topic = topic
    message.body = b"signed by python"
    print(producer.send(message).message_id, flush=True)
finally:
    producer.shutdown()
"""

NODE_PRODUCER = """
const [mod, endpoint, topic, accessKey, accessSecret] = process.argv.slice(1);
const { Producer } = require(mod);
(async () => {
  const producer = new Producer({
    endpoints: endpoint, topics: [topic], requestTimeout: 3000,
    sessionCredentials: { accessKey, accessSecret },
  });
  await producer.startup();
  const receipt = await producer.send({ topic, body: Buffer.from('signed by node') });
  console.log(receipt.messageId);
  await producer.shutdown();
})().catch((err) => { console.error(String(err)); process.exit(1); });
"""


def _require(why: str | None) -> None:
    why = available() or why
    if why is None:
        return
    if os.environ.get("CI", "").lower() == "true" and platform.machine() in ("x86_64", "AMD64"):
        pytest.fail(f"{why} (CI=true on x86_64: the 5.x client is required)")
    pytest.skip(why)


async def _run_client(argv: list[str], home: Path, timeout: float) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": str(home)},
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    logs = "\n".join(p.read_text(errors="replace")[-3000:] for p in home.rglob("*.log"))
    return proc.returncode or 0, out.decode(), err.decode() + logs


def test_official_python_client_signs_with_its_credentials(tmp_path: Path) -> None:
    _require(None if PYTHON5.is_file() else f"{PYTHON5} is missing (run `make clients`)")

    async def scenario() -> None:
        async with await _acl_broker(tmp_path) as broker:
            port = _port(broker)
            endpoint = f"127.0.0.1:{port}"
            await _create_topics(broker, ("", "AuthT"), ("ns1", "NsT"))
            runs = {}
            for name, topic, sk, namespace in (
                ("right", "AuthT", "12345678", ""),
                ("namespaced", "NsT", "12345678", "ns1"),
                ("wrong", "AuthT", "not-the-secret", ""),
            ):
                home = tmp_path / name
                home.mkdir()
                argv = [str(PYTHON5), "-c", PY_PRODUCER, endpoint, topic, "rocketmq2", sk, namespace]
                runs[name] = await _run_client(argv, home, 60)
            code, out, err = runs["right"]
            assert code == 0, err
            code_ns, out_ns, err_ns = runs["namespaced"]
            assert code_ns == 0, err_ns
            code, _, err = runs["wrong"]
            assert code != 0
            assert "signature mismatch for access key 'rocketmq2'" in err, err
            # read back over remoting once 127.0.0.1 is white-listed
            (tmp_path / "plain_acl.yml").write_text(WHITE)
            assert broker.controller.acl is not None and broker.controller.acl.maybe_reload(force=True)
            assert out.split()[0] in await stored_by_uniq_key(broker, "AuthT")
            assert out_ns.split()[0] in await stored_by_uniq_key(broker, "ns1%NsT")

    run(scenario())


def test_node_client_signs_with_uppercase_hex(tmp_path: Path) -> None:
    why = None
    if shutil.which("node") is None:
        why = "node is not installed"
    elif not (NODE5 / "package.json").is_file():
        why = f"rocketmq-client-nodejs is not installed in {NODE5} (run `make clients`)"
    _require(why)

    async def scenario() -> None:
        async with await _acl_broker(tmp_path) as broker:
            port = _port(broker)
            await _create_topics(broker, ("", "AuthT"))
            runs = {}
            for name, sk in (("right", "12345678"), ("wrong", "not-the-secret")):
                home = tmp_path / name
                home.mkdir()
                endpoint = f"127.0.0.1:{port}"
                argv = [
                    "timeout",
                    "60",
                    "node",
                    "-e",
                    NODE_PRODUCER,
                    str(NODE5),
                    endpoint,
                    "AuthT",
                    "rocketmq2",
                    sk,
                ]
                runs[name] = await _run_client(argv, home, 90)
            code, out, err = runs["right"]
            assert code == 0, err
            code, _, err = runs["wrong"]
            assert code != 0
            assert "signature mismatch" in err, err
            (tmp_path / "plain_acl.yml").write_text(WHITE)
            assert broker.controller.acl is not None and broker.controller.acl.maybe_reload(force=True)
            assert out.split()[0] in await stored_by_uniq_key(broker, "AuthT")

    run(scenario())
