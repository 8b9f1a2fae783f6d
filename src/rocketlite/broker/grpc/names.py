"""Namespaces of 5.x clients: a client configured with a namespace sends it as `x-mq-namespace` and
as `resource_namespace` on every `Resource`; the broker stores the resource as `<namespace>%<name>`,
the name a 4.x client with the same namespace uses (Java's `NamespaceUtil`, which RocketMQ's proxy
applied to every gRPC resource up to 5.1).

- `wrap("ns", "T")` is `"ns%T"`, `wrap("ns", "%RETRY%G")` is `"%RETRY%ns%G"`; system topics and
  groups, and names already in the namespace, are left as they are;
- `unwrap("ns", "ns%T")` is `"T"` (what a client of that namespace is shown).

The endpoint applies both at its edge (`auth.GrpcGuard`): handlers see the wrapped names in the
request, and the `Resource`s of their answers are unwrapped for the client, so a handler never
deals with namespaces itself.
"""

from __future__ import annotations

from typing import Any

from rocketlite.protocol.reserved import (
    BENCHMARK_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    is_sys_topic,
)

SEPARATOR = "%"
RESOURCE = "apache.rocketmq.v2.Resource"
SYS_GROUP_PREFIX = "CID_RMQ_SYS_"


def _is_system(name: str) -> bool:
    """`TopicValidator.isSystemTopic` or `MixAll.isSysConsumerGroup`: never namespaced."""
    return is_sys_topic(name) or name == BENCHMARK_TOPIC or name.startswith(SYS_GROUP_PREFIX)


def _split_prefix(name: str) -> tuple[str, str]:
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if name.startswith(prefix):
            return prefix, name[len(prefix) :]
    return "", name


def wrap(namespace: str, name: str) -> str:
    """`name` inside `namespace` (`NamespaceUtil.wrapNamespace`)."""
    if not namespace or not name or _is_system(name):
        return name
    prefix, bare = _split_prefix(name)
    if bare.startswith(namespace + SEPARATOR):
        return name
    return f"{prefix}{namespace}{SEPARATOR}{bare}"


def unwrap(namespace: str, name: str) -> str:
    """`name` as a client of `namespace` knows it; a name outside that namespace is unchanged."""
    if not namespace or not name:
        return name
    prefix, bare = _split_prefix(name)
    if bare.startswith(namespace + SEPARATOR):
        return prefix + bare[len(namespace) + 1 :]
    return name


def wrap_resource(resource: Any) -> str:
    """Put a `Resource` into its own `resource_namespace` in place (the name becomes
    `<namespace>%<name>`, the namespace field empty); returns the namespace ("" when none)."""
    namespace: str = resource.resource_namespace
    if namespace:
        resource.name = wrap(namespace, resource.name)
        resource.resource_namespace = ""
    return namespace


def unwrap_resources(message: Any, namespace: str) -> None:
    """Every `Resource` anywhere in `message` (an answer) shown as a client of `namespace` sees it:
    the bare name with `resource_namespace` set. Walks the message's set fields, maps aside."""
    for field, value in message.ListFields():
        if field.message_type is None or field.message_type.GetOptions().map_entry:
            continue
        items = value if field.is_repeated else (value,)
        if field.message_type.full_name == RESOURCE:
            for resource in items:
                bare = unwrap(namespace, resource.name)
                if bare != resource.name:
                    resource.name = bare
                    resource.resource_namespace = namespace
        else:
            for item in items:
                unwrap_resources(item, namespace)
