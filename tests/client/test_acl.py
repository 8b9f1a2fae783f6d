"""ACL keys in rocketlite's own SDK and admin CLI, against one broker with `aclEnable=true`.

* the signature primitive (`rocketlite.protocol.wire.acl_signature`): what is signed, checked with the
  broker's validator;
* the SDK: `access_key=` / `secret_key=` on producers and consumers (or in `ClientConfig`) sign
  every request; a producer and a push consumer round-trip messages, a transaction producer's
  commit (a one-way END_TRANSACTION) goes through, the blocking wrappers pass the keys on; a wrong
  secret, no keys or a refused topic raise `NoPermissionError` (16) with the broker's remark;
* the admin CLI: `--access-key` / `--secret-key`, else `$ROCKETMQ_HOME/conf/tools.yml`; without
  keys a broker verb fails with NO_PERMISSION and a hint on stderr, exit code 2.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketlite.admin.client import NO_KEYS_HINT
from rocketlite.admin.credentials import resolve_credentials
from rocketlite.broker.acl import AclValidator, parse_acl_config
from rocketlite.cli import main
from rocketlite.client import (
    AsyncProducer,
    AsyncPullConsumer,
    AsyncPushConsumer,
    AsyncTransactionProducer,
    ClientConfig,
    ClientStateError,
    ConsumeConcurrentlyContext,
    ConsumeFromWhere,
    ConsumeStatus,
    LocalTransactionState,
    Message,
    MessageExt,
    NoPermissionError,
    Producer,
)
from rocketlite.client.instance import ClientInstance
from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.wire.acl_signature import (
    ACCESS_KEY,
    SECURITY_TOKEN,
    SIGNATURE,
    UNIQUE_KEY_QUERY,
    SessionCredentials,
    calc_signature,
    sign,
    signing_content,
)
from rocketlite.protocol.wire.command import make_request
from tests.support.aio import run
from tests.support.names import unique
from tests.support.sdk import Collector, wait_messages
from tests.support.topics import create_topic

pytestmark = pytest.mark.timeout(120)

USER = ("aclClientUser", "aclClientSecret")  # not admin; any topic but T_FORBIDDEN, groups SUB
ADMIN = ("aclToolsAdmin", "aclToolsSecret")  # admin, no perms listed: everything
FORBIDDEN = "T_FORBIDDEN"
CLUSTER = "DefaultCluster"
NO_PERMISSION = 16

ACL_YML = f"""\
accounts:
  - accessKey: {USER[0]}
    secretKey: {USER[1]}
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    topicPerms: ["{FORBIDDEN}=DENY"]
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
"""


@pytest.fixture(scope="module")
def sdk_acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    root = tmp_path_factory.mktemp("client_acl")
    acl_file = root / "plain_acl.yml"
    acl_file.write_text(ACL_YML, encoding="utf-8")
    with embedded(root / "store", acl_enable=True, acl_config_file=str(acl_file)) as c:
        yield c


@pytest.fixture(autouse=True)
def no_rocketmq_home(monkeypatch: pytest.MonkeyPatch) -> None:
    """No tools.yml of the machine running the tests."""
    monkeypatch.delenv("ROCKETMQ_HOME", raising=False)


def new_topic(sdk_acl_cluster: EmbeddedCluster, prefix: str) -> str:
    topic = unique(prefix)
    create_topic(sdk_acl_cluster, topic)
    return topic


# -- the signature -----------------------------------------------------------------------------------
def test_sign_covers_what_the_broker_checks() -> None:
    ext = {"topic": "TopicTest", UNIQUE_KEY_QUERY: "true", SIGNATURE: "stale"}
    signed = sign(ext, b"BODY", "akakak", "sksksk", "tok")
    assert signed[ACCESS_KEY] == "akakak" and signed[SECURITY_TOKEN] == "tok"
    # Java order: AccessKey < SecurityToken < _UNIQUE_KEY_QUERY (left out) < topic; then the body.
    content = b"akakak" + b"tok" + b"TopicTest" + b"BODY"
    assert signing_content(signed, b"BODY", exclude=(SIGNATURE, UNIQUE_KEY_QUERY)) == content
    assert signed[SIGNATURE] == calc_signature(content, "sksksk")
    assert sign(signed, b"BODY", "akakak", "sksksk", "tok") == signed  # idempotent
    assert ext[SIGNATURE] == "stale"  # the caller's dict is left alone

    config = parse_acl_config({"accounts": [{"accessKey": "akakak", "secretKey": "sksksk", "admin": True}]})
    validator = AclValidator(config=config)
    request = make_request(RequestCode.QUERY_MESSAGE, ext, b"BODY")
    SessionCredentials("akakak", "sksksk", "tok").sign_request(request)
    validator.validate("10.0.0.1:1234", request)  # passes
    assert "sksksk" not in repr(SessionCredentials("akakak", "sksksk", "tok"))


def test_client_config_keys() -> None:
    config = ClientConfig("127.0.0.1:9876", access_key=USER[0], secret_key=USER[1])
    assert config.credentials == SessionCredentials(*USER)
    assert USER[1] not in repr(config)
    assert ClientConfig("127.0.0.1:9876").credentials is None
    with pytest.raises(ClientStateError, match="together"):
        ClientConfig("127.0.0.1:9876", access_key=USER[0])
    with pytest.raises(ClientStateError, match="security_token"):
        ClientConfig("127.0.0.1:9876", security_token="tok")
    producer = AsyncProducer("pg", "127.0.0.1:9876", access_key=USER[0], secret_key=USER[1])
    assert producer.config.credentials == SessionCredentials(*USER)
    with pytest.raises(ClientStateError, match="not both"):
        AsyncPullConsumer("cg", config=config, access_key=USER[0], secret_key=USER[1])


# -- the SDK -----------------------------------------------------------------------------------------
def test_producer_and_push_consumer_round_trip_with_keys(sdk_acl_cluster: EmbeddedCluster) -> None:
    topic, group = new_topic(sdk_acl_cluster, "AclRoundTrip"), unique("G_ACL")
    bodies = {f"acl-{i}".encode() for i in range(8)}

    async def scenario() -> None:
        async with AsyncProducer(
            unique("PG_ACL"), sdk_acl_cluster.namesrv_addr, instance_name="acl-sdk-producer",
            access_key=USER[0], secret_key=USER[1],
        ) as producer:  # fmt: skip
            for body in sorted(bodies):
                await producer.send(Message(topic, body))
        got = Collector()

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeStatus:
            await got.add(*msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = AsyncPushConsumer(
            group, sdk_acl_cluster.namesrv_addr, instance_name="acl-sdk-consumer",
            access_key=USER[0], secret_key=USER[1],
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )  # fmt: skip
        consumer.subscribe(topic, "*")
        consumer.register_message_listener(listener)
        async with consumer:
            items = await got.wait_for(lambda items: {m.body for m in items} >= bodies)
        assert {m.body for m in items} == bodies

    run(scenario())
    # close() committed the consumed offsets (UPDATE_CONSUMER_OFFSET, signed, needs SUB on both).
    assert sum(sdk_acl_cluster.broker.offsets.query_all(group, topic).values()) == len(bodies)


def test_transaction_producer_and_blocking_wrappers_pass_keys(sdk_acl_cluster: EmbeddedCluster) -> None:
    topic = new_topic(sdk_acl_cluster, "AclTx")

    class Commit:
        def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE

        def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE

    async def transaction() -> list[bytes]:
        producer = AsyncTransactionProducer(
            unique("PG_TX"), sdk_acl_cluster.namesrv_addr, listener=Commit(), instance_name="acl-sdk-tx",
            access_key=USER[0], secret_key=USER[1],
        )  # fmt: skip
        await producer.start()
        try:
            result = await producer.send_message_in_transaction(Message(topic, b"tx-commit"))
        finally:
            await producer.close()
        assert result.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
        async with AsyncPullConsumer(
            unique("G_TX"), sdk_acl_cluster.namesrv_addr, instance_name="acl-sdk-tx-reader",
            access_key=USER[0], secret_key=USER[1],
        ) as reader:  # fmt: skip
            return [m.body for m in await wait_messages(reader, topic, 2)]

    with Producer(
        unique("PG_SYNC"), sdk_acl_cluster.namesrv_addr, instance_name="acl-sdk-sync",
        access_key=USER[0], secret_key=USER[1],
    ) as producer:  # fmt: skip
        producer.send(Message(topic, b"blocking"))
    # The committed half message became visible: the one-way END_TRANSACTION was signed too.
    assert sorted(run(transaction())) == [b"blocking", b"tx-commit"]


def no_permission(exc: NoPermissionError, remark: str) -> None:
    assert exc.response_code == NO_PERMISSION
    assert str(exc) == f"NO_PERMISSION ({NO_PERMISSION}): {remark}"


@pytest.mark.parametrize(
    ("keys", "remark"),
    [
        ((USER[0], "wrongSecret"), f"Check signature failed for accessKey={USER[0]}"),
        (None, "No accessKey is configured"),
        (("nobodyUser", USER[1]), "No acl config for nobodyUser"),
    ],
    ids=["wrong-secret", "no-keys", "unknown-key"],
)
def test_refused_keys_raise_no_permission(
    sdk_acl_cluster: EmbeddedCluster, keys: tuple[str, str] | None, remark: str
) -> None:
    topic = new_topic(sdk_acl_cluster, "AclRefused")
    ak, sk = keys if keys is not None else (None, None)

    async def scenario() -> None:
        async with AsyncProducer(
            unique("PG_BAD"), sdk_acl_cluster.namesrv_addr, instance_name=unique("acl-bad"),
            access_key=ak, secret_key=sk, retry_times_when_send_failed=0,
        ) as producer:  # fmt: skip
            with pytest.raises(NoPermissionError) as sent:
                await producer.send(Message(topic, b"refused"))
            no_permission(sent.value, remark)
        async with AsyncPullConsumer(
            unique("G_BAD"), sdk_acl_cluster.namesrv_addr, instance_name=unique("acl-bad-puller"),
            access_key=ak, secret_key=sk, heartbeat=False, auto_commit=False,
        ) as consumer:  # fmt: skip
            queue = (await consumer.fetch_queues(topic))[0]  # name servers do not check keys
            with pytest.raises(NoPermissionError) as pulled:
                await consumer.fetch(queue, 0, 1)
            no_permission(pulled.value, remark)

    run(scenario())


def test_topic_permission_refusal_names_the_topic(sdk_acl_cluster: EmbeddedCluster) -> None:
    create_topic(sdk_acl_cluster, FORBIDDEN)

    async def scenario() -> None:
        async with AsyncProducer(
            unique("PG_DENY"), sdk_acl_cluster.namesrv_addr, instance_name="acl-deny",
            access_key=USER[0], secret_key=USER[1], retry_times_when_send_failed=0,
        ) as producer:  # fmt: skip
            with pytest.raises(NoPermissionError) as info:
                await producer.send(Message(FORBIDDEN, b"x"))
        no_permission(info.value, f"No permission for topic:{FORBIDDEN}")

    run(scenario())


def test_one_instance_one_set_of_keys(sdk_acl_cluster: EmbeddedCluster) -> None:
    async def scenario() -> None:
        first = AsyncProducer(unique("PG_A"), sdk_acl_cluster.namesrv_addr, instance_name="acl-shared",
                              access_key=USER[0], secret_key=USER[1])  # fmt: skip
        other = AsyncProducer(unique("PG_B"), sdk_acl_cluster.namesrv_addr, instance_name="acl-shared",
                              access_key=ADMIN[0], secret_key=ADMIN[1])  # fmt: skip
        async with first:
            with pytest.raises(ClientStateError, match="another instance_name"):
                await other.start()
            instance = await ClientInstance.acquire(first.config)  # the same keys share it
            await instance.release()

    run(scenario())


# -- the admin CLI -----------------------------------------------------------------------------------
def admin(
    sdk_acl_cluster: EmbeddedCluster, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(["--log-level", "ERROR", "admin", *args, "-n", sdk_acl_cluster.namesrv_addr])
    out, err = capsys.readouterr()
    return rc, out, err


def admin_json(sdk_acl_cluster: EmbeddedCluster, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    rc, out, err = admin(sdk_acl_cluster, capsys, *args, "--json")
    assert rc == 0, err
    return json.loads(out)


ADMIN_FLAGS = ("--access-key", ADMIN[0], "--secret-key", ADMIN[1])


def test_admin_cli_with_keys(sdk_acl_cluster: EmbeddedCluster, capsys: pytest.CaptureFixture[str]) -> None:
    topic = unique("AclAdminTopic")
    created = admin_json(sdk_acl_cluster, capsys, "updateTopic", "-c", CLUSTER, "-t", topic, "-r", "2",
                         "-w", "2", *ADMIN_FLAGS)  # fmt: skip
    assert created["routeReady"] is True
    assert sdk_acl_cluster.broker.topics.select(topic) is not None
    assert topic in admin_json(sdk_acl_cluster, capsys, "topicList", *ADMIN_FLAGS)["topics"]
    sent = admin_json(sdk_acl_cluster, capsys, "sendMessage", "-t", topic, "-p", "signed", *ADMIN_FLAGS)
    assert sent["sendStatus"] == "SEND_OK"
    assert sdk_acl_cluster.broker.store.wait_dispatched(5.0)
    # A unique-key query carries _UNIQUE_KEY_QUERY, which the signature leaves out on both sides.
    found = admin_json(
        sdk_acl_cluster, capsys, "queryMsgById", "-i", sent["msgId"], "-t", topic, *ADMIN_FLAGS
    )
    assert [m["body"] for m in found["messages"]] == ["signed"]


def test_admin_cli_refused(sdk_acl_cluster: EmbeddedCluster, capsys: pytest.CaptureFixture[str]) -> None:
    topic = unique("AclAdminRefused")
    update = ("updateTopic", "-c", CLUSTER, "-t", topic)
    rc, out, err = admin(sdk_acl_cluster, capsys, *update)
    assert (rc, out) == (2, "")
    assert err.strip() == (
        f"rocketlite: error: No accessKey is configured (NO_PERMISSION, code {NO_PERMISSION}); {NO_KEYS_HINT}"
    )
    rc, _, err = admin(sdk_acl_cluster, capsys, *update, "--access-key", USER[0], "--secret-key", USER[1])
    assert rc == 2 and err.strip() == (
        "rocketlite: error: Need admin permission for request code=17,"
        f" but accessKey={USER[0]} is not (NO_PERMISSION, code {NO_PERMISSION})"
    )
    rc, _, err = admin(
        sdk_acl_cluster, capsys, *update, "--access-key", ADMIN[0], "--secret-key", "wrongSecret"
    )
    assert rc == 2 and f"Check signature failed for accessKey={ADMIN[0]}" in err
    assert "(NO_PERMISSION, code 16)" in err
    rc, _, err = admin(sdk_acl_cluster, capsys, *update, "--access-key", ADMIN[0])
    assert rc == 2 and "--access-key and --secret-key must be given together" in err
    assert sdk_acl_cluster.broker.topics.select(topic) is None
    # The name server does not check keys (RocketMQ 4.x): topicList works without them.
    assert "TBW102" in admin_json(sdk_acl_cluster, capsys, "topicList")["topics"]


def write_tools_yml(home: Path, text: str) -> None:
    (home / "conf").mkdir(parents=True, exist_ok=True)
    (home / "conf" / "tools.yml").write_text(text, encoding="utf-8")


def test_admin_cli_reads_tools_yml(
    sdk_acl_cluster: EmbeddedCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path))
    write_tools_yml(tmp_path, f"accessKey: {ADMIN[0]}\nsecretKey: {ADMIN[1]}\n")
    topic = unique("AclToolsYml")
    assert (
        admin_json(sdk_acl_cluster, capsys, "updateTopic", "-c", CLUSTER, "-t", topic)["routeReady"] is True
    )
    # The flags win over tools.yml.
    write_tools_yml(tmp_path, f"accessKey: {ADMIN[0]}\nsecretKey: wrongSecret\n")
    rc, _, err = admin(sdk_acl_cluster, capsys, "updateTopic", "-c", CLUSTER, "-t", topic)
    assert rc == 2 and "Check signature failed" in err
    assert admin_json(sdk_acl_cluster, capsys, "updateTopic", "-c", CLUSTER, "-t", topic, *ADMIN_FLAGS)[
        "routeReady"
    ]
    write_tools_yml(tmp_path, "accessKey: [unclosed\n")
    rc, _, err = admin(sdk_acl_cluster, capsys, "topicList")
    assert rc == 2 and "tools.yml is not valid YAML" in err


def test_resolve_credentials(tmp_path: Path) -> None:
    env = {"ROCKETMQ_HOME": str(tmp_path)}
    assert resolve_credentials(None, None, env={}) is None
    assert resolve_credentials(None, None, env=env) is None  # no tools.yml
    write_tools_yml(tmp_path, "accessKey: toolsUser\nsecretKey: 12345678\n")
    assert resolve_credentials(None, None, env=env) == SessionCredentials("toolsUser", "12345678")
    flags = SessionCredentials("flagUser", "flagSecret")
    assert resolve_credentials("flagUser", "flagSecret", env=env) == flags
    write_tools_yml(tmp_path, "accessKey: toolsUser\nsecretKey: ''\n")  # blank: no ACL, as mqadmin
    assert resolve_credentials(None, None, env=env) is None
    write_tools_yml(tmp_path, "")
    assert resolve_credentials(None, None, env=env) is None


def test_sdk_requests_are_signed_on_the_wire(sdk_acl_cluster: EmbeddedCluster) -> None:
    """What the instance sends carries AccessKey and a Signature the broker recomputes."""
    seen: list[dict[str, str]] = []
    validator = sdk_acl_cluster.broker.acl
    assert isinstance(validator, AclValidator)

    async def scenario() -> None:
        config = ClientConfig(sdk_acl_cluster.namesrv_addr, instance_name="acl-wire", access_key=USER[0],
                              secret_key=USER[1], security_token="tok")  # fmt: skip
        instance = await ClientInstance.acquire(config)
        try:
            cmd = instance.command(RequestCode.GET_BROKER_RUNTIME_INFO)
            response = await instance.invoke(sdk_acl_cluster.broker_addr, cmd)
            seen.append(cmd.ext_fields)
            assert response.code == 0, response
        finally:
            await instance.release()

    asyncio.run(scenario())
    (ext,) = seen
    assert ext[ACCESS_KEY] == USER[0] and ext[SECURITY_TOKEN] == "tok"
    assert ext[SIGNATURE] == calc_signature(signing_content(ext, None), USER[1])
