"""The name server over real sockets on 127.0.0.1: what brokers, clients and admin tools see.

Each test runs its own event loop (`asyncio.run`; pytest-asyncio is not used) with a `NameServer`
on a free port and a `ManualClock`, so expiry is driven by moving the clock, never by sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocketlite.clock import ManualClock
from rocketlite.namesrv import NameServer, NamesrvConfig, register_body_crc32
from rocketlite.protocol.bodies.lists import KVTable, TopicList
from rocketlite.protocol.bodies.route import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.frame import decode_frame
from rocketlite.remoting.client import RemotingClient
from tests.support.aio import run

CLUSTER = "DefaultCluster"
MASTER_ADDR = "127.0.0.1:10911"
SLAVE_ADDR = "127.0.0.1:10921"
TOPIC = "TopicTest"
TIMEOUT = 2.0
V1 = DataVersion(timestamp=1_690_000_000_000, counter=1)
DEFAULT_TOPICS = (TopicConfig(TOPIC, 4, 4),)

PLAIN_ROUTE_BODY = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],'
    b'"filterServerTable":{},'
    b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSynFlag":0,"topicSysFlag":0,'
    b'"writeQueueNums":4}]}'
)


@dataclass
class Env:
    server: NameServer
    client: RemotingClient
    addr: str
    clock: ManualClock

    async def call(
        self,
        code: int,
        ext: dict[str, str] | None = None,
        body: bytes | None = None,
        *,
        version: int = 409,
        client: RemotingClient | None = None,
        timeout: float = TIMEOUT,
    ) -> RemotingCommand:
        request = make_request(code, ext, body, version=version)
        return await (client or self.client).invoke(self.addr, request, timeout)

    async def route(self, topic: str = TOPIC, *, version: int = 409, **ext: str) -> RemotingCommand:
        return await self.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, **ext}, version=version)

    async def register(
        self,
        broker_name: str = "broker-a",
        broker_addr: str = MASTER_ADDR,
        broker_id: int = 0,
        *,
        topics: tuple[TopicConfig, ...] = DEFAULT_TOPICS,
        version: DataVersion = V1,
        compressed: bool = False,
        crc: int | None = None,
        client: RemotingClient | None = None,
        cluster: str = CLUSTER,
    ) -> RemotingCommand:
        wrapper = TopicConfigSerializeWrapper({t.topic_name: t for t in topics}, version)
        body = RegisterBrokerBody(wrapper).encode(compressed=compressed)
        host, port = broker_addr.rsplit(":", 1)
        ext = {
            "brokerName": broker_name,
            "brokerAddr": broker_addr,
            "clusterName": cluster,
            "haServerAddr": f"{host}:{int(port) + 1}",  # the broker's HA port is listenPort + 1
            "brokerId": str(broker_id),
            "compressed": "true" if compressed else "false",
            "bodyCrc32": str(register_body_crc32(body) if crc is None else crc),
        }
        return await self.call(RequestCode.REGISTER_BROKER, ext, body, client=client)


@contextlib.asynccontextmanager
async def namesrv(tmp_path: Path, **overrides: Any) -> AsyncIterator[Env]:
    clock = ManualClock()
    config = NamesrvConfig(
        listen_port=0, listen_host="127.0.0.1", kv_config_path=tmp_path / "kvConfig.json", **overrides
    )
    server = NameServer(config, clock)
    await server.start()
    client = RemotingClient()
    try:
        yield Env(server, client, f"127.0.0.1:{server.port}", clock)
    finally:
        await client.close()
        await server.close()


async def wait_until(predicate: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    """Poll the loop until `predicate` holds (for effects of a TCP close, which arrive asynchronously)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


async def raw_exchange(port: int, frame: bytes) -> RemotingCommand:
    """Send hand-made frame bytes and read one response frame."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(frame)
        await writer.drain()
        length = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), TIMEOUT), "big")
        return decode_frame(await reader.readexactly(length))
    finally:
        writer.close()
        await writer.wait_closed()


def json_frame(header: bytes, body: bytes = b"") -> bytes:
    return (4 + len(header) + len(body)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header + body


# ------------------------------------------------------------------------------------- registration


def test_register_json_body_then_route_plain_keys_exact_bytes(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path) as env:
            reg = await env.register()
            assert reg.code == ResponseCode.SUCCESS
            assert reg.ext_fields == {}  # a master gets no masterAddr/haServerAddr
            assert reg.body is None  # no ORDER_TOPIC_CONFIG namespace yet
            for version in (317, 121, 63, 400):  # Go, ali-ons, C++ 1.x, 4.9.3
                route = await env.route(version=version)
                assert route.code == ResponseCode.SUCCESS
                assert route.body == PLAIN_ROUTE_BODY

    run(body(), 10)


def test_route_quoted_keys_for_version_401_and_accept_standard_json(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path) as env:
            await env.register()
            quoted = PLAIN_ROUTE_BODY.replace(b"{0:", b'{"0":')
            assert (await env.route(version=401)).body == quoted
            assert (await env.route(version=409)).body == quoted
            assert (await env.route(version=317, acceptStandardJsonOnly="true")).body == quoted
            assert (await env.route(version=317, acceptStandardJsonOnly="false")).body == PLAIN_ROUTE_BODY
            json.loads(quoted)  # the standard form is real JSON

    run(body(), 10)


def test_register_compressed_body(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path) as env:
            topics = (TopicConfig(TOPIC, 4, 4), TopicConfig("TBW102", 8, 8, perm=7))
            reg = await env.register(topics=topics, compressed=True)
            assert reg.code == ResponseCode.SUCCESS
            assert (await env.route(version=317)).body == PLAIN_ROUTE_BODY
            route = TopicRouteData.from_json((await env.route("TBW102")).body or b"")
            assert [(q.read_queue_nums, q.perm) for q in route.queue_datas] == [(8, 7)]

    run(body(), 10)


def test_register_crc_mismatch_and_crc_zero(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path) as env:
            bad = await env.register(crc=12345)
            assert (bad.code, bad.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
            assert (await env.route()).code == ResponseCode.TOPIC_NOT_EXIST
            assert (await env.register(crc=0)).code == ResponseCode.SUCCESS  # 0 = do not check
            assert (await env.route()).code == ResponseCode.SUCCESS

    run(body(), 10)


def test_register_undecodable_body_is_system_error(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path) as env:
            ext = {
                "brokerName": "broker-a",
                "brokerAddr": MASTER_ADDR,
                "clusterName": CLUSTER,
                "haServerAddr": "127.0.0.1:10912",
                "brokerId": "0",
                "compressed": "true",  # but the body is not a zlib stream
            }
            response = await env.call(RequestCode.REGISTER_BROKER, ext, b'{"filterServerList":[]}')
            assert response.code == ResponseCode.SYSTEM_ERROR
            assert (response.remark or "").startswith("Failed to decode RegisterBrokerBody")
            assert env.server.route_info.broker_live_table == {}

    run(body(), 10)


def test_unknown_topic_is_topic_not_exist(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path) as env:
            await env.register()
            miss = await env.route("NoSuchTopic")
            assert miss.code == ResponseCode.TOPIC_NOT_EXIST
            assert int(miss.code) == 17
            assert miss.remark is not None
            assert miss.remark.startswith("No topic route info in name server for the topic: NoSuchTopic")
            assert miss.body is None

    run(body(), 10)


def test_slave_registration_returns_master_addr(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path) as env:
            await env.register()
            # A slave's topics never create queue data: only the master's do.
            slave = await env.register(
                broker_id=1, broker_addr=SLAVE_ADDR, topics=(TopicConfig("SlaveOnly"),)
            )
            assert slave.code == ResponseCode.SUCCESS
            assert slave.ext_fields == {"masterAddr": MASTER_ADDR, "haServerAddr": "127.0.0.1:10912"}
            route = TopicRouteData.from_json((await env.route()).body or b"")
            assert dict(route.broker_datas[0].broker_addrs) == {0: MASTER_ADDR, 1: SLAVE_ADDR}
            assert (await env.route("SlaveOnly")).code == ResponseCode.TOPIC_NOT_EXIST
            # The slave is promoted: same ip:port re-registers as id 0, and id 1 disappears.
            await env.call(
                RequestCode.UNREGISTER_BROKER,
                {
                    "brokerName": "broker-a",
                    "brokerAddr": MASTER_ADDR,
                    "clusterName": CLUSTER,
                    "brokerId": "0",
                },
            )
            await env.register(broker_addr=SLAVE_ADDR, version=DataVersion(1, 2))
            route = TopicRouteData.from_json((await env.route()).body or b"")
            assert dict(route.broker_datas[0].broker_addrs) == {0: SLAVE_ADDR}

    run(body(), 10)


def test_unregister_removes_broker_and_its_topics(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path) as env:
            await env.register()
            response = await env.call(
                RequestCode.UNREGISTER_BROKER,
                {
                    "brokerName": "broker-a",
                    "brokerAddr": MASTER_ADDR,
                    "clusterName": CLUSTER,
                    "brokerId": "0",
                },
            )
            assert response.code == ResponseCode.SUCCESS
            assert (await env.route()).code == ResponseCode.TOPIC_NOT_EXIST
            info = await env.call(RequestCode.GET_BROKER_CLUSTER_INFO)
            assert info.body == b'{"brokerAddrTable":{},"clusterAddrTable":{}}'

    run(body(), 10)


def test_reregister_updates_queues_only_when_data_version_changes(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path) as env:
            await env.register()
            await env.register(topics=(TopicConfig(TOPIC, 8, 8),))  # same DataVersion: ignored
            route = TopicRouteData.from_json((await env.route()).body or b"")
            assert route.queue_datas[0].write_queue_nums == 4
            await env.register(topics=(TopicConfig(TOPIC, 8, 8),), version=DataVersion(1, 2))
            route = TopicRouteData.from_json((await env.route()).body or b"")
            assert route.queue_datas[0].write_queue_nums == 8

    run(body(), 10)


# ------------------------------------------------------------------------------------ expiry / close


def test_expiry_with_manual_clock_closes_the_broker_connection(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path) as env:
            broker = RemotingClient()
            try:
                await env.register(client=broker)
                broker_conn = await broker.connection(env.addr)
                env.clock.advance(120_000)
                assert env.server.route_info.scan_not_active_brokers() == []  # exactly 120 s: still alive
                env.clock.advance(1)
                assert env.server.route_info.scan_not_active_brokers() == [MASTER_ADDR]
                assert (await env.route()).code == ResponseCode.TOPIC_NOT_EXIST
                await wait_until(lambda: broker_conn.closed)  # Java closes the expired broker's channel
            finally:
                await broker.close()

    run(body(), 10)


def test_query_data_version_keeps_broker_alive(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path) as env:
            version = DataVersion(timestamp=1_690_000_000_000, counter=1)
            await env.register(version=version)
            ext = {
                "brokerName": "broker-a",
                "brokerAddr": MASTER_ADDR,
                "clusterName": CLUSTER,
                "brokerId": "0",
            }
            env.clock.advance(100_000)
            same = await env.call(RequestCode.QUERY_DATA_VERSION, ext, version.to_bytes())
            assert (same.code, same.ext_fields, same.body) == (
                ResponseCode.SUCCESS,
                {"changed": "false"},
                b'{"counter":1,"timestamp":1690000000000}',
            )
            env.clock.advance(100_000)  # 200 s since the register, 100 s since the query
            assert env.server.route_info.scan_not_active_brokers() == []
            other = await env.call(RequestCode.QUERY_DATA_VERSION, ext, DataVersion(5, 5).to_bytes())
            assert other.ext_fields == {"changed": "true"}

    run(body(), 10)


def test_connection_close_removes_broker(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path) as env:
            broker = RemotingClient()
            await env.register(client=broker)
            await env.register("broker-b", "127.0.0.1:20911")  # over the test's own connection
            await broker.close()
            await wait_until(lambda: MASTER_ADDR not in env.server.route_info.broker_live_table)
            route = TopicRouteData.from_json((await env.route()).body or b"")
            assert [b.broker_name for b in route.broker_datas] == ["broker-b"]

    run(body(), 10)


# ---------------------------------------------------------------------------------------- KV config


def test_kv_config_put_get_delete_and_miss(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path) as env:
            key = {"namespace": "NS", "key": "k1"}
            assert (
                await env.call(RequestCode.PUT_KV_CONFIG, {**key, "value": "v1"})
            ).code == ResponseCode.SUCCESS
            got = await env.call(RequestCode.GET_KV_CONFIG, key)
            assert (got.code, got.ext_fields) == (ResponseCode.SUCCESS, {"value": "v1"})
            listed = await env.call(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "NS"})
            assert listed.body == b'{"table":{"k1":"v1"}}'
            assert json.loads((tmp_path / "kvConfig.json").read_text()) == {
                "configTable": {"NS": {"k1": "v1"}}
            }
            assert (await env.call(RequestCode.DELETE_KV_CONFIG, key)).code == ResponseCode.SUCCESS
            miss = await env.call(RequestCode.GET_KV_CONFIG, key)
            assert (miss.code, miss.remark) == (
                ResponseCode.QUERY_NOT_FOUND,
                "No config item, Namespace: NS Key: k1",
            )
            assert int(miss.code) == 22
            no_ns = await env.call(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "Other"})
            assert (no_ns.code, no_ns.remark) == (
                ResponseCode.QUERY_NOT_FOUND,
                "No config item, Namespace: Other",
            )
            await env.call(RequestCode.PUT_KV_CONFIG, {"namespace": "NS", "key": "k2", "value": "v2"})
        async with namesrv(tmp_path) as env:  # a restart reads the file back
            got = await env.call(RequestCode.GET_KV_CONFIG, {"namespace": "NS", "key": "k2"})
            assert got.ext_fields == {"value": "v2"}

    run(body(), 10)


def test_order_topic_conf_and_register_answer_body(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path, order_message_enable=True) as env:
            ext = {"namespace": "ORDER_TOPIC_CONFIG", "key": TOPIC, "value": "broker-a:4"}
            await env.call(RequestCode.PUT_KV_CONFIG, ext)
            reg = await env.register()
            assert KVTable.from_json(reg.body or b"").table == {TOPIC: "broker-a:4"}
            route = TopicRouteData.from_json((await env.route()).body or b"")
            assert route.order_topic_conf == "broker-a:4"

    run(body(), 10)


# ----------------------------------------------------------------------------------- admin queries


def test_cluster_info_and_topic_lists(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path) as env:
            await env.register(topics=(TopicConfig(TOPIC, 4, 4), TopicConfig("TBW102", 8, 8, perm=7)))
            await env.register("broker-b", "127.0.0.1:20911", cluster="Other", topics=(TopicConfig("B"),))
            info = await env.call(RequestCode.GET_BROKER_CLUSTER_INFO)
            assert info.body == (
                b'{"brokerAddrTable":{'
                b'"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"},'
                b'"broker-b":{"brokerAddrs":{0:"127.0.0.1:20911"},"brokerName":"broker-b","cluster":"Other"}},'
                b'"clusterAddrTable":{"DefaultCluster":["broker-a"],"Other":["broker-b"]}}'
            )
            topics = await env.call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
            assert topics.body == b'{"topicList":["B","TBW102","TopicTest"]}'
            by_cluster = await env.call(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": CLUSTER})
            assert TopicList.from_json(by_cluster.body or b"").topic_list == ("TBW102", TOPIC)
            system = TopicList.from_json(
                (await env.call(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)).body or b""
            )
            assert set(system.topic_list) == {CLUSTER, "broker-a", "Other", "broker-b"}
            assert system.broker_addr in (MASTER_ADDR, "127.0.0.1:20911")
            for code in (311, 312, 313):
                unit = await env.call(code)
                assert (unit.code, unit.body) == (ResponseCode.SUCCESS, b'{"topicList":[]}')

    run(body(), 10)


def test_write_perm_wipe_add_and_delete_topic(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path) as env:
            await env.register(topics=(TopicConfig(TOPIC, 4, 4), TopicConfig("Other", 1, 1)))
            wipe = await env.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
            assert wipe.ext_fields == {"wipeTopicCount": "2"}
            route = TopicRouteData.from_json((await env.route()).body or b"")
            assert route.queue_datas[0].perm == 4
            add = await env.call(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
            assert add.ext_fields == {"addTopicCount": "2"}
            route = TopicRouteData.from_json((await env.route()).body or b"")
            assert route.queue_datas[0].perm == 6
            deleted = await env.call(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": TOPIC})
            assert deleted.code == ResponseCode.SUCCESS
            assert (await env.route()).code == ResponseCode.TOPIC_NOT_EXIST
            assert (await env.route("Other")).code == ResponseCode.SUCCESS

    run(body(), 10)


# ------------------------------------------------------------------------------ protocol edge cases


def test_unknown_code_is_not_supported_and_connection_stays_usable(tmp_path: Path) -> None:
    """As RocketMQ 5.x's name server answers (4.x's never did, and the client timed out)."""

    async def body() -> None:
        async with namesrv(tmp_path) as env:
            for code in (RequestCode.HEART_BEAT, 9999):
                response = await env.call(code)
                assert (response.code, response.remark) == (
                    ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                    f" request type {int(code)} not supported",
                )
            assert (await env.call(RequestCode.GET_BROKER_CLUSTER_INFO)).code == ResponseCode.SUCCESS

    run(body(), 10)


def test_update_namesrv_config_is_refused(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path) as env:
            evil = f"configStorePath={tmp_path / 'evil'}\nkvConfigPath={tmp_path / 'evil.json'}\n".encode()
            response = await env.call(RequestCode.UPDATE_NAMESRV_CONFIG, body=evil)
            assert response.code == ResponseCode.NO_PERMISSION
            assert env.server.config.kv_config_path == tmp_path / "kvConfig.json"
            assert not (tmp_path / "evil").exists()
            assert not (tmp_path / "evil.json").exists()
            current = await env.call(RequestCode.GET_NAMESRV_CONFIG)
            assert b"listenPort=0\n" in (current.body or b"")

    run(body(), 10)


def test_missing_header_field_is_system_error(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path) as env:
            response = await env.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {})
            assert (response.code, response.remark) == (
                ResponseCode.SYSTEM_ERROR,
                "the custom field <topic> is null",
            )
            response = await env.call(RequestCode.REGISTER_BROKER, {"brokerName": "b"})
            assert response.code == ResponseCode.SYSTEM_ERROR
            assert response.remark == "the custom field <brokerAddr> is null"

    run(body(), 10)


def test_malformed_frame_closes_connection_server_keeps_serving(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path) as env:
            reader, writer = await asyncio.open_connection("127.0.0.1", env.server.port)
            writer.write(json_frame(b"not json at all"))
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), TIMEOUT) == b""  # closed by the server
            writer.close()
            await writer.wait_closed()
            assert (await env.call(RequestCode.GET_BROKER_CLUSTER_INFO)).code == ResponseCode.SUCCESS

    run(body(), 10)


def test_cpp_client_request_with_numbers_and_signature(tmp_path: Path) -> None:
    async def body() -> None:
        async with namesrv(tmp_path) as env:
            await env.register()
            header = (
                b'{"code":105,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN",'
                b'"Signature":"m9B4yy+G9Sevb1vG0hT43lVVlTw=","topic":"TopicTest"},'
                b'"flag":0,"language":"CPP","opaque":0,"remark":"","version":63}'
            )
            response = await raw_exchange(env.server.port, json_frame(header))
            assert (response.code, response.opaque, response.flag) == (ResponseCode.SUCCESS, 0, 1)
            assert response.body == PLAIN_ROUTE_BODY
            # Numeric ext values (as the C++ client writes them) are read as text.
            unregister = (
                b'{"code":104,"extFields":{"brokerName":"broker-a","brokerAddr":"127.0.0.1:10911",'
                b'"clusterName":"DefaultCluster","brokerId":0},"flag":0,"language":"CPP","opaque":7,"version":63}'
            )
            response = await raw_exchange(env.server.port, json_frame(unregister))
            assert (response.code, response.opaque) == (ResponseCode.SUCCESS, 7)
            assert (await env.route()).code == ResponseCode.TOPIC_NOT_EXIST

    run(body(), 10)


def test_close_is_idempotent_and_port_requires_start(tmp_path: Path) -> None:
    async def body() -> None:
        server = NameServer(
            NamesrvConfig(listen_port=0, listen_host="127.0.0.1", kv_config_path=tmp_path / "kv.json")
        )
        with pytest.raises(RuntimeError):
            _ = server.port
        async with server:
            assert server.port > 0
        await server.close()

    run(body(), 10)
