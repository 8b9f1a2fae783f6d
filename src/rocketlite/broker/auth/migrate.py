"""ACL 1.0 -> ACL 2.0: a `plain_acl.yml` imported into users and ACLs on start, with
`migrateAuthFromV1Enabled=true`, as RocketMQ 5.3's `AuthMigrator` does.

Each account whose access key is not yet a user becomes one (password = secret key; `admin: true`
makes it a Super user, else Normal) with an ACL of:

* a Custom policy: `topicPerms` entries `T=PERM` -> resource `Topic:T`, `groupPerms` `G=PERM` ->
  `Group:G`;
* a Default policy: `defaultTopicPerm` -> `Topic:*`, `defaultGroupPerm` -> `Group:*`;

where PERM PUB -> Pub, SUB -> Sub, PUB|SUB (or SUB|PUB) -> Pub+Sub, all Allow; DENY (or anything
else) -> All with Deny. Accounts already present as users are left alone (the migration runs on
every start and only adds). White addresses (global or per account) are not carried over:
ACL 2.0 has no bypass, only source IPs inside ACL entries. An account that cannot be imported is
logged and skipped, as Java does; a file that cannot be read or parsed stops the start.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import yaml

from rocketlite.broker.auth.manager import AuthMetadata
from rocketlite.broker.auth.model import AuthError, UserType
from rocketlite.protocol.bodies.auth import AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo
from rocketlite.protocol.errors import ConfigError

log = logging.getLogger("rocketlite.broker.auth")


def _actions(perm: str) -> tuple[tuple[str, ...], str]:
    perm = perm.strip()
    if perm == "PUB":
        return ("Pub",), "Allow"
    if perm == "SUB":
        return ("Sub",), "Allow"
    if perm in ("PUB|SUB", "SUB|PUB"):
        return ("Pub", "Sub"), "Allow"
    return ("All",), "Deny"


def _entries(items: Any, kind: str) -> list[PolicyEntryInfo]:
    out: list[PolicyEntryInfo] = []
    for item in items or ():
        name, sep, perm = str(item).partition("=")
        if not sep or "=" in perm:
            continue  # Java skips an entry that does not split in two
        actions, decision = _actions(perm)
        out.append(PolicyEntryInfo(f"{kind}:{name.strip()}", actions, None, decision))
    return out


def account_acl(account: dict[str, Any]) -> AclInfo | None:
    """The ACL an ACL 1.0 account becomes (None when it grants nothing)."""
    policies: list[PolicyInfo] = []
    custom = _entries(account.get("topicPerms"), "Topic") + _entries(account.get("groupPerms"), "Group")
    if custom:
        policies.append(PolicyInfo("Custom", tuple(custom)))
    defaults: list[PolicyEntryInfo] = []
    for key, resource in (("defaultTopicPerm", "Topic:*"), ("defaultGroupPerm", "Group:*")):
        if account.get(key) is not None and str(account[key]).strip():
            actions, decision = _actions(str(account[key]))
            defaults.append(PolicyEntryInfo(resource, actions, None, decision))
    if defaults:
        policies.append(PolicyInfo("Default", tuple(defaults)))
    if not policies:
        return None
    return AclInfo(f"User:{account['accessKey']}", tuple(policies))


def migrate_plain_acl(path: Path, metadata: AuthMetadata) -> list[str]:
    """Import the accounts of `path` not yet users; returns the user names created."""
    if not path.is_file():
        log.info("migrateAuthFromV1Enabled: no %s, nothing to migrate", path)
        return []
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"migrateAuthFromV1Enabled: cannot read {path}: {exc}") from exc
    accounts = data.get("accounts") if isinstance(data, dict) else None
    created: list[str] = []
    seen: set[str] = set()
    for account in accounts or ():
        if not isinstance(account, dict) or not account.get("accessKey"):
            continue
        name = str(account["accessKey"])
        if name in seen or metadata.get_user(name) is not None:
            continue
        seen.add(name)
        admin = str(account.get("admin", "")).strip().lower() == "true"
        user_type = UserType.SUPER if admin else UserType.NORMAL
        try:
            metadata.create_user(UserInfo(name, str(account.get("secretKey") or ""), user_type.value))
            acl = account_acl(account)
            if acl is not None:
                metadata.put_acl(acl, None)
        except AuthError as exc:
            log.error("[ACL MIGRATE] migrating the ACL 1.0 account %s failed: %s", name, exc)
            continue
        created.append(name)
    if created:
        log.info(
            "[ACL MIGRATE] %d accounts of %s imported as users: %s", len(created), path, ", ".join(created)
        )
    return created
