"""AUTH_* 3001-3010: ACL 2.0's users and ACLs managed remotely (mqadmin 5.3's createUser ...
listAcl, the dashboard's ACL page), answered as RocketMQ 5.3's `AdminBrokerProcessor` answers.

Who may: the request passes the checks of `checks` first, where these codes need Update (writes)
or Get (reads) on `Cluster:<brokerClusterName>`, so super users and users granted that resource
may manage. On top, only a super user may create or update a super user, turn a user into one,
or change or delete a super user ("The super user can only be create by super user" (SYSTEM_ERROR,
as Java), "... update by super user" (NO_PERMISSION)). With authentication off, requests carry no
user and these checks do not apply, as in Java.

Answers: SUCCESS with no body for the writes; AUTH_GET_USER / AUTH_GET_ACL a UserInfo / AclInfo
body, or none when there is no such user or ACL; AUTH_LIST_* a JSON array, or no body when empty.
A blank user name is INVALID_PARAMETER "The username is blank"; what the manager refuses is
NO_PERMISSION with its reason; an unreadable body is SYSTEM_ERROR naming the cause.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from rocketlite.broker.auth.manager import AuthMetadata, acl_info, user_info
from rocketlite.broker.auth.model import AuthenticationError, AuthError, UserType
from rocketlite.protocol.bodies.auth import AclInfo, UserInfo, acls_to_bytes, users_to_bytes
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.wire.acl_signature import ACCESS_KEY
from rocketlite.protocol.wire.admin import INVALID_PARAMETER
from rocketlite.protocol.wire.auth import (
    AclRequestHeader,
    AuthRequestCode,
    DeleteAclRequestHeader,
    ListAclsRequestHeader,
    ListUsersRequestHeader,
    UserRequestHeader,
)
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.remoting.connection import Connection, Handler

log = logging.getLogger("rocketlite.broker.auth")


class _RefusedError(Exception):
    """A write refused with a code of its own (not the manager's NO_PERMISSION) and a remark."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


_Write = Callable[["AuthAdminProcessor", RemotingCommand], None]


def _write(fn: _Write) -> Callable[[AuthAdminProcessor, Connection, RemotingCommand], RemotingCommand]:
    """A write handler from `fn`: SUCCESS with no body once it returns, else the refusal it raised
    (`_RefusedError`, or what `AuthAdminProcessor._answer` words)."""

    @functools.wraps(fn)
    def handler(self: AuthAdminProcessor, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        try:
            fn(self, request)
        except _RefusedError as exc:
            return make_response(request, exc.code, exc.remark)
        except (AuthError, ProtocolError, OSError) as exc:
            return self._answer(request, exc)
        return make_response(request, ResponseCode.SUCCESS)

    return handler


class AuthAdminProcessor:
    """The ten AUTH_* handlers over one broker's `AuthMetadata`."""

    def __init__(self, metadata: AuthMetadata) -> None:
        self.metadata = metadata

    def handlers(self) -> dict[int, Handler]:
        c = AuthRequestCode
        return {
            c.AUTH_CREATE_USER: self.create_user,
            c.AUTH_UPDATE_USER: self.update_user,
            c.AUTH_DELETE_USER: self.delete_user,
            c.AUTH_GET_USER: self.get_user,
            c.AUTH_LIST_USER: self.list_user,
            c.AUTH_CREATE_ACL: self.put_acl,
            c.AUTH_UPDATE_ACL: self.put_acl,
            c.AUTH_DELETE_ACL: self.delete_acl,
            c.AUTH_GET_ACL: self.get_acl,
            c.AUTH_LIST_ACL: self.list_acl,
        }

    def _not_super(self, request: RemotingCommand) -> bool:
        """isNotSuperUserLogin: a request signed by a user that is not super (none: auth is off)."""
        name = request.ext_fields.get(ACCESS_KEY)
        if not name:
            return False
        user = self.metadata.get_user(name)
        return user is None or not user.is_super

    @staticmethod
    def _answer(request: RemotingCommand, exc: AuthError | ProtocolError | OSError) -> RemotingCommand:
        if isinstance(exc, AuthError):
            return make_response(request, ResponseCode.NO_PERMISSION, exc.remark)
        if isinstance(exc, ProtocolError):
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"bad request body: {exc}")
        log.error("writing the ACL 2.0 users and ACLs failed", exc_info=exc)
        return make_response(request, ResponseCode.SYSTEM_ERROR, f"writing the users and ACLs failed: {exc}")

    # -- users ---------------------------------------------------------------------------------
    def _user_body(self, request: RemotingCommand, verb: str) -> tuple[str, UserInfo]:
        """The user a create or update writes; a blank name or a super user written by a user that
        is not super is refused."""
        name = UserRequestHeader.from_ext(request.ext_fields).username
        info = UserInfo.from_json(request.body or b"{}")
        if not name:
            raise _RefusedError(INVALID_PARAMETER, "The username is blank")
        if UserType.by_name(info.user_type) is UserType.SUPER and self._not_super(request):
            raise _RefusedError(ResponseCode.SYSTEM_ERROR, f"The super user can only be {verb} by super user")
        return name, UserInfo(name, info.password, info.user_type, info.user_status)

    @_write
    def create_user(self, request: RemotingCommand) -> None:
        self.metadata.create_user(self._user_body(request, "create")[1])

    @_write
    def update_user(self, request: RemotingCommand) -> None:
        name, info = self._user_body(request, "update")
        old = self.metadata.get_user(name)
        if old is None:
            raise AuthenticationError("The user is not exist")
        if old.is_super and self._not_super(request):
            raise AuthenticationError("The super user can only be update by super user")
        self.metadata.update_user(info)

    @_write
    def delete_user(self, request: RemotingCommand) -> None:
        name = UserRequestHeader.from_ext(request.ext_fields).username or ""
        user = self.metadata.get_user(name)
        if user is not None:
            if user.is_super and self._not_super(request):
                raise AuthenticationError("The super user can only be update by super user")
            self.metadata.delete_user(name)

    def get_user(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        name = UserRequestHeader.from_ext(request.ext_fields).username
        if not name or not name.strip():
            return make_response(request, INVALID_PARAMETER, "The username is blank")
        user = self.metadata.get_user(name)
        body = user_info(user).to_bytes() if user is not None else None
        return make_response(request, ResponseCode.SUCCESS, body=body)

    def list_user(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        users = self.metadata.list_users(ListUsersRequestHeader.from_ext(request.ext_fields).filter)
        body = users_to_bytes([user_info(u) for u in users]) if users else None
        return make_response(request, ResponseCode.SUCCESS, body=body)

    # -- ACLs ----------------------------------------------------------------------------------
    @_write
    def put_acl(self, request: RemotingCommand) -> None:
        """AUTH_CREATE_ACL and AUTH_UPDATE_ACL: Java serves both alike (merge into the ACL)."""
        subject = AclRequestHeader.from_ext(request.ext_fields).subject
        info = AclInfo.from_json(request.body) if request.body else None
        if info is None or not info.policies:
            raise AuthError("The body of acl is null")
        self.metadata.put_acl(info, subject)

    @_write
    def delete_acl(self, request: RemotingCommand) -> None:
        header = DeleteAclRequestHeader.from_ext(request.ext_fields)
        self.metadata.delete_acl(header.subject, header.policy_type, header.resource)

    def get_acl(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        try:
            acl = self.metadata.get_acl(AclRequestHeader.from_ext(request.ext_fields).subject)
        except AuthError as exc:
            return self._answer(request, exc)
        body = acl_info(acl).to_bytes() if acl is not None else None
        return make_response(request, ResponseCode.SUCCESS, body=body)

    def list_acl(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = ListAclsRequestHeader.from_ext(request.ext_fields)
        acls = self.metadata.list_acls(header.subject_filter, header.resource_filter)
        body = acls_to_bytes([acl_info(a) for a in acls]) if acls else None
        return make_response(request, ResponseCode.SUCCESS, body=body)
