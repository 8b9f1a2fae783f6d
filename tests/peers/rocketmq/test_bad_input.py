"""Bad input on the wire, RocketMQ 5.3.3 vs rocketlite: the refusals the suite already pins
(tests/broker/test_send.py, test_consume.py, test_messages.py, test_pop_wire.py, test_timer_wire.py,
test_admin_requests.py, tests/namesrv/test_namesrv.py, tests/reliability/test_fuzz.py), sent to both.

The response code must be RocketMQ's; remarks are compared only where they are a status name
(differential.ACCEPTED). Switches a scenario flips on the shared brokers (UPDATE_BROKER_CONFIG) are
put back before it ends.
"""

from __future__ import annotations

import json
import time

import pytest

from rocketlite.protocol.bodies.heartbeat import SubscriptionData
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.formats.batch import BatchEntry, encode_batch
from rocketlite.protocol.message import java_string_hash
from rocketlite.protocol.requests.offsets import (
    build_get_earliest_msg_store_time,
    build_get_max_offset,
    build_get_min_offset,
    build_query_consumer_offset,
    build_search_offset,
    build_update_consumer_offset,
)
from rocketlite.protocol.requests.send import build_send_batch
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.frame import encode_command
from rocketlite.protocol.wire.pop import PopRequestCode
from tests.peers.rocketmq.differential import Side
from tests.peers.rocketmq.runner import Pair
from tests.peers.rocketmq.steps import BORN, PG, create_topic, heartbeat, props, pull, send, setup_topic
from tests.peers.rocketmq.test_message_paths import pop, send_back
from tests.support.names import unique

pytestmark = pytest.mark.timeout(600)


def broker_config(text: str) -> RemotingCommand:
    return make_request(RequestCode.UPDATE_BROKER_CONFIG, body=text.encode())


def test_send_refusals(pair: Pair) -> None:
    topic = unique("DiffBadSend")

    async def scenario(s: Side) -> None:
        await setup_topic(s, topic, 2)
        await setup_topic(s, f"{topic}_ro", 2, perm=4)
        await s.call(
            "default topic that does not exist", send(unique("DiffNew"), b"x", default_topic="NoSuchTBW")
        )
        await s.call("illegal topic name", send("bad topic!", b"x"))
        await s.call("topic name too long", send("T" * 128, b"x"))
        await s.call("empty topic name", send("", b"x"))
        await s.call("to SCHEDULE_TOPIC_XXXX", send("SCHEDULE_TOPIC_XXXX", b"x"))
        await s.call("to RMQ_SYS_TRANS_HALF_TOPIC", send("RMQ_SYS_TRANS_HALF_TOPIC", b"x"))
        await s.call(
            "to the timer topic",
            send("rmq_sys_wheel_timer", b"x", extra={"REAL_TOPIC": topic, "REAL_QID": "0"}),
        )
        await s.call("to a read-only topic", send(f"{topic}_ro", b"x"))
        await s.call(
            "header without producerGroup", make_request(RequestCode.SEND_MESSAGE_V2, {"b": topic}, b"x")
        )
        bad_qid = send(topic, b"x")
        bad_qid.ext_fields["e"] = "x"
        await s.call("queueId not a number", bad_qid)
        await s.call("queueId beyond the topic's queues", send(topic, b"x", queue_id=5))
        await s.call("body over maxMessageSize", send(topic, bytes(4 * 1024 * 1024 + 1), uniq="BIG"))
        await s.call("properties over 32767 bytes", send(topic, b"x", extra={"K": "v" * 32_800}))
        await s.call("empty body", send(topic, b"", uniq="EMPTY"))
        await s.call("DELAY not a number", send(topic, b"x", uniq="NAN", extra={"DELAY": "x"}))
        await s.call(
            "timer: TIMER_DELIVER_MS not a number", send(topic, b"x", extra={"TIMER_DELIVER_MS": "tomorrow"})
        )
        await s.call(
            "timer: TIMER_DELAY_SEC not a number", send(topic, b"x", extra={"TIMER_DELAY_SEC": "1.5"})
        )
        far = str(int(time.time() * 1000) + 4 * 86_400_000)
        await s.call("timer: beyond timerMaxDelaySec", send(topic, b"x", extra={"TIMER_DELIVER_MS": far}))

    pair.check(
        "send refusals",
        scenario,
        known={
            "illegal topic name": "invalid-parameter",
            "topic name too long": "invalid-parameter",
            "empty topic name": "invalid-parameter",
            "queueId beyond the topic's queues": "invalid-parameter",
            "to the timer topic": "stricter-send",
            "to a read-only topic": "stricter-send",
            "empty body": "empty-body",
        },
    )


def test_batch_refusals(pair: Pair) -> None:
    topic = unique("DiffBadBatch")

    def batch(body: bytes, header: str = "") -> RemotingCommand:
        return build_send_batch(
            group=PG, topic=topic, queue_id=1, body=body, properties=header, born_timestamp=BORN
        )

    one = encode_batch([BatchEntry(0, b"m", props(keys="k", uniq="BB1"))])

    async def scenario(s: Side) -> None:
        await setup_topic(s, topic, 2)
        await s.call("DELAY in the header", batch(one, "DELAY\x013"))
        await s.call("empty body", batch(b""))
        await s.call("torn entry", batch(one[:-1]))
        await s.call("header properties over 32767 bytes", batch(one, "K\x01" + "v" * 32_800))
        half = encode_batch(
            [BatchEntry(0, bytes(2 * 1024 * 1024 + 100), props(uniq=f"H{i}")) for i in range(1)]
        )
        await s.call("two entries over maxMessageSize together", batch(half + half))
        sys_batch = build_send_batch(
            group=PG, topic="SCHEDULE_TOPIC_XXXX", queue_id=0, body=one, properties="", born_timestamp=BORN
        )
        await s.call("to a system topic", sys_batch)
        await s.call("a good one after all that", batch(one))
        await s.call(
            "an entry with DELAY",
            batch(encode_batch([BatchEntry(0, b"m", props(uniq="BB2", extra={"DELAY": "2"}))])),
        )

    pair.check("batch refusals", scenario, known={"an entry with DELAY": "stricter-send"})


def test_pull_refusals(pair: Pair) -> None:
    topic, group = unique("DiffBadPull"), unique("diff_cg")
    disabled = unique("diff_cg_off")

    async def scenario(s: Side) -> None:
        await setup_topic(s, topic, 2)
        s.expect(await s.call("send", send(topic, b"x", tags="a", uniq="BP1")))
        await s.wait_messages(topic, 0, 1)
        nope = unique("DiffNope")
        await s.call("unknown topic", pull(group, nope, 0))
        lite = pull(group, nope, 0)
        lite.code = PopRequestCode.LITE_PULL_MESSAGE
        await s.call("lite pull, unknown topic", lite)
        lite_ok = pull(group, topic, 0)
        lite_ok.code = PopRequestCode.LITE_PULL_MESSAGE
        await s.call("lite pull", lite_ok)
        await s.call("queueId beyond the topic's queues", pull(group, topic, 0, queue_id=9))
        await s.call("negative queueId", pull(group, topic, 0, queue_id=-1))
        await s.call("no subscription flag, no heartbeat", pull(group, topic, 0, sys_flag=0))
        await s.call("tag expression of separators only", pull(group, topic, 0, expression="||"))
        await s.call("heartbeat", heartbeat(group, topic, "a"))
        await s.call(
            "subscription older than the heartbeat's", pull(group, topic, 0, sys_flag=0, sub_version=0)
        )
        body = json.dumps({"groupName": disabled, "consumeEnable": False}).encode()
        await s.call(
            "create a group that may not consume",
            make_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body),
        )
        await s.call("pull by that group", pull(disabled, topic, 0))
        await s.call("autoCreateSubscriptionGroup=false", broker_config("autoCreateSubscriptionGroup=false"))
        try:
            await s.call("pull by an unknown group", pull(unique("diff_cg_new"), topic, 0))
            await s.call("send back for an unknown group", send_back(0, unique("diff_cg_new"), 0))
        finally:
            await s.call(
                "autoCreateSubscriptionGroup=true", broker_config("autoCreateSubscriptionGroup=true")
            )

    pair.check(
        "pull refusals",
        scenario,
        known={
            "queueId beyond the topic's queues": "invalid-parameter",
            "negative queueId": "invalid-parameter",
        },
    )


def test_sql92_pull(pair: Pair) -> None:
    topic, group, broken = unique("DiffSql"), unique("diff_cg"), unique("diff_cg_bad")

    async def scenario(s: Side) -> None:
        await setup_topic(s, topic, 1)
        for i, (a, color) in enumerate([(1, "red"), (5, "blue"), (9, "red")]):
            await s.call(
                f"send {i}",
                send(topic, f"s{i}".encode(), tags="t", uniq=f"SQ{i}", extra={"a": str(a), "color": color}),
            )
        await s.call("a > 3", pull(group, topic, 0, expression="a > 3", expression_type="SQL92"))
        await s.call(
            "color = 'red' AND a BETWEEN 0 AND 5",
            pull(group, topic, 0, expression="color = 'red' AND a BETWEEN 0 AND 5", expression_type="SQL92"),
        )
        await s.call(
            "missing property IS NULL",
            pull(group, topic, 0, expression="nope IS NULL", expression_type="SQL92"),
        )
        await s.call(
            "TAGS as a property", pull(group, topic, 0, expression="TAGS = 't'", expression_type="SQL92")
        )
        await s.call("nothing matches", pull(group, topic, 0, expression="a > 100", expression_type="SQL92"))
        await s.call(
            "a number that is not one", pull(group, topic, 0, expression="color > 1", expression_type="SQL92")
        )
        await s.call("malformed expression", pull(group, topic, 0, expression="a >", expression_type="SQL92"))
        await s.call("unknown expression type", pull(group, topic, 0, expression_type="FOO"))
        await s.call("heartbeat with SQL92", heartbeat(group, topic, "a > 3", expression_type="SQL92"))
        await s.call("pull by the heartbeat's SQL92", pull(group, topic, 0, sys_flag=0))
        await s.call(
            "heartbeat with a malformed SQL92", heartbeat(broken, topic, "a >", expression_type="SQL92")
        )
        await s.call("pull by the malformed heartbeat's", pull(broken, topic, 0, sys_flag=0))
        for label, expression, kind in (
            ("check a good SQL92", "a > 3", "SQL92"),
            ("check a malformed SQL92", "a >", "SQL92"),
            ("check an SQL92 with literal bounds out of order", "a BETWEEN 5 AND 1", "SQL92"),
            ("check a tag expression", "TagA || TagB", "TAG"),
        ):
            await s.call(label, check_client_config(group, topic, expression, kind))
        await s.call(
            "pop with SQL92",
            pop(unique("diff_pop"), topic, max_nums=8, exp="color = 'red'", exp_type="SQL92"),
        )
        await s.call(
            "pop with a malformed SQL92", pop(unique("diff_pop"), topic, exp="color =", exp_type="SQL92")
        )

    pair.check(
        "SQL92 pull",
        scenario,
        known={
            "malformed expression": "sql92-unparsable",
            "unknown expression type": "sql92-unparsable",
            "pop with a malformed SQL92": "pop-answer-header",
        },
    )


def check_client_config(group: str, topic: str, expression: str, kind: str) -> RemotingCommand:
    """CHECK_CLIENT_CONFIG as the Java push consumer sends it at start."""
    tags = tuple(t.strip() for t in expression.split("||")) if kind == "TAG" else ()
    sub = SubscriptionData(topic, expression, tags, tuple(java_string_hash(t) for t in tags), 1, kind)
    body = {"clientId": "diff@1", "group": group, "subscriptionData": sub.to_json_obj()}
    return make_request(RequestCode.CHECK_CLIENT_CONFIG, body=fastjson.dumps(body).encode())


def test_offset_refusals(pair: Pair) -> None:
    topic, group = unique("DiffBadOffsets"), unique("diff_cg")
    nope = unique("DiffNope")

    async def scenario(s: Side) -> None:
        await setup_topic(s, topic, 1)
        await s.call("query an unknown topic", build_query_consumer_offset(group, nope, 0))
        await s.call(
            "commit for a group never seen", build_update_consumer_offset(unique("diff_cg_x"), topic, 0, 1)
        )
        await s.call("heartbeat", heartbeat(group, topic))
        await s.call("commit for an unknown topic", build_update_consumer_offset(group, nope, 0, 1))
        await s.call("max offset of an unknown topic", build_get_max_offset(nope, 0))
        await s.call("min offset of an unknown topic", build_get_min_offset(nope, 0))
        await s.call("earliest time of an unknown topic", build_get_earliest_msg_store_time(nope, 0))
        await s.call("search an unknown topic", build_search_offset(nope, 0, 1))
        await s.call("max offset, queueId beyond the topic", build_get_max_offset(topic, 7))
        await s.call(
            "query without queueId",
            make_request(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic}),
        )

    pair.check(
        "offset refusals",
        scenario,
        known={
            "commit for a group never seen": "offset-commit-checks",
            "commit for an unknown topic": "offset-commit-checks",
        },
    )


def test_pop_refusals(pair: Pair) -> None:
    topic, group = unique("DiffBadPop"), unique("diff_cg")
    zero, stale = f"{topic}_zero", f"{topic}_stale"

    async def scenario(s: Side) -> None:
        await s.call("unknown topic", pop(group, unique("DiffNope")))
        for name in (topic, zero, stale):
            await setup_topic(s, name, 1)
            s.expect(await s.call(f"send to {name[-5:]}", send(name, b"x", uniq="BPOP1"), record=False))
            await s.wait_messages(name, 0, 1)
        await s.call("queueId beyond the topic", pop(group, topic, queue_id=99))
        await s.call("invisibleTime 0", pop(group, zero, invisible_ms=0))
        await s.call("born a long time ago", pop(group, stale, born_ms=1))
        await s.call("pop", pop(group, topic))

        def ack(handle: str, offset: int) -> RemotingCommand:
            ext = {
                "consumerGroup": group,
                "topic": topic,
                "queueId": "0",
                "extraInfo": handle,
                "offset": str(offset),
            }
            return make_request(PopRequestCode.ACK_MESSAGE, ext)

        await s.call("ack with a malformed handle", ack("not a handle", 0))
        await s.call("ack of a queue offset never popped", ack("0 1 60000 0 0 broker-a 0 5", 5))

    pair.check(
        "POP refusals",
        scenario,
        known={
            "unknown topic": "pop-answer-header",
            "queueId beyond the topic": "invalid-parameter",
            "invisibleTime 0": "pop-invisible-zero",
            "born a long time ago": "pop-born-time",
        },
    )


NAMES = ("bad topic!", "SCHEDULE_TOPIC_XXXX", "TBW102", "rmq_sys_mine", "DefaultCluster", "T" * 128)


def test_admin_refusals(pair: Pair) -> None:
    async def scenario(s: Side) -> None:
        for name in NAMES:
            await s.call(f"create topic {name[:20]!r}", create_topic(name))
        await s.call("create topic, filter type ANY", create_topic(unique("DiffX"), filter_type="ANY"))
        await s.call("create topic, 0 queues", create_topic(unique("DiffX"), 0))
        await s.call(
            "delete a system topic",
            make_request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "SCHEDULE_TOPIC_XXXX"}),
        )
        await s.call(
            "create group without a name",
            make_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"retryMaxTimes":1}'),
        )
        # Each side is given its own paths: RocketMQ applies a new store path to a running broker.
        await s.call("broker config storePathRootDir", broker_config(f"storePathRootDir={s.store_root}"))
        await s.call(
            "broker config storePathCommitLog",
            broker_config(f"storePathCommitLog={s.store_root / 'commitlog'}"),
        )
        await s.call(
            "broker config brokerConfigPath", broker_config(f"brokerConfigPath={s.store_root / 'x.conf'}")
        )
        await s.call("broker config, unknown key", broker_config("noSuchKey=1"))
        await s.call("broker config, empty", broker_config(""))

    pair.check(
        "admin refusals",
        scenario,
        known={
            **{f"create topic {name[:20]!r}": "invalid-parameter" for name in NAMES},
            "delete a system topic": "invalid-parameter",
            "broker config storePathRootDir": "broker-config",
            "broker config storePathCommitLog": "broker-config",
            "broker config, unknown key": "broker-config",
        },
    )


def test_name_server_refusals(pair: Pair) -> None:
    async def scenario(s: Side) -> None:
        await s.call("unknown code", make_request(9999), to="namesrv", timeout=5)
        await s.call(
            "HEART_BEAT to a name server", make_request(RequestCode.HEART_BEAT), to="namesrv", timeout=5
        )
        await s.call("route without topic", make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC), to="namesrv")
        await s.call(
            "route of an unknown topic",
            make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": unique("DiffNope")}),
            to="namesrv",
        )
        evil = b"configStorePath=/tmp/evil\nkvConfigPath=/tmp/evil.json\n"
        await s.call(
            "UPDATE_NAMESRV_CONFIG", make_request(RequestCode.UPDATE_NAMESRV_CONFIG, body=evil), to="namesrv"
        )
        await s.call(
            "register without brokerAddr",
            make_request(RequestCode.REGISTER_BROKER, {"brokerName": "b"}),
            to="namesrv",
        )

    pair.check("name server refusals", scenario, known={"route without topic": "route-without-topic"})


def test_broken_frames(pair: Pair) -> None:
    def frame(header: bytes) -> bytes:
        return (len(header) + 4).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header

    async def scenario(s: Side) -> None:
        for to in ("broker", "namesrv"):
            await s.raw(
                f"{to}: 64 MiB length prefix", (64 * 1024 * 1024).to_bytes(4, "big") + b"\0" * 8, to=to
            )
            await s.raw(f"{to}: header that is not JSON", frame(b"not json at all"), to=to)
            await s.raw(
                f"{to}: header length beyond the frame",
                (12).to_bytes(4, "big") + (99).to_bytes(4, "big") + b"{}{}{}{}",
                to=to,
            )
            await s.raw(f"{to}: unknown code, raw", encode_command(make_request(9999)), to=to)

    pair.check("broken frames", scenario)
