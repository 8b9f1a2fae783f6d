"""Name server state without sockets: RouteInfoManager rules, the KV file, NamesrvConfig keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketlite.clock import ManualClock
from rocketlite.config import build_config
from rocketlite.namesrv import KVConfigManager, NamesrvConfig, RouteInfoManager, register_body_crc32
from rocketlite.protocol.bodies.route import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from rocketlite.protocol.errors import ConfigError

CLUSTER = "DefaultCluster"
A0 = "10.0.0.1:10911"
A1 = "10.0.0.2:10911"
B0 = "10.0.1.1:10911"


class FakeConn:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def wrapper(*topics: TopicConfig, counter: int = 1) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper({t.topic_name: t for t in topics}, DataVersion(1000, counter))


def manager() -> tuple[RouteInfoManager, ManualClock]:
    clock = ManualClock()
    return RouteInfoManager(clock, broker_expired_ms=120_000), clock


def test_master_and_slave_registration() -> None:
    routes, _ = manager()
    slave_first = routes.register_broker(CLUSTER, A1, "a", 1, "10.0.0.2:10912", wrapper(), [], None)
    assert (slave_first.master_addr, slave_first.ha_server_addr) == (None, None)  # no master yet
    master = routes.register_broker(
        CLUSTER, A0, "a", 0, "10.0.0.1:10912", wrapper(TopicConfig("T", 2, 2)), [], None
    )
    assert (master.master_addr, master.ha_server_addr) == (None, None)
    slave = routes.register_broker(CLUSTER, A1, "a", 1, "10.0.0.2:10912", wrapper(), [], None)
    assert (slave.master_addr, slave.ha_server_addr) == (A0, "10.0.0.1:10912")
    route = routes.pick_topic_route("T")
    assert route is not None
    assert dict(route.broker_datas[0].broker_addrs) == {0: A0, 1: A1}
    assert routes.pick_topic_route("missing") is None


def test_master_loss_keeps_queues_while_a_slave_remains() -> None:
    routes, _ = manager()
    master_conn, slave_conn = FakeConn(), FakeConn()
    routes.register_broker(CLUSTER, A0, "a", 0, "", wrapper(TopicConfig("T")), [], master_conn)
    routes.register_broker(CLUSTER, A1, "a", 1, "", wrapper(), [], slave_conn)
    assert routes.on_connection_closed(master_conn) == [A0]
    route = routes.pick_topic_route("T")
    assert route is not None
    assert dict(route.broker_datas[0].broker_addrs) == {1: A1}
    assert routes.on_connection_closed(slave_conn) == [A1]
    assert routes.pick_topic_route("T") is None
    assert routes.cluster_addr_table == {}
    assert routes.broker_addr_table == {}


def test_expiry_closes_connection_and_drops_only_stale_brokers() -> None:
    routes, clock = manager()
    conn_a, conn_b = FakeConn(), FakeConn()
    routes.register_broker(
        CLUSTER, A0, "a", 0, "", wrapper(TopicConfig("T"), TopicConfig("OnlyA")), [], conn_a
    )
    clock.advance(60_000)
    routes.register_broker(CLUSTER, B0, "b", 0, "", wrapper(TopicConfig("T")), [], conn_b)
    clock.advance(60_001)
    assert routes.scan_not_active_brokers() == [A0]
    assert conn_a.closed and not conn_b.closed
    assert routes.pick_topic_route("OnlyA") is None
    route = routes.pick_topic_route("T")
    assert route is not None
    assert [q.broker_name for q in route.queue_datas] == ["b"]
    assert routes.on_connection_closed(conn_a) == []  # the later close event finds nothing left


def test_queue_data_updates_follow_data_version() -> None:
    routes, _ = manager()
    routes.register_broker(CLUSTER, A0, "a", 0, "", wrapper(TopicConfig("T", 4, 4)), [], None)
    routes.register_broker(CLUSTER, A0, "a", 0, "", wrapper(TopicConfig("T", 8, 8)), [], None)
    assert routes.topic_queue_table["T"]["a"].write_queue_nums == 4
    routes.register_broker(CLUSTER, A0, "a", 0, "", wrapper(TopicConfig("T", 8, 8), counter=2), [], None)
    assert routes.topic_queue_table["T"]["a"].write_queue_nums == 8
    assert routes.query_data_version(A0, DataVersion(1000, 2)) is False
    assert routes.query_data_version(A0, DataVersion(1000, 3)) is True
    assert routes.query_data_version("10.9.9.9:1", DataVersion()) is True


def test_filter_servers_appear_in_route() -> None:
    routes, _ = manager()
    routes.register_broker(CLUSTER, A0, "a", 0, "", wrapper(TopicConfig("T")), ["10.0.0.1:30000"], None)
    route = routes.pick_topic_route("T")
    assert route is not None
    assert route.filter_server_table == {A0: ("10.0.0.1:30000",)}
    routes.register_broker(CLUSTER, A0, "a", 0, "", wrapper(TopicConfig("T")), [], None)
    assert routes.filter_server_table == {}


def test_delete_topic_by_cluster_and_unit_flags() -> None:
    routes, _ = manager()
    routes.register_broker(
        CLUSTER, A0, "a", 0, "", wrapper(TopicConfig("T"), TopicConfig("U", topic_sys_flag=1)), [], None
    )
    routes.register_broker(
        "Other", B0, "b", 0, "", wrapper(TopicConfig("T"), TopicConfig("S", topic_sys_flag=2)), [], None
    )
    assert routes.unit_topics() == ["U"]
    assert routes.has_unit_sub_topics() == ["S"]
    assert routes.has_unit_sub_ununit_topics() == ["S"]
    assert routes.topics_by_cluster("Other") == ["S", "T"]
    assert routes.topics_by_cluster("nope") == []
    routes.delete_topic("T", "Other")
    assert list(routes.topic_queue_table["T"]) == ["a"]
    routes.delete_topic("T")
    assert "T" not in routes.topic_queue_table


def test_register_body_crc32_is_java_masked() -> None:
    assert register_body_crc32(None) == 0
    assert register_body_crc32(b"") == 0
    assert register_body_crc32(b"123456789") == 0xCBF43926 & 0x7FFFFFFF


# ------------------------------------------------------------------------------------------ KV file


def test_kv_file_round_trip_bak_fallback_and_corruption(tmp_path: Path) -> None:
    path = tmp_path / "namesrv" / "kvConfig.json"
    kv = KVConfigManager(path)
    kv.load()  # no file: empty
    kv.put("ORDER_TOPIC_CONFIG", "T", "a:4")
    kv.put("NS", "k", "v")
    assert json.loads(path.read_text()) == {
        "configTable": {"NS": {"k": "v"}, "ORDER_TOPIC_CONFIG": {"T": "a:4"}}
    }
    assert path.read_text() == '{"configTable":{"NS":{"k":"v"},"ORDER_TOPIC_CONFIG":{"T":"a:4"}}}'
    kv.delete("NS", "k")
    assert kv.namespace("NS") == {}  # Java keeps the emptied namespace

    path.write_text("{broken")  # the previous good copy is in .bak
    again = KVConfigManager(path)
    again.load()
    assert again.get("ORDER_TOPIC_CONFIG", "T") == "a:4"

    path.with_name("kvConfig.json.bak").write_text("also broken")
    with pytest.raises(ConfigError):
        KVConfigManager(path).load()


def test_kv_reads_java_file_with_unquoted_keys(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    path.write_text('{configTable:{"NS":{"n":1,"s":"x"}}}')
    kv = KVConfigManager(path)
    kv.load()
    assert kv.namespace("NS") == {"n": "1", "s": "x"}


# ------------------------------------------------------------------------------------------- config


def test_config_keys_and_defaults(tmp_path: Path) -> None:
    default = NamesrvConfig()
    assert (default.listen_port, default.broker_expired_ms, default.scan_not_active_broker_interval) == (
        9876,
        120_000,
        10_000,
    )
    assert default.kv_config_path == Path.home() / "namesrv" / "kvConfig.json"
    config = build_config(
        NamesrvConfig,
        {
            "listenPort": "19876",
            "brokerChannelExpiredTime": "30000",
            "scanNotActiveBrokerInterval": "5000",
            "orderMessageEnable": "true",
            "clusterTest": "false",
            "kvConfigPath": str(tmp_path / "kv.json"),
            "bindAddress": "127.0.0.1",
        },
    )
    assert (config.listen_port, config.broker_expired_ms, config.scan_not_active_broker_interval) == (
        19876,
        30_000,
        5_000,
    )
    assert config.order_message_enable and config.listen_host == "127.0.0.1"
    assert config.to_properties()["brokerChannelExpiredTime"] == "30000"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("listenPort", "70000"),
        ("listenPort", "abc"),
        ("brokerChannelExpiredTime", "0"),
        ("scanNotActiveBrokerInterval", "-1"),
        ("orderMessageEnable", "yes"),
        ("kvConfigPath", "/"),
    ],
)
def test_config_validation(key: str, value: str) -> None:
    with pytest.raises(ConfigError):
        build_config(NamesrvConfig, {key: value})
