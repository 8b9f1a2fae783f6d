"""ACL 2.0's admin requests on the wire (RocketMQ 5.3, RIP-68): request codes 3001-3010 and their
custom headers, field for field as Java's `CreateUserRequestHeader` ... `ListAclsRequestHeader`.

The users and ACLs themselves travel as JSON bodies (`protocol.bodies.auth`): UserInfo with
AUTH_CREATE_USER / AUTH_UPDATE_USER and in the answers of AUTH_GET_USER / AUTH_LIST_USER, AclInfo
with AUTH_CREATE_ACL / AUTH_UPDATE_ACL and in the answers of AUTH_GET_ACL / AUTH_LIST_ACL. A
delete carries its key in the header only. Every field is optional on the wire: the broker answers
a missing one itself (INVALID_PARAMETER "The username is blank", or NO_PERMISSION with the
manager's reason), as Java's `AdminBrokerProcessor` does, rather than the codec's "custom field is
null".
"""

from __future__ import annotations

from enum import IntEnum

from rocketlite.protocol.wire.custom_header import CustomHeader
from rocketlite.protocol.wire.custom_header import header_dataclass as _header


class AuthRequestCode(IntEnum):
    """`RequestCode.AUTH_*` of RocketMQ 5.3."""

    AUTH_CREATE_USER = 3001
    AUTH_UPDATE_USER = 3002
    AUTH_DELETE_USER = 3003
    AUTH_GET_USER = 3004
    AUTH_LIST_USER = 3005
    AUTH_CREATE_ACL = 3006
    AUTH_UPDATE_ACL = 3007
    AUTH_DELETE_ACL = 3008
    AUTH_GET_ACL = 3009
    AUTH_LIST_ACL = 3010


@_header
class UserRequestHeader(CustomHeader):
    """Create/Update/Delete/GetUserRequestHeader (3001-3004): the user's name."""

    username: str | None = None


@_header
class ListUsersRequestHeader(CustomHeader):
    """AUTH_LIST_USER (3005): names containing `filter` (all when blank)."""

    filter: str | None = None


@_header
class AclRequestHeader(CustomHeader):
    """Create/Update/GetAclRequestHeader (3006, 3007, 3009): the subject, `User:<name>`."""

    subject: str | None = None


@_header
class DeleteAclRequestHeader(CustomHeader):
    """AUTH_DELETE_ACL (3008): the whole ACL of `subject`, or only the entry of `resource` in the
    policy of `policy_type` (Custom when absent)."""

    subject: str | None = None
    policy_type: str | None = None
    resource: str | None = None


@_header
class ListAclsRequestHeader(CustomHeader):
    """AUTH_LIST_ACL (3010): subjects containing `subject_filter`; entries whose resource contains
    `resource_filter`."""

    subject_filter: str | None = None
    resource_filter: str | None = None
