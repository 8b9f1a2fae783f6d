"""`BrokerConfig`: built once, validated; only its live fields change afterwards."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rocketlite.broker.config import LIVE_BROKER_FIELDS, BrokerConfig, BrokerRole
from rocketlite.broker.live_config import LIVE_KEYS
from rocketlite.cli import load_broker_config
from rocketlite.config import key_of
from rocketlite.protocol.errors import ConfigError


def test_live_fields_change_the_others_need_a_restart() -> None:
    cfg = BrokerConfig(broker_name="b1", broker_permission=6)
    cfg.broker_permission = 4  # what LiveConfig does for UPDATE_BROKER_CONFIG
    assert cfg.broker_permission == 4
    with pytest.raises(dataclasses.FrozenInstanceError, match="broker_name"):
        cfg.broker_name = "b2"
    with pytest.raises(dataclasses.FrozenInstanceError, match="broker_role"):
        cfg.broker_role = BrokerRole.SLAVE
    assert cfg.broker_name == "b1" and cfg.broker_role is BrokerRole.ASYNC_MASTER
    copy = dataclasses.replace(cfg, broker_name="b2")  # a new config is built as any other
    assert copy.broker_name == "b2" and copy.broker_permission == 4
    with pytest.raises(ConfigError):
        BrokerConfig(ha_transfer_batch_size=1)


def test_every_live_field_is_a_field_and_a_live_key() -> None:
    fields = {f.name: f for f in dataclasses.fields(BrokerConfig)}
    assert fields.keys() >= LIVE_BROKER_FIELDS
    assert {key_of(fields[name]) for name in LIVE_BROKER_FIELDS} <= LIVE_KEYS


def test_min_in_sync_replicas_and_async_learner_are_read_by_rocketmqs_names(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b\nbrokerId=1\nbrokerRole=SLAVE\nminInSyncReplicas=2\nasyncLearner=true\n")
    broker, _ = load_broker_config(conf)
    assert (broker.min_in_sync_replicas, broker.async_learner) == (2, True)
    conf.write_text("brokerName=b\nminInSyncReplicas=0\n")
    with pytest.raises(ConfigError, match="minInSyncReplicas"):
        load_broker_config(conf)
