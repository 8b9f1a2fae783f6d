"""ACL 2.0's JSON bodies: `UserInfo` and `AclInfo` (RocketMQ 5.3's remoting `body` package).

UserInfo::

    {"password":"secret","userStatus":"enable","userType":"Normal","username":"alice"}

AclInfo (one per subject; a policy per type, Custom or Default; an entry per resource)::

    {"policies":[{"entries":[{"actions":["Pub","Sub"],"decision":"Allow",
                              "resource":"Topic:orders","sourceIps":["10.0.0.0/8"]}],
                  "policyType":"Custom"}],
     "subject":"User:alice"}

Names are as Java prints its enums (`UserType.getName()`: "Super"/"Normal", `UserStatus`:
"enable"/"disable", `Action`: "Pub", "Sub", "Create", ..., "All", `Decision`: "Allow"/"Deny",
`PolicyType`: "Custom"/"Default"); they are read case-insensitively, as Java's `getByName`.
Resources are `Type:name`, `Type:prefix*`, `Type:*` or `*` (see `broker.auth.model`). Keys come
out sorted and absent values are left out (fastjson), so mqadmin and the dashboard read them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from rocketlite.protocol.bodies.json_body import JsonBody, expect_obj, get_list, get_opt_str
from rocketlite.protocol.wire import fastjson


def _drop_none(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if v is not None}


def _str_list(obj: Mapping[Any, Any], key: str) -> tuple[str, ...] | None:
    if obj.get(key) is None:
        return None
    return tuple(str(v) for v in get_list(obj, key) if v is not None)


@dataclass(frozen=True, slots=True)
class UserInfo(JsonBody):
    username: str | None = None
    password: str | None = None
    user_type: str | None = None
    user_status: str | None = None

    def to_json_obj(self) -> dict[str, Any]:
        return _drop_none(
            {
                "username": self.username,
                "password": self.password,
                "userType": self.user_type,
                "userStatus": self.user_status,
            }
        )

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            get_opt_str(obj, "username"),
            get_opt_str(obj, "password"),
            get_opt_str(obj, "userType"),
            get_opt_str(obj, "userStatus"),
        )


@dataclass(frozen=True, slots=True)
class PolicyEntryInfo(JsonBody):
    resource: str | None = None
    actions: tuple[str, ...] | None = None
    source_ips: tuple[str, ...] | None = None
    decision: str | None = None

    def to_json_obj(self) -> dict[str, Any]:
        return _drop_none(
            {
                "resource": self.resource,
                "actions": list(self.actions) if self.actions is not None else None,
                "sourceIps": list(self.source_ips) if self.source_ips is not None else None,
                "decision": self.decision,
            }
        )

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(
            get_opt_str(obj, "resource"),
            _str_list(obj, "actions"),
            _str_list(obj, "sourceIps"),
            get_opt_str(obj, "decision"),
        )


@dataclass(frozen=True, slots=True)
class PolicyInfo(JsonBody):
    policy_type: str | None = None
    entries: tuple[PolicyEntryInfo, ...] = ()

    def to_json_obj(self) -> dict[str, Any]:
        return _drop_none(
            {
                "policyType": self.policy_type,
                "entries": [e.to_json_obj() for e in self.entries] if self.entries else None,
            }
        )

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        entries = tuple(
            PolicyEntryInfo.from_json_obj(expect_obj(e, "entries[]")) for e in get_list(obj, "entries")
        )
        return cls(get_opt_str(obj, "policyType"), entries)


@dataclass(frozen=True, slots=True)
class AclInfo(JsonBody):
    subject: str | None = None
    policies: tuple[PolicyInfo, ...] = ()

    def to_json_obj(self) -> dict[str, Any]:
        return _drop_none(
            {
                "subject": self.subject,
                "policies": [p.to_json_obj() for p in self.policies] if self.policies else None,
            }
        )

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        policies = tuple(
            PolicyInfo.from_json_obj(expect_obj(p, "policies[]")) for p in get_list(obj, "policies")
        )
        return cls(get_opt_str(obj, "subject"), policies)


def users_to_bytes(users: list[UserInfo]) -> bytes:
    """AUTH_LIST_USER's answer: a JSON array of UserInfo."""
    return fastjson.dumps([u.to_json_obj() for u in users]).encode("utf-8")


def acls_to_bytes(acls: list[AclInfo]) -> bytes:
    """AUTH_LIST_ACL's answer: a JSON array of AclInfo."""
    return fastjson.dumps([a.to_json_obj() for a in acls]).encode("utf-8")


def users_from_bytes(body: bytes) -> list[UserInfo]:
    data = fastjson.loads(body)
    return [UserInfo.from_json_obj(expect_obj(u, "UserInfo")) for u in (data or [])]


def acls_from_bytes(body: bytes) -> list[AclInfo]:
    data = fastjson.loads(body)
    return [AclInfo.from_json_obj(expect_obj(a, "AclInfo")) for a in (data or [])]
