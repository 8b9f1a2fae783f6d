"""The ACL 2.0 verbs' flags (mqadmin 5.3's `command/auth`), wired to `auth`'s operations and
`render`'s output."""

from __future__ import annotations

import argparse

from rocketlite.admin import auth, render
from rocketlite.admin.verb import Verb
from rocketlite.admin.verb import broker_or_cluster as _broker_or_cluster


def _cfg_user(p: argparse.ArgumentParser, *, password: bool = True, kind: bool = True) -> None:
    _broker_or_cluster(p, "for users")
    p.add_argument("-u", "--username", required=True, help="the user's name")
    if password:
        p.add_argument("-p", "--password", required=True, help="the user's password")
    if kind:
        p.add_argument("-t", "--userType", dest="user_type", help="Super or Normal (default Normal)")


def _cfg_update_user(p: argparse.ArgumentParser) -> None:
    _cfg_user(p, password=False, kind=False)
    p.add_argument("-p", "--password", help="the new password")
    p.add_argument("-t", "--userType", dest="user_type", help="Super or Normal")
    p.add_argument("-s", "--userStatus", dest="user_status", help="enable or disable")


def _cfg_list_user(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p, "users")
    p.add_argument("-f", "--filter", dest="filter_", help="only users whose name contains this")


def _cfg_acl(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p, "ACLs")
    p.add_argument("-s", "--subject", required=True, help="User:NAME")
    p.add_argument(
        "-r",
        "--resources",
        required=True,
        help="comma-separated: Topic:NAME, Group:NAME, Cluster:NAME, a * or prefix* pattern",
    )
    p.add_argument(
        "-a", "--actions", required=True, help="comma-separated: Pub, Sub, Get, Update, Create, Delete, All"
    )
    p.add_argument("-i", "--sourceIp", dest="source_ip", help="comma-separated addresses or CIDRs")
    p.add_argument("-d", "--decision", required=True, help="Allow or Deny")  # fmt: skip


def _cfg_delete_acl(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p, "ACLs")
    p.add_argument("-s", "--subject", required=True, help="User:NAME")
    p.add_argument("-r", "--resources", dest="resource", help="only this resource's entry")
    p.add_argument("-t", "--policyType", dest="policy_type", help="Custom or Default")


def _cfg_get_acl(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p, "ACLs")
    p.add_argument("-s", "--subject", required=True, help="User:NAME")


def _cfg_list_acl(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p, "ACLs")
    p.add_argument("-s", "--subject", help="only subjects containing this")
    p.add_argument("-r", "--resource", help="only ACLs with a resource containing this")


def _acl_verb(name: str, help_: str, update: bool) -> Verb:
    return Verb(name, help_, _cfg_acl,
                lambda a, ns: auth.put_acl(
                    a, update=update, subject=ns.subject, resources=ns.resources, actions=ns.actions,
                    source_ips=ns.source_ip, decision=ns.decision, broker_addr=ns.broker_addr,
                    cluster=ns.cluster),
                render.auth_written("update" if update else "create", "acl to"))  # fmt: skip


AUTH_VERBS: tuple[Verb, ...] = (
    Verb("createUser", "Create user to cluster (ACL 2.0)", _cfg_user,
         lambda a, ns: auth.create_user(
             a, username=ns.username, password=ns.password, user_type=ns.user_type,
             broker_addr=ns.broker_addr, cluster=ns.cluster),
         render.auth_written("create", "user to")),
    Verb("updateUser", "Update user to cluster (ACL 2.0)", _cfg_update_user,
         lambda a, ns: auth.update_user(
             a, username=ns.username, password=ns.password, user_type=ns.user_type,
             user_status=ns.user_status, broker_addr=ns.broker_addr, cluster=ns.cluster),
         render.auth_written("update", "user to")),
    Verb("deleteUser", "Delete user from cluster (ACL 2.0)",
         lambda p: _cfg_user(p, password=False, kind=False),
         lambda a, ns: auth.delete_user(
             a, username=ns.username, broker_addr=ns.broker_addr, cluster=ns.cluster),
         render.auth_written("delete", "user from")),
    Verb("getUser", "Get user from cluster (ACL 2.0)", lambda p: _cfg_user(p, password=False, kind=False),
         lambda a, ns: auth.get_user(a, username=ns.username, broker_addr=ns.broker_addr, cluster=ns.cluster),
         render.get_user),
    Verb("listUser", "List users from cluster (ACL 2.0)", _cfg_list_user,
         lambda a, ns: auth.list_user(a, filter_=ns.filter_, broker_addr=ns.broker_addr, cluster=ns.cluster),
         render.list_user),
    _acl_verb("createAcl", "Create acl to cluster (ACL 2.0)", update=False),
    _acl_verb("updateAcl", "Update acl to cluster (ACL 2.0)", update=True),
    Verb("deleteAcl", "Delete acl from cluster (ACL 2.0)", _cfg_delete_acl,
         lambda a, ns: auth.delete_acl(
             a, subject=ns.subject, resource=ns.resource, policy_type=ns.policy_type,
             broker_addr=ns.broker_addr, cluster=ns.cluster),
         render.auth_written("delete", "acl to")),
    Verb("getAcl", "Get acl from cluster (ACL 2.0)", _cfg_get_acl,
         lambda a, ns: auth.get_acl(a, subject=ns.subject, broker_addr=ns.broker_addr, cluster=ns.cluster),
         render.acls),
    Verb("listAcl", "List acls from cluster (ACL 2.0)", _cfg_list_acl,
         lambda a, ns: auth.list_acl(
             a, subject=ns.subject, resource=ns.resource, broker_addr=ns.broker_addr, cluster=ns.cluster),
         render.acls),
)  # fmt: skip
