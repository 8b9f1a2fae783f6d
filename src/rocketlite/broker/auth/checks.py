"""ACL 2.0's two checks, as RocketMQ 5.3 runs them before a request reaches its processor:
authentication (`DefaultAuthenticationHandler`), then authorization (`UserAuthorizationHandler`
and `AclAuthorizationHandler`), each on when its key is (`authenticationEnabled`,
`authorizationEnabled`) and skipped for the request codes of its white list
(`authenticationWhitelist` / `authorizationWhitelist`: comma-separated remoting codes, or gRPC
request type names such as `apache.rocketmq.v2.QueryRouteRequest`).

Authentication, with the messages Java answers (NO_PERMISSION on remoting, UNAUTHORIZED on gRPC):

* remoting: the `AccessKey` ext field names the user ("username cannot be null." without one);
  its `Signature` must be Base64(HmacSHA1(password, content)), the content of ACL 1.0
  (`protocol.wire.acl_signature`). 5.x Java clients sign `_UNIQUE_KEY_QUERY` too, 4.x clients and
  rocketlite's SDK do not: either content is accepted, both being signed with the same password.
* gRPC: `authorization: MQv2-HMAC-SHA1 Credential=<user>, SignedHeaders=x-mq-date-time,
  Signature=<hex>` over the `x-mq-date-time` value.
* "User:<name> is not found.", "User:<name> is disabled.", "check signature failed.".

Authorization, per (resource, actions) the request needs (`contexts`): a super user passes; a
normal user needs the deciding entry of its ACL (`model.decide`) to allow it from the request's
source IP, else "User:<name> has no permission to access <resource> from <ip>, no matched
policies." or "..., the decision is deny.".
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rocketlite.broker.auth.contexts import Need
from rocketlite.broker.auth.manager import AuthMetadata
from rocketlite.broker.auth.model import (
    AuthenticationError,
    AuthorizationError,
    Decision,
    UserStatus,
    decide,
    subject_key,
)
from rocketlite.protocol.wire.acl_signature import (
    ACCESS_KEY,
    SIGNATURE,
    UNIQUE_KEY_QUERY,
    calc_signature,
    signing_content,
)
from rocketlite.protocol.wire.command import RemotingCommand

GRPC_ALGORITHM = "MQv2-HMAC-SHA1"
GRPC_AUTHORIZATION = "authorization"
GRPC_DATE_TIME = "x-mq-date-time"


def _whitelist(text: str | None) -> frozenset[str]:
    return frozenset(item.strip() for item in (text or "").split(",") if item.strip())


@dataclass(frozen=True, slots=True)
class AuthSettings:
    """The broker keys the checks read (parsed once by `BrokerConfig`)."""

    cluster: str
    authentication_enabled: bool
    authorization_enabled: bool
    authentication_whitelist: frozenset[str] = frozenset()
    authorization_whitelist: frozenset[str] = frozenset()

    @classmethod
    def of(cls, cluster: str, authn: bool, authz: bool, authn_white: str | None,
           authz_white: str | None) -> AuthSettings:  # fmt: skip
        return cls(cluster, authn, authz, _whitelist(authn_white), _whitelist(authz_white))


class AuthChecks:
    """Both checks over one broker's users and ACLs."""

    def __init__(self, metadata: AuthMetadata, settings: AuthSettings) -> None:
        self.metadata = metadata
        self.settings = settings

    # -- authentication ------------------------------------------------------------------------
    def _password(self, username: str | None) -> str:
        if not username:
            raise AuthenticationError("username cannot be null.")
        user = self.metadata.get_user(username)
        if user is None:
            raise AuthenticationError(f"User:{username} is not found.")
        if user.user_status is UserStatus.DISABLE:
            raise AuthenticationError(f"User:{username} is disabled.")
        return user.password or ""

    def authenticate_remoting(self, request: RemotingCommand) -> None:
        if (
            not self.settings.authentication_enabled
            or str(request.code) in self.settings.authentication_whitelist
        ):
            return
        ext = request.ext_fields
        password = self._password(ext.get(ACCESS_KEY))
        given = (ext.get(SIGNATURE) or "").encode()
        candidates = [signing_content(ext, request.body, exclude=(SIGNATURE, UNIQUE_KEY_QUERY))]
        if UNIQUE_KEY_QUERY in ext:
            candidates.append(signing_content(ext, request.body, exclude=(SIGNATURE,)))
        if not any(hmac.compare_digest(calc_signature(c, password).encode(), given) for c in candidates):
            raise AuthenticationError("check signature failed.")

    def authenticate_grpc(self, rpc_type: str, meta: Mapping[str, str]) -> str | None:
        """The caller's user name (None when authentication is off or white-listed)."""
        if not self.settings.authentication_enabled or rpc_type in self.settings.authentication_whitelist:
            return grpc_username(meta)
        header = meta.get(GRPC_AUTHORIZATION)
        if not header:
            raise AuthenticationError("username cannot be null.")
        date_time = meta.get(GRPC_DATE_TIME)
        if not date_time:
            raise AuthenticationError("datetime is null.")
        username, signature = _parse_grpc_authorization(header)
        password = self._password(username)
        expected = hmac.new(password.encode(), date_time.encode(), hashlib.sha1).digest()
        if signature is None or not hmac.compare_digest(expected, signature):
            raise AuthenticationError("check signature failed.")
        return username

    # -- authorization -------------------------------------------------------------------------
    def authorize(self, username: str | None, needs: Iterable[Need], source_ip: str, rpc_code: str) -> None:
        if not self.settings.authorization_enabled or rpc_code in self.settings.authorization_whitelist:
            return
        needs = list(needs)
        if not needs:
            return
        if not username:
            raise AuthorizationError("Authorization failed. Please verify your access rights and try again.")
        user = self.metadata.get_user(username)
        if user is None:
            raise AuthorizationError(f"User:{username} not found.")
        if user.is_super:
            return
        acl = self.metadata.acl_of(username)
        for resource, actions in needs:
            entry = decide(acl, resource, actions, source_ip)
            if entry is None or entry.decision is Decision.DENY:
                why = "no matched policies." if entry is None else "the decision is deny."
                who = subject_key(username)
                raise AuthorizationError(
                    f"{who} has no permission to access {resource.key} from {source_ip}, {why}"
                )


def grpc_username(meta: Mapping[str, str]) -> str | None:
    header = meta.get(GRPC_AUTHORIZATION)
    if not header:
        return None
    try:
        return _parse_grpc_authorization(header)[0]
    except AuthenticationError:
        return None


def _parse_grpc_authorization(header: str) -> tuple[str | None, bytes | None]:
    """DefaultAuthenticationContextBuilder: `<algorithm> Credential=<user>[/...], ...,
    Signature=<hex>` -> the user and the signature's bytes."""
    parts = header.split(" ", 1)
    if len(parts) != 2:
        raise AuthenticationError("authentication header is incorrect.")
    username: str | None = None
    signature: bytes | None = None
    for item in parts[1].split(","):
        key, eq, value = item.strip().partition("=")
        if not eq:
            raise AuthenticationError(
                f"authentication keyValues length is incorrect, actual length={1 if item.strip() else 0}."
            )
        if key == "Credential":
            username = value.split("/")[0]
        elif key == "Signature":
            try:
                signature = bytes.fromhex(value)
            except ValueError:
                raise AuthenticationError("create authentication context error.") from None
    return username, signature
