"""`PermName` bits and the topic rules RocketMQ enforces (names, system topics)."""

from __future__ import annotations

import re

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1

TOPIC_NAME_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")
TOPIC_MAX_LENGTH = 127

DEFAULT_TOPIC = "TBW102"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
BENCHMARK_TOPIC = "BenchmarkTest"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"

# Topics producers may not send to (`TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`).
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC,
     OFFSET_MOVED_EVENT}
)  # fmt: skip


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


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_sys_topic(topic: str) -> bool:
    return topic in NOT_ALLOWED_SEND_TOPICS or topic.startswith("rmq_sys_") or topic == DEFAULT_TOPIC
