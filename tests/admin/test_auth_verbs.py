"""`rocketlite admin` ACL 2.0 verbs (mqadmin 5.3's createUser ... listAcl) run in-process through
`rocketlite.cli.main` against an embedded name server + broker with authentication and
authorization on: each verb's table and `--json` output, what the broker then holds, and the
refusals (unsigned, a normal user managing users, a bad policy type)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketlite.cli import main
from rocketlite.embedded import EmbeddedCluster, embedded

ADMIN = ("rocketmq", "12345678")
CLUSTER = "DefaultCluster"


@pytest.fixture(scope="module")
def auth_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    root: Path = tmp_path_factory.mktemp("auth-admin")
    with embedded(
        root / "store",
        authentication_enabled=True,
        authorization_enabled=True,
        init_authentication_user=json.dumps({"username": ADMIN[0], "password": ADMIN[1]}),
    ) as c:
        yield c


class Admin:
    def __init__(self, cluster: EmbeddedCluster, capsys: pytest.CaptureFixture[str]) -> None:
        self.cluster = cluster
        self.capsys = capsys

    def run(self, *args: str, keys: tuple[str, str] | None = ADMIN, expect: int = 0) -> tuple[str, str]:
        self.capsys.readouterr()
        signed = ["--access-key", keys[0], "--secret-key", keys[1]] if keys else []
        rc = main(["--log-level", "ERROR", "admin", *args, "-n", self.cluster.namesrv_addr, *signed])
        out, err = self.capsys.readouterr()
        assert rc == expect, f"exit {rc}, stdout {out!r}, stderr {err!r}"
        return out, err

    def json(self, *args: str, keys: tuple[str, str] | None = ADMIN) -> Any:
        return json.loads(self.run(*args, "--json", keys=keys)[0])


@pytest.fixture
def admin(auth_cluster: EmbeddedCluster, capsys: pytest.CaptureFixture[str]) -> Admin:
    return Admin(auth_cluster, capsys)


def test_users_lifecycle(admin: Admin) -> None:
    addr = admin.cluster.broker_addr
    out, _ = admin.run("createUser", "-c", CLUSTER, "-u", "alice", "-p", "alice-pw")
    assert out == f"create user to {addr} success.\n"
    table = admin.run("getUser", "-b", addr, "-u", "alice")[0].splitlines()
    assert table[0].split() == ["#UserName", "#Password", "#UserType"]
    assert table[2].split() == ["alice", "alice-pw", "Normal"]
    listed = admin.json("listUser", "-c", CLUSTER)["brokers"][addr]
    assert {u["username"]: u["userType"] for u in listed} == {"rocketmq": "Super", "alice": "Normal"}
    assert [u["username"] for u in admin.json("listUser", "-b", addr, "-f", "ali")["brokers"][addr]] == [
        "alice"
    ]

    out, _ = admin.run("updateUser", "-b", addr, "-u", "alice", "-s", "disable")
    assert out == f"update user to {addr} success.\n"
    [alice] = admin.json("getUser", "-b", addr, "-u", "alice")["users"]
    assert (alice["userStatus"], alice["password"]) == ("disable", "alice-pw")

    # a normal user may not manage users: refused by the broker, named on stderr
    admin.run("updateUser", "-b", addr, "-u", "alice", "-s", "enable")
    _, err = admin.run("createUser", "-b", addr, "-u", "eve", "-p", "x", "-t", "Super",
                       keys=("alice", "alice-pw"), expect=2)  # fmt: skip
    assert "NO_PERMISSION" in err or "super user" in err, err
    _, err = admin.run("createUser", "-b", addr, "-u", "eve", "-p", "x", keys=None, expect=2)
    assert "eve" not in [u["username"] for u in admin.json("listUser", "-b", addr)["brokers"][addr]]
    assert err.startswith("rocketlite: error:"), err

    out, _ = admin.run("deleteUser", "-c", CLUSTER, "-u", "alice")
    assert out == f"delete user from {addr} success.\n"
    assert admin.json("getUser", "-b", addr, "-u", "alice")["users"] == []
    assert admin.run("getUser", "-b", addr, "-u", "alice")[0] == ""


def test_acls_lifecycle(admin: Admin) -> None:
    addr = admin.cluster.broker_addr
    admin.run("createUser", "-b", addr, "-u", "bob", "-p", "bob-pw")
    out, _ = admin.run("createAcl", "-c", CLUSTER, "-s", "User:bob", "-r", "Topic:orders, Group:g1",
                       "-a", "Pub,Sub", "-i", "127.0.0.1", "-d", "Allow")  # fmt: skip
    assert out == f"create acl to {addr} success.\n"
    out, _ = admin.run(
        "updateAcl", "-b", addr, "-s", "User:bob", "-r", "Topic:secret", "-a", "All", "-d", "Deny"
    )
    assert out == f"update acl to {addr} success.\n"

    table = admin.run("getAcl", "-b", addr, "-s", "User:bob")[0]
    rows = [re.split(r"\s{2,}", line.strip()) for line in table.splitlines()]
    assert rows[0] == ["#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision"]
    body = {r[2]: r for r in rows[2:] if r != [""]}
    assert set(body) == {"Topic:orders", "Group:g1", "Topic:secret"}
    assert body["Topic:orders"] == [
        "User:bob",
        "Custom",
        "Topic:orders",
        "[Pub, Sub]",
        "[127.0.0.1]",
        "Allow",
    ]
    assert body["Topic:secret"][3:] == ["[All]", "[]", "Deny"]

    [acl] = admin.json("getAcl", "-c", CLUSTER, "-s", "User:bob")["brokers"][addr]
    entries = {e["resource"]: e for p in acl["policies"] for e in p["entries"]}
    assert entries["Topic:orders"]["actions"] == ["Pub", "Sub"]
    assert entries["Topic:orders"]["sourceIps"] == ["127.0.0.1"]
    assert (entries["Topic:secret"]["actions"], entries["Topic:secret"]["decision"]) == (["All"], "Deny")

    found = admin.json("listAcl", "-b", addr, "-s", "bob", "-r", "secret")["brokers"][addr]
    assert [a["subject"] for a in found] == ["User:bob"]
    assert admin.json("listAcl", "-b", addr, "-s", "nobody")["brokers"][addr] == []

    out, _ = admin.run("deleteAcl", "-b", addr, "-s", "User:bob", "-r", "Topic:orders", "-t", "custom")
    assert out == f"delete acl to {addr} success.\n"
    [acl] = admin.json("getAcl", "-b", addr, "-s", "User:bob")["brokers"][addr]
    assert {e["resource"] for p in acl["policies"] for e in p["entries"]} == {"Group:g1", "Topic:secret"}
    _, err = admin.run("deleteAcl", "-b", addr, "-s", "User:bob", "-t", "Weird", expect=2)
    assert "Invalid policyType: Weird" in err

    admin.run("deleteAcl", "-c", CLUSTER, "-s", "User:bob")
    assert admin.json("getAcl", "-b", addr, "-s", "User:bob")["brokers"][addr] == []
    admin.run("deleteUser", "-b", addr, "-u", "bob")
