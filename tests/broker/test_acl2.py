"""ACL 2.0 (broker/auth/) on a real broker over 127.0.0.1, with raw signed requests: the AUTH_*
codes 3001-3010 (bodies and answers as RocketMQ 5.3's), what is written to config/auth.json and
read back after a restart, every refusal with its code and remark, the first super user
(`initAuthenticationUser`), the migration of plain_acl.yml, and the broker keys. The matrix of
users x resources x actions x ports with real clients and mqadmin is tests/peers/mqadmin/test_acl2.py;
the model alone (which entry decides, what each request needs) is test_acl2_model.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rocketlite.broker.config import BrokerConfig, broker_config_keys
from rocketlite.config import build_config
from rocketlite.protocol.bodies.auth import (
    AclInfo,
    PolicyEntryInfo,
    PolicyInfo,
    UserInfo,
    acls_from_bytes,
    users_from_bytes,
)
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.errors import ConfigError
from rocketlite.protocol.wire.acl_signature import sign
from rocketlite.protocol.wire.auth import AuthRequestCode as A
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import CreateTopicRequestHeader
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test

ADMIN = ("rocketmq", "12345678")
INIT_USER = json.dumps({"username": ADMIN[0], "password": ADMIN[1]})
NO_PERMISSION, SYSTEM_ERROR, INVALID_PARAMETER = 16, 1, 29


async def call(
    broker: BrokerUnderTest,
    code: int,
    ext: dict[str, str] | None = None,
    body: bytes | None = None,
    keys: tuple[str, str] | None = ADMIN,
) -> RemotingCommand:
    """One request, signed as Java's AclClientRPCHook signs it with `keys` (unsigned: None)."""
    fields = dict(ext or {})
    if keys is not None:
        fields = sign(fields, body, *keys)
    return await broker.client.invoke(broker.addr, make_request(code, fields, body), 5.0)


def ok(response: RemotingCommand) -> RemotingCommand:
    assert response.code == ResponseCode.SUCCESS, (response.code, response.remark)
    return response


def refused(response: RemotingCommand, code: int, remark: str) -> None:
    assert (response.code, response.remark) == (code, remark)


def acl_body(
    subject: str, *entries: tuple[str, list[str], str, list[str] | None], policy: str | None = None
) -> bytes:
    infos = tuple(PolicyEntryInfo(r, tuple(a), tuple(ips) if ips else None, d) for r, a, d, ips in entries)
    return AclInfo(subject, (PolicyInfo(policy, infos),)).to_bytes()


def auth_broker(root: Path, **overrides: Any) -> Any:
    settings = {
        "authentication_enabled": True,
        "authorization_enabled": True,
        "init_authentication_user": INIT_USER,
    }
    return broker_under_test(root, **{**settings, **overrides})


def on_disk(root: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / "config" / "auth.json").read_text())
    return data


# -- the admin codes ------------------------------------------------------------------------------


def test_users_and_acls_are_managed_stored_and_survive_a_restart(tmp_path: Path) -> None:
    alice = {"username": "alice"}

    async def manage() -> None:
        async with auth_broker(tmp_path) as broker:
            created = UserInfo(None, "alice-secret", "Normal").to_bytes()
            ok(await call(broker, A.AUTH_CREATE_USER, alice, created))
            refused(
                await call(broker, A.AUTH_CREATE_USER, alice, created), NO_PERMISSION, "The user is existed"
            )
            got = ok(await call(broker, A.AUTH_GET_USER, alice))
            assert json.loads(got.body or b"") == {
                "password": "alice-secret",
                "userStatus": "enable",
                "userType": "Normal",
                "username": "alice",
            }
            assert ok(await call(broker, A.AUTH_GET_USER, {"username": "nobody"})).body is None
            ok(await call(broker, A.AUTH_UPDATE_USER, alice, UserInfo(user_status="disable").to_bytes()))
            listed = users_from_bytes(ok(await call(broker, A.AUTH_LIST_USER, {"filter": "ali"})).body or b"")
            assert [(u.username, u.password, u.user_status) for u in listed] == [
                ("alice", "alice-secret", "disable")
            ]
            names = users_from_bytes(ok(await call(broker, A.AUTH_LIST_USER)).body or b"")
            assert sorted(u.username or "" for u in names) == ["alice", "rocketmq"]
            ok(await call(broker, A.AUTH_UPDATE_USER, alice, UserInfo(user_status="enable").to_bytes()))

            subject = {"subject": "User:alice"}
            body = acl_body(
                "User:alice",
                ("Topic:orders", ["Pub", "Sub"], "Allow", ["10.0.0.0/8"]),
                ("Group:app-*", ["Sub"], "Allow", None),
            )
            ok(await call(broker, A.AUTH_CREATE_ACL, subject, body))
            # an update merges: the entry of Topic:orders is replaced, Topic:audit added
            body = acl_body(
                "User:alice", ("Topic:orders", ["Pub"], "Deny", None), ("Topic:audit", ["Sub"], "Allow", None)
            )
            ok(await call(broker, A.AUTH_UPDATE_ACL, subject, body))
            got = ok(await call(broker, A.AUTH_GET_ACL, subject))
            assert json.loads(got.body or b"") == {
                "policies": [
                    {
                        "entries": [
                            {"actions": ["Pub"], "decision": "Deny", "resource": "Topic:orders"},
                            {"actions": ["Sub"], "decision": "Allow", "resource": "Group:app-*"},
                            {"actions": ["Sub"], "decision": "Allow", "resource": "Topic:audit"},
                        ],
                        "policyType": "Custom",
                    }
                ],
                "subject": "User:alice",
            }
            ok(await call(broker, A.AUTH_DELETE_ACL, {"subject": "User:alice", "resource": "Topic:audit"}))
            acls = acls_from_bytes(
                ok(await call(broker, A.AUTH_LIST_ACL, {"resourceFilter": "Group"})).body or b""
            )
            assert [(a.subject, [e.resource for p in a.policies for e in p.entries]) for a in acls] == [
                ("User:alice", ["Group:app-*"])
            ]
            assert ok(await call(broker, A.AUTH_LIST_ACL, {"subjectFilter": "bob"})).body is None

        stored = on_disk(tmp_path)
        assert [u["username"] for u in stored["users"]] == ["alice", "rocketmq"]
        assert stored["users"][1]["userType"] == "Super"
        assert [a["subject"] for a in stored["acls"]] == ["User:alice"]

        async with auth_broker(tmp_path) as broker:  # the same users and ACLs after a restart
            got = ok(await call(broker, A.AUTH_GET_ACL, {"subject": "User:alice"}))
            assert [e.resource for p in AclInfo.from_json(got.body or b"").policies for e in p.entries] == [
                "Topic:orders",
                "Group:app-*",
            ]
            ok(await call(broker, A.AUTH_DELETE_USER, alice))  # takes its ACL with it
            assert ok(await call(broker, A.AUTH_GET_USER, alice)).body is None
            assert ok(await call(broker, A.AUTH_LIST_ACL)).body is None
            ok(await call(broker, A.AUTH_DELETE_USER, alice))  # a missing user: no error, as Java
        assert on_disk(tmp_path)["acls"] == []

    run(manage())


def test_bad_admin_requests_are_refused_naming_the_cause(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with auth_broker(tmp_path) as broker:
            bob = {"username": "bob"}
            ok(await call(broker, A.AUTH_CREATE_USER, bob, UserInfo(password="bob-secret").to_bytes()))
            refused(
                await call(broker, A.AUTH_CREATE_USER, {}, UserInfo(password="x").to_bytes()),
                INVALID_PARAMETER,
                "The username is blank",
            )
            refused(
                await call(broker, A.AUTH_CREATE_USER, {"username": "carol"}, UserInfo().to_bytes()),
                NO_PERMISSION,
                "password can not be blank",
            )
            refused(
                await call(
                    broker, A.AUTH_UPDATE_USER, {"username": "carol"}, UserInfo(password="p").to_bytes()
                ),
                NO_PERMISSION,
                "The user is not exist",
            )
            refused(await call(broker, A.AUTH_GET_USER, {}), INVALID_PARAMETER, "The username is blank")
            subject = {"subject": "User:bob"}
            cases = {
                "The actions can not be Any.": ("Topic:t", ["Any"], "Allow", None),
                "The actions is empty.": ("Topic:t", ["Fly"], "Allow", None),
                "The source ip is invalid.": ("Topic:t", ["Pub"], "Allow", ["10.0.0.300"]),
                "The decision is null or illegal.": ("Topic:t", ["Pub"], "Maybe", None),
                "The resource is null.": ("Queue:t", ["Pub"], "Allow", None),
            }
            for remark, entry in cases.items():
                refused(
                    await call(broker, A.AUTH_CREATE_ACL, subject, acl_body("User:bob", entry)),
                    NO_PERMISSION,
                    remark,
                )
            refused(
                await call(
                    broker,
                    A.AUTH_CREATE_ACL,
                    {"subject": "User:zed"},
                    acl_body("User:zed", ("Topic:t", ["Pub"], "Allow", None)),
                ),
                NO_PERMISSION,
                "The subject of User:zed is not exist.",
            )
            refused(
                await call(broker, A.AUTH_CREATE_ACL, subject, b"{}"),
                NO_PERMISSION,
                "The body of acl is null",
            )
            refused(
                await call(broker, A.AUTH_CREATE_ACL, subject, b"{not json"),
                SYSTEM_ERROR,
                "bad request body: " + _json_error(b"{not json"),
            )
            refused(await call(broker, A.AUTH_DELETE_ACL, subject), NO_PERMISSION, "The acl is not exist.")
            assert on_disk(tmp_path)["acls"] == []  # nothing half-written

            # a normal user may manage only with Cluster:<cluster> Update, and never a super user
            body = UserInfo(password="s3cret!!", user_type="Super").to_bytes()
            refused(
                await call(
                    broker, A.AUTH_CREATE_USER, {"username": "mallory"}, body, keys=("bob", "bob-secret")
                ),
                NO_PERMISSION,
                "User:bob has no permission to access Cluster:DefaultCluster from 127.0.0.1,"
                " no matched policies.",
            )
            grant = acl_body("User:bob", ("Cluster:DefaultCluster", ["Update", "Get"], "Allow", None))
            ok(await call(broker, A.AUTH_CREATE_ACL, subject, grant))
            refused(
                await call(
                    broker, A.AUTH_CREATE_USER, {"username": "mallory"}, body, keys=("bob", "bob-secret")
                ),
                SYSTEM_ERROR,
                "The super user can only be create by super user",
            )
            refused(
                await call(
                    broker,
                    A.AUTH_UPDATE_USER,
                    {"username": ADMIN[0]},
                    UserInfo(password="x").to_bytes(),
                    keys=("bob", "bob-secret"),
                ),
                NO_PERMISSION,
                "The super user can only be update by super user",
            )
            refused(
                await call(broker, A.AUTH_DELETE_USER, {"username": ADMIN[0]}, keys=("bob", "bob-secret")),
                NO_PERMISSION,
                "The super user can only be update by super user",
            )
            normal = UserInfo(password="dave-secret").to_bytes()
            ok(
                await call(
                    broker, A.AUTH_CREATE_USER, {"username": "dave"}, normal, keys=("bob", "bob-secret")
                )
            )

    run(scenario())


def _json_error(body: bytes) -> str:
    try:
        AclInfo.from_json(body)
    except Exception as exc:
        return str(exc)
    raise AssertionError("parsed")


# -- authentication and authorization --------------------------------------------------------------


def test_every_request_is_authenticated_then_authorized(tmp_path: Path) -> None:
    topic_ext = {"topic": "orders"}

    async def scenario() -> None:
        async with auth_broker(tmp_path) as broker:
            for name, password in (("alice", "alice-secret"), ("off", "off-secret")):
                ok(
                    await call(
                        broker, A.AUTH_CREATE_USER, {"username": name}, UserInfo(password=password).to_bytes()
                    )
                )
            ok(
                await call(
                    broker,
                    A.AUTH_UPDATE_USER,
                    {"username": "off"},
                    UserInfo(user_status="disable").to_bytes(),
                )
            )
            create = CreateTopicRequestHeader(
                topic="orders",
                default_topic="TBW102",
                read_queue_nums=1,
                write_queue_nums=1,
                perm=6,
                topic_filter_type="SINGLE_TAG",
                order=False,
            )
            ok(await call(broker, RequestCode.UPDATE_AND_CREATE_TOPIC, create.to_ext()))
            max_offset = RequestCode.GET_MAX_OFFSET
            refused(
                await call(broker, max_offset, {**topic_ext, "queueId": "0"}, keys=None),
                NO_PERMISSION,
                "username cannot be null.",
            )
            refused(
                await call(broker, max_offset, {**topic_ext, "queueId": "0"}, keys=("zed", "x")),
                NO_PERMISSION,
                "User:zed is not found.",
            )
            refused(
                await call(broker, max_offset, {**topic_ext, "queueId": "0"}, keys=("alice", "wrong")),
                NO_PERMISSION,
                "check signature failed.",
            )
            refused(
                await call(broker, max_offset, {**topic_ext, "queueId": "0"}, keys=("off", "off-secret")),
                NO_PERMISSION,
                "User:off is disabled.",
            )
            no_match = (
                "User:alice has no permission to access Topic:orders from 127.0.0.1, no matched policies."
            )
            refused(
                await call(broker, max_offset, {**topic_ext, "queueId": "0"}, keys=("alice", "alice-secret")),
                NO_PERMISSION,
                no_match,
            )
            grant = acl_body("User:alice", ("Topic:ord*", ["Get"], "Allow", ["127.0.0.0/8"]))
            ok(await call(broker, A.AUTH_CREATE_ACL, {"subject": "User:alice"}, grant))
            ok(await call(broker, max_offset, {**topic_ext, "queueId": "0"}, keys=("alice", "alice-secret")))
            # a literal Deny is more specific than the prefix
            deny = acl_body("User:alice", ("Topic:orders", ["All"], "Deny", None))
            ok(await call(broker, A.AUTH_UPDATE_ACL, {"subject": "User:alice"}, deny))
            refused(
                await call(broker, max_offset, {**topic_ext, "queueId": "0"}, keys=("alice", "alice-secret")),
                NO_PERMISSION,
                "User:alice has no permission to access Topic:orders from 127.0.0.1, the decision is deny.",
            )
            # a code without an annotated header needs authentication only, as in RocketMQ 5.3
            ok(await call(broker, RequestCode.GET_BROKER_RUNTIME_INFO, {}, keys=("alice", "alice-secret")))
            refused(
                await call(broker, RequestCode.GET_BROKER_RUNTIME_INFO, {}, keys=None),
                NO_PERMISSION,
                "username cannot be null.",
            )

    run(scenario())


def test_white_lists_skip_a_check_by_request_code(tmp_path: Path) -> None:
    async def scenario() -> None:
        code = str(int(RequestCode.GET_BROKER_RUNTIME_INFO))
        async with auth_broker(tmp_path, authentication_whitelist=f" {code} ,999") as broker:
            ok(await call(broker, RequestCode.GET_BROKER_RUNTIME_INFO, {}, keys=None))
            refused(
                await call(broker, RequestCode.GET_BROKER_CONFIG, {}, keys=None),
                NO_PERMISSION,
                "username cannot be null.",
            )

    run(scenario())


def test_admin_codes_are_served_with_checks_off(tmp_path: Path) -> None:
    """As in Java, the AUTH_* codes are served whatever the switches (the dashboard prepares
    users before authentication is turned on); unsigned requests carry no user to check."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as broker:
            ok(
                await call(
                    broker,
                    A.AUTH_CREATE_USER,
                    {"username": "x"},
                    UserInfo(password="p").to_bytes(),
                    keys=None,
                )
            )
            assert ok(await call(broker, A.AUTH_GET_USER, {"username": "x"}, keys=None)).body is not None

    run(scenario())


# -- migration and configuration -------------------------------------------------------------------

PLAIN_ACL = """\
globalWhiteRemoteAddresses: [10.10.103.*]
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    whiteRemoteAddress: 192.168.0.*
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
    groupPerms: [groupA=DENY, groupB=PUB|SUB]
  - accessKey: rocketmq2
    secretKey: "12345678"
    admin: true
"""


def test_plain_acl_yml_is_migrated_on_start_once(tmp_path: Path) -> None:
    plain = tmp_path / "plain_acl.yml"
    plain.write_text(PLAIN_ACL)
    settings: dict[str, Any] = {
        "migrate_auth_from_v1_enabled": True,
        "acl_config_file": str(plain),
        "authentication_enabled": True,
        "authorization_enabled": True,
    }

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store", **settings) as broker:
            user = ok(
                await call(broker, A.AUTH_GET_USER, {"username": "RocketMQ"}, keys=("rocketmq2", "12345678"))
            )
            assert json.loads(user.body or b"")["userType"] == "Normal"
            acl = ok(
                await call(
                    broker, A.AUTH_GET_ACL, {"subject": "User:RocketMQ"}, keys=("rocketmq2", "12345678")
                )
            )
            policies = {
                p.policy_type: [(e.resource, e.actions, e.decision) for e in p.entries]
                for p in AclInfo.from_json(acl.body or b"").policies
            }
            assert policies == {
                "Custom": [
                    ("Topic:topicA", ("All",), "Deny"),
                    ("Topic:topicB", ("Pub", "Sub"), "Allow"),
                    ("Topic:topicC", ("Sub",), "Allow"),
                    ("Group:groupA", ("All",), "Deny"),
                    ("Group:groupB", ("Pub", "Sub"), "Allow"),
                ],
                "Default": [("Topic:*", ("All",), "Deny"), ("Group:*", ("Sub",), "Allow")],
            }
            admin = json.loads(
                ok(
                    await call(
                        broker, A.AUTH_GET_USER, {"username": "rocketmq2"}, keys=("rocketmq2", "12345678")
                    )
                ).body
                or b""
            )
            assert admin["userType"] == "Super"
            assert (
                ok(
                    await call(
                        broker, A.AUTH_GET_ACL, {"subject": "User:rocketmq2"}, keys=("rocketmq2", "12345678")
                    )
                ).body
                is None
            )
            # a migrated user, changed since, is not migrated again
            ok(
                await call(
                    broker,
                    A.AUTH_UPDATE_USER,
                    {"username": "RocketMQ"},
                    UserInfo(password="changed").to_bytes(),
                    keys=("rocketmq2", "12345678"),
                )
            )
        async with broker_under_test(tmp_path / "store", **settings):
            pass
        users = {u["username"]: u for u in on_disk(tmp_path / "store")["users"]}
        assert users["RocketMQ"]["password"] == "changed"

    run(scenario())


def test_broker_keys_are_typed_and_checked() -> None:
    assert {
        "authenticationEnabled",
        "authorizationEnabled",
        "initAuthenticationUser",
        "migrateAuthFromV1Enabled",
        "authenticationWhitelist",
        "authorizationWhitelist",
        "innerClientAuthenticationCredentials",
    } <= broker_config_keys()
    config = build_config(
        BrokerConfig, {"authenticationEnabled": "true", "initAuthenticationUser": INIT_USER}
    )
    assert config.authentication_enabled and not config.authorization_enabled
    with pytest.raises(ConfigError, match="config key authorizationEnabled: expected true or false"):
        build_config(BrokerConfig, {"authorizationEnabled": "yes"})
    with pytest.raises(ConfigError, match="config key initAuthenticationUser: expected"):
        build_config(BrokerConfig, {"initAuthenticationUser": '{"username": "x"}'})
    with pytest.raises(ConfigError, match="config key innerClientAuthenticationCredentials: not JSON"):
        build_config(BrokerConfig, {"innerClientAuthenticationCredentials": "ak:sk"})
    with pytest.raises(ConfigError, match=r"aclEnable .* exclude each other"):
        build_config(BrokerConfig, {"aclEnable": "true", "authenticationEnabled": "true"})


def test_an_unreadable_auth_file_stops_the_start(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "auth.json").write_text('{"users": [')

    async def start() -> None:
        async with broker_under_test(tmp_path):
            pass

    with pytest.raises(ConfigError, match=r"cannot read the ACL 2\.0 users and ACLs in .*auth\.json"):
        run(start())
    assert (tmp_path / "config" / "auth.json").read_text() == '{"users": ['
