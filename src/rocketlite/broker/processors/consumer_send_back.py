"""CONSUMER_SEND_MSG_BACK (36): a consumer hands back a message it failed to consume.

Java 4.9's `SendMessageProcessor.asyncConsumerSendMsgBack`, step by step: the group must exist
(auto-created when `autoCreateSubscriptionGroup` is on), `%RETRY%group` is created if needed, and
the failed message is looked up **by its commit-log offset** — the C++ 1.x client sends nothing
else (no originMsgId, no originTopic). A copy goes to the retry topic with `DELAY` = 3 +
reconsumeTimes (or the level asked for), so the store parks it in SCHEDULE_TOPIC_XXXX and the
schedule service delivers it later; once reconsumeTimes reaches the group's (or the header's)
maximum, or the client asks with delayLevel < 0, it goes to `%DLQ%group` instead, undelayed
(`DELAY=0`, as RocketMQ 5 stores it).

The copy keeps the stored body (compressed or not) and sysFlag, the born host and time, gets
reconsumeTimes + 1, `RETRY_TOPIC` = the original topic (kept when already set, so retries of
retries still name the user's topic), `ORIGIN_MESSAGE_ID` and `WAIT=false` (which the retry
delivered later keeps, as RocketMQ's does). Differences from Java, on purpose:
the copy's store host is this broker's current address (its msgId must be reachable even if the
port changed since the original was stored), `ORIGIN_MESSAGE_ID` falls back to the header's
originMsgId / the UNIQ_KEY before the offsetMsgId, and a flush or replication timeout counts as
success (the copy is stored; failing would make the client send a duplicate).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.processors.outcome import OK, Outcome, after_flush, command_later
from rocketlite.broker.stats import BrokerStats
from rocketlite.broker.subscription_group import SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.protocol import perm, reserved
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.message import HostAddress, MessageConst, properties_to_string, string_to_properties
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.headers import ConsumerSendMsgBackRequestHeader
from rocketlite.remoting.connection import Connection, HandlerResult
from rocketlite.store.api import StoreAPI
from rocketlite.store.results import PutMessageResult

log = logging.getLogger("rocketlite.broker.send_back")

DLQ_NUMS_PER_GROUP = 1
V3_4_9 = 121  # MQVersion.Version.V3_4_9.ordinal(): from here the header's maxReconsumeTimes counts
FAQ_SUFFIX = " See http://rocketmq.apache.org/docs/faq/"
TOPIC_SYS_FLAG_UNIT_SUB = 2  # TopicSysFlag.buildSysFlag(false, true)


class ConsumerSendBackProcessor:
    """Handles CONSUMER_SEND_MSG_BACK; collaborators are explicit, nothing reaches back."""

    def __init__(
        self,
        broker: BrokerConfig,
        store: StoreAPI,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        stats: BrokerStats,
        store_host: HostAddress,
        rng: random.Random | None = None,
    ) -> None:
        self.broker = broker
        self.store = store
        self.topics = topics
        self.groups = groups
        self.stats = stats
        self.store_host = store_host
        self.rng = rng or random.Random()

    def handle(self, conn: Connection, request: RemotingCommand) -> HandlerResult:
        """CONSUMER_SEND_MSG_BACK on the remoting port: the header decoded, `send_back`, the
        outcome as the answer."""
        del conn
        header = ConsumerSendMsgBackRequestHeader.from_ext(request.ext_fields)
        outcome = self.send_back(header, request.version)
        if isinstance(outcome, Outcome):
            return outcome.command(request)
        return command_later(request, outcome)

    def send_back(
        self, header: ConsumerSendMsgBackRequestHeader, version: int
    ) -> Outcome | Awaitable[Outcome]:
        """The typed core: a copy of the message at `header.offset` to the group's retry topic
        (delayed) or its DLQ. `version`: the client's MQVersion ordinal (the header's
        maxReconsumeTimes counts from V3_4_9)."""
        group = header.group
        cfg = self.groups.find(group)
        if cfg is None:
            return Outcome(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {group}{FAQ_SUFFIX}",
            )
        if not perm.is_writeable(self.broker.broker_permission):
            return Outcome(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.broker.broker_ip1}] sending message is forbidden",
            )
        if cfg.retry_queue_nums <= 0:
            log.info("group %s has no retry queues: message at %d dropped", group, header.offset)
            return OK

        new_topic = reserved.retry_topic(group)
        queue_id = self.rng.randrange(cfg.retry_queue_nums)
        topic_sys_flag = TOPIC_SYS_FLAG_UNIT_SUB if header.unit_mode else 0
        tc = self.topics.create_in_send_back(
            new_topic, cfg.retry_queue_nums, perm.PERM_READ | perm.PERM_WRITE, topic_sys_flag
        )
        if not perm.is_writeable(tc.perm):
            return Outcome(ResponseCode.NO_PERMISSION, f"the topic[{new_topic}] sending message is forbidden")
        original = self.store.look_message_by_offset(header.offset)
        if original is None:
            return Outcome(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}")

        props = string_to_properties(original.properties_string)
        props.setdefault(MessageConst.RETRY_TOPIC, original.topic)
        props[MessageConst.WAIT_STORE_MSG_OK] = "false"  # Java's msgExt.setWaitStoreMsgOK(false)
        max_times = cfg.retry_max_times
        if version >= V3_4_9 and header.max_reconsume_times is not None:
            max_times = header.max_reconsume_times
        delay_level = header.delay_level
        if original.reconsume_times >= max_times or delay_level < 0:
            new_topic = reserved.dlq_topic(group)
            queue_id = self.rng.randrange(DLQ_NUMS_PER_GROUP)
            self.topics.create_in_send_back(new_topic, DLQ_NUMS_PER_GROUP, perm.PERM_READ | perm.PERM_WRITE)
            props[MessageConst.DELAY_TIME_LEVEL] = "0"  # RocketMQ 5 stores it: msgExt.setDelayTimeLevel(0)
            log.info(
                "message at %d of group %s goes to %s after %d reconsumes",
                header.offset, group, new_topic, original.reconsume_times,
            )  # fmt: skip
        else:
            if delay_level == 0:
                delay_level = 3 + original.reconsume_times
            props[MessageConst.DELAY_TIME_LEVEL] = str(delay_level)
        if not props.get(MessageConst.ORIGIN_MESSAGE_ID):
            props[MessageConst.ORIGIN_MESSAGE_ID] = (
                header.origin_msg_id
                or props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
                or original.msg_id
            )
        msg = original.reposted(
            new_topic, queue_id, self.store_host, properties_to_string(props),
            reconsume_times=original.reconsume_times + 1, keep_transaction_offset=False,
        )  # fmt: skip
        back_topic = props[MessageConst.RETRY_TOPIC]
        target = new_topic  # the store rewrites msg.topic to the schedule topic when delayed
        pending = self.store.put_message_nowait(msg)

        def build(result: PutMessageResult) -> Outcome:
            if not result.ok:
                log.warning("send-back for group %s failed: %s %s", group, result.status.name, result.remark)
                return Outcome(ResponseCode.SYSTEM_ERROR, result.status.name)
            self.stats.record_send_back(back_topic, group)
            self.stats.record_put(target, 1, len(msg.body))
            if target.startswith(reserved.DLQ_GROUP_TOPIC_PREFIX):
                self.stats.record_dlq(back_topic, group)
            log.debug("sent back %s message of group %s to %s", back_topic, group, target)
            return OK

        return after_flush(self.store, pending, build)
