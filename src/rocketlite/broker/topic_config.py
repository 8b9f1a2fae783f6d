"""`TopicConfigManager`: the broker's topics, persisted as `config/topics.json`.

At start it creates RocketMQ's system topics (SELF_TEST_TOPIC, TBW102 when auto-create is on,
BenchmarkTest, the cluster and broker topics, OFFSET_MOVED_EVENT, SCHEDULE_TOPIC_XXXX with 18
queues, the reply topic). Topics are created on send (`create_in_send`, from TBW102 with
PERM_INHERIT) and on send-back (`create_in_send_back`, retry and DLQ topics). Every change bumps
the data version, persists the file atomically, and calls `on_change` so the broker re-registers
with the name servers at once.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.state_files import JsonConfigFile
from rocketlite.clock import Clock
from rocketlite.protocol import perm, reserved, topic_attributes
from rocketlite.protocol.bodies.route import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from rocketlite.protocol.wire import fastjson

log = logging.getLogger("rocketlite.broker.topic_config")


class TopicConfigManager(JsonConfigFile):
    file_name = "topics.json"

    def __init__(
        self,
        config_dir: Path,
        broker: BrokerConfig,
        clock: Clock,
        delay_levels: int,
        *,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(config_dir)
        self.broker = broker
        self.clock = clock
        self.delay_levels = delay_levels
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self.on_change = on_change  # the broker re-registers with the name servers
        self._create_lock = threading.Lock()

    # -- persistence ------------------------------------------------------------------------
    def encode(self) -> str:
        wrapper = TopicConfigSerializeWrapper(dict(self.table), self.data_version)
        return fastjson.dumps(wrapper.to_json_obj())

    def decode(self, text: str) -> None:
        wrapper = TopicConfigSerializeWrapper.from_json(text)
        self.table.update(wrapper.topic_config_table)
        self.data_version = wrapper.data_version

    def start(self) -> None:
        """Load topics.json, then make sure the system topics exist."""
        self.load()
        b = self.broker
        system = [
            TopicConfig(reserved.SELF_TEST_TOPIC, 1, 1),
            TopicConfig(reserved.BENCHMARK_TOPIC, 1024, 1024),
            TopicConfig(reserved.OFFSET_MOVED_EVENT, 1, 1),
            TopicConfig(reserved.SCHEDULE_TOPIC, self.delay_levels, self.delay_levels),
            TopicConfig(reserved.reply_topic(b.broker_cluster_name), 1, 1),
        ]
        cluster_perm = perm.PERM_READ | perm.PERM_WRITE | perm.PERM_INHERIT
        system.append(
            TopicConfig(
                b.broker_cluster_name, 16, 16, cluster_perm if b.cluster_topic_enable else perm.PERM_INHERIT
            )
        )
        system.append(
            TopicConfig(b.broker_name, 1, 1, cluster_perm if b.broker_topic_enable else perm.PERM_INHERIT)
        )
        if b.trace_topic_enable:
            system.append(TopicConfig(b.msg_trace_topic_name, 1, 1))
        for tc in system:
            self.table.setdefault(tc.topic_name, tc)
        if b.auto_create_topic_enable:
            n = b.default_topic_queue_nums
            self.table[reserved.DEFAULT_TOPIC] = TopicConfig(reserved.DEFAULT_TOPIC, n, n, cluster_perm)
        else:
            self.table.pop(reserved.DEFAULT_TOPIC, None)
        self.persist()

    def _changed(self) -> None:
        self.data_version = self.data_version.next_version(self.clock.now_ms())
        self.persist()
        if self.on_change is not None:
            self.on_change()

    # -- queries ----------------------------------------------------------------------------
    def select(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def wrapper(self) -> TopicConfigSerializeWrapper:
        return TopicConfigSerializeWrapper(dict(self.table), self.data_version)

    # -- changes ----------------------------------------------------------------------------
    def create_in_send(
        self,
        topic: str,
        default_topic: str,
        client_queue_nums: int,
        topic_sys_flag: int = 0,
        *,
        creator: str = "a client",
    ) -> TopicConfig | None:
        """Auto-create `topic` from `default_topic` (TBW102) if that one may be inherited.

        Said at WARNING with the producer's address (`creator`): any name a producer sends to
        becomes a topic, a misspelt one too, which RocketMQ advises against in production."""
        with self._create_lock:
            existing = self.table.get(topic)
            if existing is not None:
                return existing
            default = self.table.get(default_topic)
            if default is None:
                log.warning("create topic %s: default topic %s does not exist", topic, default_topic)
                return None
            if default_topic == reserved.DEFAULT_TOPIC and not self.broker.auto_create_topic_enable:
                return None
            if not perm.is_inherited(default.perm):
                log.warning(
                    "create topic %s: default topic %s has no inherit permission", topic, default_topic
                )
                return None
            queues = max(1, min(client_queue_nums, default.write_queue_nums))
            tc = TopicConfig(
                topic, queues, queues, default.perm & ~perm.PERM_INHERIT, topic_sys_flag=topic_sys_flag
            )
            self.table[topic] = tc
            log.warning(
                "auto-created topic %s from %s (%d queues) on a send from %s: autoCreateTopicEnable "
                "creates any topic a producer names, a misspelt one too; in production set "
                "autoCreateTopicEnable=false and create topics with `rocketlite admin updateTopic`",
                topic, default_topic, queues, creator,
            )  # fmt: skip
        self._changed()
        return tc

    def create_in_send_back(
        self, topic: str, queue_nums: int, perm: int, topic_sys_flag: int = 0
    ) -> TopicConfig:
        """Retry / DLQ topics: created on heartbeat or send-back."""
        with self._create_lock:
            existing = self.table.get(topic)
            if existing is not None:
                return existing
            tc = TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag=topic_sys_flag)
            self.table[topic] = tc
            log.info("created topic %s (%d queues)", topic, queue_nums)
        self._changed()
        return tc

    def update(self, tc: TopicConfig, changes: Mapping[str, str] | None = None) -> None:
        """Store `tc`. With `changes` (an admin request's signed attribute changes, "+key" /
        "-key"), its attributes are the topic's current ones with the changes applied, as
        `updateTopicConfig` does: no changes keep them. A refused change raises
        `TopicAttributeError` and changes nothing."""
        if changes is not None:
            tc = self._with_attributes(tc, changes)
        self.table[tc.topic_name] = tc
        log.info("topic %s updated: %s", tc.topic_name, tc)
        self._changed()

    def update_many(self, tcs: Iterable[TopicConfig]) -> None:
        """`updateTopicConfigList`: every topic of a batch, one write and one registration. Each
        config's attributes are signed changes, as in a request; all are checked first."""
        done = [self._with_attributes(tc, tc.attributes) for tc in tcs]
        for tc in done:
            self.table[tc.topic_name] = tc
            log.info("topic %s updated: %s", tc.topic_name, tc)
        self._changed()

    def _with_attributes(self, tc: TopicConfig, changes: Mapping[str, str]) -> TopicConfig:
        current = self.table.get(tc.topic_name)
        attributes = topic_attributes.alter(
            current is None, current.attributes if current is not None else {}, changes
        )
        return dataclasses.replace(tc, attributes=attributes)

    def delete(self, topic: str) -> bool:
        if self.table.pop(topic, None) is None:
            return False
        log.info("topic %s deleted", topic)
        self._changed()
        return True
