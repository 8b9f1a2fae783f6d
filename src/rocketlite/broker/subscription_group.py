"""`SubscriptionGroupManager`: consumer-group settings, persisted as `config/subscriptionGroup.json`.

Groups are created on first use when `autoCreateSubscriptionGroup` is on (RocketMQ's default).
The fields and defaults are `SubscriptionGroupConfig`'s; `retryMaxTimes` (16) decides when a
message goes to the DLQ; `consumeMessageOrderly` (RocketMQ 5) makes 5.x consumers of the group
consume FIFO.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rocketlite.broker.state_files import JsonConfigFile
from rocketlite.clock import Clock
from rocketlite.protocol.bodies.json_body import get_bool, get_int, get_str
from rocketlite.protocol.bodies.route import DataVersion
from rocketlite.protocol.wire import fastjson

log = logging.getLogger("rocketlite.broker.subscription_group")


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    consume_message_orderly: bool = False

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "brokerId": self.broker_id,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeEnable": self.consume_enable,
            "consumeMessageOrderly": self.consume_message_orderly,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "groupName": self.group_name,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "retryMaxTimes": self.retry_max_times,
            "retryQueueNums": self.retry_queue_nums,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
        }

    @classmethod
    def from_json_obj(cls, obj: dict[str, Any]) -> SubscriptionGroupConfig:
        d = cls(get_str(obj, "groupName"))
        return replace(
            d,
            consume_enable=get_bool(obj, "consumeEnable", True),
            consume_from_min_enable=get_bool(obj, "consumeFromMinEnable", True),
            consume_broadcast_enable=get_bool(obj, "consumeBroadcastEnable", True),
            retry_queue_nums=get_int(obj, "retryQueueNums", 1),
            retry_max_times=get_int(obj, "retryMaxTimes", 16),
            broker_id=get_int(obj, "brokerId", 0),
            which_broker_when_consume_slowly=get_int(obj, "whichBrokerWhenConsumeSlowly", 1),
            notify_consumer_ids_changed_enable=get_bool(obj, "notifyConsumerIdsChangedEnable", True),
            consume_message_orderly=get_bool(obj, "consumeMessageOrderly", False),
        )


SYSTEM_GROUPS = (
    "TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "__MONITOR_CONSUMER", "CLIENT_INNER_PRODUCER",
    "SELF_TEST_P_GROUP", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER", "CID_ONSAPI_PULL", "CID_RMQ_SYS_TRANS",
)  # fmt: skip


class SubscriptionGroupManager(JsonConfigFile):
    file_name = "subscriptionGroup.json"

    def __init__(self, config_dir: Path, clock: Clock, *, auto_create: bool) -> None:
        super().__init__(config_dir)
        self.clock = clock
        self.auto_create = auto_create
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion()

    def encode(self) -> str:
        return fastjson.dumps(
            {
                "dataVersion": self.data_version.to_json_obj(),
                "subscriptionGroupTable": {k: v.to_json_obj() for k, v in self.table.items()},
            }
        )

    def decode(self, text: str) -> None:
        data = fastjson.loads(text)
        for name, obj in (data.get("subscriptionGroupTable") or {}).items():
            self.table[str(name)] = SubscriptionGroupConfig.from_json_obj(obj)
        if isinstance(data.get("dataVersion"), dict):
            self.data_version = DataVersion.from_json_obj(data["dataVersion"])

    def start(self) -> None:
        self.load()
        for name in SYSTEM_GROUPS:
            self.table.setdefault(name, SubscriptionGroupConfig(name))

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config; created (and persisted) on first use when auto-create is on."""
        cfg = self.table.get(group)
        if cfg is None and self.auto_create:
            cfg = SubscriptionGroupConfig(group)
            self.table[group] = cfg
            self._changed()
            log.info("auto-created subscription group %s", group)
        return cfg

    def update(self, cfg: SubscriptionGroupConfig) -> None:
        self.table[cfg.group_name] = cfg
        self._changed()

    def update_many(self, cfgs: Iterable[SubscriptionGroupConfig]) -> None:
        """`updateSubscriptionGroupConfigList`: a batch of groups, one write."""
        for cfg in cfgs:
            self.table[cfg.group_name] = cfg
        self._changed()

    def delete(self, group: str) -> bool:
        if self.table.pop(group, None) is None:
            return False
        self._changed()
        return True

    def _changed(self) -> None:
        self.data_version = self.data_version.next_version(self.clock.now_ms())
        self.persist()
