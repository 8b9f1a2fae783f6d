"""The sans-IO request layer: builders give the wire form each request had when callers built it
themselves (checked after a frame round trip), parsers read answers made with `make_response`."""

from __future__ import annotations

import pytest

from rocketlite.protocol.bodies.heartbeat import HeartbeatData, ProducerData
from rocketlite.protocol.bodies.lists import TopicList
from rocketlite.protocol.bodies.route import BrokerData, QueueData, TopicRouteData
from rocketlite.protocol.codes import PullSysFlag, RequestCode, ResponseCode
from rocketlite.protocol.formats.record import MessageInner, encode_record
from rocketlite.protocol.message import HostAddress, MessageConst, properties_to_string
from rocketlite.protocol.requests import heartbeat, offsets, pull, query, route, send
from rocketlite.protocol.requests.response import ResponseError
from rocketlite.protocol.subscription import build_subscription_data
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.protocol.wire.frame import decode_frame, encode_command
from rocketlite.protocol.wire.headers import (
    PullMessageRequestHeader,
    QueryMessageRequestHeader,
    SendMessageRequestHeader,
)

LOCAL = HostAddress.parse("127.0.0.1:10911")


def wire(cmd: RemotingCommand) -> RemotingCommand:
    """`cmd` as a server reads it: encoded to a frame and decoded (length field dropped)."""
    assert not cmd.is_response and cmd.opaque == 0
    return decode_frame(encode_command(cmd)[4:])


def record(topic: str, queue_offset: int, props: dict[str, str] | None = None) -> bytes:
    msg = MessageInner(
        topic=topic,
        body=b"body",
        born_host=LOCAL,
        store_host=LOCAL,
        properties_string=properties_to_string(props or {}),
        queue_offset=queue_offset,
    )
    return encode_record(msg)


# -- pull ------------------------------------------------------------------------------------------


def test_build_pull_carries_the_expression_with_the_subscription_flag() -> None:
    cmd = wire(
        pull.build_pull(
            group="g", topic="t", queue_id=3, offset=7, max_nums=32, expression="TagA || TagB",
            sub_version=5, broker_name="b0",
        )
    )  # fmt: skip
    assert cmd.code == RequestCode.PULL_MESSAGE
    header = PullMessageRequestHeader.from_ext(cmd.ext_fields)
    assert (header.consumer_group, header.topic, header.queue_id) == ("g", "t", 3)
    assert (header.queue_offset, header.max_msg_nums, header.sys_flag) == (7, 32, PullSysFlag.SUBSCRIPTION)
    assert (header.commit_offset, header.suspend_timeout_millis) == (0, 0)
    assert (header.subscription, header.sub_version, header.expression_type) == ("TagA || TagB", 5, "TAG")
    assert header.bname == "b0"


def test_build_pull_without_subscription_flag_sends_no_expression() -> None:
    flags = PullSysFlag.COMMIT_OFFSET | PullSysFlag.SUSPEND
    cmd = wire(
        pull.build_pull(
            group="g", topic="t", queue_id=0, offset=0, max_nums=1, sys_flag=flags,
            expression="TagA", commit_offset=9, suspend_timeout_ms=15000,
        )
    )  # fmt: skip
    header = PullMessageRequestHeader.from_ext(cmd.ext_fields)
    assert header.subscription is None and header.bname is None
    assert (header.sys_flag, header.commit_offset, header.suspend_timeout_millis) == (flags, 9, 15000)


def test_build_pull_takes_a_subscription() -> None:
    sub = build_subscription_data("t", "TagA || TagB", sub_version=7)
    cmd = wire(pull.build_pull(group="g", topic="t", queue_id=0, offset=0, max_nums=1, subscription=sub))
    header = PullMessageRequestHeader.from_ext(cmd.ext_fields)
    assert (header.subscription, header.sub_version, header.expression_type) == ("TagA || TagB", 7, "TAG")


def _pull_answer(code: int, body: bytes | None = None) -> RemotingCommand:
    ext = {"suggestWhichBrokerId": "1", "nextBeginOffset": "12", "minOffset": "2", "maxOffset": "40"}
    request = pull.build_pull(group="g", topic="t", queue_id=0, offset=10, max_nums=2)
    return make_response(request, code, ext=ext, body=body)


def test_parse_pull_found_decodes_records() -> None:
    body = record("t", 10) + record("t", 11)
    result = pull.parse_pull(_pull_answer(ResponseCode.SUCCESS, body))
    assert result.status is pull.PullStatus.FOUND
    assert (result.next_begin_offset, result.min_offset, result.max_offset) == (12, 2, 40)
    assert result.suggest_which_broker_id == 1
    assert result.body == body
    assert [r.queue_offset for r in result.records()] == [10, 11]


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ResponseCode.PULL_NOT_FOUND, pull.PullStatus.NO_NEW_MSG),
        (ResponseCode.PULL_RETRY_IMMEDIATELY, pull.PullStatus.NO_MATCHED_MSG),
        (ResponseCode.PULL_OFFSET_MOVED, pull.PullStatus.OFFSET_ILLEGAL),
    ],
)
def test_parse_pull_other_answers_have_no_records(code: int, status: pull.PullStatus) -> None:
    result = pull.parse_pull(_pull_answer(code, b"ignored"))
    assert result.status is status and result.body == b"" and result.records() == []
    assert result.next_begin_offset == 12


def test_parse_pull_refusal_raises_with_the_code() -> None:
    request = pull.build_pull(group="g", topic="t", queue_id=0, offset=0, max_nums=1)
    with pytest.raises(ResponseError) as info:
        pull.parse_pull(make_response(request, ResponseCode.SUBSCRIPTION_NOT_EXIST, "no sub"))
    assert info.value.response_code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    assert info.value.response_remark == "no sub"
    assert info.value.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    assert "PULL_MESSAGE" in str(info.value)
    with pytest.raises(ResponseError) as unknown:
        pull.parse_pull(make_response(request, 999))
    assert unknown.value.response_code == 999 and unknown.value.code == ResponseCode.SYSTEM_ERROR


# -- send ------------------------------------------------------------------------------------------


def test_build_send_uses_the_v2_letters() -> None:
    props = properties_to_string({MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "U1"})
    cmd = wire(
        send.build_send(
            group="pg", topic="t", queue_id=2, body=b"hello", properties=props, born_timestamp=1234,
            sys_flag=1, flag=8, broker_name="b0",
        )
    )  # fmt: skip
    assert cmd.code == RequestCode.SEND_MESSAGE_V2 and cmd.body == b"hello"
    assert cmd.ext_fields["a"] == "pg" and cmd.ext_fields["b"] == "t" and cmd.ext_fields["c"] == "TBW102"
    header = SendMessageRequestHeader.from_ext(cmd.ext_fields, RequestCode.SEND_MESSAGE_V2)
    assert (header.queue_id, header.sys_flag, header.flag, header.born_timestamp) == (2, 1, 8, 1234)
    assert (header.default_topic_queue_nums, header.reconsume_times, header.batch) == (4, 0, False)
    assert header.properties == props and header.bname == "b0" and header.max_reconsume_times is None


def test_build_send_batch_sets_the_batch_flag() -> None:
    cmd = wire(
        send.build_send_batch(group="pg", topic="t", queue_id=1, body=b"xx", properties="", born_timestamp=5)
    )
    assert cmd.code == RequestCode.SEND_BATCH_MESSAGE
    header = SendMessageRequestHeader.from_ext(cmd.ext_fields, RequestCode.SEND_BATCH_MESSAGE)
    assert header.batch and header.sys_flag == 0 and header.queue_id == 1


def test_parse_send() -> None:
    request = send.build_send(group="g", topic="t", queue_id=0, body=b"x", properties="", born_timestamp=0)
    ext = {"msgId": "AB", "queueId": "3", "queueOffset": "17", "MSG_REGION": "r", "TRACE_ON": "false"}
    result = send.parse_send(make_response(request, ResponseCode.FLUSH_DISK_TIMEOUT, ext=ext))
    assert result == send.SendResponse(send.SendStatus.FLUSH_DISK_TIMEOUT, "AB", 3, 17, None, "r", False)
    ok = send.parse_send(make_response(request, ResponseCode.SUCCESS, ext={**ext, "TRACE_ON": "true"}))
    assert ok.status is send.SendStatus.SEND_OK and ok.trace_on
    with pytest.raises(ResponseError) as info:
        send.parse_send(make_response(request, ResponseCode.SYSTEM_BUSY, "busy"))
    assert info.value.response_code == ResponseCode.SYSTEM_BUSY


# -- offsets ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "parse", "code"),
    [
        (offsets.build_get_max_offset, offsets.parse_get_max_offset, RequestCode.GET_MAX_OFFSET),
        (offsets.build_get_min_offset, offsets.parse_get_min_offset, RequestCode.GET_MIN_OFFSET),
    ],
)
def test_queue_offsets(build: object, parse: object, code: int) -> None:
    assert callable(build) and callable(parse)
    cmd = wire(build("t", 3))
    assert cmd.code == code and cmd.ext_fields == {"topic": "t", "queueId": "3"}
    assert parse(make_response(cmd, ResponseCode.SUCCESS, ext={"offset": "42"})) == 42
    with pytest.raises(ResponseError):
        parse(make_response(cmd, ResponseCode.SYSTEM_ERROR, "no queue"))


def test_search_offset_and_earliest_store_time() -> None:
    cmd = wire(offsets.build_search_offset("t", 1, 1700000000000))
    assert cmd.code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP
    assert cmd.ext_fields == {"topic": "t", "queueId": "1", "timestamp": "1700000000000"}
    assert offsets.parse_search_offset(make_response(cmd, ResponseCode.SUCCESS, ext={"offset": "5"})) == 5
    cmd = wire(offsets.build_get_earliest_msg_store_time("t", 1))
    assert cmd.code == RequestCode.GET_EARLIEST_MSG_STORETIME
    answer = make_response(cmd, ResponseCode.SUCCESS, ext={"timestamp": "99"})
    assert offsets.parse_get_earliest_msg_store_time(answer) == 99


def test_consumer_offsets() -> None:
    cmd = wire(offsets.build_query_consumer_offset("g", "t", 2))
    assert cmd.code == RequestCode.QUERY_CONSUMER_OFFSET
    assert cmd.ext_fields == {"consumerGroup": "g", "topic": "t", "queueId": "2"}
    answer = make_response(cmd, ResponseCode.SUCCESS, ext={"offset": "8"})
    assert offsets.parse_query_consumer_offset(answer) == 8
    assert offsets.parse_query_consumer_offset(make_response(cmd, ResponseCode.QUERY_NOT_FOUND)) is None
    with pytest.raises(ResponseError):
        offsets.parse_query_consumer_offset(make_response(cmd, ResponseCode.SYSTEM_ERROR))
    update = offsets.build_update_consumer_offset("g", "t", 2, 11, oneway=True)
    assert update.is_oneway
    update = wire(offsets.build_update_consumer_offset("g", "t", 2, 11))
    assert update.code == RequestCode.UPDATE_CONSUMER_OFFSET and not update.is_oneway
    assert update.ext_fields == {"consumerGroup": "g", "topic": "t", "queueId": "2", "commitOffset": "11"}
    offsets.parse_update_consumer_offset(make_response(update, ResponseCode.SUCCESS))
    with pytest.raises(ResponseError):
        offsets.parse_update_consumer_offset(make_response(update, ResponseCode.NO_PERMISSION))


# -- query -----------------------------------------------------------------------------------------


def test_query_message_and_key_filter() -> None:
    cmd = wire(query.build_query_message("t", "U1", max_num=32, unique=True))
    assert cmd.code == RequestCode.QUERY_MESSAGE
    header = QueryMessageRequestHeader.from_ext(cmd.ext_fields)
    assert (header.topic, header.key, header.max_num, header.unique_key_query) == ("t", "U1", 32, True)
    assert (header.begin_timestamp, header.end_timestamp) == (0, query.QUERY_END_MS)
    assert cmd.ext_fields["_UNIQUE_KEY_QUERY"] == "true"
    body = record("t", 0, {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "U1", MessageConst.KEYS: "k1 k2"})
    body += record("other", 1, {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "U1"})
    records = query.parse_query_message(make_response(cmd, ResponseCode.SUCCESS, body=body))
    assert [r.topic for r in records] == ["t", "other"]
    assert [query.matches_key(r, "t", "U1", unique=True) for r in records] == [True, False]
    assert query.matches_key(records[0], "t", "k2", unique=False)
    assert not query.matches_key(records[0], "t", "k", unique=False)
    assert query.parse_query_message(make_response(cmd, ResponseCode.QUERY_NOT_FOUND)) == []
    with pytest.raises(ResponseError):
        query.parse_query_message(make_response(cmd, ResponseCode.SYSTEM_ERROR))


def test_view_message() -> None:
    cmd = wire(query.build_view_message(4096))
    assert cmd.code == RequestCode.VIEW_MESSAGE_BY_ID and cmd.ext_fields == {"offset": "4096"}
    found = query.parse_view_message(make_response(cmd, ResponseCode.SUCCESS, body=record("t", 3)))
    assert found is not None and found.queue_offset == 3
    assert query.parse_view_message(make_response(cmd, ResponseCode.SUCCESS)) is None
    with pytest.raises(ResponseError):
        query.parse_view_message(make_response(cmd, ResponseCode.SYSTEM_ERROR, "no message"))


# -- route and topic list --------------------------------------------------------------------------


def test_route() -> None:
    cmd = wire(route.build_get_route("t"))
    assert cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert cmd.ext_fields == {"topic": "t", "acceptStandardJsonOnly": "true"}
    data = TopicRouteData(
        queue_datas=(QueueData("b0", 4, 4, 6),),
        broker_datas=(BrokerData("c", "b0", {0: "127.0.0.1:10911"}),),
    )
    parsed = route.parse_route(make_response(cmd, ResponseCode.SUCCESS, body=data.to_bytes(standard=True)))
    assert parsed is not None and parsed.broker_datas[0].master_addr == "127.0.0.1:10911"
    assert route.parse_route(make_response(cmd, ResponseCode.TOPIC_NOT_EXIST, "no route")) is None
    assert route.parse_route(make_response(cmd, ResponseCode.SUCCESS)) is None
    with pytest.raises(ResponseError):
        route.parse_route(make_response(cmd, ResponseCode.SYSTEM_ERROR))


def test_topic_list() -> None:
    cmd = wire(route.build_get_all_topics())
    assert cmd.code == RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER and cmd.ext_fields == {}
    body = TopicList(("b", "a")).to_bytes()
    assert route.parse_topic_list(make_response(cmd, ResponseCode.SUCCESS, body=body)) == ["a", "b"]


# -- heartbeat -------------------------------------------------------------------------------------


def test_heartbeat_and_unregister() -> None:
    data = HeartbeatData("cid", producer_data_set=(ProducerData("pg"),))
    cmd = wire(heartbeat.build_heartbeat(data))
    assert cmd.code == RequestCode.HEART_BEAT and HeartbeatData.from_json(cmd.body or b"") == data
    answer = make_response(cmd, ResponseCode.SUCCESS, version=401)
    assert heartbeat.parse_heartbeat(answer) == 401
    with pytest.raises(ResponseError):
        heartbeat.parse_heartbeat(make_response(cmd, ResponseCode.SYSTEM_ERROR))
    cmd = wire(heartbeat.build_unregister_client("cid", consumer_group="cg"))
    assert cmd.code == RequestCode.UNREGISTER_CLIENT
    assert cmd.ext_fields == {"clientID": "cid", "consumerGroup": "cg"}
    heartbeat.parse_unregister_client(make_response(cmd, ResponseCode.SUCCESS))
