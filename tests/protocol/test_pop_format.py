"""The POP wire format: receipt handles and offset infos round-trip; bad or forged texts are refused
naming the cause; the headers use RocketMQ's field names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.wire.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    MalformedReceiptHandleError,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    ReceiptHandle,
    offset_info,
    parse_offset_info,
    topic_type,
)


def test_receipt_handle_round_trip_and_java_text() -> None:
    handle = ReceiptHandle(5, 1_700_000_000_000, 60_000, 0, "0", "broker-a", 3, 7)
    text = handle.build()
    assert text == "5 1700000000000 60000 0 0 broker-a 3 7"
    assert ReceiptHandle.parse(text) == handle
    short = ReceiptHandle.parse("5 1700000000000 60000 0 1 broker-a 3")
    assert short.queue_offset is None and short.topic_type == "1"


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ("", "1 fields"),
        ("5 1 2 0 0 b", "6 fields"),
        ("5 1 2 0 0 b 3 7 9", "9 fields"),
        ("5  1 2 0 0 b 3", "popTime ''"),
        ("x 1 2 0 0 b 3 7", "ckQueueOffset 'x'"),
        ("5 -1 2 0 0 b 3 7", "popTime '-1'"),
        ("5 1 2 0 2 b 3 7", "topic type '2'"),
        ("5 1 2 0 0  3", "empty broker name"),
        ("5 1 2 0 0 b q 7", "queueId 'q'"),
        ("5 1 2 0 0 b 3 99999999999999999999", "queueOffset"),
        ("5 1 2 0 0 b 3 ٣", "queueOffset"),
        ("1" * 600, "longer than"),
    ],
)
def test_bad_receipt_handles_are_refused_naming_the_cause(text: str, cause: str) -> None:
    with pytest.raises(MalformedReceiptHandleError, match=cause) as info:
        ReceiptHandle.parse(text)
    assert info.value.code == ResponseCode.NO_MESSAGE


_field = st.one_of(
    st.integers(0, 10**20).map(str),
    st.text(alphabet=st.sampled_from("0123456789 ab٣-"), max_size=4),
    st.sampled_from(["0", "1", "broker-a"]),
)


@given(st.lists(_field, min_size=6, max_size=9).map(" ".join))
def test_a_handle_parses_to_what_its_fields_say_or_is_refused(text: str) -> None:
    """The one-match path of `parse` and its field-by-field checks agree: what parses is exactly
    RocketMQ's 7 or 8 fields (numbers of 1 to 19 ASCII digits, topic type 0 or 1, a broker name),
    and builds back to the same text."""
    parts = text.split(" ")
    numeric = [0, 1, 2, 3, 6] + ([7] if len(parts) == 8 else [])
    well_formed = (
        len(parts) in (7, 8)
        and all(parts[i].isascii() and parts[i].isdigit() and len(parts[i]) <= 19 for i in numeric)
        and parts[4] in ("0", "1")
        and parts[5] != ""
    )
    try:
        handle = ReceiptHandle.parse(text)
    except MalformedReceiptHandleError:
        assert not well_formed
    else:
        assert well_formed
        assert handle.broker_name == parts[5] and handle.queue_id == int(parts[6])
        canonical = " ".join(str(int(p)) if i in numeric else p for i, p in enumerate(parts))
        assert handle.build() == canonical


def test_offset_info_round_trip_and_bad_input() -> None:
    text = offset_info([("0", 0, [4]), ("0", 2, [7, 9])])
    assert text == "0 0 4;0 2 7,9"
    assert parse_offset_info(text) == {("0", 0): [4], ("0", 2): [7, 9]}
    assert parse_offset_info("") == {}
    for bad in ("0 0", "0 0 4;0 0 5", "3 0 4", "0 0 a"):
        with pytest.raises(MalformedReceiptHandleError):
            parse_offset_info(bad)
    assert topic_type("%RETRY%g_t") == "1" and topic_type("t") == "0"


def test_headers_use_rocketmq_field_names() -> None:
    ext = {"consumerGroup": "g", "topic": "t", "queueId": "-1", "maxMsgNums": "32",
           "invisibleTime": "60000", "pollTime": "0", "bornTime": "1", "initMode": "1",
           "expType": "TAG", "exp": "*", "order": "false"}  # fmt: skip
    pop = PopMessageRequestHeader.from_ext(ext)
    assert (pop.queue_id, pop.max_msg_nums, pop.init_mode, pop.order) == (-1, 32, 1, False)
    out = PopMessageResponseHeader(pop_time=1, invisible_time=2, revive_qid=0, rest_num=3,
                                   start_offset_info="0 0 4").to_ext()  # fmt: skip
    assert out == {"popTime": "1", "invisibleTime": "2", "reviveQid": "0", "restNum": "3",
                   "startOffsetInfo": "0 0 4"}  # fmt: skip
    ack = AckMessageRequestHeader.from_ext(
        {"consumerGroup": "g", "topic": "t", "queueId": "0", "extraInfo": "x", "offset": "4"}
    )
    assert ack.extra_info == "x" and ack.offset == 4
    change = ChangeInvisibleTimeRequestHeader.from_ext(
        {
            "consumerGroup": "g",
            "topic": "t",
            "queueId": "0",
            "extraInfo": "x",
            "offset": "4",
            "invisibleTime": "5",
        }
    )
    assert change.invisible_time == 5
