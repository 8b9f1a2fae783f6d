"""The send side of 5.x timer messages: which sends are timers, and how one is parked.

A producer asks for a delivery time with one of three properties (RocketMQ 5's `MessageConst`):
`TIMER_DELAY_SEC` (seconds from now), `TIMER_DELAY_MS` (milliseconds from now) or
`TIMER_DELIVER_MS` (absolute epoch milliseconds), read in that order of precedence as RocketMQ's
`HookUtils.transformTimerMessage` does. The 5.x gRPC send maps a DELAY message's
`delivery_timestamp` to `TIMER_DELIVER_MS`.

As in RocketMQ:

- a message with a 4.x `DELAY` level is not a timer: its TIMER_* request properties are removed
  and the level wins (`checkIfTimerMessage`);
- a message that already carries `TIMER_OUT_MS` (one the timer delivered, sent back later) is not
  parked again;
- only plain and committed messages are timers (a transaction half is not delayed);
- a value that is not a whole number is refused with MESSAGE_ILLEGAL, as is a time more than
  `timerMaxDelaySec` ahead;
- a time not in the future is delivered at once: the message is stored in its topic as sent.

Parking moves the message to `rmq_sys_wheel_timer` queue 0 with `REAL_TOPIC`, `REAL_QID` and
`TIMER_OUT_MS` (the delivery time) added, the way the schedule topic holds 4.x delayed messages.
Unlike RocketMQ, the delivery time is not rounded down to `timerPrecisionMs`: a message is never
delivered before the time asked for.
"""

from __future__ import annotations

import re

from rocketlite.protocol import reserved
from rocketlite.protocol.errors import MessageIllegalError
from rocketlite.protocol.formats.record import MessageInner
from rocketlite.protocol.message import (
    MessageConst,
    MessageSysFlag,
    properties_to_string,
    string_to_properties,
)

TIMER_TOPIC = reserved.TIMER_TOPIC
TIMER_QUEUE_ID = 0
TIMER_NEEDLE = "TIMER_"
"""A substring of every timer request property: the send path looks no further without it."""

_REQUEST_PROPERTIES = (
    MessageConst.TIMER_DELAY_SEC,
    MessageConst.TIMER_DELAY_MS,
    MessageConst.TIMER_DELIVER_MS,
)
_LONG = re.compile(r"[+-]?[0-9]{1,19}")  # what Java's Long.parseLong takes (range checked below)
_LONG_MAX = 2**63 - 1


def _parse_long(name: str, text: str) -> int:
    value = int(text) if _LONG.fullmatch(text) else None
    if value is None or not -_LONG_MAX - 1 <= value <= _LONG_MAX:
        raise MessageIllegalError(f"timer message illegal: {name}={text!r} is not a whole number")
    return value


def asks_for_timer(properties: str) -> bool:
    """Whether an encoded properties string asks for a delivery time (and was not delivered yet)."""
    if TIMER_NEEDLE not in properties:
        return False
    props = string_to_properties(properties)
    return MessageConst.TIMER_OUT_MS not in props and any(name in props for name in _REQUEST_PROPERTIES)


def deliver_ms_of(props: dict[str, str], now_ms: int) -> int | None:
    """The delivery time a message's properties ask for; None when they ask for none."""
    sec = props.get(MessageConst.TIMER_DELAY_SEC)
    if sec is not None:
        return now_ms + _parse_long(MessageConst.TIMER_DELAY_SEC, sec) * 1000
    ms = props.get(MessageConst.TIMER_DELAY_MS)
    if ms is not None:
        return now_ms + _parse_long(MessageConst.TIMER_DELAY_MS, ms)
    deliver = props.get(MessageConst.TIMER_DELIVER_MS)
    if deliver is not None:
        return _parse_long(MessageConst.TIMER_DELIVER_MS, deliver)
    return None


def park_timer_message(msg: MessageInner, now_ms: int, max_delay_sec: int) -> int | None:
    """Park `msg` (in place) in the timer topic when it asks for a future delivery time.

    Returns the delivery time when parked, None when the message is stored as it is (no timer, a
    DELAY level, already delivered once, a transaction half, or a time not in the future).
    Raises `MessageIllegalError` (MESSAGE_ILLEGAL) for a value that is not a number or a time
    beyond `max_delay_sec`.
    """
    text = msg.properties_string
    if TIMER_NEEDLE not in text:
        return None
    tran = msg.sys_flag & MessageSysFlag.TRANSACTION_MASK
    if tran not in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE):
        return None
    props = string_to_properties(text)
    level = props.get(MessageConst.DELAY_TIME_LEVEL, "0")
    if level.lstrip("-").isdigit() and int(level) > 0:
        removed = [props.pop(name, None) for name in _REQUEST_PROPERTIES]
        if any(value is not None for value in removed):
            msg.properties_string = properties_to_string(props)
        return None
    if msg.topic == TIMER_TOPIC or MessageConst.TIMER_OUT_MS in props:
        return None
    deliver_ms = deliver_ms_of(props, now_ms)
    if deliver_ms is None or deliver_ms <= now_ms:
        return None
    if deliver_ms - now_ms > max_delay_sec * 1000:
        raise MessageIllegalError(
            "timer message illegal, the delay time should not be bigger than the max delay "
            f"{max_delay_sec * 1000}ms (timerMaxDelaySec); this message asks for "
            f"{deliver_ms - now_ms}ms from now"
        )
    props[MessageConst.TIMER_OUT_MS] = str(deliver_ms)
    props[MessageConst.REAL_TOPIC] = msg.topic
    props[MessageConst.REAL_QUEUE_ID] = str(msg.queue_id)
    msg.properties_string = properties_to_string(props)
    msg.topic = TIMER_TOPIC
    msg.queue_id = TIMER_QUEUE_ID
    return deliver_ms
