"""RocketMQ's reserved names and ids (Java `MixAll`, `TopicValidator`): system topics, the retry and
dead-letter prefixes, the master's broker id.

Broker, SDK, admin CLI and Spark all recognise these names; each takes them from here.
"""

from __future__ import annotations

from typing import Final

MASTER_ID: Final = 0
"""`MixAll.MASTER_ID`: the broker id of a master in routes and registrations; slaves are > 0."""

DEFAULT_TOPIC: Final = "TBW102"
SELF_TEST_TOPIC: Final = "SELF_TEST_TOPIC"
BENCHMARK_TOPIC: Final = "BenchmarkTest"
OFFSET_MOVED_EVENT: Final = "OFFSET_MOVED_EVENT"
SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
TRANS_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
TIMER_TOPIC: Final = "rmq_sys_wheel_timer"
"""`TimerMessageStore.TIMER_TOPIC`: where 5.x timer messages wait for their delivery time."""
RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"

NOT_ALLOWED_SEND_TOPICS: Final = frozenset(
    {SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC,
     OFFSET_MOVED_EVENT, TIMER_TOPIC}
)  # fmt: skip
"""`TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`, plus the timer topic: topics producers may not send
to (a message sent straight into the timer topic would be delivered wherever its REAL_TOPIC says)."""


REPLY_TOPIC_POSTFIX: Final = "REPLY_TOPIC"


def reply_topic(cluster: str) -> str:
    """`MixAll.getReplyTopic`: where a cluster's request-reply answers go (`<cluster>_REPLY_TOPIC`)."""
    return f"{cluster}_{REPLY_TOPIC_POSTFIX}"


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_sys_topic(topic: str) -> bool:
    return topic in NOT_ALLOWED_SEND_TOPICS or topic.startswith("rmq_sys_") or topic == DEFAULT_TOPIC
