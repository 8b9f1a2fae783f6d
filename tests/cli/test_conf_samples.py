"""The sample files in conf/: each loads with no unknown key and no error, the servers they
configure start, serve a real client and stop cleanly on SIGTERM."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rocketlite.broker.acl import load_acl_file
from rocketlite.broker.config import BrokerRole
from rocketlite.cli import DEV_STORE_DEFAULTS, load_broker_config, load_namesrv_config
from rocketlite.client import Message, Producer
from rocketlite.config import load_properties
from tests.support.listening import wait_log_line, with_values
from tests.support.names import unique
from tests.support.ports import broker_port, free_port
from tests.support.processes import spawn, stop

CONF = Path(__file__).resolve().parents[2] / "conf"


def test_broker_conf_loads_without_warnings(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        broker, store = load_broker_config(CONF / "broker.conf")
    assert caplog.records == []
    assert broker.broker_role is BrokerRole.ASYNC_MASTER and broker.listen_port == 10911
    assert broker.listen_host == "127.0.0.1" and broker.namesrv_addr == "127.0.0.1:9876"
    assert store.store_path_root_dir == Path("data")
    assert broker.acl_config_file == "conf/plain_acl.yml"


def test_broker_conf_store_sizes_are_the_dev_servers() -> None:
    """So `rocketlite broker -c conf/broker.conf` can open the store `rocketlite dev` made."""
    props = load_properties(CONF / "broker.conf")
    assert {key: props[key] for key in DEV_STORE_DEFAULTS} == DEV_STORE_DEFAULTS


def test_namesrv_conf_loads_without_warnings(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = load_namesrv_config(CONF / "namesrv.conf")
    assert caplog.records == []
    assert (config.listen_host, config.listen_port) == ("127.0.0.1", 9876)
    assert config.kv_config_path == Path("data/namesrv/kvConfig.json")


def test_plain_acl_yml_loads() -> None:
    acl = load_acl_file(CONF / "plain_acl.yml")
    assert set(acl.accounts) == {"RocketMQ", "rocketmq2"}
    assert acl.accounts["rocketmq2"].admin and not acl.accounts["RocketMQ"].admin
    assert [w.match("127.0.0.1") for w in acl.global_white] == [True]


def test_sample_confs_start_serve_and_stop(tmp_path: Path) -> None:
    """The samples with only the ports and paths moved into this test's own: a name server and a
    broker (ACL on, with conf/plain_acl.yml) as two processes, a send, SIGTERM."""
    ns_port = free_port()
    br_port = broker_port(avoid=(ns_port,))
    grpc_port = free_port(avoid=(ns_port, br_port - 2, br_port, br_port + 1))
    ns_conf = tmp_path / "namesrv.conf"
    ns_conf.write_text(
        with_values(
            (CONF / "namesrv.conf").read_text(),
            {"listenPort": str(ns_port), "kvConfigPath": str(tmp_path / "kv.json")},
        )
    )
    br_conf = tmp_path / "broker.conf"
    br_conf.write_text(
        with_values(
            (CONF / "broker.conf").read_text(),
            {
                "listenPort": str(br_port),
                "grpcServerPort": str(grpc_port),  # not 8081, which anything on the machine may hold
                "namesrvAddr": f"127.0.0.1:{ns_port}",
                "storePathRootDir": str(tmp_path / "store"),
                "aclEnable": "true",
                "aclConfigFile": str(CONF / "plain_acl.yml"),
            },
        )
    )
    ns_log, br_log = tmp_path / "namesrv.log", tmp_path / "broker.log"
    namesrv = spawn(["namesrv", "-c", str(ns_conf)], ns_log)
    broker = None
    try:
        wait_log_line(namesrv, ns_log, f"name server listening on 127.0.0.1:{ns_port}")
        broker = spawn(["broker", "-c", str(br_conf)], br_log)
        wait_log_line(broker, br_log, f"serving on 127.0.0.1:{br_port}")
        wait_log_line(namesrv, ns_log, "new broker registered: broker-a")
        topic = unique("SampleConf")
        with Producer(unique("pg"), f"127.0.0.1:{ns_port}") as producer:
            result = producer.send(Message(topic, b"hello from conf/"))
        assert result.msg_id
    finally:
        rcs = [stop(p) for p in (broker, namesrv) if p is not None]
    logs = br_log.read_text() + ns_log.read_text()
    assert rcs == [0, 0], logs
    assert "unknown config key" not in logs and "ERROR" not in logs, logs
