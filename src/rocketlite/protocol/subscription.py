"""Subscription expressions (`FilterAPI`, `ExpressionType`): `"*"` or `"TagA || TagB"` to the tag set
and the tag-hash code set a consume queue is filtered by.

The SDK builds the subscription it sends in heartbeats and pulls with `build_subscription_data`;
the broker rebuilds the code set from the same expression (the C++ client sends zeros) and filters
consume-queue units with `tag_codes`. One parser, so both sides agree on what matches.
"""

from __future__ import annotations

from typing import Final

from rocketlite.protocol.bodies.heartbeat import SubscriptionData
from rocketlite.protocol.message import tags_code

SUB_ALL: Final = "*"
TAG_EXPRESSION: Final = "TAG"


def is_tag_type(expression_type: str | None) -> bool:
    """`ExpressionType.isTagType`: no type means TAG."""
    return expression_type is None or expression_type == TAG_EXPRESSION


def parse_tags(sub_string: str) -> tuple[str, ...]:
    """`FilterAPI.buildSubscriptionData`'s split: `||`-separated, trimmed, empties dropped.

    Raises ValueError where Java's `String.split` yields no element at all (only separators).
    """
    parts = sub_string.split("||")
    while parts and parts[-1] == "":  # Java's split drops trailing empty strings
        parts.pop()
    if not parts:
        raise ValueError(f"subString split error: {sub_string!r}")
    tags: list[str] = []
    for part in parts:
        tag = part.strip()
        if tag and tag not in tags:
            tags.append(tag)
    return tuple(tags)


def build_subscription_data(
    topic: str, sub_string: str | None, expression_type: str | None = None, sub_version: int = 0
) -> SubscriptionData:
    """`FilterAPI.build`: a subscription with tagsSet/codeSet computed from the expression."""
    if not is_tag_type(expression_type):
        return SubscriptionData(
            topic, sub_string or "", sub_version=sub_version, expression_type=expression_type or ""
        )
    if not sub_string or sub_string == SUB_ALL:
        return SubscriptionData(topic, SUB_ALL, sub_version=sub_version)
    tags = parse_tags(sub_string)
    return SubscriptionData(
        topic, sub_string, tags, tuple(tags_code(t) for t in tags), sub_version=sub_version
    )


def tag_codes(sub: SubscriptionData | None) -> frozenset[int] | None:
    """The CQ tag codes `sub` accepts, or None when it accepts everything
    (`ExpressionMessageFilter.isMatchedByConsumeQueue`: no subscription, class filter, `*`, or an
    expression that is not a tag expression, which is judged on the message's properties)."""
    if (
        sub is None
        or sub.class_filter_mode
        or sub.sub_string == SUB_ALL
        or not is_tag_type(sub.expression_type)
    ):
        return None
    return frozenset(sub.code_set)
