"""The consume side over real sockets: heartbeats and group membership, pulls (statuses, filters,
long polling, offset commit), offset queries, and orderly-consumer queue locks.

Heartbeat bodies are the ones real-clients.md recorded from ali-ons (enum names) and the C++ client
(ordinals, `codeSet:[0,0]`, subVersion as a string).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

from rocketlite.broker.client_manager import ClientManager
from rocketlite.broker.processors.pull import PullMessageProcessor
from rocketlite.broker.rebalance_lock import RebalanceLockManager
from rocketlite.protocol.bodies.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel
from rocketlite.protocol.bodies.message_queue import LockBatchRequestBody, LockBatchResponseBody, MessageQueue
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.formats.record import decode_records
from rocketlite.protocol.message import java_string_hash
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import PullMessageRequestHeader
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import Connection, RequestTable
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test

PULL_FIELDS = {"suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"}
SUSPEND, SUBSCRIPTION, COMMIT = 0x2, 0x4, 0x1


def ali_ons_heartbeat(client_id: str, group: str, topic: str, sub: str = "TagA || TagB") -> bytes:
    tags = [t.strip() for t in sub.split("||")] if sub != "*" else []
    return json.dumps(
        {"clientID": client_id, "consumerDataSet": [{
            "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "subscriptionDataSet": [
                {"topic": topic, "subString": sub, "classFilterMode": False, "tagsSet": tags,
                 "codeSet": [java_string_hash(t) for t in tags], "subVersion": 1795303693449},
                {"topic": f"%RETRY%{group}", "subString": "*", "classFilterMode": False, "tagsSet": [],
                 "codeSet": [], "subVersion": 1795303693450}],
            "unitMode": False}],
         "producerDataSet": [{"groupName": "smoke_producer_group"}]}
    ).encode()  # fmt: skip


def cpp_heartbeat(client_id: str, group: str, topic: str) -> bytes:
    return json.dumps(
        {"clientID": client_id, "consumerDataSet": [{
            "consumeFromWhere": 0, "consumeType": 1, "groupName": group, "messageModel": 1,
            "subscriptionDataSet": [
                {"subString": "*", "subVersion": "1795303223557", "topic": f"%RETRY%{group}"},
                {"codeSet": [0, 0], "subString": "TagA || TagB", "subVersion": "1795303223557",
                 "tagsSet": ["TagA", "TagB"], "topic": topic}]}]}
    ).encode()  # fmt: skip


def pull_ext(
    group: str,
    topic: str,
    offset: int,
    *,
    qid: int = 0,
    flags: int = SUBSCRIPTION,
    sub: str = "*",
    suspend_ms: int = 15000,
    commit: int = 0,
    sub_version: int = 0,
) -> dict[str, str]:
    return PullMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=qid, queue_offset=offset, max_msg_nums=32,
        sys_flag=flags, commit_offset=commit, suspend_timeout_millis=suspend_ms,
        subscription=sub if flags & SUBSCRIPTION else None, sub_version=sub_version,
    ).to_ext()  # fmt: skip


class Recorder:
    """A client-side request table that records what the broker sends us (NOTIFY_... is one-way)."""

    def __init__(self) -> None:
        self.table = RequestTable()
        self.received: asyncio.Queue[RemotingCommand] = asyncio.Queue()
        self.table.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._record)

    def _record(self, conn: Connection, request: RemotingCommand) -> None:
        del conn
        self.received.put_nowait(request)

    async def next(self) -> RemotingCommand:
        return await asyncio.wait_for(self.received.get(), 5)


def parts(b: BrokerUnderTest) -> tuple[ClientManager, PullMessageProcessor, RebalanceLockManager]:
    ctx = b.controller.parts
    assert ctx is not None and ctx.clients is not None and ctx.pull is not None and ctx.locks is not None
    return ctx.clients, ctx.pull, ctx.locks


async def dispatched(b: BrokerUnderTest) -> None:
    assert await asyncio.to_thread(b.controller.store.wait_dispatched, 5)


async def consumer_ids(b: BrokerUnderTest, group: str) -> list[str] | None:
    r = await b.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
    if r.code != ResponseCode.SUCCESS:
        assert r.code == ResponseCode.SYSTEM_ERROR and r.remark == f"no consumer for this group, {group}"
        return None
    ids = json.loads(r.body or b"")["consumerIdList"]
    assert isinstance(ids, list)
    return sorted(ids)


async def send_tagged(b: BrokerUnderTest, topic: str, tags: list[str], qid: int = 0) -> None:
    for i, tag in enumerate(tags):
        r = await b.send(topic, f"m{i}-{tag}".encode(), queue_id=qid, tags=tag)
        assert r.code == ResponseCode.SUCCESS, r.remark
    await dispatched(b)


# ----------------------------------------------------------------------------------------- heartbeat


def test_heartbeat_from_ali_ons_registers_group_and_retry_topic(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            clients, _, _ = parts(b)
            assert await consumer_ids(b, "G") is None
            r = await b.call(RequestCode.HEART_BEAT, body=ali_ons_heartbeat("127.0.0.1@30021", "G", "T"))
            assert r.code == ResponseCode.SUCCESS and r.version == 409
            retry = b.controller.topics.select("%RETRY%G")
            assert retry is not None and (retry.read_queue_nums, retry.perm) == (1, 6)
            assert await consumer_ids(b, "G") == ["127.0.0.1@30021"]
            sub = clients.find_subscription("G", "T")
            assert sub is not None and sub.code_set == (2598919, 2598920)
            assert clients.consumer_groups_of_topic("T") == {"G"}
            assert len(clients.producer_channels("smoke_producer_group")) == 1
            conns = await b.call(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "G"})
            body = json.loads(conns.body or b"")
            assert body["consumeType"] == "CONSUME_PASSIVELY" and body["messageModel"] == "CLUSTERING"
            assert body["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET"
            assert [c["clientId"] for c in body["connectionSet"]] == ["127.0.0.1@30021"]
            assert body["subscriptionTable"]["T"]["tagsSet"] == ["TagA", "TagB"]
            missing = await b.call(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "X"})
            assert missing.code == ResponseCode.CONSUMER_NOT_ONLINE
            prod = await b.call(
                RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "smoke_producer_group"}
            )
            assert json.loads(prod.body or b"")["connectionSet"][0]["clientId"] == "127.0.0.1@30021"
            check = await b.call(RequestCode.CHECK_CLIENT_CONFIG, body=b'{"clientId":"c","group":"G"}')
            assert check.code == ResponseCode.SUCCESS

    run(scenario())


def test_heartbeat_from_cpp_client_with_ordinals_and_zero_codes(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            clients, _, _ = parts(b)
            body = cpp_heartbeat("4242-127.0.0.1@DEFAULT", "CG", "T")
            request = make_request(RequestCode.HEART_BEAT, {}, body, language="CPP", version=63)
            r = await b.client.invoke(b.addr, request)
            assert r.code == ResponseCode.SUCCESS
            assert await consumer_ids(b, "CG") == ["4242-127.0.0.1@DEFAULT"]
            info = clients.consumer_group("CG")
            assert info is not None
            assert info.consume_type is ConsumeType.CONSUME_PASSIVELY
            assert info.message_model is MessageModel.CLUSTERING
            assert info.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
            sub = info.subscription_table["T"]
            assert sub.code_set == (java_string_hash("TagA"), java_string_hash("TagB"))
            assert sub.sub_version == 1795303223557
            assert b.controller.topics.select("%RETRY%CG") is not None
            channel = info.channels["4242-127.0.0.1@DEFAULT"]
            assert (channel.language, channel.version) == ("CPP", 63)

    run(scenario())


def test_membership_changes_notify_the_group(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            rec1, rec2 = Recorder(), Recorder()
            c1, c2 = RemotingClient(rec1.table), RemotingClient(rec2.table)
            hb1, hb2 = ali_ons_heartbeat("c1@1", "G", "T"), ali_ons_heartbeat("c2@2", "G", "T")
            try:
                assert (await c1.invoke(b.addr, make_request(RequestCode.HEART_BEAT, {}, hb1))).code == 0
                await rec1.next()  # joining is a change, announced to the joiner too (as Java does)
                # The same heartbeat again changes nothing: a notification would precede this answer.
                assert (await c1.invoke(b.addr, make_request(RequestCode.HEART_BEAT, {}, hb1))).code == 0
                assert rec1.received.empty()
                assert (await c2.invoke(b.addr, make_request(RequestCode.HEART_BEAT, {}, hb2))).code == 0
                note = await rec1.next()
                assert note.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED and note.is_oneway
                assert note.ext_fields == {"consumerGroup": "G"}
                await rec2.next()  # every channel of the group is told, the newcomer included
                assert await consumer_ids(b, "G") == ["c1@1", "c2@2"]

                unregister = {
                    "clientID": "c2@2",
                    "consumerGroup": "G",
                    "producerGroup": "smoke_producer_group",
                }
                r = await c2.invoke(b.addr, make_request(RequestCode.UNREGISTER_CLIENT, unregister))
                assert r.code == ResponseCode.SUCCESS
                await rec1.next()
                assert await consumer_ids(b, "G") == ["c1@1"]
                assert len(parts(b)[0].producer_channels("smoke_producer_group")) == 1

                assert (await c2.invoke(b.addr, make_request(RequestCode.HEART_BEAT, {}, hb2))).code == 0
                await rec1.next()
                await c2.close()  # the broker drops the closed connection's clients and tells the rest
                await rec1.next()
                assert await consumer_ids(b, "G") == ["c1@1"]
            finally:
                await c1.close()
                await c2.close()

    run(scenario())


def test_silent_channels_expire(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            clients, _, _ = parts(b)
            await b.call(RequestCode.HEART_BEAT, body=ali_ons_heartbeat("c1@1", "G", "T"))
            ours = await b.client.connection(b.addr)
            closed = asyncio.get_running_loop().create_future()
            ours.close_callbacks.append(lambda _conn: closed.set_result(None))
            now = b.controller.clock.now_ms()
            assert clients.scan_not_active_channels(now + 60_000) == 0
            assert clients.scan_not_active_channels(now + 121_000) == 2  # consumer + producer
            assert (
                clients.consumer_group("G") is None
                and clients.producer_channels("smoke_producer_group") == []
            )
            await asyncio.wait_for(closed, 5)  # the broker closes an expired client's channel
            assert await consumer_ids(b, "G") is None  # the client reconnects for this call

    run(scenario())


# -------------------------------------------------------------------------------------------- pull


def test_pull_found_with_expression_and_heartbeat_filters(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            await send_tagged(b, "T", ["TagA", "TagB", "TagA"])
            r = await b.call(RequestCode.PULL_MESSAGE, pull_ext("P", "T", 0))
            assert r.code == ResponseCode.SUCCESS and r.remark == "FOUND"
            assert r.ext_fields == {"suggestWhichBrokerId": "0", "nextBeginOffset": "3", "minOffset": "0",
                                    "maxOffset": "3"}  # fmt: skip
            recs = decode_records(r.body or b"")
            assert [x.body for x in recs] == [b"m0-TagA", b"m1-TagB", b"m2-TagA"]
            assert [x.queue_offset for x in recs] == [0, 1, 2]

            only_a = await b.call(RequestCode.PULL_MESSAGE, pull_ext("P", "T", 0, sub="TagA || TagC"))
            assert [x.tags for x in decode_records(only_a.body or b"")] == ["TagA", "TagA"]
            assert only_a.ext_fields["nextBeginOffset"] == "3"
            none = await b.call(RequestCode.PULL_MESSAGE, pull_ext("P", "T", 0, sub="TagC"))
            assert none.code == ResponseCode.PULL_RETRY_IMMEDIATELY and none.remark == "NO_MATCHED_MESSAGE"
            assert set(none.ext_fields) == PULL_FIELDS and none.ext_fields["nextBeginOffset"] == "3"

            # Without the SUBSCRIPTION flag the heartbeat's subscription filters.
            no_group = await b.call(RequestCode.PULL_MESSAGE, pull_ext("H", "T", 0, flags=0))
            assert no_group.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
            await b.call(RequestCode.HEART_BEAT, body=ali_ons_heartbeat("h@1", "H", "T", sub="TagB"))
            by_hb = await b.call(RequestCode.PULL_MESSAGE, pull_ext("H", "T", 0, flags=0))
            assert [x.body for x in decode_records(by_hb.body or b"")] == [b"m1-TagB"]
            other_topic = await b.call(RequestCode.PULL_MESSAGE, pull_ext("H", "Other", 0, flags=0))
            assert other_topic.code == ResponseCode.TOPIC_NOT_EXIST
            b.controller.topics.create_in_send_back("Other", 1, 6)
            unsubscribed = await b.call(RequestCode.PULL_MESSAGE, pull_ext("H", "Other", 0, flags=0))
            assert unsubscribed.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
            newer = await b.call(
                RequestCode.PULL_MESSAGE, pull_ext("H", "T", 0, flags=0, sub_version=2 << 40)
            )
            assert newer.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
            sql = await b.call(RequestCode.PULL_MESSAGE, {**pull_ext("P", "T", 0), "expressionType": "SQL92"})
            assert sql.code == ResponseCode.SYSTEM_ERROR and "SQL92" in (sql.remark or "")
            assert b.controller.stats.group_get_nums["P"] == 5

    run(scenario())


def test_pull_status_codes_carry_all_four_fields(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            await send_tagged(b, "T", ["a", "b", "c"])

            async def pull(offset: int, qid: int = 0) -> RemotingCommand:
                r = await b.call(RequestCode.PULL_MESSAGE, pull_ext("P", "T", offset, qid=qid))
                assert set(r.ext_fields) == PULL_FIELDS
                return r

            caught_up = await pull(3)
            assert (caught_up.code, caught_up.remark) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
            assert caught_up.ext_fields["nextBeginOffset"] == "3" and caught_up.ext_fields["maxOffset"] == "3"
            badly = await pull(10)
            assert (badly.code, badly.remark) == (ResponseCode.PULL_OFFSET_MOVED, "OFFSET_OVERFLOW_BADLY")
            assert badly.ext_fields["nextBeginOffset"] == "3"  # to the end (RocketMQ >= 4.9.4)
            empty_at_zero = await pull(0, qid=1)
            assert (empty_at_zero.code, empty_at_zero.remark) == (
                ResponseCode.PULL_NOT_FOUND,
                "NO_MESSAGE_IN_QUEUE",
            )
            empty_moved = await pull(5, qid=1)
            assert empty_moved.code == ResponseCode.PULL_OFFSET_MOVED
            assert empty_moved.ext_fields["nextBeginOffset"] == "0"

            cq = b.controller.store.cq_store.get("T", 0)
            assert cq is not None
            cq.correct_min_offset(b.controller.store.get_commit_log_offset_in_queue("T", 0, 2))
            too_small = await pull(0)
            assert (too_small.code, too_small.remark) == (ResponseCode.PULL_OFFSET_MOVED, "OFFSET_TOO_SMALL")
            assert too_small.ext_fields["nextBeginOffset"] == "2" and too_small.ext_fields["minOffset"] == "2"

            bad_queue = await b.call(RequestCode.PULL_MESSAGE, pull_ext("P", "T", 0, qid=9))
            assert bad_queue.code == ResponseCode.SYSTEM_ERROR and "queueId[9] is illegal" in (
                bad_queue.remark or ""
            )
            groups = b.controller.groups
            cfg = groups.find("P")
            assert cfg is not None
            groups.update(replace(cfg, consume_enable=False))
            disabled = await b.call(RequestCode.PULL_MESSAGE, pull_ext("P", "T", 0))
            assert disabled.code == ResponseCode.NO_PERMISSION

    run(scenario())


def test_pull_needs_a_group_when_auto_create_is_off(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path, auto_create_subscription_group=False) as b:
            await send_tagged(b, "T", ["a"])
            r = await b.call(RequestCode.PULL_MESSAGE, pull_ext("Unknown", "T", 0))
            assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST

    run(scenario())


def test_pull_commits_offset_on_first_execution(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            await send_tagged(b, "T", ["a", "b"])
            offsets = b.controller.offsets
            await b.call(RequestCode.PULL_MESSAGE, pull_ext("P", "T", 0, commit=7))
            assert offsets.query("P", "T", 0) == -1  # no COMMIT_OFFSET flag
            r = await b.call(
                RequestCode.PULL_MESSAGE, pull_ext("P", "T", 1, flags=SUBSCRIPTION | COMMIT, commit=1)
            )
            assert r.code == ResponseCode.SUCCESS and offsets.query("P", "T", 0) == 1
            # A held pull commits when it is parked, not again when it is answered.
            held = pull_ext("P", "T", 2, flags=SUBSCRIPTION | COMMIT | SUSPEND, commit=2, suspend_ms=200)
            task = asyncio.ensure_future(b.call(RequestCode.PULL_MESSAGE, held))
            await b.call(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"})  # after the park
            assert offsets.query("P", "T", 0) == 2
            offsets.commit("P", "T", 0, 99)
            assert (await task).code == ResponseCode.PULL_NOT_FOUND
            assert offsets.query("P", "T", 0) == 99

    run(scenario())


# ---------------------------------------------------------------------------------------- long poll


def test_long_polling_answers_when_a_message_arrives(tmp_path: Path) -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        async with broker_under_test(tmp_path) as b:
            _, pull, _ = parts(b)
            assert pull.hold is not None
            b.controller.topics.create_in_send_back("T", 2, 6)
            started = loop.time()
            request = pull_ext("P", "T", 0, flags=SUBSCRIPTION | SUSPEND, suspend_ms=10_000)
            task = asyncio.ensure_future(b.call(RequestCode.PULL_MESSAGE, request, timeout=15))
            # Requests on one connection are handled in order: once this answers, the pull is parked.
            await b.call(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"})
            assert not task.done() and pull.hold.held_count == 1
            sent = await b.send("T", b"late", queue_id=0, tags="x")
            assert sent.code == ResponseCode.SUCCESS
            sent_at = loop.time()
            r = await task
            answered = loop.time()
            assert r.code == ResponseCode.SUCCESS and [x.body for x in decode_records(r.body or b"")] == [
                b"late"
            ]
            assert set(r.ext_fields) == PULL_FIELDS and r.ext_fields["nextBeginOffset"] == "1"
            assert sent_at <= answered and answered - started < 5.0  # well before the 10 s suspend
            assert pull.hold.held_count == 0

    run(scenario())


def test_long_polling_times_out_with_not_found(tmp_path: Path) -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        async with broker_under_test(tmp_path) as b:
            b.controller.topics.create_in_send_back("T", 2, 6)
            started = loop.time()
            request = pull_ext("P", "T", 0, flags=SUBSCRIPTION | SUSPEND, suspend_ms=300)
            r = await b.call(RequestCode.PULL_MESSAGE, request)
            elapsed = loop.time() - started
            assert r.code == ResponseCode.PULL_NOT_FOUND and set(r.ext_fields) == PULL_FIELDS
            assert 0.29 <= elapsed < 2.0

    run(scenario())


def test_held_pull_ignores_messages_its_filter_rejects(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            _, pull, _ = parts(b)
            assert pull.hold is not None
            b.controller.topics.create_in_send_back("T", 1, 6)
            request = pull_ext("P", "T", 0, flags=SUBSCRIPTION | SUSPEND, sub="TagA", suspend_ms=10_000)
            task = asyncio.ensure_future(b.call(RequestCode.PULL_MESSAGE, request, timeout=15))
            await b.call(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"})
            await send_tagged(b, "T", ["TagB"])
            # The arrival report hopped onto the loop before this round trip finished.
            await b.call(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"})
            assert not task.done() and pull.hold.held_count == 1
            await send_tagged(b, "T", ["TagA"])
            r = await asyncio.wait_for(task, 5)
            assert r.code == ResponseCode.SUCCESS
            assert [x.tags for x in decode_records(r.body or b"")] == ["TagA"]
            assert r.ext_fields["nextBeginOffset"] == "2"

    run(scenario())


# ------------------------------------------------------------------------------------------ offsets


def test_consumer_offset_queries(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            store = b.controller.store
            await send_tagged(b, "T", ["a", "b", "c"])
            q = {"consumerGroup": "G", "topic": "T", "queueId": "0"}
            fresh = await b.call(RequestCode.QUERY_CONSUMER_OFFSET, q)
            assert (fresh.code, fresh.ext_fields) == (ResponseCode.SUCCESS, {"offset": "0"})  # young queue
            empty = await b.call(RequestCode.QUERY_CONSUMER_OFFSET, {**q, "queueId": "1"})
            assert empty.code == ResponseCode.QUERY_NOT_FOUND  # no message at 0 yet: consumeFromWhere decides
            upd = await b.call(RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "2"})
            assert upd.code == ResponseCode.SUCCESS
            assert (await b.call(RequestCode.QUERY_CONSUMER_OFFSET, q)).ext_fields["offset"] == "2"
            await b.call(RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "-1"})  # ali-ons' quirk
            assert b.controller.offsets.query("G", "T", 0) == -1
            all_offsets = await b.call(RequestCode.GET_ALL_CONSUMER_OFFSET)
            assert '"T@G"' in (all_offsets.body or b"").decode()

            qt = {"topic": "T", "queueId": "0"}
            assert (await b.call(RequestCode.GET_MAX_OFFSET, qt)).ext_fields == {"offset": "3"}
            assert (await b.call(RequestCode.GET_MIN_OFFSET, qt)).ext_fields == {"offset": "0"}
            stamps = [store.get_message_store_timestamp("T", 0, i) for i in range(3)]
            earliest = await b.call(RequestCode.GET_EARLIEST_MSG_STORETIME, qt)
            assert earliest.ext_fields == {"timestamp": str(stamps[0])}
            search = await b.call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**qt, "timestamp": str(stamps[1])})
            assert search.ext_fields["offset"] == str(next(i for i, s in enumerate(stamps) if s >= stamps[1]))
            future = await b.call(
                RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**qt, "timestamp": str(stamps[2] + 1)}
            )
            assert future.ext_fields["offset"] == "3"
            nothing = {"topic": "Nope", "queueId": "0"}
            assert (await b.call(RequestCode.GET_MIN_OFFSET, nothing)).ext_fields == {"offset": "0"}
            assert (await b.call(RequestCode.GET_EARLIEST_MSG_STORETIME, nothing)).ext_fields == {
                "timestamp": "-1"
            }

            # Once the queue no longer starts at 0, a group without an offset is sent to consumeFromWhere.
            cq = store.cq_store.get("T", 0)
            assert cq is not None
            cq.correct_min_offset(store.get_commit_log_offset_in_queue("T", 0, 1))
            assert (await b.call(RequestCode.GET_MIN_OFFSET, qt)).ext_fields == {"offset": "1"}
            gone = await b.call(RequestCode.QUERY_CONSUMER_OFFSET, {**q, "consumerGroup": "New"})
            assert gone.code == ResponseCode.QUERY_NOT_FOUND
            assert gone.remark == "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"

    run(scenario())


# -------------------------------------------------------------------------------------------- locks


def test_lock_and_unlock_queues_between_two_clients(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            _, _, locks = parts(b)
            mq = [MessageQueue("T", "broker-a", i) for i in range(3)]
            other = RemotingClient()

            async def lock(client: RemotingClient, cid: str, queues: list[MessageQueue]) -> set[int]:
                body = LockBatchRequestBody("G", cid, frozenset(queues)).to_bytes()
                r = await client.invoke(b.addr, make_request(RequestCode.LOCK_BATCH_MQ, {}, body))
                assert r.code == ResponseCode.SUCCESS
                return {m.queue_id for m in LockBatchResponseBody.from_json(r.body or b"").lock_ok_mq_set}

            def unlock_request(cid: str, queues: list[MessageQueue], oneway: bool = False) -> RemotingCommand:
                body = LockBatchRequestBody("G", cid, frozenset(queues)).to_bytes()
                return make_request(RequestCode.UNLOCK_BATCH_MQ, {}, body, oneway=oneway)

            try:
                assert await lock(b.client, "c1", mq[:2]) == {0, 1}
                assert await lock(other, "c2", mq[1:]) == {2}  # queue 1 is c1's
                assert await lock(b.client, "c1", mq[:2]) == {0, 1}  # re-locking refreshes
                r = await other.invoke(b.addr, unlock_request("c2", [mq[1]]))
                assert r.code == ResponseCode.SUCCESS
                assert locks.is_locked("G", mq[1], "c1")  # c2 cannot release c1's lock
                await b.client.invoke_oneway(b.addr, unlock_request("c1", [mq[1]], oneway=True))
                assert await lock(b.client, "c3", [mq[1]]) == {1}  # same connection: after the unlock
                later = b.controller.clock.now_ms() + 61_000
                assert locks.try_lock_batch("G", [mq[0], mq[2]], "c2", now_ms=later) == {mq[0], mq[2]}
                assert await lock(b.client, "c1", [mq[0]]) == set()  # c1's lock expired and was taken
            finally:
                await other.close()

    run(scenario())
