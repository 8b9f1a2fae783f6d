"""RocketMQ 4.x plain ACL: `plain_acl.yml`, request signatures and per-resource permissions.

Mirrors `acl/.../plain/PlainAccessValidator` and `PlainPermissionManager`:

* the config file (broker.conf `aclConfigFile`, else `$ROCKETMQ_HOME/conf/plain_acl.yml`) holds
  `globalWhiteRemoteAddresses` and `accounts` (accessKey, secretKey, whiteRemoteAddress, admin,
  defaultTopicPerm, defaultGroupPerm, topicPerms ["T=PUB|SUB"], groupPerms ["G=SUB"]). It is re-read
  when its mtime or size changes (checked at most every `RELOAD_CHECK_S` seconds, on requests); a
  broken file keeps the last good one.
* a request passes when its remote IP matches a global white address; otherwise its `AccessKey`
  must be configured, the account's own `whiteRemoteAddress` lets it through, or its `Signature`
  must equal Base64(HmacSHA1(secretKey, values of all ext fields except `Signature` and
  `_UNIQUE_KEY_QUERY`, sorted by key in Java String order, concatenated, + body)) -- computed by
  `rocketlite.protocol.wire.acl_signature`, which clients use to sign; then admin-only
  codes need `admin: true` and the request's resources (topics PUB/SUB, groups as
  `%RETRY%group` SUB) must be allowed by the account's topic/group perms or its defaults.

Failures answer NO_PERMISSION (16) with RocketMQ's AclException messages as remark. The name
server does not check ACL (4.x).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rocketlite.protocol.bodies.heartbeat import HeartbeatData
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.errors import ConfigError
from rocketlite.protocol.reserved import RETRY_GROUP_TOPIC_PREFIX as RETRY_PREFIX
from rocketlite.protocol.wire.acl_signature import ACCESS_KEY, SIGNATURE, calc_signature, signing_content
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.protocol.wire.pop import PopRequestCode
from rocketlite.remoting.connection import Connection, Handler, RequestTable, WireResult

log = logging.getLogger("rocketlite.broker.acl")

_POP_CODES = frozenset(int(c) for c in PopRequestCode)

RELOAD_CHECK_S = 1.0

# org.apache.rocketmq.acl.common.Permission
DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3

ADMIN_CODES: frozenset[int] = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
    }
)


class AclError(Exception):
    """A denied request; the message is the NO_PERMISSION remark."""


def parse_perm(text: Any) -> int:
    """Permission.parsePermFromString: PUB, SUB, PUB|SUB (or SUB|PUB), DENY; anything else is DENY."""
    value = str(text).strip().upper() if text is not None else ""
    if value == "PUB":
        return PUB
    if value == "SUB":
        return SUB
    if value in ("PUB|SUB", "SUB|PUB"):
        return PUB | SUB
    return DENY


def check_permission(needed: int, owned: int) -> bool:
    """Permission.checkPermission."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


# ------------------------------------------------------------------------------- remote addresses

_SEGMENT = re.compile(r"^(\*|\d{1,3}(-\d{1,3})?|\{\d{1,3}(,\d{1,3})*\})$")


class AddressMatcher:
    """RemoteAddressStrategyFactory: '*', exact IPs, 'a.b.*', 'a.b.c.1-100', 'a.b.c.{1,2}'; comma lists."""

    def __init__(self, pattern: str | None) -> None:
        self.pattern = (pattern or "").strip()
        self._alts: list[list[str] | str] = []
        text = self.pattern
        if not text:
            return
        # Split on commas outside braces.
        parts = [p.strip() for p in re.split(r",(?![^{]*\})", text) if p.strip()]
        for part in parts:
            if part in ("*", "*.*.*.*"):
                self._alts.append("*")
                continue
            segs = part.split(".")
            if (
                len(segs) <= 4
                and all(_SEGMENT.match(s) for s in segs)
                and (len(segs) == 4 or segs[-1] == "*")
            ):
                self._alts.append(segs + ["*"] * (4 - len(segs)))
            else:
                self._alts.append(part)  # IPv6 or anything else: exact match

    def __bool__(self) -> bool:
        return bool(self._alts)

    def match(self, ip: str) -> bool:
        if not ip:
            return False
        ip_segs = ip.split(".")
        for alt in self._alts:
            if alt == "*":
                return True
            if isinstance(alt, str):
                if _same_ip(alt, ip):
                    return True
                continue
            if len(ip_segs) == 4 and all(_seg_match(p, s) for p, s in zip(alt, ip_segs, strict=True)):
                return True
        return False


def _same_ip(a: str, b: str) -> bool:
    try:
        return ipaddress.ip_address(a.strip("[]")) == ipaddress.ip_address(b.strip("[]"))
    except ValueError:
        return a == b


def _seg_match(pattern: str, seg: str) -> bool:
    if pattern == "*":
        return True
    if not seg.isdigit():
        return False
    value = int(seg)
    if pattern.startswith("{"):
        return value in {int(x) for x in pattern[1:-1].split(",")}
    if "-" in pattern:
        lo, hi = pattern.split("-")
        return int(lo) <= value <= int(hi)
    return int(pattern) == value


def remote_ip(remote_address: str) -> str:
    """'1.2.3.4:5678' / '[::1]:5678' -> the host part."""
    host, sep, _port = remote_address.rpartition(":")
    if not sep:
        return remote_address
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


# ------------------------------------------------------------------------------------- the config


@dataclass(frozen=True, slots=True)
class Account:
    access_key: str
    secret_key: str
    white_remote_address: AddressMatcher
    admin: bool = False
    default_topic_perm: int = DENY
    default_group_perm: int = DENY
    # Topics by name, groups as %RETRY%group (PlainAccessResource's convention).
    resource_perms: dict[str, int] | None = None


@dataclass(frozen=True, slots=True)
class AclConfig:
    global_white: tuple[AddressMatcher, ...] = ()
    accounts: dict[str, Account] = field(default_factory=dict)


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() == "true" if value is not None else False


def _perm_list(items: Any, what: str, key: str) -> list[tuple[str, int]]:
    if items is None:
        return []
    if not isinstance(items, list):
        raise ConfigError(f"{what}: {key} must be a list of 'name=PERM'")
    out: list[tuple[str, int]] = []
    for item in items:
        name, sep, perm_text = str(item).partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"{what}: bad {key} entry {item!r} (expected 'name=PUB|SUB')")
        out.append((name.strip(), parse_perm(perm_text)))
    return out


def parse_acl_config(data: Any, source: str = "plain_acl.yml") -> AclConfig:
    """The parsed YAML document -> AclConfig (PlainPermissionManager.load + buildPlainAccessResource)."""
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{source} file is not data")
    whites = data.get("globalWhiteRemoteAddresses") or []
    if not isinstance(whites, list):
        whites = [whites]
    accounts: dict[str, Account] = {}
    raw_accounts = data.get("accounts") or []
    if not isinstance(raw_accounts, list):
        raise ConfigError(f"{source}: accounts must be a list")
    for raw in raw_accounts:
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}: each account must be a mapping")
        ak = "" if raw.get("accessKey") is None else str(raw["accessKey"])
        sk = "" if raw.get("secretKey") is None else str(raw["secretKey"])
        if len(ak) <= 5 or len(sk) <= 5:
            raise ConfigError(
                f"{source}: The accessKey={ak} and secretKey cannot be null and length should longer than 6"
            )
        if ak in accounts:
            raise ConfigError(f"{source}: duplicate accessKey {ak}")
        perms: dict[str, int] = {}
        for topic, p in _perm_list(raw.get("topicPerms"), source, "topicPerms"):
            perms[topic] = p
        for group, p in _perm_list(raw.get("groupPerms"), source, "groupPerms"):
            perms[RETRY_PREFIX + group] = p
        white = raw.get("whiteRemoteAddress")
        accounts[ak] = Account(
            access_key=ak,
            secret_key=sk,
            white_remote_address=AddressMatcher(None if white is None else str(white)),
            admin=_bool(raw.get("admin")),
            default_topic_perm=parse_perm(raw.get("defaultTopicPerm")),
            default_group_perm=parse_perm(raw.get("defaultGroupPerm")),
            resource_perms=perms or None,
        )
    return AclConfig(tuple(AddressMatcher(str(w)) for w in whites if w is not None), accounts)


def load_acl_file(path: Path) -> AclConfig:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read ACL config {path}: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: bad YAML: {exc}") from exc
    return parse_acl_config(data, str(path))


def default_acl_path(configured: str | None) -> Path:
    """broker.conf `aclConfigFile`, else $ROCKETMQ_HOME/conf/plain_acl.yml (else ./conf/plain_acl.yml)."""
    if configured:
        return Path(configured).expanduser()
    home = os.environ.get("ROCKETMQ_HOME", "")
    return Path(home) / "conf" / "plain_acl.yml" if home else Path("conf") / "plain_acl.yml"


# ---------------------------------------------------------------------------------- the validator


def _retry(group: str | None) -> str:
    return RETRY_PREFIX + (group or "")


def needed_resources(request: RemotingCommand) -> dict[str, int]:
    """PlainAccessValidator.parse: the topics (and %RETRY%groups) a request touches, with the perm."""
    ext = request.ext_fields
    code = request.code
    need: dict[str, int] = {}

    def add(resource: str | None, perm: int) -> None:
        if resource:
            need[resource] = need.get(resource, 0) | perm

    if code == RequestCode.SEND_MESSAGE:
        topic = ext.get("topic")
        if topic and topic.startswith(RETRY_PREFIX):
            add(_retry(ext.get("producerGroup")), SUB)
        else:
            add(topic, PUB)
    elif code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        topic = ext.get("b", ext.get("topic"))
        if topic and topic.startswith(RETRY_PREFIX):
            add(_retry(ext.get("a", ext.get("producerGroup"))), SUB)
        else:
            add(topic, PUB)
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        add(ext.get("originTopic"), PUB)
        add(_retry(ext.get("group")), SUB)
    elif code == RequestCode.PULL_MESSAGE or code in _POP_CODES:
        # POP, its ack and its change of invisible time read the topic for the group, as a pull
        add(ext.get("topic"), SUB)
        add(_retry(ext.get("consumerGroup")), SUB)
    elif code == RequestCode.QUERY_MESSAGE:
        add(ext.get("topic"), SUB)
    elif code == RequestCode.HEART_BEAT:
        if request.body:
            try:
                heartbeat = HeartbeatData.from_json(request.body)
            except Exception as exc:
                raise AclError(f"Decode heartbeat failed: {exc}") from exc
            for consumer in heartbeat.consumer_data_set:
                add(_retry(consumer.group_name), SUB)
                for sub in consumer.subscription_data_set:
                    add(sub.topic, SUB)
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        if ext.get("consumerGroup"):
            add(_retry(ext.get("consumerGroup")), SUB)
    elif code in (RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.QUERY_CONSUMER_OFFSET):
        add(_retry(ext.get("consumerGroup")), SUB)
        add(ext.get("topic"), SUB)
    return need


def _print_resource(resource: str) -> str:
    """`PlainAccessResource.printStr`: "topic:T", or "group:G" for a retry topic."""
    if resource.startswith(RETRY_PREFIX):
        return "group:" + resource[len(RETRY_PREFIX) :]
    return "topic:" + resource


class AclValidator:
    """Holds the current AclConfig (reloaded on file change) and checks requests against it."""

    def __init__(self, path: Path | None = None, *, config: AclConfig | None = None,
                 reload_check_s: float = RELOAD_CHECK_S) -> None:  # fmt: skip
        self.path = path
        self.reload_check_s = reload_check_s
        self._stamp: tuple[int, int] | None = None
        self._last_check = -float("inf")
        if config is not None:
            self.config = config
        elif path is not None:
            self._stamp = self._stat()
            self.config = load_acl_file(path)
        else:
            raise ValueError("AclValidator needs a path or a config")

    def _stat(self) -> tuple[int, int] | None:
        assert self.path is not None
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def maybe_reload(self, *, force: bool = False) -> bool:
        """Re-read the file if its mtime/size changed; True when a new config was loaded."""
        if self.path is None:
            return False
        now = time.monotonic()
        if not force and now < self._last_check + self.reload_check_s:
            return False
        self._last_check = now
        stamp = self._stat()
        if stamp is None or stamp == self._stamp:
            return False
        try:
            config = load_acl_file(self.path)
        except ConfigError as exc:
            log.warning("ACL config %s not reloaded, keeping the previous one: %s", self.path, exc)
            self._stamp = stamp
            return False
        self._stamp = stamp
        self.config = config
        log.info("ACL config %s reloaded: %d accounts", self.path, len(config.accounts))
        return True

    def validate(self, remote_address: str, request: RemotingCommand) -> None:
        """Raise AclError when the request is not allowed (PlainPermissionManager.validate)."""
        self.maybe_reload()
        config = self.config
        ip = remote_ip(remote_address)
        if any(w.match(ip) for w in config.global_white):
            return
        ext = request.ext_fields
        access_key = ext.get(ACCESS_KEY)
        if access_key is None:
            raise AclError("No accessKey is configured")
        account = config.accounts.get(access_key)
        if account is None:
            raise AclError(f"No acl config for {access_key}")
        if account.white_remote_address.match(ip):
            return
        content = signing_content(ext, request.body)
        expected = calc_signature(content, account.secret_key)
        if not hmac.compare_digest(expected.encode(), (ext.get(SIGNATURE) or "").encode()):
            raise AclError(f"Check signature failed for accessKey={access_key}")
        self.check_perm(request, account)

    @staticmethod
    def check_perm(request: RemotingCommand, account: Account) -> None:
        if request.code in ADMIN_CODES and not account.admin:
            raise AclError(
                f"Need admin permission for request code={request.code},"
                f" but accessKey={account.access_key} is not"
            )
        need = needed_resources(request)
        owned = account.resource_perms
        if not need or (owned is None and account.admin):
            return
        for resource, perm in need.items():
            is_group = resource.startswith(RETRY_PREFIX)
            if owned is None or resource not in owned:
                default = account.default_group_perm if is_group else account.default_topic_perm
                if not check_permission(perm, default):
                    raise AclError(f"No default permission for {_print_resource(resource)}")
            elif not check_permission(perm, owned[resource]):
                raise AclError(f"No permission for {_print_resource(resource)}")


class AclRequestTable(RequestTable):
    """The broker's request table with the ACL check in front of every handler (aclEnable=true)."""

    def __init__(self, inner: RequestTable, validator: AclValidator) -> None:
        super().__init__(default=inner.default)
        self.handlers = inner.handlers  # shared: registrations on either table are seen by both
        self.inner = inner
        self.validator = validator

    def lookup(self, code: int) -> Handler | None:
        handler = self.inner.lookup(code)
        if handler is None:
            return None
        validator = self.validator

        def checked(conn: Connection, request: RemotingCommand) -> WireResult:
            try:
                validator.validate(conn.remote_address, request)
            except AclError as exc:
                log.debug("ACL denied code %d from %s: %s", request.code, conn.remote_address, exc)
                return make_response(request, ResponseCode.NO_PERMISSION, str(exc))
            return handler(conn, request)

        return checked
