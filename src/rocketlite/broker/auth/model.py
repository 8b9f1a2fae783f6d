"""ACL 2.0's vocabulary and matching rules, as RocketMQ 5.3's `auth` module defines them.

* A **user** has a name, a password (its secret key: clients sign with AccessKey = name,
  SecretKey = password), a type (Super, Normal) and a status (enable, disable). A super user
  is allowed everything; a normal user only what its ACL allows.
* An **ACL** belongs to a subject (`User:<name>`) and holds up to two policies, Custom and
  Default; each policy is a list of **entries**: a resource, actions, optional source IPs
  (addresses or CIDRs) and a decision (Allow, Deny).
* A **resource** is written `Type:name` (LITERAL), `Type:prefix*` (PREFIXED), `Type:*` (ANY of the
  type) or `*` (anything); types are Cluster, Namespace, Topic and Group.
* **Actions**: Pub, Sub, Create, Update, Delete, Get, List, and All (every one). Any appears only
  in requests ("any action of this entry will do"), never in stored entries.

Deciding one request context (subject, resource, actions, source IP), Java's
`AclAuthorizationHandler`: the entries of the Custom policy that match the resource, share an
action with the request (or hold All) and allow the source IP; if none, those of the Default
policy. The most specific wins: a typed resource before `*`, a literal before a prefix before
`Type:*`; of two prefixes the shorter one (Java compares their lengths ascending); on a tie, Deny
before Allow. No entry, or a winning Deny, refuses the request.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.reserved import RETRY_GROUP_TOPIC_PREFIX

DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
ASTERISK = "*"


class _Named(enum.Enum):
    """A Java auth enum: its `getName()` is `value`, looked up case-insensitively."""

    @classmethod
    def by_name(cls, name: str | None) -> _Named | None:
        if name is None:
            return None
        for member in cls:
            if str(member.value).lower() == name.strip().lower():
                return member
        return None


class UserType(_Named):
    SUPER = "Super"
    NORMAL = "Normal"


class UserStatus(_Named):
    ENABLE = "enable"
    DISABLE = "disable"


class Action(_Named):
    ALL = "All"
    ANY = "Any"
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"


class ResourceType(_Named):
    ANY = "Any"
    CLUSTER = "Cluster"
    NAMESPACE = "Namespace"
    TOPIC = "Topic"
    GROUP = "Group"


class ResourcePattern(enum.Enum):
    ANY = "ANY"
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Decision(_Named):
    ALLOW = "Allow"
    DENY = "Deny"


class PolicyType(_Named):
    CUSTOM = "Custom"
    DEFAULT = "Default"


class AuthError(RocketliteError):
    """A refusal of ACL 2.0, answered NO_PERMISSION (16) with the message as remark, as Java's
    `AuthenticationException` / `AuthorizationException` are."""

    code = ResponseCode.NO_PERMISSION


class AuthenticationError(AuthError):
    """Who the caller is could not be established (or a user change was refused)."""


class AuthorizationError(AuthError):
    """The caller may not do this (or an ACL change was refused)."""


USER_SUBJECT = "User"


def subject_key(username: str) -> str:
    """`User:<name>`, the key of a user's ACL."""
    return f"{USER_SUBJECT}:{username}"


def subject_user(key: str | None) -> str | None:
    """The user name of a subject key (`User:alice` -> alice); None for any other kind."""
    if key is None:
        return None
    kind, sep, name = key.partition(":")
    if kind.strip().lower() != USER_SUBJECT.lower():
        return None
    return name if sep else ""


@dataclass(frozen=True, slots=True)
class User:
    username: str
    password: str | None = None
    user_type: UserType = UserType.NORMAL
    user_status: UserStatus = UserStatus.ENABLE

    @property
    def is_super(self) -> bool:
        return self.user_type is UserType.SUPER


def strip_retry(name: str) -> str:
    """NamespaceUtil.withOutRetryAndDLQ: a group's retry or DLQ topic names the group."""
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def is_retry_topic(name: str | None) -> bool:
    return bool(name) and name is not None and name.startswith(RETRY_GROUP_TOPIC_PREFIX)


@dataclass(frozen=True, slots=True)
class Resource:
    type: ResourceType
    name: str | None
    pattern: ResourcePattern

    @classmethod
    def topic(cls, name: str | None) -> Resource:
        return cls(ResourceType.TOPIC, name, ResourcePattern.LITERAL)

    @classmethod
    def group(cls, name: str | None) -> Resource:
        return cls(ResourceType.GROUP, strip_retry(name) if name else name, ResourcePattern.LITERAL)

    @classmethod
    def cluster(cls, name: str) -> Resource:
        return cls(ResourceType.CLUSTER, name, ResourcePattern.LITERAL)

    @classmethod
    def parse(cls, key: str | None) -> Resource | None:
        """`Type:name`, `Type:prefix*`, `Type:*` or `*`; None for a blank key or an unknown type."""
        if key is None or not key.strip():
            return None
        if key == ASTERISK:
            return cls(ResourceType.ANY, None, ResourcePattern.ANY)
        kind, _, name = key.partition(":")
        rtype = ResourceType.by_name(kind)
        if not isinstance(rtype, ResourceType):
            return None
        if name == ASTERISK:
            return cls(rtype, None, ResourcePattern.ANY)
        if name.endswith(ASTERISK):
            return cls(rtype, name[: name.index(ASTERISK)], ResourcePattern.PREFIXED)
        return cls(rtype, name, ResourcePattern.LITERAL)

    @property
    def key(self) -> str:
        if self.type is ResourceType.ANY:
            return ASTERISK
        if self.pattern is ResourcePattern.ANY:
            return f"{self.type.value}:{ASTERISK}"
        if self.pattern is ResourcePattern.PREFIXED:
            return f"{self.type.value}:{self.name}{ASTERISK}"
        return f"{self.type.value}:{self.name}"

    def matches(self, wanted: Resource) -> bool:
        """Whether this (an entry's) resource covers `wanted` (a request's, always literal)."""
        if self.type is ResourceType.ANY:
            return True
        if self.type is not wanted.type:
            return False
        if self.pattern is ResourcePattern.ANY:
            return True
        if self.pattern is ResourcePattern.LITERAL:
            return self.name == wanted.name
        return (wanted.name or "").startswith(self.name or "")


def valid_ip_or_cidr(text: str) -> bool:
    try:
        if "/" in text:
            ipaddress.ip_network(text, strict=False)
        else:
            ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def ip_in(ip: str, source: str) -> bool:
    """IPAddressUtils.isIPInRange: `ip` equals the address or lies in the CIDR `source`."""
    try:
        address = ipaddress.ip_address(ip.strip("[]"))
        if "/" in source:
            return address in ipaddress.ip_network(source, strict=False)
        return address == ipaddress.ip_address(source)
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class PolicyEntry:
    resource: Resource
    actions: tuple[Action, ...]
    decision: Decision
    source_ips: tuple[str, ...] = ()

    def matches_actions(self, wanted: Sequence[Action]) -> bool:
        if not self.actions:
            return False
        if Action.ANY in wanted:
            return True
        return any(a in self.actions or Action.ALL in self.actions for a in wanted)

    def matches_ip(self, ip: str | None) -> bool:
        if not self.source_ips:
            return True
        if not ip:
            return False
        return any(ip_in(ip, source) for source in self.source_ips)


@dataclass(frozen=True, slots=True)
class Policy:
    policy_type: PolicyType
    entries: tuple[PolicyEntry, ...]


@dataclass(frozen=True, slots=True)
class Acl:
    subject: str
    policies: tuple[Policy, ...] = field(default=())

    def policy(self, policy_type: PolicyType) -> Policy | None:
        for p in self.policies:
            if p.policy_type is policy_type:
                return p
        return None

    def updated(self, policies: Iterable[Policy]) -> Acl:
        """Acl.updatePolicy: each new policy merges into the one of its type (an entry of the same
        resource takes the new actions, IPs and decision; others are appended)."""
        current = {p.policy_type: list(p.entries) for p in self.policies}
        order = [p.policy_type for p in self.policies]
        for new in policies:
            if new.policy_type not in current:
                current[new.policy_type] = []
                order.append(new.policy_type)
            entries = current[new.policy_type]
            for entry in new.entries:
                for i, old in enumerate(entries):
                    if old.resource == entry.resource:
                        entries[i] = entry
                        break
                else:
                    entries.append(entry)
        return replace(self, policies=tuple(Policy(t, tuple(current[t])) for t in order))

    def without(self, policy_type: PolicyType, resource: Resource) -> Acl:
        """Acl.deletePolicy: the entry of `resource` leaves the policy; an empty policy goes."""
        out: list[Policy] = []
        for p in self.policies:
            if p.policy_type is policy_type:
                kept = tuple(e for e in p.entries if e.resource != resource)
                if kept:
                    out.append(Policy(p.policy_type, kept))
            else:
                out.append(p)
        return replace(self, policies=tuple(out))


def _specificity(entry: PolicyEntry) -> tuple[int, int, int]:
    """Sort key, the deciding entry first: typed before `*`, literal before prefix before any, the
    shorter of two prefixes (as Java's comparator), then Deny before Allow."""
    r = entry.resource
    typed = 1 if r.type is ResourceType.ANY else 0
    pattern = {ResourcePattern.LITERAL: 0, ResourcePattern.PREFIXED: 1, ResourcePattern.ANY: 2}[r.pattern]
    length = len(r.name or "") if r.pattern is ResourcePattern.PREFIXED else 0
    deny = 0 if entry.decision is Decision.DENY else 1
    return (typed * 10 + pattern, length, deny)


def decide(
    acl: Acl | None, resource: Resource, actions: Sequence[Action], ip: str | None
) -> PolicyEntry | None:
    """The entry that decides (resource, actions, ip) for a normal user, or None (no match)."""
    if acl is None:
        return None
    for policy_type in (PolicyType.CUSTOM, PolicyType.DEFAULT):
        policy = acl.policy(policy_type)
        if policy is None:
            continue
        matched = [
            e
            for e in policy.entries
            if e.resource.matches(resource) and e.matches_actions(actions) and e.matches_ip(ip)
        ]
        if matched:
            return min(matched, key=_specificity)
    return None
