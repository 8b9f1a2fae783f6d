"""The dashboard's ACL page (ACL 2.0) against rocketlite: its service calls, one by one.

rocketmq-dashboard's 2.1 line serves the ACL page from `AclServiceImpl`, which works per broker
address through `MQAdminExt`: listUser / listAcl to show users and ACLs, createUser / updateUser /
deleteUser, and createAcl / updateAcl / deleteAcl, for every address of the brokers of the chosen
cluster (or of the chosen broker). The driver (`AclPage.java`) makes those calls as the service
makes them, with the dashboard's admin client signing as a super user (the dashboard's
`rocketmq.config.accessKey` / `secretKey`).

One embedded cluster with `authenticationEnabled`, `authorizationEnabled` and the initial super
user `rocketmq`. Every answer and every change is checked against the broker's own users and ACLs
(`AuthMetadata`, what it authorizes with) and `config/auth.json`; the ACLs the page makes are then
used: rocketlite's SDK, signed as the page's user, is allowed and refused as they say.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from rocketlite.broker.auth.model import Acl, PolicyEntry
from rocketlite.client import AsyncProducer, Message, NoPermissionError
from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.codes import ResponseCode
from tests.support.foreign_clients.dashboard import Dashboard, DriverError, dashboard_driver
from tests.support.ports import broker_port
from tests.support.topics import create_topic

pytestmark = pytest.mark.timeout(120)

CLUSTER = "DefaultCluster"
BROKER = "broker-a"
ADMIN = ("rocketmq", "12345678")
BOB = ("bob", "bob-secret")
TOPICS = ("DashAclT1", "DashAclT2", "DashAclDeny")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    init = json.dumps({"username": ADMIN[0], "password": ADMIN[1]})
    with embedded(
        tmp_path_factory.mktemp("dash-acl") / "store",
        listen_port=broker_port(),
        authentication_enabled=True,
        authorization_enabled=True,
        init_authentication_user=init,
    ) as c:
        for topic in TOPICS:
            create_topic(c, topic, queues=1)
        yield c


@pytest.fixture(scope="module")
def dash(cluster: EmbeddedCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    with dashboard_driver(tmp_path_factory.mktemp("dashboard-acl"), cluster.namesrv_addr, ADMIN) as driver:
        yield driver


def _users(cluster: EmbeddedCluster) -> list[dict[str, Any]]:
    """The broker's users as the page lists them."""
    return [
        {"username": u.username, "password": u.password, "userType": u.user_type.value,
         "userStatus": u.user_status.value}
        for u in sorted(cluster.broker.auth_metadata.list_users(None), key=lambda u: u.username)
    ]  # fmt: skip


def _entry(e: PolicyEntry) -> dict[str, Any]:
    out: dict[str, Any] = {"resource": e.resource.key, "actions": [a.value for a in e.actions]}
    if e.source_ips:  # absent, not empty, in the broker's answer (Java's null)
        out["sourceIps"] = list(e.source_ips)
    return {**out, "decision": e.decision.value}


def _acl(acl: Acl) -> dict[str, Any]:
    """One of the broker's ACLs as the page shows it."""
    policies = [{"policyType": p.policy_type.value, "entries": [_entry(e) for e in p.entries]}
                for p in acl.policies]  # fmt: skip
    return {"subject": acl.subject, "policies": policies}


def _policies(*entries: dict[str, Any]) -> list[dict[str, Any]]:
    """The page's PolicyRequest.policies: one Custom policy with these entries."""
    return [{"policyType": "Custom", "entries": list(entries)}]


def _grant(resources: list[str], actions: list[str], decision: str = "Allow", **more: Any) -> dict[str, Any]:
    """One entry of the page's policy form (its resources are a list)."""
    return {"resource": resources, "actions": actions, "decision": decision, **more}


def _refusal(exc: pytest.ExceptionInfo[DriverError]) -> tuple[int | None, str]:
    return exc.value.code, exc.value.error.get("remark", "")


def _key(item: dict[str, Any]) -> str:
    return json.dumps(item, sort_keys=True)


def _stored(cluster: EmbeddedCluster) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((cluster.store_dir / "config" / "auth.json").read_text())
    return data


def _wrote(result: dict[str, Any], cluster: EmbeddedCluster, requests: int = 1) -> None:
    """A write went to every address of the cluster's one broker, `requests` requests in all."""
    assert result == {"brokerAddrs": [cluster.broker_addr], "requests": requests}


def _send(cluster: EmbeddedCluster, keys: tuple[str, str], topic: str) -> str:
    """A send signed with `keys`: "ok", or the refusal's text."""

    async def send() -> str:
        producer = AsyncProducer(
            "DashAclPG", cluster.namesrv_addr, instance_name=f"dash-acl-{topic}",
            access_key=keys[0], secret_key=keys[1], retry_times_when_send_failed=0,
        )  # fmt: skip
        await producer.start()
        try:
            await producer.send(Message(topic, b"from the ACL page's user"))
        except NoPermissionError as exc:
            return str(exc)
        finally:
            await producer.close()
        return "ok"

    return asyncio.run(send())


def test_acl_page_users(cluster: EmbeddedCluster, dash: Dashboard) -> None:
    meta = cluster.broker.auth_metadata
    assert dash.call("acl.listUsers", clusterName=CLUSTER) == _users(cluster)
    assert [u["username"] for u in _users(cluster)] == [ADMIN[0]]

    user = {"username": BOB[0], "password": "first", "userType": "Normal", "userStatus": "enable"}
    _wrote(dash.call("acl.createUser", clusterName=CLUSTER, **user), cluster)
    bob = meta.get_user(BOB[0])
    assert bob is not None and (bob.password, bob.is_super) == ("first", False)
    with pytest.raises(DriverError) as exists:
        dash.call("acl.createUser", clusterName=CLUSTER, **user)
    assert _refusal(exists) == (ResponseCode.NO_PERMISSION, "The user is existed")

    # the edit dialog sends every field; by broker name instead of cluster
    edited = {**user, "password": BOB[1], "userType": "Super", "userStatus": "disable"}
    _wrote(dash.call("acl.updateUser", brokerName=BROKER, **edited), cluster)
    bob = meta.get_user(BOB[0])
    assert bob is not None and (bob.password, bob.user_type.value, bob.user_status.value) == (
        BOB[1],
        "Super",
        "disable",
    )
    _wrote(dash.call("acl.updateUser", clusterName=CLUSTER, **{**edited, "userType": "Normal",
                                                               "userStatus": "enable"}), cluster)  # fmt: skip
    listed = dash.call("acl.listUsers", brokerName=BROKER)
    assert listed == _users(cluster)
    assert {"username": BOB[0], "password": BOB[1], "userType": "Normal", "userStatus": "enable"} in listed
    stored = {u["username"]: u for u in _stored(cluster)["users"]}
    assert set(stored) == {ADMIN[0], BOB[0]} and stored[BOB[0]]["password"] == BOB[1]

    # the service refuses a call naming neither cluster nor broker before it asks anything
    with pytest.raises(DriverError, match="Cluster name cannot be null or empty"):
        dash.call("acl.listUsers")


def test_acl_page_acls(cluster: EmbeddedCluster, dash: Dashboard) -> None:
    meta = cluster.broker.auth_metadata
    if meta.get_user(BOB[0]) is None:  # run alone
        dash.call("acl.createUser", clusterName=CLUSTER, username=BOB[0], password=BOB[1])
    t1, t2, deny = TOPICS
    request = {
        "clusterName": CLUSTER,
        "subject": f"User:{BOB[0]}",
        "policies": _policies(
            _grant([f"Topic:{t1}", "Group:DashAclG"], ["Pub", "Sub"]),
            _grant([f"Topic:{deny}"], ["All"], "Deny", sourceIps=["127.0.0.1"]),
        ),
    }
    # one createAcl per resource: the broker merges them into bob's one ACL
    _wrote(dash.call("acl.createAcl", **request), cluster, requests=3)
    acl = meta.acl_of(BOB[0])
    assert acl is not None and len(acl.policies) == 1
    assert [(e.resource.key, [a.value for a in e.actions], e.decision.value, e.source_ips)
            for e in acl.policies[0].entries] == [
        (f"Topic:{t1}", ["Pub", "Sub"], "Allow", ()), ("Group:DashAclG", ["Pub", "Sub"], "Allow", ()),
        (f"Topic:{deny}", ["All"], "Deny", ("127.0.0.1",)),
    ]  # fmt: skip
    assert dash.call("acl.listAcls", clusterName=CLUSTER) == [_acl(acl)]
    assert [a["subject"] for a in _stored(cluster)["acls"]] == [f"User:{BOB[0]}"]

    # the search box: listAcl by subject and by resource, merged
    by_resource = dash.call("acl.listAcls", clusterName=CLUSTER, searchParam=deny)
    want = {_key(_acl(a)) for a in meta.list_acls(deny, None) + meta.list_acls(None, deny)}
    assert {_key(a) for a in by_resource} == want and len(by_resource) == 1
    assert [e["resource"] for e in by_resource[0]["policies"][0]["entries"]] == [f"Topic:{deny}"]
    by_subject = dash.call("acl.listAcls", brokerName=BROKER, searchParam=BOB[0])
    assert by_subject == [_acl(acl)]
    assert dash.call("acl.listAcls", clusterName=CLUSTER, searchParam="nothing-like-it") == []

    # the broker authorizes with what the page wrote
    assert _send(cluster, BOB, t1) == "ok"
    assert _send(cluster, BOB, deny).endswith(f"Topic:{deny} from 127.0.0.1, the decision is deny.")
    assert _send(cluster, BOB, t2).endswith(f"Topic:{t2} from 127.0.0.1, no matched policies.")

    # update: T1 becomes Sub only, T2 gets Pub
    update = {
        **request,
        "policies": _policies(_grant([f"Topic:{t1}"], ["Sub"]), _grant([f"Topic:{t2}"], ["Pub"])),
    }
    _wrote(dash.call("acl.updateAcl", **update), cluster, requests=2)
    acl = meta.acl_of(BOB[0])
    assert acl is not None
    assert {e.resource.key: [a.value for a in e.actions] for e in acl.policies[0].entries} == {
        f"Topic:{t1}": ["Sub"], "Group:DashAclG": ["Pub", "Sub"], f"Topic:{deny}": ["All"],
        f"Topic:{t2}": ["Pub"],
    }  # fmt: skip
    assert dash.call("acl.listAcls", clusterName=CLUSTER) == [_acl(acl)]
    assert _send(cluster, BOB, t1).endswith(f"Topic:{t1} from 127.0.0.1, no matched policies.")
    assert _send(cluster, BOB, t2) == "ok"

    # delete one resource, then (no resource) the whole ACL
    subject = f"User:{BOB[0]}"
    _wrote(
        dash.call("acl.deleteAcl", clusterName=CLUSTER, subject=subject, resource=f"Topic:{deny}"), cluster
    )
    acl = meta.acl_of(BOB[0])
    assert acl is not None and f"Topic:{deny}" not in {e.resource.key for e in acl.policies[0].entries}
    assert _send(cluster, BOB, deny).endswith(f"Topic:{deny} from 127.0.0.1, no matched policies.")
    _wrote(dash.call("acl.deleteAcl", clusterName=CLUSTER, subject=subject), cluster)
    assert meta.acl_of(BOB[0]) is None and _stored(cluster)["acls"] == []
    assert dash.call("acl.listAcls", clusterName=CLUSTER) == []
    with pytest.raises(DriverError) as gone:
        dash.call("acl.deleteAcl", clusterName=CLUSTER, subject=subject)
    assert _refusal(gone) == (ResponseCode.NO_PERMISSION, "The acl is not exist.")

    # a policy for a user that does not exist is refused with the broker's words
    with pytest.raises(DriverError) as unknown:
        dash.call("acl.createAcl", **{**request, "subject": "User:nobody"})
    assert unknown.value.error["remark"] == "The subject of User:nobody is not exist."


def test_acl_page_delete_user(cluster: EmbeddedCluster, dash: Dashboard) -> None:
    meta = cluster.broker.auth_metadata
    dash.call("acl.createUser", clusterName=CLUSTER, username="carol", password="c", userType="Normal",
              userStatus="enable")  # fmt: skip
    dash.call(
        "acl.createAcl",
        clusterName=CLUSTER,
        subject="User:carol",
        policies=_policies(_grant(["Topic:*"], ["Pub"])),
    )
    assert meta.acl_of("carol") is not None
    _wrote(dash.call("acl.deleteUser", clusterName=CLUSTER, username="carol"), cluster)
    assert meta.get_user("carol") is None and meta.acl_of("carol") is None  # its ACL goes with it
    assert "carol" not in {u["username"] for u in dash.call("acl.listUsers", clusterName=CLUSTER)}
    assert "carol" not in {u["username"] for u in _stored(cluster)["users"]}
    # deleting a user that is not there is no error, as on RocketMQ
    _wrote(dash.call("acl.deleteUser", clusterName=CLUSTER, username="carol"), cluster)


@pytest.mark.parametrize(
    ("keys", "remark"),
    [
        (BOB, f"User:bob has no permission to access Cluster:{CLUSTER} from 127.0.0.1, no matched policies."),
        ((ADMIN[0], "not-the-secret"), "check signature failed."),
    ],
    ids=["normal-user", "wrong-secret"],
)
def test_acl_page_needs_a_super_users_keys(
    cluster: EmbeddedCluster,
    dash: Dashboard,
    tmp_path_factory: pytest.TempPathFactory,
    keys: tuple[str, str],
    remark: str,
) -> None:
    """The page configured with a normal user's keys, or a wrong secret: the broker refuses its
    requests with NO_PERMISSION and says why; nothing changes."""
    meta = cluster.broker.auth_metadata
    if meta.get_user(BOB[0]) is None:  # run alone
        dash.call("acl.createUser", clusterName=CLUSTER, username=BOB[0], password=BOB[1])
    with dashboard_driver(tmp_path_factory.mktemp("dashboard-refused"), cluster.namesrv_addr, keys) as other:
        for call, args in (
            ("acl.listUsers", {}),
            ("acl.createUser", {"username": "eve", "password": "e", "userType": "Normal"}),
            ("acl.createAcl", {"subject": "User:bob", "policies": _policies(_grant(["Topic:*"], ["All"]))}),
        ):
            with pytest.raises(DriverError) as refused:
                other.call(call, clusterName=CLUSTER, **args)
            assert _refusal(refused) == (ResponseCode.NO_PERMISSION, remark)
    assert meta.get_user("eve") is None and meta.acl_of(BOB[0]) is None


def test_every_acl_call_is_run(dash: Dashboard) -> None:
    """Each of the driver's ACL page calls was made above (this one runs last);
    test_dashboard_services.py checks that the docs have a row for each."""
    acl_calls = [c for c in dash.calls if c.startswith("acl.")]
    assert len(acl_calls) == 8
    assert sorted(dash.timings) == sorted(acl_calls), set(acl_calls) - set(dash.timings)
