"""ACL 2.0's users and ACLs, changed as RocketMQ 5.3's `AuthenticationMetadataManagerImpl` and
`AuthorizationMetadataManagerImpl` change them, with their checks and messages (each refusal an
`AuthenticationError` / `AuthorizationError`, answered NO_PERMISSION with the message).

Users: a new one needs a name and a password ("username can not be blank", "password can not be
blank"), and must not exist ("The user is existed"); it is Normal and enabled unless said
otherwise. An update changes only what it names (password, type, status) of an existing user
("The user is not exist"). Deleting a user deletes its ACL; deleting a missing one is no error.

ACLs: the subject must be an existing user ("The subject of User:x is not exist."); every entry
needs a known resource, actions (not Any), valid source IPs or CIDRs and a decision. Creating an
ACL that exists merges into it, as updating does (an entry of the same resource is replaced,
others are added). A delete names the subject and optionally one resource (of the Custom policy
unless a policy type is named); an ACL left without entries goes.

Every change is written through `AuthStore` before it is answered; if the write fails, the
change is undone in memory and the request fails.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from rocketlite.broker.auth.model import (
    Acl,
    Action,
    AuthenticationError,
    AuthorizationError,
    Decision,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    User,
    UserStatus,
    UserType,
    subject_key,
    subject_user,
    valid_ip_or_cidr,
)
from rocketlite.broker.auth.store import AuthStore
from rocketlite.protocol.bodies.auth import AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo
from rocketlite.protocol.errors import ConfigError

# -- conversions between the bodies and the model ---------------------------------------------------


def user_info(user: User) -> UserInfo:
    return UserInfo(user.username, user.password, user.user_type.value, user.user_status.value)


def _user_type(name: str | None) -> UserType | None:
    found = UserType.by_name(name)
    return found if isinstance(found, UserType) else None


def _user_status(name: str | None) -> UserStatus | None:
    found = UserStatus.by_name(name)
    return found if isinstance(found, UserStatus) else None


def acl_info(acl: Acl) -> AclInfo:
    return AclInfo(
        acl.subject,
        tuple(
            PolicyInfo(
                p.policy_type.value,
                tuple(
                    PolicyEntryInfo(
                        e.resource.key,
                        tuple(a.value for a in e.actions) or None,
                        e.source_ips or None,
                        e.decision.value,
                    )
                    for e in p.entries
                ),
            )
            for p in acl.policies
        ),
    )


def _entry(info: PolicyEntryInfo) -> PolicyEntry:
    """AclConverter + validate(PolicyEntry): unknown actions are dropped, as Java drops them."""
    resource = Resource.parse(info.resource)
    if resource is None:
        raise AuthorizationError("The resource is null.")
    actions = [a for a in (Action.by_name(n) for n in info.actions or ()) if isinstance(a, Action)]
    if not actions:
        raise AuthorizationError("The actions is empty.")
    if Action.ANY in actions:
        raise AuthorizationError("The actions can not be Any.")
    for ip in info.source_ips or ():
        if not ip.strip():
            raise AuthorizationError("The source ip is empty.")
        if not valid_ip_or_cidr(ip.strip()):
            raise AuthorizationError("The source ip is invalid.")
    decision = Decision.by_name(info.decision)
    if not isinstance(decision, Decision):
        raise AuthorizationError("The decision is null or illegal.")
    return PolicyEntry(resource, tuple(actions), decision, tuple(ip.strip() for ip in info.source_ips or ()))


def acl_from_info(info: AclInfo, subject: str | None) -> Acl:
    """An AclInfo (its subject, else the header's) as an Acl, checked as Java checks it."""
    key = info.subject or subject
    if subject_user(key) is None:
        raise AuthorizationError(f"The subject {key!r} is not a user: subjects are written User:<name>.")
    policies: list[Policy] = []
    for p in info.policies:
        if not p.entries:
            continue  # AclConverter skips a policy without entries
        found = PolicyType.by_name(p.policy_type) if p.policy_type else PolicyType.CUSTOM
        if not isinstance(found, PolicyType):
            raise AuthorizationError(f"The policy type {p.policy_type!r} is not Custom or Default.")
        policies.append(Policy(found, tuple(_entry(e) for e in p.entries)))
    if not policies:
        raise AuthorizationError("The policies is empty.")
    assert key is not None
    return Acl(subject_key(subject_user(key) or ""), tuple(policies))


# -- the metadata ----------------------------------------------------------------------------------


class AuthMetadata:
    """The users and ACLs of one broker, persisted through `store` on every change."""

    def __init__(self, store: AuthStore) -> None:
        self.store = store
        self.users: dict[str, User] = {}
        self.acls: dict[str, Acl] = {}
        users, acls = store.load()
        for info in users:
            if not info.username:
                continue
            self.users[info.username] = User(
                info.username,
                info.password,
                _user_type(info.user_type) or UserType.NORMAL,
                _user_status(info.user_status) or UserStatus.ENABLE,
            )
        for acl in acls:
            try:
                loaded = acl_from_info(acl, None)
            except AuthorizationError as exc:
                raise ConfigError(f"{store.path}: the ACL of {acl.subject!r} is invalid: {exc}") from exc
            self.acls[loaded.subject] = loaded

    def _commit(self, undo: Callable[[], object]) -> None:
        try:
            self.store.save(
                [user_info(u) for _, u in sorted(self.users.items())],
                [acl_info(a) for _, a in sorted(self.acls.items())],
            )
        except OSError:
            undo()
            raise

    # -- users ---------------------------------------------------------------------------------
    def get_user(self, username: str) -> User | None:
        return self.users.get(username)

    def list_users(self, name_filter: str | None) -> list[User]:
        return [u for n, u in sorted(self.users.items()) if not name_filter or name_filter in n]

    def create_user(self, info: UserInfo) -> User:
        if not info.username or not info.username.strip():
            raise AuthenticationError("username can not be blank")
        if not info.password or not info.password.strip():
            raise AuthenticationError("password can not be blank")
        if info.username in self.users:
            raise AuthenticationError("The user is existed")
        user = User(
            info.username,
            info.password,
            _user_type(info.user_type) or UserType.NORMAL,
            _user_status(info.user_status) or UserStatus.ENABLE,
        )
        self.users[user.username] = user
        self._commit(lambda: self.users.pop(user.username, None))
        return user

    def update_user(self, info: UserInfo) -> User:
        if not info.username or not info.username.strip():
            raise AuthenticationError("username can not be blank")
        old = self.users.get(info.username)
        if old is None:
            raise AuthenticationError("The user is not exist")
        new = User(
            old.username,
            info.password if info.password and info.password.strip() else old.password,
            _user_type(info.user_type) or old.user_type,
            _user_status(info.user_status) or old.user_status,
        )
        self.users[old.username] = new
        self._commit(lambda: self.users.__setitem__(old.username, old))
        return new

    def delete_user(self, username: str) -> None:
        if not username or not username.strip():
            raise AuthenticationError("username can not be blank")
        user = self.users.pop(username, None)
        acl = self.acls.pop(subject_key(username), None)
        if user is None and acl is None:
            return

        def undo() -> None:
            if user is not None:
                self.users[username] = user
            if acl is not None:
                self.acls[acl.subject] = acl

        self._commit(undo)

    def init_user(self, username: str, password: str) -> bool:
        """initAuthenticationUser / innerClientAuthenticationCredentials: a super user, created
        if no user of that name exists (an existing one is left as it is). True if created."""
        if username in self.users:
            return False
        self.create_user(UserInfo(username, password, UserType.SUPER.value))
        return True

    # -- ACLs ----------------------------------------------------------------------------------
    def _user_subject(self, key: str | None, missing: str) -> str:
        name = subject_user(key)
        if name is None:
            raise AuthorizationError("The subject is null.")
        if name not in self.users:
            raise AuthorizationError(missing.format(subject=subject_key(name)))
        return subject_key(name)

    def get_acl(self, subject: str | None) -> Acl | None:
        return self.acls.get(self._user_subject(subject, "The subject is not exist."))

    def acl_of(self, username: str) -> Acl | None:
        return self.acls.get(subject_key(username))

    def put_acl(self, info: AclInfo, header_subject: str | None) -> Acl:
        """AUTH_CREATE_ACL and AUTH_UPDATE_ACL alike: merged into the existing ACL, if any."""
        acl = acl_from_info(info, header_subject)
        key = self._user_subject(acl.subject, "The subject of {subject} is not exist.")
        old = self.acls.get(key)
        new = old.updated(acl.policies) if old is not None else acl
        self.acls[key] = new
        self._commit(lambda: self.acls.__setitem__(key, old) if old is not None else self.acls.pop(key, None))
        return new

    def delete_acl(self, subject: str | None, policy_type: str | None, resource: str | None) -> None:
        key = self._user_subject(subject, "The subject is not exist.")
        old = self.acls.get(key)
        if old is None:
            raise AuthorizationError("The acl is not exist.")
        target = Resource.parse(resource)
        found = PolicyType.by_name(policy_type) if policy_type else PolicyType.CUSTOM
        kind = found if isinstance(found, PolicyType) else PolicyType.CUSTOM
        new = old.without(kind, target) if target is not None else None
        if new is None or not new.policies:
            del self.acls[key]
        else:
            self.acls[key] = new
        self._commit(lambda: self.acls.__setitem__(key, old))

    def list_acls(self, subject_filter: str | None, resource_filter: str | None) -> list[Acl]:
        """LocalAuthorizationMetadataProvider.listAcl: subjects containing the subject filter; with
        a resource filter (unless the subject itself contains it), only the entries whose
        resource contains it, and ACLs left empty are not listed."""
        out: list[Acl] = []
        for key, acl in sorted(self.acls.items()):
            if subject_filter and subject_filter not in key:
                continue
            policies: Sequence[Policy] = acl.policies
            if resource_filter and resource_filter not in key:
                policies = [
                    Policy(p.policy_type, tuple(e for e in p.entries if resource_filter in e.resource.key))
                    for p in acl.policies
                ]
                policies = [p for p in policies if p.entries]
            if policies:
                out.append(Acl(key, tuple(policies)))
        return out


def parse_user_json(text: str, key: str) -> tuple[str, str]:
    """`initAuthenticationUser` ({"username":..,"password":..}) or
    `innerClientAuthenticationCredentials` ({"accessKey":..,"secretKey":..}): the name and password;
    a ConfigError naming `key` when it is not such JSON."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"config key {key}: not JSON ({exc}): {text!r}") from None
    if not isinstance(data, dict):
        data = {}
    name_key, secret_key = ("accessKey", "secretKey") if "accessKey" in data else ("username", "password")
    if not data.get(name_key) or not data.get(secret_key):
        raise ConfigError(
            f'config key {key}: expected {{"{name_key}": "...", "{secret_key}": "..."}}, got {text!r}'
        )
    return str(data[name_key]), str(data[secret_key])
