"""Admin request round trips over real sockets: topics, groups, statistics, broker configuration.

Topic changes must reach the name servers; a small in-test name server (a real `RemotingServer`)
records every REGISTER_BROKER, so the test awaits the registration that carries the new topic.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from rocketlite.broker.processors.admin_requests import RuntimeStatsSampler, human_bytes
from rocketlite.clock import ManualClock
from rocketlite.protocol.bodies.heartbeat import ConsumerData, HeartbeatData, SubscriptionData
from rocketlite.protocol.bodies.lists import KVTable, TopicList
from rocketlite.protocol.bodies.message_queue import ConsumeStats, MessageQueue, TopicStatsTable
from rocketlite.protocol.bodies.route import RegisterBrokerBody, TopicConfigSerializeWrapper
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.formats.record import MessageInner
from rocketlite.protocol.message import HostAddress
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.admin import INVALID_PARAMETER, AdminRequestCode
from rocketlite.protocol.wire.command import RemotingCommand, make_request, make_response
from rocketlite.protocol.wire.headers import (
    CreateTopicRequestHeader,
    GetConsumeStatsRequestHeader,
    RegisterBrokerRequestHeader,
)
from rocketlite.remoting.connection import Connection, RequestTable
from rocketlite.remoting.server import RemotingServer
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test
from tests.support.store import StoreFactory


class FakeNameServer:
    """Accepts registrations and remembers the topics each one carried."""

    def __init__(self) -> None:
        table = RequestTable()
        table.register(RequestCode.REGISTER_BROKER, self._register)
        table.register(RequestCode.UNREGISTER_BROKER, lambda c, r: make_response(r, ResponseCode.SUCCESS))
        self.server = RemotingServer(table, host="127.0.0.1")
        self.registrations: list[set[str]] = []
        self.changed = asyncio.Event()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.ports[0]}"

    def _register(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = RegisterBrokerRequestHeader.from_ext(request.ext_fields)
        body = RegisterBrokerBody.decode(request.body or b"", compressed=header.compressed)
        self.registrations.append(set(body.topic_config_serialize_wrapper.topic_config_table))
        self.changed.set()
        return make_response(request, ResponseCode.SUCCESS)

    async def wait_for(self, predicate_topic: str, present: bool, timeout: float = 10.0) -> None:
        async def until() -> None:
            while not self.registrations or (predicate_topic in self.registrations[-1]) != present:
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(until(), timeout)


def create_topic_ext(
    topic: str,
    *,
    queues: int = 4,
    perm: int = 6,
    filter_type: str = "SINGLE_TAG",
    attributes: str | None = None,
) -> dict[str, str]:
    return CreateTopicRequestHeader(
        topic=topic, default_topic="TBW102", read_queue_nums=queues, write_queue_nums=queues, perm=perm,
        topic_filter_type=filter_type, topic_sys_flag=0, order=False, attributes=attributes,
    ).to_ext()  # fmt: skip


async def all_topics(b: BrokerUnderTest) -> TopicConfigSerializeWrapper:
    r = await b.call(RequestCode.GET_ALL_TOPIC_CONFIG)
    assert r.code == ResponseCode.SUCCESS
    return TopicConfigSerializeWrapper.from_json(r.body or b"")


async def dispatched(b: BrokerUnderTest) -> None:
    assert await asyncio.to_thread(b.controller.store.wait_dispatched, 10.0)


def test_topic_create_list_delete_and_registration(tmp_path: Path) -> None:
    async def scenario() -> None:
        ns = FakeNameServer()
        await ns.server.start()
        try:
            async with broker_under_test(tmp_path, namesrv_addr=ns.addr) as b:
                r = await b.call(
                    RequestCode.UPDATE_AND_CREATE_TOPIC, create_topic_ext("AdminT", queues=3, perm=4)
                )
                assert r.code == ResponseCode.SUCCESS, r.remark
                tc = (await all_topics(b)).topic_config_table["AdminT"]
                assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (3, 3, 4)
                assert '"topicName":"AdminT"' in (tmp_path / "config" / "topics.json").read_text()
                await ns.wait_for("AdminT", present=True)

                refusals = {
                    "bad topic!": "illegal",
                    "SCHEDULE_TOPIC_XXXX": "conflict with system topic",
                    "TBW102": "conflict with system topic",
                    "rmq_sys_mine": "conflict with system topic",
                    "DefaultCluster": "conflict with system reserved words",
                }
                for topic, why in refusals.items():
                    r = await b.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create_topic_ext(topic))
                    assert r.code == ResponseCode.SYSTEM_ERROR and why in (r.remark or ""), (topic, r.remark)
                r = await b.call(
                    RequestCode.UPDATE_AND_CREATE_TOPIC, create_topic_ext("X", filter_type="ANY")
                )
                assert r.code == ResponseCode.SYSTEM_ERROR

                b.controller.topics.update(tc.__class__("Doomed", 2, 2))
                await b.send("Doomed", b"bye", queue_id=1)
                b.controller.offsets.commit("cg", "Doomed", 1, 1)
                await dispatched(b)
                assert (tmp_path / "consumequeue" / "Doomed").is_dir()
                r = await b.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Doomed"})
                assert r.code == ResponseCode.SUCCESS
                assert "Doomed" not in (await all_topics(b)).topic_config_table
                assert not (tmp_path / "consumequeue" / "Doomed").exists()
                assert b.controller.offsets.query("cg", "Doomed", 1) == -1
                await ns.wait_for("Doomed", present=False)
                r = await b.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "SCHEDULE_TOPIC_XXXX"})
                assert r.code == ResponseCode.SYSTEM_ERROR

                r = await b.call(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
                system = set(TopicList.from_json(r.body or b"").topic_list)
                assert {
                    "SCHEDULE_TOPIC_XXXX",
                    "TBW102",
                    "DefaultCluster",
                    "broker-a",
                    "SELF_TEST_TOPIC",
                } <= system
                assert "AdminT" not in system
        finally:
            await ns.server.close()

    run(scenario())


def test_topic_attributes(tmp_path: Path) -> None:
    """5.x's topic attributes (what the dashboard's topic dialogs set and show: `message.type`):
    set on creation, changed and kept by later updates, served by GET_TOPIC_CONFIG and
    GET_ALL_TOPIC_CONFIG, written to topics.json and read back after a restart; refusals answered
    with RocketMQ's codes and texts, the topic unchanged."""

    async def attributes(b: BrokerUnderTest, topic: str) -> dict[str, str]:
        r = await b.call(AdminRequestCode.GET_TOPIC_CONFIG, {"topic": topic})
        assert r.code == ResponseCode.SUCCESS, r.remark
        body = json.loads(r.body or b"")
        assert body["attributes"] == dict((await all_topics(b)).topic_config_table[topic].attributes)
        return dict(body["attributes"])

    async def create(b: BrokerUnderTest, topic: str, attrs: str | None, perm: int = 6) -> RemotingCommand:
        return await b.call(
            RequestCode.UPDATE_AND_CREATE_TOPIC, create_topic_ext(topic, perm=perm, attributes=attrs)
        )

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            assert (await create(b, "Fifo", "+message.type=FIFO")).code == ResponseCode.SUCCESS
            assert await attributes(b, "Fifo") == {"message.type": "FIFO"}
            assert (await create(b, "Fifo", None, perm=4)).code == ResponseCode.SUCCESS  # no change: kept
            assert await attributes(b, "Fifo") == {"message.type": "FIFO"}
            assert b.controller.topics.select("Fifo").perm == 4  # type: ignore[union-attr]
            assert (await create(b, "Fifo", "+message.type=TRANSACTION")).code == ResponseCode.SUCCESS
            assert await attributes(b, "Fifo") == {"message.type": "TRANSACTION"}
            assert await attributes(b, "SELF_TEST_TOPIC") == {}

            refusals = [
                ("Fifo", "+message.type=MIXED", INVALID_PARAMETER, "MIXED message type is not supported."),
                ("Fifo", "+queue.type=BatchCQ", ResponseCode.SYSTEM_ERROR,
                 "attempt to update an unchangeable attribute. key: queue.type"),
                ("Fifo", "message.type=FIFO", ResponseCode.SYSTEM_ERROR,
                 "add/alter attribute format is wrong: message.type"),
                ("New", "-message.type", ResponseCode.SYSTEM_ERROR,
                 "only add attribute is supported while creating topic. key: message.type"),
                ("New", "+color=red", ResponseCode.SYSTEM_ERROR, "unsupported key: color"),
            ]  # fmt: skip
            for topic, attrs, code, why in refusals:
                r = await create(b, topic, attrs)
                assert (r.code, r.remark) == (code, why), attrs
            assert b.controller.topics.select("New") is None
            assert await attributes(b, "Fifo") == {"message.type": "TRANSACTION"}
            assert (
                '"attributes":{"message.type":"TRANSACTION"}'
                in (tmp_path / "config" / "topics.json").read_text()
            )

            def batch(attrs: dict[str, str]) -> bytes:  # UPDATE_AND_CREATE_TOPIC_LIST: signed, as a map
                return json.dumps(
                    {"topicConfigList": [{"topicName": "Delayed", "attributes": attrs}]}
                ).encode()

            list_code = AdminRequestCode.UPDATE_AND_CREATE_TOPIC_LIST
            r = await b.call(list_code, body=batch({"+message.type": "DELAY"}))
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert await attributes(b, "Delayed") == {"message.type": "DELAY"}
            r = await b.call(list_code, body=batch({"+color": "red"}))
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "unsupported key: color")

        async with broker_under_test(tmp_path) as b:
            assert await attributes(b, "Fifo") == {"message.type": "TRANSACTION"}

    run(scenario())


def test_subscription_group_crud(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            body = b'{"groupName":"GA","retryMaxTimes":3,"retryQueueNums":2,"consumeBroadcastEnable":false}'
            r = await b.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
            assert r.code == ResponseCode.SUCCESS, r.remark
            r = await b.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            table = fastjson.loads(r.body or b"")["subscriptionGroupTable"]
            assert table["GA"]["retryMaxTimes"] == 3 and table["GA"]["consumeBroadcastEnable"] is False
            assert "CID_RMQ_SYS_TRANS" in table  # system groups are listed too
            assert '"GA"' in (tmp_path / "config" / "subscriptionGroup.json").read_text()

            b.controller.offsets.commit("GA", "T1", 0, 5)
            b.controller.offsets.commit("GB", "T1", 0, 5)
            r = await b.call(
                RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "GA", "removeOffset": "true"}
            )
            assert r.code == ResponseCode.SUCCESS
            r = await b.call(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "GB"})
            assert r.code == ResponseCode.SUCCESS
            assert b.controller.groups.table.get("GA") is None
            assert b.controller.offsets.query("GA", "T1", 0) == -1  # removeOffset=true
            assert b.controller.offsets.query("GB", "T1", 0) == 5  # offsets kept by default
            r = await b.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"retryMaxTimes":1}')
            assert r.code == ResponseCode.SYSTEM_ERROR  # no groupName

    run(scenario())


def test_stats_runtime_info_and_consumers(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            for qid in (0, 0, 0, 1):
                assert (await b.send("StatT", b"s", queue_id=qid)).code == ResponseCode.SUCCESS
            await dispatched(b)
            store = b.controller.store

            r = await b.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "StatT"})
            assert r.code == ResponseCode.SUCCESS and b'{{"brokerName":"broker-a","queueId":0' in (
                r.body or b""
            )
            stats = TopicStatsTable.from_json(r.body or b"").offset_table
            q0 = stats[MessageQueue("StatT", "broker-a", 0)]
            assert (q0.min_offset, q0.max_offset) == (0, 3) and q0.last_update_timestamp > 0
            assert stats[MessageQueue("StatT", "broker-a", 3)].max_offset == 0 and len(stats) == 4
            r = await b.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Missing"})
            assert r.code == ResponseCode.TOPIC_NOT_EXIST

            b.controller.offsets.commit("CG", "StatT", 0, 2)
            header = GetConsumeStatsRequestHeader(consumer_group="CG", topic="StatT")
            for ext in (header.to_ext(), {"consumerGroup": "CG"}):  # topic given, or found via offsets
                r = await b.call(RequestCode.GET_CONSUME_STATS, ext)
                consume = ConsumeStats.from_json(r.body or b"")
                w = consume.offset_table[MessageQueue("StatT", "broker-a", 0)]
                assert (w.broker_offset, w.consumer_offset) == (3, 2)
                assert w.last_timestamp == store.get_message_store_timestamp("StatT", 0, 1)
                assert consume.offset_table[MessageQueue("StatT", "broker-a", 1)].consumer_offset == 0
                assert b'"consumeTps":0.0' in (r.body or b"")

            online = HeartbeatData(
                client_id="127.0.0.1@admin-test",
                consumer_data_set=(
                    ConsumerData("OnlineCG", subscription_data_set=(SubscriptionData("StatT", "*"),)),
                ),
            )
            assert (await b.call(RequestCode.HEART_BEAT, body=online.to_bytes())).code == ResponseCode.SUCCESS
            r = await b.call(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "StatT"})
            assert r.code == ResponseCode.SUCCESS
            assert set(json.loads(r.body or b"")["groupList"]) == {"CG", "OnlineCG"}

            r = await b.call(RequestCode.GET_BROKER_RUNTIME_INFO)
            info = KVTable.from_json(r.body or b"").table
            assert (info["brokerVersion"], info["brokerVersionDesc"]) == ("409", "V4_9_8")
            assert int(info["msgPutTotalTodayNow"]) >= 4
            assert int(info["commitLogMaxOffset"]) == store.max_phy_offset
            assert int(info["earliestMessageTimeStamp"]) > 0 and int(info["bootTimestamp"]) > 0
            put_tps = [float(x) for x in info["putTps"].split()]
            assert len(put_tps) == 3 and put_tps[2] > 0  # four puts within the 10-minute window
            assert info["runtime"].startswith("[ 0 days, 0 hours")
            for key in (
                "msgGetTotalTodayNow",
                "getTransferedTps",
                "commitLogDiskRatio",
                "sendThreadPoolQueueSize",
            ):
                assert key in info

    run(scenario())


def test_broker_config_and_maintenance(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path, store_message_delay_level="1s 2s") as b:
            r = await b.call(RequestCode.GET_BROKER_CONFIG)
            assert r.code == ResponseCode.SUCCESS
            lines = dict(line.split("=", 1) for line in (r.body or b"").decode().splitlines())
            assert lines["brokerName"] == "broker-a" and lines["brokerRole"] == "ASYNC_MASTER"
            assert lines["messageDelayLevel"] == "1s 2s" and lines["transactionTimeOut"] == "6000"
            assert lines["storePathRootDir"] == str(tmp_path) and lines["autoCreateTopicEnable"] == "true"
            assert "counter" in json.loads(r.ext_fields["version"])

            for body in (
                b"storePathRootDir=/tmp/evil",
                b"brokerConfigPath=/tmp/x.conf",
                b"storePathCommitLog=/x",
            ):
                r = await b.call(RequestCode.UPDATE_BROKER_CONFIG, body=body)
                assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "Can not update config path")
            r = await b.call(RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4\nnoSuchKey=1")
            assert r.code == ResponseCode.SYSTEM_ERROR and "noSuchKey" in (r.remark or "")
            assert b.controller.broker.broker_permission == 6
            assert (await b.call(RequestCode.UPDATE_BROKER_CONFIG, body=b"")).code == ResponseCode.SUCCESS

            r = await b.call(RequestCode.DELETE_EXPIRED_COMMITLOG)
            assert r.code == ResponseCode.SUCCESS
            r = await b.call(RequestCode.GET_ALL_DELAY_OFFSET)
            assert r.code == ResponseCode.SUCCESS and fastjson.loads(r.body or b"") == {"offsetTable": {}}
            request = make_request(RequestCode.GET_BROKER_RUNTIME_INFO)
            request.flag |= 2  # one-way admin requests are handled without an answer
            (await b.client.connection(b.addr)).oneway(request)
            assert (await b.call(RequestCode.GET_ALL_TOPIC_CONFIG)).code == ResponseCode.SUCCESS

    run(scenario())


def test_human_bytes() -> None:
    assert [human_bytes(n) for n in (0, 1023, 1024, 1536, 5 * 1024**3)] == [
        "0 B", "1023 B", "1.0 KiB", "1.5 KiB", "5.0 GiB",
    ]  # fmt: skip


def test_sampler_rolls_day_totals_over_at_midnight(open_store: StoreFactory) -> None:
    store = open_store()
    clock = ManualClock(1_700_000_000_000)
    sampler = RuntimeStatsSampler(store, clock)
    host = HostAddress.parse("127.0.0.1:10911")
    for _ in range(3):
        assert store.put_message(MessageInner(topic="Day", body=b"d", born_host=host, store_host=host)).ok
    sampler.sample()
    assert (sampler.yesterday_morning, sampler.today_morning) == ((0, 0), (0, 0))
    clock.advance(86_400_000)
    sampler.sample()
    assert (sampler.yesterday_morning, sampler.today_morning) == ((0, 0), (3, 0))
