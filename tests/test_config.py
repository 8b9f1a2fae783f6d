"""RocketMQ-style properties files into typed config objects."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rocketlite.config import (
    build_config,
    config_keys,
    load_properties,
    parse_properties,
    warn_unknown_keys,
)
from rocketlite.protocol.errors import ConfigError
from rocketlite.store.config import FlushDiskType, StoreConfig, parse_delay_levels

BROKER_CONF = """\
# a broker.conf as RocketMQ users write it
brokerClusterName = DefaultCluster
brokerName=broker-a
brokerId : 0
storePathRootDir=/tmp/rl-store
mapedFileSizeCommitLog=8192
flushDiskType=SYNC_FLUSH
transientStorePoolEnable=true
messageDelayLevel=1s 5s \\
  10s
! old-style comment
"""


def test_parse_properties_forms() -> None:
    props = parse_properties(BROKER_CONF)
    assert props["brokerClusterName"] == "DefaultCluster"
    assert props["brokerId"] == "0"
    assert props["messageDelayLevel"] == "1s 5s 10s"
    assert "!" not in "".join(props)


def test_store_config_from_broker_conf(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text(BROKER_CONF)
    cfg = build_config(StoreConfig, load_properties(path))
    assert cfg.store_path_root_dir == Path("/tmp/rl-store")
    assert cfg.maped_file_size_commit_log == 8192
    assert cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert cfg.transient_store_pool_enable is True
    assert cfg.delay_levels_ms == (1000, 5000, 10000)
    assert cfg.commit_log_dir == Path("/tmp/rl-store/commitlog")
    # Defaults are RocketMQ's.
    assert cfg.max_message_size == 4 * 1024 * 1024 and cfg.cq_file_size == 6_000_000
    assert cfg.max_hash_slot_num == 5_000_000 and cfg.max_index_num == 20_000_000
    assert parse_delay_levels(StoreConfig().message_delay_level)[-1] == 2 * 3600 * 1000


def test_alias_key_names() -> None:
    cfg = build_config(StoreConfig, {"mappedFileSizeCommitLog": "65536"})
    assert cfg.maped_file_size_commit_log == 65536
    assert "checkCRCOnRecover" in config_keys(StoreConfig)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("mapedFileSizeCommitLog", "abc", "expected an integer"),
        ("mapedFileSizeCommitLog", "100", "at least 4096"),
        ("flushDiskType", "SOMETIMES", "ASYNC_FLUSH, SYNC_FLUSH"),
        ("transientStorePoolEnable", "yes", "true or false"),
        ("deleteWhen", "25", "bad hour"),
        ("messageDelayLevel", "1x", "bad level"),
        ("diskMaxUsedSpaceRatio", "99", "10..95"),
        ("diskSpaceWarningLevelRatio", "101", "10..100"),
        ("diskSpaceCleanForciblyRatio", "5", "10..100"),
    ],
)
def test_bad_values_fail_clearly(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        build_config(StoreConfig, {key: value})
    assert key in str(info.value) or message in str(info.value)


def test_unknown_keys_warn(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="rocketlite.config"):
        unknown = warn_unknown_keys({"listenPort": "1", "colour": "red"}, {"listenPort"}, "broker.conf")
    assert unknown == ["colour"]
    assert "colour" in caplog.text


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_properties(tmp_path / "nope.conf")
