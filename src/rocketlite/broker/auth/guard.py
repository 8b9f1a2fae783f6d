"""ACL 2.0 in front of every remoting handler of the broker's client port: authentication, then
authorization (`checks`), as RocketMQ 5.3's `AuthenticationPipeline` and
`AuthorizationPipeline` run before any processor. A refusal is answered NO_PERMISSION (16) with
the reason as remark and the handler never runs; a request whose resources cannot be read (a
heartbeat body that is not JSON) is refused "parse authorization context error." (the cause
follows), as Java refuses it.
"""

from __future__ import annotations

import logging

from rocketlite.broker.acl import remote_ip
from rocketlite.broker.auth.checks import AuthChecks
from rocketlite.broker.auth.contexts import remoting_needs
from rocketlite.broker.auth.model import AuthError
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.wire.acl_signature import ACCESS_KEY
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.remoting.connection import Connection, Handler, RequestTable, WireResult

log = logging.getLogger("rocketlite.broker.auth")


class AuthRequestTable(RequestTable):
    """The broker's request table behind ACL 2.0's checks (authenticationEnabled /
    authorizationEnabled). Registrations on either table are seen by both."""

    def __init__(self, inner: RequestTable, checks: AuthChecks) -> None:
        super().__init__(default=inner.default)
        self.handlers = inner.handlers
        self.inner = inner
        self.checks = checks

    def check(self, conn: Connection, request: RemotingCommand) -> None:
        """Raise AuthError when `request` may not be served."""
        checks = self.checks
        checks.authenticate_remoting(request)
        if not checks.settings.authorization_enabled:
            return
        try:
            needs = remoting_needs(request, checks.settings.cluster)
        except (ProtocolError, ValueError, KeyError) as exc:
            raise AuthError(f"parse authorization context error. ({exc})") from exc
        user = request.ext_fields.get(ACCESS_KEY)
        checks.authorize(user, needs, remote_ip(conn.remote_address), str(request.code))

    def lookup(self, code: int) -> Handler | None:
        handler = self.inner.lookup(code)
        if handler is None:
            return None

        def checked(conn: Connection, request: RemotingCommand) -> WireResult:
            try:
                self.check(conn, request)
            except AuthError as exc:
                log.debug("ACL 2.0 refused code %d from %s: %s", request.code, conn.remote_address, exc)
                return make_response(request, ResponseCode.NO_PERMISSION, exc.remark)
            return handler(conn, request)

        return checked
