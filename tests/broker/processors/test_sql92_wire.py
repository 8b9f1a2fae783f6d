"""SQL92 filters over a real socket, as raw requests: PULL with the subscription in the request and
by heartbeat, CHECK_CLIENT_CONFIG, POP, long polling woken only by a matching message, bad
expressions refused with their code and a remark naming the error, `enablePropertyFilter` off,
and consumerFilter.json written in RocketMQ's format and read back."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from rocketlite.filter.bloom import BloomFilter
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.formats.record import decode_records
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.headers import PullMessageRequestHeader
from rocketlite.protocol.wire.pop import PopRequestCode
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test

SUSPEND, SUBSCRIPTION = 0x2, 0x4
NOT_SUPPORTED = "The broker does not support consumer to filter message by SQL92"
# (a, color) of the messages every scenario sends to queue 0 of T, in order
MESSAGES = [(1, "red"), (5, "blue"), (9, "red"), (4, "green")]


async def send_all(b: BrokerUnderTest, topic: str = "T") -> None:
    for i, (a, color) in enumerate(MESSAGES):
        sent = await b.send(topic, f"m{i}".encode(), tags="t", props={"a": str(a), "color": color})
        assert sent.code == ResponseCode.SUCCESS, sent.remark


def pull_ext(
    group: str,
    offset: int,
    expression: str | None,
    *,
    kind: str = "SQL92",
    flags: int = SUBSCRIPTION,
    sub_version: int = 0,
    suspend_ms: int = 15_000,
    topic: str = "T",
) -> dict[str, str]:
    header = PullMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=0, queue_offset=offset, max_msg_nums=32,
        sys_flag=flags, commit_offset=0, suspend_timeout_millis=suspend_ms,
        subscription=expression, sub_version=sub_version,
    )  # fmt: skip
    return {**header.to_ext(), "expressionType": kind}


async def pull(b: BrokerUnderTest, *args: object, timeout: float = 5.0, **kw: object) -> RemotingCommand:
    return await b.call(RequestCode.PULL_MESSAGE, pull_ext(*args, **kw), timeout=timeout)  # type: ignore[arg-type]


def bodies(r: RemotingCommand) -> list[bytes]:
    return [m.body for m in decode_records(r.body or b"")]


def heartbeat_body(group: str, expression: str, version: int, kind: str = "SQL92") -> bytes:
    return json.dumps(
        {"clientID": f"{group}@1", "consumerDataSet": [{
            "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False, "subscriptionDataSet": [
                {"topic": "T", "subString": expression, "expressionType": kind, "classFilterMode": False,
                 "tagsSet": [], "codeSet": [], "subVersion": version}]}],
         "producerDataSet": []}
    ).encode()  # fmt: skip


def check_body(expression: str, kind: str = "SQL92") -> bytes:
    """CheckClientRequestBody, as the Java push consumer sends it at start."""
    return json.dumps(
        {"clientId": "c@1", "group": "G", "subscriptionData": {
            "topic": "T", "subString": expression, "expressionType": kind, "classFilterMode": False,
            "tagsSet": [], "codeSet": [], "subVersion": 7}}
    ).encode()  # fmt: skip


async def pop(b: BrokerUnderTest, group: str, expression: str, kind: str = "SQL92") -> RemotingCommand:
    ext = {"consumerGroup": group, "topic": "T", "queueId": "-1", "maxMsgNums": "32",
           "invisibleTime": "60000", "pollTime": "0", "bornTime": "1", "initMode": "1", "expType": kind,
           "exp": expression}  # fmt: skip
    return await b.call(PopRequestCode.POP_MESSAGE, ext)


def test_pull_with_the_expression_in_the_request(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "s", enable_property_filter=True) as b:
            await send_all(b)
            r = await pull(b, "G", 0, "a > 3")
            assert r.code == ResponseCode.SUCCESS and bodies(r) == [b"m1", b"m2", b"m3"]
            r = await pull(b, "G", 0, "color = 'red' AND a BETWEEN 0 AND 5")
            assert bodies(r) == [b"m0"] and r.ext_fields["nextBeginOffset"] == "4"
            r = await pull(b, "G", 1, "TAGS = 't' AND color IN ('red', 'green')")
            assert bodies(r) == [b"m2", b"m3"]
            r = await pull(b, "G", 0, "nope IS NOT NULL")
            assert (r.code, r.remark) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
            assert r.ext_fields["nextBeginOffset"] == "4"  # the consumer moves past what did not match
            r = await pull(b, "G", 0, "a > 100 OR a = 9")  # a tag expression of the same text is not
            assert bodies(r) == [b"m2"]

            # Bad input: the code RocketMQ gives, and a remark naming the error.
            malformed = await pull(b, "G", 0, "a >")
            assert malformed.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
            assert "parse the consumer's subscription failed" in (malformed.remark or "")
            assert "line 1, column 4" in (malformed.remark or "")
            typed = await pull(b, "G", 0, "a > 'x'")
            assert typed.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "only numbers" in (
                typed.remark or ""
            )
            empty = await pull(b, "G", 0, "")
            assert empty.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
            unknown = await pull(b, "G", 0, "a > 3", kind="FOO")
            assert unknown.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "FOO" in (unknown.remark or "")
            assert bodies(await pull(b, "G", 0, "a > 3")) == [b"m1", b"m2", b"m3"]  # still served

    run(scenario())


def test_pull_by_the_heartbeats_subscription(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "s", enable_property_filter=True) as b:
            await send_all(b)
            hb = await b.call(RequestCode.HEART_BEAT, body=heartbeat_body("H", "a < 5", 100))
            assert hb.code == ResponseCode.SUCCESS
            r = await pull(b, "H", 0, None, flags=0, sub_version=100)
            assert bodies(r) == [b"m0", b"m3"]
            newer = await pull(b, "H", 0, None, flags=0, sub_version=101)
            assert newer.code == ResponseCode.SUBSCRIPTION_NOT_LATEST

            # A new version of the expression replaces the old one.
            await b.call(RequestCode.HEART_BEAT, body=heartbeat_body("H", "color = 'red'", 200))
            assert bodies(await pull(b, "H", 0, None, flags=0, sub_version=200)) == [b"m0", b"m2"]

            # A heartbeat whose expression does not compile drops the group's filter: its pulls are
            # told FILTER_DATA_NOT_EXIST, as RocketMQ tells them.
            await b.call(RequestCode.HEART_BEAT, body=heartbeat_body("H", "color = ", 300))
            gone = await pull(b, "H", 0, None, flags=0, sub_version=300)
            assert gone.code == ResponseCode.FILTER_DATA_NOT_EXIST
            assert (
                gone.remark == "The broker's consumer filter data is not exist!Your expression may be wrong!"
            )

    run(scenario())


def test_property_filter_off(tmp_path: Path) -> None:
    """enablePropertyFilter=false (the default): PULL and CHECK_CLIENT_CONFIG refuse SQL92 with
    RocketMQ's SYSTEM_ERROR and remark; POP serves it, as RocketMQ's POP does; turned on at run
    time by UPDATE_BROKER_CONFIG, pulls are served."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "s") as b:
            await send_all(b)
            r = await pull(b, "G", 0, "a > 3")
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, NOT_SUPPORTED)
            await b.call(RequestCode.HEART_BEAT, body=heartbeat_body("H", "a > 3", 1))
            r = await pull(b, "H", 0, None, flags=0, sub_version=1)
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, NOT_SUPPORTED)
            check = await b.call(RequestCode.CHECK_CLIENT_CONFIG, body=check_body("a > 3"))
            assert (check.code, check.remark) == (ResponseCode.SYSTEM_ERROR, NOT_SUPPORTED)
            tag = await b.call(RequestCode.CHECK_CLIENT_CONFIG, body=check_body("TagA", "TAG"))
            assert tag.code == ResponseCode.SUCCESS
            popped = await pop(b, "P", "a > 3")
            assert popped.code == ResponseCode.SUCCESS and bodies(popped) == [b"m1", b"m2", b"m3"]

            on = await b.call(RequestCode.UPDATE_BROKER_CONFIG, body=b"enablePropertyFilter=true\n")
            assert on.code == ResponseCode.SUCCESS, on.remark
            assert bodies(await pull(b, "G", 0, "a > 3")) == [b"m1", b"m2", b"m3"]
            assert bodies(await pull(b, "H", 0, None, flags=0, sub_version=1)) == [b"m1", b"m2", b"m3"]

    run(scenario())


def test_check_client_config(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "s", enable_property_filter=True) as b:
            ok = await b.call(RequestCode.CHECK_CLIENT_CONFIG, body=check_body("a BETWEEN 1 AND 3"))
            assert ok.code == ResponseCode.SUCCESS
            bad = await b.call(RequestCode.CHECK_CLIENT_CONFIG, body=check_body("a BETWEEN 3 AND 1"))
            assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
            assert "invalid SQL92 expression" in (bad.remark or "") and "line 1" in (bad.remark or "")
            foo = await b.call(RequestCode.CHECK_CLIENT_CONFIG, body=check_body("a > 1", "FOO"))
            assert foo.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "FOO" in (foo.remark or "")

    run(scenario())


def test_pop_with_sql92(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "s", enable_property_filter=True) as b:
            await send_all(b)
            r = await pop(b, "P", "color <> 'red'")
            assert r.code == ResponseCode.SUCCESS and bodies(r) == [b"m1", b"m3"]
            bad = await pop(b, "P2", "color <>")
            assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "line 1" in (bad.remark or "")

    run(scenario())


def test_a_held_pull_wakes_only_for_a_matching_message(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "s", enable_property_filter=True) as b:
            await send_all(b)
            hold = b.controller.parts.pull.hold if b.controller.parts is not None else None
            assert hold is not None
            held = asyncio.create_task(
                pull(b, "G", 4, "color = 'blue'", flags=SUBSCRIPTION | SUSPEND, timeout=20)
            )
            while hold.held_count == 0:
                await asyncio.sleep(0.01)
            await b.send("T", b"not blue", tags="t", props={"a": "1", "color": "red"})
            hold.check_all()  # the periodic check too sees the new message, and it does not match
            await asyncio.sleep(0.05)  # and any arrival hop the dispatch thread made
            assert not held.done() and hold.held_count == 1
            await b.send("T", b"blue", tags="t", props={"a": "2", "color": "blue"})
            r = await asyncio.wait_for(held, 10)
            assert r.code == ResponseCode.SUCCESS and bodies(r) == [b"blue"]
            assert r.ext_fields["nextBeginOffset"] == "6"

            # Its deadline answers a pull nothing matched (PULL_NOT_FOUND at the end of the queue).
            late = await pull(b, "G", 6, "color = 'nope'", flags=SUBSCRIPTION | SUSPEND, suspend_ms=300)
            assert late.code == ResponseCode.PULL_NOT_FOUND

    run(scenario())


def test_consumer_filter_json(tmp_path: Path) -> None:
    """Written as RocketMQ writes it; loaded back, every entry dead until its group beats again."""

    async def scenario() -> None:
        root = tmp_path / "s"
        async with broker_under_test(root, enable_property_filter=True) as b:
            await send_all(b)
            await b.call(RequestCode.HEART_BEAT, body=heartbeat_body("cg", "a > 3", 42))
            assert b.controller.filters.persist_if_changed()
            saved = json.loads((root / "config" / "consumerFilter.json").read_text())
            entry = saved["filterDataByTopic"]["T"]["groupFilterData"]["cg"]
            assert saved["filterDataByTopic"]["T"]["topic"] == "T"
            bloom = BloomFilter().generate("cg#T")  # RocketMQ's positions of group#topic
            assert entry["bloomFilterData"] == {"bitNum": 112, "bitPos": list(bloom.bit_pos)}
            assert {k: entry[k] for k in ("clientVersion", "consumerGroup", "dead", "deadTime", "expression",
                                          "expressionType", "topic")} == {
                "clientVersion": 42, "consumerGroup": "cg", "dead": False, "deadTime": 0,
                "expression": "a > 3", "expressionType": "SQL92", "topic": "T"}  # fmt: skip
            assert list(entry) == sorted(entry)
        async with broker_under_test(root, enable_property_filter=True) as b:
            data = b.controller.filters.get("T", "cg")
            assert data is not None and data.dead and data.expression == "a > 3"
            await b.call(RequestCode.HEART_BEAT, body=heartbeat_body("cg", "a > 3", 42))
            assert not data.dead  # the same version brings it back to life
            assert bodies(await pull(b, "cg", 0, None, flags=0, sub_version=42)) == [b"m1", b"m2", b"m3"]

    run(scenario())
