"""RocketMQ 5's topic attributes: the change text of UPDATE_AND_CREATE_TOPIC, how changes apply to a
topic's current attributes, and how a topic with attributes is written (JSON and the compressed
registration's text form), each refusal with RocketMQ's text."""

from __future__ import annotations

import pytest

from rocketlite.protocol.bodies.route import RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from rocketlite.protocol.topic_attributes import (
    TopicAttributeError,
    alter,
    format_modification,
    parse_modification,
)
from rocketlite.protocol.wire import fastjson


def test_change_text_round_trip() -> None:
    changes = parse_modification("+message.type=FIFO,-cleanup.policy")
    assert changes == {"+message.type": "FIFO", "-cleanup.policy": ""}
    assert format_modification(changes) == "+message.type=FIFO,-cleanup.policy"
    assert parse_modification(None) == {} == parse_modification("")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("message.type=FIFO", "add/alter attribute format is wrong: message.type"),
        ("message.type", "delete attribute format is wrong: message.type"),
        ("+a=1,+a=2", "key duplication: +a"),
    ],
)
def test_bad_change_text(text: str, why: str) -> None:
    with pytest.raises(TopicAttributeError) as exc:
        parse_modification(text)
    assert str(exc.value) == why


def test_changes_applied_to_a_new_and_an_existing_topic() -> None:
    created = alter(True, {}, {"+message.type": "FIFO", "+queue.type": "SimpleCQ"})
    assert created == {"message.type": "FIFO", "queue.type": "SimpleCQ"}
    assert alter(False, created, {}) == created  # no changes keep what the topic has
    assert alter(False, created, {"+message.type": "NORMAL"}) == {
        "message.type": "NORMAL",
        "queue.type": "SimpleCQ",
    }
    assert alter(False, created, {"-message.type": ""}) == {"queue.type": "SimpleCQ"}
    assert alter(False, {}, {"+reserve.time": "3600"}) == {"reserve.time": "3600"}


@pytest.mark.parametrize(
    ("create", "current", "changes", "why"),
    [
        (
            True,
            {},
            {"-message.type": ""},
            "only add attribute is supported while creating topic. key: message.type",
        ),
        (True, {}, {"+color": "red"}, "unsupported key: color"),
        (True, {}, {"+message.type": "LOUD"}, "value is not in set: "),
        (
            False,
            {"queue.type": "SimpleCQ"},
            {"+queue.type": "BatchCQ"},
            "attempt to update an unchangeable attribute",
        ),
        (
            False,
            {},
            {"+cleanup.policy": "DELETE"},
            "attempt to update an unchangeable attribute. key: cleanup.policy",
        ),
        (False, {}, {"-message.type": ""}, "attempt to delete a nonexistent key: message.type"),
        (False, {}, {"+reserve.time": "-2"}, "value is not in range(-1, 9223372036854775807)"),
        (False, {}, {"+": "x"}, "kv string format wrong."),
        (False, {}, {"*message.type": "FIFO"}, "wrong format key: message.type"),
    ],
)
def test_refused_changes(create: bool, current: dict[str, str], changes: dict[str, str], why: str) -> None:
    with pytest.raises(TopicAttributeError) as exc:
        alter(create, current, changes)
    assert str(exc.value).startswith(why)


def test_a_topic_with_attributes_is_written_as_5x_writes_it() -> None:
    plain = TopicConfig("P", 4, 4)
    assert "attributes" not in plain.to_json_obj()  # as 4.x writes it: no key
    assert plain.encode_text() == "P 4 4 6 SINGLE_TAG"
    typed = TopicConfig("T", 4, 4, attributes={"message.type": "FIFO"})
    assert fastjson.dumps(typed.to_json_obj()).startswith(
        '{"attributes":{"message.type":"FIFO"},"order":false'
    )
    assert typed.encode_text() == 'T 4 4 6 SINGLE_TAG {"message.type":"FIFO"}'
    assert TopicConfig.decode_text(typed.encode_text()) == typed
    assert TopicConfig.from_json(fastjson.dumps(typed.to_json_obj())) == typed
    # a sixth field that is not a JSON map is ignored, as Java's decode ignores it
    assert TopicConfig.decode_text('T 4 4 6 SINGLE_TAG {"a b":"c"}').attributes == {}
    body = RegisterBrokerBody(TopicConfigSerializeWrapper({"T": typed, "P": plain}))
    assert RegisterBrokerBody.decode(body.encode(compressed=True), compressed=True) == body
