"""`rocketlite dev`: loopback only, a small store, `-c broker.conf` over the dev defaults, and a
start line that names the addresses really bound."""

from __future__ import annotations

import argparse
import logging
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest

from rocketlite.broker.config import BrokerConfig
from rocketlite.cli import DEV_STORE_DEFAULTS, build_parser, dev_configs
from rocketlite.protocol.errors import ConfigError
from tests.support.listening import (
    addresses_in,
    listening_sockets,
    non_loopback_address,
    store_bytes,
    wait_log_line,
)
from tests.support.ports import broker_port, free_port
from tests.support.processes import ROCKETLITE, child_env, spawn, stop, write_conf

MiB = 1024 * 1024


def _dev_args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["dev", *argv])


def test_dev_serves_on_loopback_only_with_a_small_store_and_metrics(tmp_path: Path) -> None:
    metrics_port = free_port()
    conf = write_conf(tmp_path / "broker.conf", {"metricsPort": str(metrics_port)})
    log_path = tmp_path / "dev.log"
    store = tmp_path / "data"
    popen = spawn(
        ["dev", "-c", str(conf), "--store", str(store), "--namesrv-port", "0", "--broker-port", "0"], log_path
    )
    try:
        line = wait_log_line(popen, log_path, "rocketlite dev listening on:")
        bound = addresses_in(line)
        # name server, broker, its VIP channel, HA, metrics: all read from the sockets, all loopback
        assert len(bound) == 5, line
        assert {host for host, _ in bound} == {"127.0.0.1"}, line
        ports = {port for _, port in bound}
        assert metrics_port in ports and 0 not in ports
        listeners = [(host, port) for host, port in listening_sockets() if port in ports]
        assert sorted(listeners) == sorted(bound), f"the kernel's listeners {listeners} differ from {line}"
        other = non_loopback_address()
        if other is not None:  # nothing answers on the machine's other address
            for _, port in bound:
                with pytest.raises(OSError), socket.create_connection((other, port), 2):
                    pass
        for _, port in bound:
            with socket.create_connection(("127.0.0.1", port), 2):
                pass
        assert store_bytes(store) < 200 * MiB
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as resp:
            assert resp.status == 200
            assert b"# TYPE" in resp.read()
    finally:
        rc = stop(popen)
    log_text = log_path.read_text()
    assert rc == 0, log_text
    assert "unknown config key" not in log_text and "ERROR" not in log_text, log_text


def test_dev_defaults_are_loopback_and_laptop_sizes() -> None:
    namesrv, broker, store = dev_configs(_dev_args())
    assert (namesrv.listen_host, broker.listen_host, broker.broker_ip1) == ("127.0.0.1",) * 3
    assert (namesrv.listen_port, broker.listen_port) == (9876, 10911)
    assert store.store_path_root_dir == Path("data")
    assert namesrv.kv_config_path == Path("data/namesrv/kvConfig.json")
    assert store.maped_file_size_commit_log == 64 * MiB == int(DEV_STORE_DEFAULTS["mapedFileSizeCommitLog"])
    # at first start: two commit-log segments, one index file, a few queue files: well under 200 MiB
    index_file = 40 + 4 * store.max_hash_slot_num + 20 * store.max_index_num
    assert 2 * store.maped_file_size_commit_log + index_file + 20 * store.cq_file_size < 160 * MiB


def test_dev_conf_applies_over_the_defaults_and_flags_over_the_conf(tmp_path: Path) -> None:
    conf = write_conf(
        tmp_path / "broker.conf",
        {
            "metricsPort": "9100",
            "listenHost": "0.0.0.0",
            "listenPort": "20911",
            "storePathRootDir": str(tmp_path / "s"),
            "mapedFileSizeCommitLog": "1048576",
            "flushDiskType": "SYNC_FLUSH",
        },
    )
    namesrv, broker, store = dev_configs(_dev_args("-c", str(conf)))
    assert broker.metrics_port == 9100 and broker.listen_port == 20911
    assert namesrv.listen_host == broker.listen_host == "0.0.0.0"
    assert broker.broker_ip1 == "127.0.0.1"  # a wildcard host is reached on loopback
    assert store.store_path_root_dir == tmp_path / "s" and store.maped_file_size_commit_log == 1048576
    assert store.flush_disk_type.value == "SYNC_FLUSH"
    assert int(DEV_STORE_DEFAULTS["maxIndexNum"]) == store.max_index_num  # untouched keys: dev's
    flags = ("--host", "127.0.0.2", "--broker-port", "30911", "--store", str(tmp_path / "t"))
    namesrv, broker, store = dev_configs(_dev_args("-c", str(conf), *flags))
    assert namesrv.listen_host == broker.listen_host == broker.broker_ip1 == "127.0.0.2"
    assert broker.listen_port == 30911 and store.store_path_root_dir == tmp_path / "t"


def test_dev_conf_warns_unknown_keys_and_ignores_its_namesrv_addr(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conf = write_conf(
        tmp_path / "broker.conf", {"flushDiskTyp": "SYNC_FLUSH", "namesrvAddr": "10.0.0.1:9876"}
    )
    with caplog.at_level(logging.WARNING):
        _, broker, _ = dev_configs(_dev_args("-c", str(conf)))
    assert broker.namesrv_addr is None  # filled in with the dev name server's bound address
    text = caplog.text
    assert "unknown config key 'flushDiskTyp' ignored" in text
    assert "namesrvAddr ignored" in text


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("metricsPort", "ninety", "config key metricsPort: expected an integer"),
        ("flushDiskType", "SOMETIMES", "config key flushDiskType: expected one of"),
        ("mapedFileSizeCommitLog", "100", "mapedFileSizeCommitLog must be at least 4096"),
    ],
)
def test_dev_conf_bad_value_names_the_key(tmp_path: Path, key: str, value: str, message: str) -> None:
    conf = write_conf(tmp_path / "broker.conf", {key: value})
    with pytest.raises(ConfigError, match=message):
        dev_configs(_dev_args("-c", str(conf)))


def test_dev_conf_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read config file .*nope\.conf"):
        dev_configs(_dev_args("-c", str(tmp_path / "nope.conf")))


def test_broker_defaults_stay_rocketmqs() -> None:
    """`rocketlite broker` binds every interface, as RocketMQ does; only dev is loopback."""
    assert BrokerConfig().listen_host == "0.0.0.0"


@pytest.mark.parametrize(
    ("busy", "offset"), [("broker", 0), ("VIP channel", -2), ("HA", 1), ("metrics", None)]
)
def test_a_second_dev_on_busy_ports_leaves_no_store_behind(
    tmp_path: Path, busy: str, offset: int | None
) -> None:
    """`make run` already serving (here: one listening socket on the port) and a second
    `rocketlite dev` on a new store: a clear error naming the port, exit 2, and the new store
    directory not created (it used to be created and preallocated, 129 MB, before the bind)."""
    port = broker_port()
    metrics = free_port(avoid={port - 2, port, port + 1})
    taken = metrics if offset is None else port + offset
    store = tmp_path / "store2"
    conf = write_conf(tmp_path / "broker.conf", {"metricsPort": str(metrics), "grpcServerPort": "0"})
    with socket.create_server(("127.0.0.1", taken)):
        done = subprocess.run(
            [*ROCKETLITE, "dev", "-c", str(conf), "--store", str(store), "--namesrv-port", "0",
             "--broker-port", str(port)],
            capture_output=True, text=True, env=child_env(), timeout=60, check=False,
        )  # fmt: skip
    assert done.returncode == 2, f"{busy}: {done.stderr}"
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith(f"rocketlite: error: [Errno 98] cannot listen on 127.0.0.1:{taken}: ")
    ), done.stderr
    assert not store.exists(), f"{busy} port in use: {sorted(p.name for p in store.rglob('*'))}"
