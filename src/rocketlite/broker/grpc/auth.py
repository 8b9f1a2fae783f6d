"""The edge of every RPC of the gRPC endpoint: namespaces, then (with aclEnable) the 5.x signature and
the plain_acl.yml permissions, the same accounts as 4.x remoting clients (`broker/acl.py`).

A 5.x client with credentials sends, on every call,

    x-mq-date-time: 20260101T120000Z
    authorization: MQv2-HMAC-SHA1 Credential=<AK>, SignedHeaders=x-mq-date-time, Signature=<hex>

where the signature is HMAC-SHA1(secret key, the `x-mq-date-time` value) in hex: lowercase from
the Python client, uppercase from Node, so it is compared as bytes (Java decodes the hex too). The
date is only signed, never checked against the clock, as Java does: the Python client writes its
local time with a `Z`, so a skew check would refuse it in any zone but UTC.

The checks run in Java's order (`PlainPermissionManager.validate`): a global white address passes;
else the access key must name an account; the account's white address passes; else the signature
must match, and the resources the RPC touches must be allowed by the account's topic and group
permissions (or its defaults; an admin account without any is allowed everything). Groups are
checked as `%RETRY%group`, as the 4.x checks do, so `groupPerms` apply to both protocols.

Answers, never a dropped stream: a missing or wrong signature or an unknown access key gets
`UNAUTHORIZED`, a missing permission `FORBIDDEN`, in the answer's `status` with a message naming
the cause. ReceiveMessage answers one response carrying that status and ends; Telemetry answers the
refused command with a status-only command and ends the stream, as Java's proxy does
(`ResponseWriter.write` then completes).

Namespaces (`names.py`): each request `Resource` with a `resource_namespace` is renamed
`<namespace>%<name>` before anything else (ACL included, as Java's `PlainAccessResource` wraps
them), and the `Resource`s of the answer are shown back without it.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from rocketlite.broker.acl import ANY, PUB, SUB, Account, AclValidator, check_permission, remote_ip
from rocketlite.broker.auth import model as auth2
from rocketlite.broker.auth.checks import AuthChecks
from rocketlite.broker.auth.contexts import ContextError, grpc_needs
from rocketlite.broker.grpc import names
from rocketlite.broker.grpc.kit import ProtoKit, metadata, peer_address
from rocketlite.protocol.reserved import RETRY_GROUP_TOPIC_PREFIX

log = logging.getLogger("rocketlite.broker.grpc.auth")

ALGORITHM = "MQv2-HMAC-SHA1"
DATE_TIME = "x-mq-date-time"
AUTHORIZATION = "authorization"
NAMESPACE = "x-mq-namespace"
CONSUMER_TYPES = frozenset({2, 3, 4})  # ClientType PUSH_CONSUMER, SIMPLE_CONSUMER, PULL_CONSUMER

TOPIC, GROUP = False, True
Need = tuple[Any, bool, int]
"""A `Resource` of a request, whether it names a group, and the permission it needs (0: none)."""


class AuthError(Exception):
    """A refused call: `code` is the `apache.rocketmq.v2.Code` name, the message says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _unauthorized(message: str) -> AuthError:
    return AuthError("UNAUTHORIZED", message)


def parse_authorization(header: str) -> tuple[str, bytes]:
    """`MQv2-HMAC-SHA1 Credential=AK[/...], SignedHeaders=x-mq-date-time, Signature=HEX` -> the access
    key and the signature's bytes (hex of either case)."""
    algorithm, _, rest = header.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise _unauthorized(f"authorization metadata must start with {ALGORITHM}, got {algorithm!r}")
    items: dict[str, str] = {}
    for part in rest.split(","):
        key, eq, value = part.strip().partition("=")
        if not eq:
            raise _unauthorized(f"authorization metadata item {part.strip()!r} is not key=value")
        items[key] = value.strip()
    access_key = items.get("Credential", "").split("/")[0]
    try:
        signature = bytes.fromhex(items.get("Signature", ""))
    except ValueError:
        raise _unauthorized(f"authorization Signature {items.get('Signature')!r} is not hex") from None
    return access_key, signature


def sign(secret_key: str, date_time: str) -> str:
    """The signature a client sends for `date_time` (lowercase hex, as the Python client)."""
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def needs(rpc: str, request: Any) -> list[Need]:
    """The resources an RPC's request touches and the permission each needs: Java's plain ACL for
    gRPC (`PlainAccessResource.parse`), with QueryRoute needing PUB or SUB on the topic and
    QueryAssignment and ChangeInvisibleDuration SUB on topic and group (as ACL 2.0 and the 4.x POP
    checks)."""
    r = request
    if rpc == "SendMessage":
        return [(m.topic, TOPIC, PUB) for m in r.messages]
    if rpc in ("ReceiveMessage", "PullMessage", "UpdateOffset", "GetOffset"):
        return [(r.group, GROUP, SUB), (r.message_queue.topic, TOPIC, SUB)]
    if rpc in ("AckMessage", "ChangeInvisibleDuration", "ForwardMessageToDeadLetterQueue",
               "QueryAssignment", "SyncLiteSubscription"):  # fmt: skip
        return [(r.group, GROUP, SUB), (r.topic, TOPIC, SUB)]
    if rpc == "QueryRoute":
        return [(r.topic, TOPIC, ANY)]
    if rpc in ("EndTransaction", "RecallMessage"):
        return [(r.topic, TOPIC, PUB)]
    if rpc == "QueryOffset":
        return [(r.message_queue.topic, TOPIC, SUB)]
    if rpc == "Heartbeat":
        perm = SUB if r.client_type in CONSUMER_TYPES else 0
        return [(r.group, GROUP, perm)] if r.HasField("group") else []
    if rpc == "NotifyClientTermination":
        return [(r.group, GROUP, SUB)] if r.HasField("group") and r.group.name else []
    if rpc == "Telemetry" and r.WhichOneof("command") == "settings":
        settings = r.settings
        out: list[Need] = [(t, TOPIC, PUB) for t in settings.publishing.topics]
        if settings.HasField("subscription"):
            out.append((settings.subscription.group, GROUP, SUB))
            out.extend((e.topic, TOPIC, SUB) for e in settings.subscription.subscriptions)
        return out
    return []


def _perm_name(perm: int) -> str:
    return {PUB: "PUB", SUB: "SUB", ANY: "PUB or SUB"}.get(perm, str(perm))


@dataclass(frozen=True, slots=True)
class Caller:
    """An ACL 2.0 caller: the user it signed as (None when authentication is off and it sent no
    credentials) and its IP."""

    user: str | None
    ip: str


Principal = Account | Caller | None


class GrpcGuard:
    """Wraps each RPC handler of the servicer (`wrap`). `validator` is the broker's plain ACL (None
    when aclEnable is off), `auth` ACL 2.0's checks (None when neither authenticationEnabled nor
    authorizationEnabled is on); with neither only namespaces are applied."""

    def __init__(self, kit: ProtoKit, validator: AclValidator | None, auth: AuthChecks | None = None) -> None:
        self.kit = kit
        self.validator = validator
        self.auth = auth
        self.methods = kit.spb.DESCRIPTOR.services_by_name["MessagingService"].methods_by_name

    # -- checks ----------------------------------------------------------------------------

    def authenticate(self, meta: dict[str, str], peer: str) -> Account | None:
        """The caller's account, or None when a white address lets it through unchecked."""
        validator = self.validator
        assert validator is not None
        validator.maybe_reload()
        config = validator.config
        ip = remote_ip(peer_address(peer))
        if any(white.match(ip) for white in config.global_white):
            return None
        header = meta.get(AUTHORIZATION)
        if not header:
            raise _unauthorized(
                "no authorization metadata: aclEnable is on and the client sent no credentials"
            )
        access_key, signature = parse_authorization(header)
        if not access_key:
            raise _unauthorized("no access key in the authorization metadata (empty credentials)")
        account = config.accounts.get(access_key)
        if account is None:
            raise _unauthorized(f"no account for access key {access_key!r} in the ACL config")
        if account.white_remote_address.match(ip):
            return None
        date_time = meta.get(DATE_TIME)
        if not date_time:
            raise _unauthorized(f"no {DATE_TIME} metadata: nothing signed")
        expected = hmac.new(account.secret_key.encode(), date_time.encode(), hashlib.sha1).digest()
        if not hmac.compare_digest(expected, signature):
            raise _unauthorized(f"signature mismatch for access key {access_key!r}: wrong secret key")
        return account

    @staticmethod
    def authorize(account: Account, wanted: Iterable[Need]) -> None:
        """Raise FORBIDDEN unless the account may use every resource (PlainPermissionManager)."""
        owned = account.resource_perms
        if owned is None and account.admin:
            return
        for resource, is_group, perm in wanted:
            if not perm or not resource.name:
                continue
            key = RETRY_GROUP_TOPIC_PREFIX + resource.name if is_group else resource.name
            kind = "group" if is_group else "topic"
            denied = f"access key {account.access_key!r} has no {_perm_name(perm)} permission for {kind}"
            if owned is None or key not in owned:
                default = account.default_group_perm if is_group else account.default_topic_perm
                if not check_permission(perm, default):
                    why = f"not listed, and the default {kind} permission denies it"
                    raise AuthError("FORBIDDEN", f"{denied} {resource.name!r} ({why})")
            elif not check_permission(perm, owned[key]):
                raise AuthError("FORBIDDEN", f"{denied} {resource.name!r}")

    def admit(self, rpc: str, request: Any, principal: Principal) -> str:
        """Namespaces applied, then permissions checked; returns the request's namespace ("")."""
        wanted = needs(rpc, request)
        namespace = ""
        for resource, _, _ in wanted:
            namespace = names.wrap_resource(resource) or namespace
        if isinstance(principal, Account):
            self.authorize(account=principal, wanted=wanted)
        elif isinstance(principal, Caller) and self.auth is not None:
            try:
                contexts = grpc_needs(rpc, request)
                self.auth.authorize(principal.user, contexts, principal.ip, self._type_name(rpc))
            except (auth2.AuthError, ContextError) as exc:
                raise _unauthorized(str(exc)) from None
        return namespace

    def _type_name(self, rpc: str) -> str:
        return str(self.methods[rpc].input_type.full_name)

    # -- handlers --------------------------------------------------------------------------

    def _refusal(self, rpc: str, error: AuthError) -> Any:
        method = self.methods[rpc]
        log.debug("gRPC %s refused: %s", rpc, error)
        return getattr(self.kit.spb, method.output_type.name)(status=self.kit.status(error.code, str(error)))

    def _account(self, rpc: str, context: Any) -> Principal:
        if self.auth is not None:
            ip = remote_ip(peer_address(context.peer()))
            try:
                return Caller(self.auth.authenticate_grpc(self._type_name(rpc), metadata(context)), ip)
            except auth2.AuthError as exc:
                raise _unauthorized(str(exc)) from None
        if self.validator is None:
            return None
        return self.authenticate(metadata(context), context.peer())

    def wrap(self, rpc: str, handler: Callable[..., Any]) -> Callable[..., Any]:
        """`handler` behind the checks, of the same shape (unary, server or bidirectional stream)."""
        method = self.methods[rpc]
        if method.client_streaming:
            return self._wrap_bidi(rpc, handler)
        if method.server_streaming:
            return self._wrap_stream(rpc, handler)
        return self._wrap_unary(rpc, handler)

    def _wrap_unary(self, rpc: str, handler: Callable[..., Any]) -> Callable[..., Any]:
        async def guarded(request: Any, context: Any) -> Any:
            try:
                namespace = self.admit(rpc, request, self._account(rpc, context))
            except AuthError as error:
                return self._refusal(rpc, error)
            answer = await handler(request, context)
            if namespace and answer is not None and not isinstance(answer, bytes):  # (bytes: no resource)
                names.unwrap_resources(answer, namespace)
            return answer

        return guarded

    def _wrap_stream(self, rpc: str, handler: Callable[..., Any]) -> Callable[..., Any]:
        async def guarded(request: Any, context: Any) -> AsyncIterator[Any]:
            try:
                namespace = self.admit(rpc, request, self._account(rpc, context))
            except AuthError as error:
                yield self._refusal(rpc, error)
                return
            answers = handler(request, context)
            if not inspect.isasyncgen(answers):  # a coroutine handler (writes itself, or aborts)
                await answers
                return
            async for answer in answers:
                if not namespace:
                    yield answer
                elif isinstance(answer, list):  # a batch of answers (ReceiveMessage's messages)
                    answer[:] = [self._unwrap(item, namespace) for item in answer]
                    yield answer
                else:
                    yield self._unwrap(answer, namespace)

        return guarded

    def _unwrap(self, answer: Any, namespace: str) -> Any:
        """A streamed answer with the namespace taken off its resources."""
        if isinstance(answer, bytes):  # a message written as bytes: parsed to unwrap it
            answer = self.kit.spb.ReceiveMessageResponse.FromString(answer)
        names.unwrap_resources(answer, namespace)
        return answer

    def _wrap_bidi(self, rpc: str, handler: Callable[..., Any]) -> Callable[..., Any]:
        """Each command is admitted before the handler sees it; a refused command ends the commands
        the handler reads, and once it has answered the earlier ones the refusal is the stream's
        last message."""

        async def guarded(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
            refused: list[AuthError] = []
            namespace = metadata(context).get(NAMESPACE, "")
            account: Principal = None
            try:
                account = self._account(rpc, context)
            except AuthError as error:
                refused.append(error)

            async def admitted() -> AsyncIterator[Any]:
                nonlocal namespace
                async for command in requests:
                    try:
                        if refused:
                            raise refused[0]
                        namespace = self.admit(rpc, command, account) or namespace
                    except AuthError as error:
                        refused[:] = [error]
                        return
                    yield command

            answers = handler(admitted(), context)
            if not inspect.isasyncgen(answers):
                await answers
            else:
                async for answer in answers:
                    if namespace:
                        names.unwrap_resources(answer, namespace)
                    yield answer
            if refused:
                yield self._refusal(rpc, refused[0])

        return guarded
