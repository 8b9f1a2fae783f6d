"""`ClientManager`: the producers and consumers the broker knows from heartbeats.

RocketMQ splits this into `ProducerManager` and `ConsumerManager`; here one class owns both tables
because every event that changes one (heartbeat, unregister, a connection
closing, a channel expiring) is handled the same way for both. The tables are keyed by clientID
(the identity GET_CONSUMER_LIST_BY_GROUP must echo verbatim, and rebalancing depends on it), with
the connection the client last heartbeated on; a client that reconnects replaces its old entry
instead of being listed twice.

A client is on a `ClientChannel`: a remoting `Connection` for 4.x clients, `grpc/clients.py`'s
channel for 5.x ones (which pop, so GET_CONSUMER_LIST_BY_GROUP, the list 4.x clients rebalance
over, leaves them out: `ClientChannelInfo.pops`).

Consumer subscriptions are kept per group, as Java does (`ConsumerGroupInfo.subscriptionTable`).
Their tag code sets are recomputed here from the subscription string: the C++ client sends
`codeSet:[0,0]`, and the pull path filters consume-queue units by these codes.

When a group's set of clients or its subscriptions change, every client of the group gets a
one-way NOTIFY_CONSUMER_IDS_CHANGED so it rebalances at once instead of within 20 s. Everything
runs on the event loop; nothing here blocks except the small config-file writes that creating a
group or a retry topic triggers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.consumer_filter import ConsumerFilterManager
from rocketlite.broker.subscription_group import SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.clock import Clock
from rocketlite.protocol import perm, reserved
from rocketlite.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    SubscriptionData,
)
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.subscription import SUB_ALL, build_subscription_data, is_tag_type
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import NotifyConsumerIdsChangedRequestHeader
from rocketlite.remoting.connection import Connection
from rocketlite.runtime import cancel_tasks

log = logging.getLogger("rocketlite.broker.client")

SCAN_INTERVAL_S = 10.0  # RocketMQ's ClientHousekeepingService period
_CLOSE_HOOK = "rocketlite.client_manager"  # conn.attrs key: close callback installed
FAQ_SUFFIX = " See http://rocketmq.apache.org/docs/faq/"  # Java appends FAQUrl.suggestTodo(...)


# ------------------------------------------------------------------------------------ subscriptions


def normalize_subscription(sub: SubscriptionData) -> SubscriptionData:
    """A heartbeat subscription with our own code set (the C++ client sends zeros)."""
    if not is_tag_type(sub.expression_type) or sub.class_filter_mode:
        return sub
    try:
        built = build_subscription_data(sub.topic, sub.sub_string, sub.expression_type, sub.sub_version)
    except ValueError:
        log.warning("unparsable subscription %r for %s; matching everything", sub.sub_string, sub.topic)
        return replace(sub, sub_string=SUB_ALL, tags_set=(), code_set=())
    return replace(sub, sub_string=built.sub_string, tags_set=built.tags_set, code_set=built.code_set)


# ---------------------------------------------------------------------------------------- tables


class ClientChannel(Protocol):
    """What the tables need of a client's connection: a remoting `Connection`, or a 5.x client's
    channel (`grpc/clients.py`), as `transaction.CheckChannel` does for check-backs."""

    @property
    def closed(self) -> bool: ...

    @property
    def remote_address(self) -> str: ...

    def oneway(self, cmd: RemotingCommand) -> None: ...

    def close(self) -> None: ...


@dataclass(slots=True, eq=False)
class ClientChannelInfo:
    """One client on one connection; `last_update` is the wall-clock ms of its last heartbeat;
    `pops`: a 5.x consumer, which takes no queue in a 4.x rebalance."""

    conn: ClientChannel
    client_id: str
    language: str
    version: int
    last_update: int
    pops: bool = False

    def to_connection_json(self) -> dict[str, Any]:
        """RocketMQ's `Connection` bean (GET_CONSUMER/PRODUCER_CONNECTION_LIST)."""
        return {
            "clientAddr": self.conn.remote_address,
            "clientId": self.client_id,
            "language": self.language,
            "version": self.version,
        }


@dataclass(slots=True)
class ConsumerGroupInfo:
    """`ConsumerGroupInfo`: how a group consumes, what it subscribes to, who is in it."""

    group: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    channels: dict[str, ClientChannelInfo] = field(default_factory=dict)
    last_update: int = 0

    def client_ids(self) -> list[str]:
        """The clients 4.x consumers rebalance the queues over (GET_CONSUMER_LIST_BY_GROUP): not
        the 5.x ones, which pop across every queue and would leave theirs unconsumed."""
        return [cid for cid, info in self.channels.items() if not info.pops]

    def connections(self) -> list[ClientChannel]:
        """Distinct live connections of the group's clients, in registration order."""
        seen: dict[int, ClientChannel] = {}
        for info in self.channels.values():
            if not info.conn.closed:
                seen.setdefault(id(info.conn), info.conn)
        return list(seen.values())

    def update_channel(self, info: ClientChannelInfo, data: ConsumerData) -> bool:
        """Record the client (True if it is new or moved to another connection)."""
        self.consume_type = data.consume_type
        self.message_model = data.message_model
        self.consume_from_where = data.consume_from_where
        self.last_update = info.last_update
        old = self.channels.get(info.client_id)
        self.channels[info.client_id] = info
        return old is None or old.conn is not info.conn

    def update_subscription(self, subs: Iterable[SubscriptionData], now_ms: int) -> bool:
        """`updateSubscription`: True if a topic was added or removed (a newer version of an
        existing topic's subscription replaces it without counting as a change, as in Java)."""
        updated = False
        wanted: set[str] = set()
        for sub in subs:
            wanted.add(sub.topic)
            old = self.subscription_table.get(sub.topic)
            if old is None:
                self.subscription_table[sub.topic] = sub
                updated = True
                log.info("group %s subscribes %s (%s)", self.group, sub.topic, sub.sub_string)
            elif sub.sub_version > old.sub_version:
                self.subscription_table[sub.topic] = sub
        for topic in [t for t in self.subscription_table if t not in wanted]:
            log.warning("group %s no longer subscribes %s", self.group, topic)
            del self.subscription_table[topic]
            updated = True
        self.last_update = now_ms
        return updated

    def to_consumer_connection_json(self) -> dict[str, Any]:
        """RocketMQ's `ConsumerConnection` body."""
        return {
            "connectionSet": [c.to_connection_json() for c in self.channels.values()],
            "consumeFromWhere": self.consume_from_where,
            "consumeType": self.consume_type,
            "messageModel": self.message_model,
            "subscriptionTable": {t: s.to_json_obj() for t, s in self.subscription_table.items()},
        }


# ------------------------------------------------------------------------------------ the manager

# A registration to remove: (group, clientID, is_consumer, only-if-on-this-connection or None).
_Entry = tuple[str, str, bool, ClientChannel | None]


class ClientManager:
    """Producers and consumers known from heartbeats (the requests about them are answered by
    `processors/client_requests.py`)."""

    def __init__(
        self,
        broker: BrokerConfig,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        clock: Clock,
        *,
        scan_interval_s: float = SCAN_INTERVAL_S,
        filters: ConsumerFilterManager | None = None,
    ) -> None:
        self.broker = broker
        self.filters = filters  # told of every registration and of groups that empty (SQL92)
        self.topics = topics
        self.groups = groups
        self.clock = clock
        self.scan_interval_s = scan_interval_s
        self.producers: dict[str, dict[str, ClientChannelInfo]] = {}
        self.consumers: dict[str, ConsumerGroupInfo] = {}
        self._scan_task: asyncio.Task[None] | None = None

    # -- queries for other modules ----------------------------------------------------------
    def consumer_group(self, group: str) -> ConsumerGroupInfo | None:
        return self.consumers.get(group)

    def find_subscription(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.consumers.get(group)
        return info.subscription_table.get(topic) if info is not None else None

    def producer_channels(self, group: str) -> list[ClientChannel]:
        """Live connections of a producer group (transaction check-back picks one)."""
        infos = self.producers.get(group, {})
        return [i.conn for i in infos.values() if not i.conn.closed]

    def find_channel(self, client_id: str) -> ClientChannel | None:
        """The live connection of a client by its clientID (`ProducerManager.findChannel`, where a
        reply is pushed): its producer registration first, as RocketMQ looks only there, then a
        consumer one, so a client that only consumes can be answered too."""
        for table in self.producers.values():
            info = table.get(client_id)
            if info is not None and not info.conn.closed:
                return info.conn
        for group_info in self.consumers.values():
            info = group_info.channels.get(client_id)
            if info is not None and not info.conn.closed:
                return info.conn
        return None

    def consumer_groups_of_topic(self, topic: str) -> set[str]:
        """Online groups subscribed to `topic` (`queryTopicConsumeByWho`)."""
        return {g for g, info in self.consumers.items() if topic in info.subscription_table}

    # -- registration -----------------------------------------------------------------------
    def _watch(self, conn: Connection) -> None:
        if not conn.attrs.get(_CLOSE_HOOK):
            conn.attrs[_CLOSE_HOOK] = True
            conn.close_callbacks.append(self.on_connection_closed)

    def register_producer(self, group: str, info: ClientChannelInfo) -> None:
        table = self.producers.setdefault(group, {})
        if info.client_id not in table:
            log.info("new producer %s in group %s from %s", info.client_id, group, info.conn.remote_address)
        table[info.client_id] = info

    def register_consumer(self, data: ConsumerData, info: ClientChannelInfo, *, notify: bool) -> bool:
        """`ConsumerManager.registerConsumer`; True (and a notification) if the group changed."""
        group = data.group_name
        group_info = self.consumers.get(group)
        if group_info is None:
            group_info = ConsumerGroupInfo(
                group, data.consume_type, data.message_model, data.consume_from_where
            )
            self.consumers[group] = group_info
        channel_changed = group_info.update_channel(info, data)
        subs = [normalize_subscription(s) for s in data.subscription_data_set]
        subs_changed = group_info.update_subscription(subs, info.last_update)
        changed = channel_changed or subs_changed
        if self.filters is not None:  # RocketMQ's REGISTER event, sent on every registration
            self.filters.register_group(group, subs)
        if changed:
            log.info("consumer group %s changed: clients %s", group, list(group_info.channels))
            if notify:
                self.notify_ids_changed(group)
        return changed

    def notify_ids_changed(self, group: str) -> None:
        """One-way NOTIFY_CONSUMER_IDS_CHANGED to every connection of the group."""
        if not self.broker.notify_consumer_ids_changed_enable:
            return
        info = self.consumers.get(group)
        if info is None:
            return
        ext = NotifyConsumerIdsChangedRequestHeader(consumer_group=group).to_ext()
        for conn in info.connections():
            conn.oneway(make_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, ext))

    def _group_notifies(self, group: str) -> bool:
        """The group's `notifyConsumerIdsChangedEnable` (true for groups without a config)."""
        cfg = self.groups.table.get(group)
        return cfg.notify_consumer_ids_changed_enable if cfg is not None else True

    def _remove_consumer(self, group: str, client_id: str, conn: ClientChannel | None) -> bool:
        """Remove a client from a group (only if on `conn`, when given); drop emptied groups."""
        info = self.consumers.get(group)
        if info is None:
            return False
        entry = info.channels.get(client_id)
        if entry is None or (conn is not None and entry.conn is not conn):
            return False
        del info.channels[client_id]
        log.info("consumer %s left group %s", client_id, group)
        if not info.channels:
            del self.consumers[group]
            log.info("consumer group %s has no clients left", group)
            if self.filters is not None:  # UNREGISTER: the group's SQL92 filters die
                self.filters.unregister(group)
        return True

    def _remove_producer(self, group: str, client_id: str, conn: ClientChannel | None) -> bool:
        table = self.producers.get(group)
        entry = table.get(client_id) if table is not None else None
        if table is None or entry is None or (conn is not None and entry.conn is not conn):
            return False
        del table[client_id]
        if not table:
            del self.producers[group]
        return True

    def _drop(self, doomed: Iterable[_Entry]) -> None:
        """Remove registrations; tell the groups that lost a consumer."""
        changed: list[str] = []
        for group, client_id, is_consumer, conn in doomed:
            if is_consumer:
                if self._remove_consumer(group, client_id, conn) and group not in changed:
                    changed.append(group)
            else:
                self._remove_producer(group, client_id, conn)
        for group in changed:
            if self._group_notifies(group):
                self.notify_ids_changed(group)

    def on_connection_closed(self, conn: ClientChannel) -> None:
        """Forget every client registered through `conn` (a closed channel must not keep queues);
        also how a 5.x client that left is removed."""
        self._drop(self._entries(lambda info: info.conn is conn))

    def _entries(self, pick: Callable[[ClientChannelInfo], bool]) -> list[_Entry]:
        out: list[_Entry] = []
        for group, cinfo in self.consumers.items():
            out += [(group, cid, True, i.conn) for cid, i in cinfo.channels.items() if pick(i)]
        for group, table in self.producers.items():
            out += [(group, cid, False, i.conn) for cid, i in table.items() if pick(i)]
        return out

    def scan_not_active_channels(self, now_ms: int | None = None) -> int:
        """Drop (and close) clients silent for more than `channelExpiredTimeout`; returns how many.

        `now_ms` defaults to the clock; tests pass a later time instead of waiting two minutes.
        """
        now = self.clock.now_ms() if now_ms is None else now_ms
        limit = self.broker.channel_expired_timeout
        expired = self._entries(lambda info: now - info.last_update > limit)
        for group, client_id, is_consumer, conn in expired:
            kind = "consumer" if is_consumer else "producer"
            log.warning("%s %s of group %s expired (no heartbeat for %d ms)", kind, client_id, group, limit)
            if conn is not None:
                conn.close()
        self._drop(expired)
        return len(expired)

    # -- what clients report --------------------------------------------------------------
    def heartbeat(self, conn: Connection, data: HeartbeatData, language: str, version: int) -> None:
        """A HEART_BEAT: (re-)register every producer and consumer group the client names, on
        `conn`; a consumer group with a config gets its retry topic (`ClientManageProcessor.heartBeat`)."""
        now = self.clock.now_ms()
        info = ClientChannelInfo(conn, data.client_id, language, version, now)
        self._watch(conn)
        for consumer in data.consumer_data_set:
            notify = self.prepare_group(consumer.group_name, unit_mode=consumer.unit_mode)
            self.register_consumer(consumer, info, notify=notify)
        for producer in data.producer_data_set:
            self.register_producer(producer.group_name, info)

    def prepare_group(self, group: str, *, unit_mode: bool = False) -> bool:
        """A consumer group with a config (created on first use while autoCreateSubscriptionGroup
        is on) gets its retry topic, as a heartbeat naming it does; returns whether the group's
        clients are told of changes (its notifyConsumerIdsChangedEnable; True without a config)."""
        cfg = self.groups.find(group)
        if cfg is None:
            return True
        sys_flag = 2 if unit_mode else 0  # TopicSysFlag.buildSysFlag(false, true)
        self.topics.create_in_send_back(
            reserved.retry_topic(group), cfg.retry_queue_nums, perm.PERM_READ | perm.PERM_WRITE, sys_flag
        )
        return cfg.notify_consumer_ids_changed_enable

    def unregister(self, client_id: str, producer_group: str | None, consumer_group: str | None) -> None:
        """An UNREGISTER_CLIENT: remove the clientID from the named producer / consumer group."""
        doomed: list[_Entry] = []
        if producer_group:
            doomed.append((producer_group, client_id, False, None))
        if consumer_group:
            doomed.append((consumer_group, client_id, True, None))
        self._drop(doomed)

    # -- service ----------------------------------------------------------------------------
    async def start(self) -> None:
        self._scan_task = asyncio.create_task(self._scan_loop(), name="broker-client-scan")

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self.scan_interval_s)
            try:
                self.scan_not_active_channels()
            except Exception:
                log.exception("client channel scan failed")

    async def close(self) -> None:
        task, self._scan_task = self._scan_task, None
        await cancel_tasks(task)
