"""`PermName` bits and `TopicValidator`'s name rule: what a topic's perm means, which names are legal.

The broker enforces them; the admin CLI and the SDK print and pre-check with the same rules."""

from __future__ import annotations

import re

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1

TOPIC_NAME_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")
TOPIC_MAX_LENGTH = 127


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def is_inherited(perm: int) -> bool:
    return bool(perm & PERM_INHERIT)


def perm_to_string(perm: int) -> str:
    return (
        ("R" if perm & PERM_READ else "-")
        + ("W" if perm & PERM_WRITE else "-")
        + ("X" if perm & PERM_INHERIT else "-")
    )


def topic_name_problem(topic: str) -> str | None:
    """Why `topic` is not a legal name (RocketMQ's `TopicValidator.validateTopic`), or None."""
    if not topic:
        return "the specified topic is blank"
    if not TOPIC_NAME_RE.match(topic):
        return "the specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic.encode("utf-8")) > TOPIC_MAX_LENGTH:
        return f"the specified topic is longer than topic max length {TOPIC_MAX_LENGTH}"
    return None
