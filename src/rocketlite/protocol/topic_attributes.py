"""RocketMQ 5's topic attributes: what a topic declares about itself (`message.type`, ...).

On the wire, UPDATE_AND_CREATE_TOPIC's `attributes` header field carries changes as text
(`AttributeParser`): "+key=value" adds or changes a key, "-key" deletes it, comma-separated,
e.g. "+message.type=FIFO,-cleanup.policy". The batch request (18) carries the same changes as a
map in each TopicConfig's "attributes" ({"+message.type": "FIFO"}). The broker applies them to
the topic's current attributes (`AttributeUtil.alterCurrentAttributes`) and stores the result
without signs: {"message.type": "FIFO"}, in topics.json, GET_ALL_TOPIC_CONFIG and GET_TOPIC_CONFIG.

The attributes a 5.3 broker knows (`TopicAttributes.ALL`):

| key | values | changeable after creation |
| --- | --- | --- |
| queue.type | BatchCQ, SimpleCQ | no |
| cleanup.policy | DELETE, COMPACTION | no |
| message.type | UNSPECIFIED, NORMAL, FIFO, DELAY, TRANSACTION, MIXED | yes |
| reserve.time | -1 .. Long.MAX_VALUE | yes (tiered store only) |

Every refusal is a `TopicAttributeError` whose text is RocketMQ's exception message, which its
broker answers as the remark of a SYSTEM_ERROR.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

MESSAGE_TYPE = "message.type"
MESSAGE_TYPES = ("UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")
RESERVE_TIME = "reserve.time"
_JAVA_LONG_MAX = 2**63 - 1


class TopicAttributeError(ValueError):
    """A change RocketMQ refuses; the text is its exception's message."""


@dataclass(frozen=True, slots=True)
class _Attribute:
    name: str
    changeable: bool
    values: tuple[str, ...] = ()  # an EnumAttribute's universe; empty: a LongRangeAttribute

    def verify(self, value: str) -> None:
        if self.values:
            if value not in self.values:
                # Java prints its HashSet; the order of its elements is not part of the contract
                raise TopicAttributeError(f"value is not in set: [{', '.join(self.values)}]")
            return
        try:
            number = int(value)
        except ValueError:
            raise TopicAttributeError(f'For input string: "{value}"') from None
        if not -1 <= number <= _JAVA_LONG_MAX:
            raise TopicAttributeError(f"value is not in range(-1, {_JAVA_LONG_MAX})")


ALL: Mapping[str, _Attribute] = {
    a.name: a
    for a in (
        _Attribute("queue.type", False, ("BatchCQ", "SimpleCQ")),
        _Attribute("cleanup.policy", False, ("DELETE", "COMPACTION")),
        _Attribute(MESSAGE_TYPE, True, MESSAGE_TYPES),
        _Attribute(RESERVE_TIME, True),
    )
}


def parse_modification(text: str | None) -> dict[str, str]:
    """`AttributeParser.parseToMap`: "+k=v,-k2" -> {"+k": "v", "-k2": ""} (signs kept)."""
    if not text:
        return {}
    out: dict[str, str] = {}
    for kv in text.split(","):
        if "=" in kv:
            key, value = kv.split("=")[:2]
            if "+" not in key:
                raise TopicAttributeError(f"add/alter attribute format is wrong: {key}")
        else:
            key, value = kv, ""
            if "-" not in key:
                raise TopicAttributeError(f"delete attribute format is wrong: {key}")
        if key in out:
            raise TopicAttributeError(f"key duplication: {key}")
        out[key] = value
    return out


def format_modification(changes: Mapping[str, str]) -> str:
    """`AttributeParser.parseToString`: the header text for `changes` ({"+k": "v"} -> "+k=v")."""
    return ",".join(k if not v else f"{k}={v}" for k, v in changes.items())


def alter(create: bool, current: Mapping[str, str], changes: Mapping[str, str]) -> dict[str, str]:
    """`AttributeUtil.alterCurrentAttributes`: `current` with `changes` applied, or the refusal.

    A new topic (`create`) takes additions only; an existing one may add, change and delete,
    but not change an unchangeable key. Values are checked against the attribute's range."""
    seen: set[str] = set()
    adds: dict[str, str] = {}
    deletes: list[str] = []
    for key, value in changes.items():
        real = key[1:]
        if not real or "+" in real or "-" in real:
            raise TopicAttributeError("kv string format wrong.")
        if real in seen:
            raise TopicAttributeError(f"alter duplication key. key: {real}")
        seen.add(real)
        if key.startswith("+"):
            adds[real] = value
        elif create:
            raise TopicAttributeError(f"only add attribute is supported while creating topic. key: {real}")
        elif key.startswith("-"):
            if real not in current:
                raise TopicAttributeError(f"attempt to delete a nonexistent key: {real}")
            deletes.append(real)
        else:
            raise TopicAttributeError(f"wrong format key: {real}")
    for real, value in adds.items():
        _check(real, value, initial=create)
    for real in deletes:
        _check(real, None, initial=False)
    out = {**current, **adds}
    for real in deletes:
        out.pop(real, None)
    return out


def _check(key: str, value: str | None, *, initial: bool) -> None:
    attribute = ALL.get(key)
    if attribute is None:
        raise TopicAttributeError(f"unsupported key: {key}")
    if not initial and not attribute.changeable:
        raise TopicAttributeError(f"attempt to update an unchangeable attribute. key: {key}")
    if value is not None:
        attribute.verify(value)
