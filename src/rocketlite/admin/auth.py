"""ACL 2.0 verbs (RocketMQ 5.3 mqadmin `command/auth`): createUser, updateUser, deleteUser,
getUser, listUser, createAcl, updateAcl, deleteAcl, getAcl, listAcl, over the brokers' AUTH_*
codes 3001-3010 (`protocol.wire.auth`, bodies `protocol.bodies.auth`).

As mqadmin: `-b brokerAddr` names one broker, `-c clusterName` a cluster; writes go to every
broker of the cluster, masters and slaves (`fetchMasterAndSlaveAddrByClusterName`), reads to its
masters. Users are `-u username -p password -t userType` (Super / Normal) and, for updateUser,
`-s userStatus` (enable / disable). An ACL is `-s subject` (`User:alice`) with comma-separated
`-r resources` (`Topic:orders`, `Group:g1`, `Topic:*`, `Topic:ord*`), `-a actions` (Pub, Sub,
Get, Update, Create, Delete, All), `-i sourceIps` (addresses or CIDRs) and `-d decision` (Allow /
Deny): one policy entry per resource, as `AclInfo.of` builds it; deleteAcl takes `-r` (one
resource) and `-t policyType` (Custom / Default) to narrow what it removes.
"""

from __future__ import annotations

from typing import Any

from rocketlite.admin.client import AdminClient, AdminError, UsageError
from rocketlite.protocol.bodies.auth import (
    AclInfo,
    PolicyEntryInfo,
    PolicyInfo,
    UserInfo,
    acls_from_bytes,
    users_from_bytes,
)
from rocketlite.protocol.wire.auth import (
    AclRequestHeader,
    AuthRequestCode,
    DeleteAclRequestHeader,
    ListAclsRequestHeader,
    ListUsersRequestHeader,
    UserRequestHeader,
)

POLICY_TYPES = {"custom": "Custom", "default": "Default"}


def split_list(text: str | None) -> tuple[str, ...] | None:
    """mqadmin's comma-separated values, each trimmed, empty ones dropped."""
    if text is None:
        return None
    return tuple(part.strip() for part in text.split(",") if part.strip())


async def write_targets(admin: AdminClient, broker_addr: str | None, cluster: str | None) -> list[str]:
    """`-b`: that broker; `-c`: every broker of the cluster, masters and slaves."""
    if broker_addr is not None:
        return [broker_addr]
    info = await admin.cluster_info()
    if cluster not in info.cluster_addr_table:
        known = ", ".join(sorted(info.cluster_addr_table)) or "none"
        raise AdminError(f"cluster {cluster!r} not found in the name server (known: {known})")
    addrs = [
        addr
        for name in sorted(info.broker_addr_table)
        if info.broker_addr_table[name].cluster == cluster
        for _, addr in sorted(info.broker_addr_table[name].broker_addrs.items())
    ]
    if not addrs:
        raise AdminError(f"cluster {cluster!r} has no broker")
    return addrs


async def read_targets(admin: AdminClient, broker_addr: str | None, cluster: str | None) -> list[str]:
    """`-b`: that broker; `-c`: the cluster's masters."""
    return [t.addr for t in await admin.targets(broker_addr, cluster)]


def _user_json(info: UserInfo) -> dict[str, Any]:
    return {"username": info.username, "password": info.password, "userType": info.user_type,
            "userStatus": info.user_status}  # fmt: skip


def _acl_json(info: AclInfo) -> dict[str, Any]:
    return {
        "subject": info.subject,
        "policies": [
            {
                "policyType": p.policy_type,
                "entries": [
                    {
                        "resource": e.resource,
                        "actions": list(e.actions or ()),
                        "sourceIps": list(e.source_ips or ()),
                        "decision": e.decision,
                    }
                    for e in p.entries
                ],
            }
            for p in info.policies
        ],
    }


# -- users ----------------------------------------------------------------------------------------


async def _write_user(
    admin: AdminClient, code: int, info: UserInfo, broker_addr: str | None, cluster: str | None
) -> dict[str, Any]:
    done = []
    header = UserRequestHeader(username=info.username).to_ext()
    for addr in await write_targets(admin, broker_addr, cluster):
        await admin.call(addr, code, header, info.to_bytes())
        done.append(addr)
    return {"username": info.username, "brokers": done}


async def create_user(
    admin: AdminClient, *, username: str, password: str, user_type: str | None,
    broker_addr: str | None, cluster: str | None,
) -> dict[str, Any]:  # fmt: skip
    info = UserInfo(username.strip(), password.strip(), user_type.strip() if user_type else None)
    return await _write_user(admin, AuthRequestCode.AUTH_CREATE_USER, info, broker_addr, cluster)


async def update_user(
    admin: AdminClient, *, username: str, password: str | None, user_type: str | None,
    user_status: str | None, broker_addr: str | None, cluster: str | None,
) -> dict[str, Any]:  # fmt: skip
    if password is None and user_type is None and user_status is None:
        raise UsageError("one of -p/--password, -t/--userType, -s/--userStatus is required")
    info = UserInfo(username.strip(), password, user_type, user_status)
    return await _write_user(admin, AuthRequestCode.AUTH_UPDATE_USER, info, broker_addr, cluster)


async def delete_user(
    admin: AdminClient, *, username: str, broker_addr: str | None, cluster: str | None
) -> dict[str, Any]:
    done = []
    header = UserRequestHeader(username=username.strip()).to_ext()
    for addr in await write_targets(admin, broker_addr, cluster):
        await admin.call(addr, AuthRequestCode.AUTH_DELETE_USER, header)
        done.append(addr)
    return {"username": username.strip(), "brokers": done}


async def get_user(
    admin: AdminClient, *, username: str, broker_addr: str | None, cluster: str | None
) -> dict[str, Any]:
    """The user as the first master that has it answers (mqadmin stops at the first)."""
    header = UserRequestHeader(username=username.strip()).to_ext()
    for addr in await read_targets(admin, broker_addr, cluster):
        r = await admin.call(addr, AuthRequestCode.AUTH_GET_USER, header)
        if r.body:
            return {"users": [_user_json(UserInfo.from_json(r.body))], "broker": addr}
    return {"users": []}


async def list_user(
    admin: AdminClient, *, filter_: str | None, broker_addr: str | None, cluster: str | None
) -> dict[str, Any]:
    header = ListUsersRequestHeader(filter=filter_.strip() if filter_ else None).to_ext()
    out: dict[str, list[dict[str, Any]]] = {}
    for addr in await read_targets(admin, broker_addr, cluster):
        r = await admin.call(addr, AuthRequestCode.AUTH_LIST_USER, header)
        out[addr] = [_user_json(u) for u in users_from_bytes(r.body)] if r.body else []
    return {"brokers": out}


# -- ACLs -----------------------------------------------------------------------------------------


def acl_body(
    subject: str, resources: tuple[str, ...], actions: tuple[str, ...], source_ips: tuple[str, ...] | None,
    decision: str,
) -> AclInfo:  # fmt: skip
    """`AclInfo.of`: one policy (its type left to the broker: Custom) with an entry per resource."""
    entries = tuple(PolicyEntryInfo(r, actions, source_ips, decision) for r in resources)
    return AclInfo(subject, (PolicyInfo(None, entries),))


async def put_acl(
    admin: AdminClient, *, update: bool, subject: str, resources: str, actions: str, source_ips: str | None,
    decision: str, broker_addr: str | None, cluster: str | None,
) -> dict[str, Any]:  # fmt: skip
    res, acts = split_list(resources) or (), split_list(actions) or ()
    if not res or not acts:
        raise UsageError("-r/--resources and -a/--actions need at least one value")
    body = acl_body(subject.strip(), res, acts, split_list(source_ips), decision.strip()).to_bytes()
    code = AuthRequestCode.AUTH_UPDATE_ACL if update else AuthRequestCode.AUTH_CREATE_ACL
    header = AclRequestHeader(subject=subject.strip()).to_ext()
    done = []
    for addr in await write_targets(admin, broker_addr, cluster):
        await admin.call(addr, code, header, body)
        done.append(addr)
    return {"subject": subject.strip(), "brokers": done}


async def delete_acl(
    admin: AdminClient, *, subject: str, resource: str | None, policy_type: str | None,
    broker_addr: str | None, cluster: str | None,
) -> dict[str, Any]:  # fmt: skip
    kind = None
    if policy_type is not None and policy_type.strip():
        kind = POLICY_TYPES.get(policy_type.strip().lower())
        if kind is None:
            raise UsageError(f"Invalid policyType: {policy_type}")
    header = DeleteAclRequestHeader(
        subject=subject.strip(), policy_type=kind, resource=resource.strip() if resource else None
    ).to_ext()
    done = []
    for addr in await write_targets(admin, broker_addr, cluster):
        await admin.call(addr, AuthRequestCode.AUTH_DELETE_ACL, header)
        done.append(addr)
    return {"subject": subject.strip(), "brokers": done}


async def get_acl(
    admin: AdminClient, *, subject: str, broker_addr: str | None, cluster: str | None
) -> dict[str, Any]:
    header = AclRequestHeader(subject=subject.strip()).to_ext()
    out: dict[str, list[dict[str, Any]]] = {}
    for addr in await read_targets(admin, broker_addr, cluster):
        r = await admin.call(addr, AuthRequestCode.AUTH_GET_ACL, header)
        out[addr] = [_acl_json(AclInfo.from_json(r.body))] if r.body else []
    return {"brokers": out}


async def list_acl(
    admin: AdminClient, *, subject: str | None, resource: str | None, broker_addr: str | None,
    cluster: str | None,
) -> dict[str, Any]:  # fmt: skip
    header = ListAclsRequestHeader(
        subject_filter=subject.strip() if subject else None,
        resource_filter=resource.strip() if resource else None,
    ).to_ext()
    out: dict[str, list[dict[str, Any]]] = {}
    for addr in await read_targets(admin, broker_addr, cluster):
        r = await admin.call(addr, AuthRequestCode.AUTH_LIST_ACL, header)
        out[addr] = [_acl_json(a) for a in acls_from_bytes(r.body)] if r.body else []
    return {"brokers": out}
