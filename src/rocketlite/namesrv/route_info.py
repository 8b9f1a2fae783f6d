"""`RouteInfoManager`: the name server's routing tables, with RocketMQ 4.9's update rules.

Five tables, named as in `RouteInfoManager.java`:

- `topic_queue_table`   topic -> brokerName -> QueueData (queue counts, perm, topicSysFlag)
- `broker_addr_table`   brokerName -> BrokerAddrs (cluster, brokerId -> "ip:port"; id 0 = master)
- `cluster_addr_table`  cluster -> {brokerName}
- `broker_live_table`   brokerAddr -> BrokerLiveInfo (last register time, DataVersion, connection,
  HA address)
- `filter_server_table` brokerAddr -> filter server addresses (obsolete feature, kept for the route)

Rules (REGISTER_BROKER, §11.1 of the protocol notes): the broker name joins its cluster; its address
is stored under its id after any *other* id with the same address is dropped (a slave promoted to
master re-registers as id 0 from the same ip:port); only a master (id 0) creates or updates queue
data, and only on its first registration or when its topic-config DataVersion changed; the live
entry is refreshed every time. A slave learns its master's address and HA address from the answer.

Removal (UNREGISTER_BROKER, connection close, expiry after `broker_expired_ms` without a
register): the address leaves every table; when a broker name is left with no address at all it
leaves its cluster and its queue data goes, and topics left without queue data disappear. As in
Java, a broker name that still has a slave keeps its queue data.

Everything runs on one asyncio loop, so there is no locking. The tables hold plain mutable records;
callers get frozen protocol objects (`TopicRouteData`, `ClusterInfo`) built from them. Connections
are opaque here: anything with `close()` (Java closes the channel of an expired broker).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from rocketlite.clock import SYSTEM_CLOCK, Clock
from rocketlite.namesrv.config import BROKER_CHANNEL_EXPIRED_TIME_MS
from rocketlite.protocol.bodies.route import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)
from rocketlite.protocol.reserved import MASTER_ID

log = logging.getLogger("rocketlite.namesrv.route")

PERM_READ: Final = 4  # `PermName`
PERM_WRITE: Final = 2
FLAG_UNIT: Final = 1  # `TopicSysFlag`
FLAG_UNIT_SUB: Final = 2


class Closable(Protocol):
    """What the manager needs of a connection: identity, and `close()` for expired brokers."""

    def close(self) -> None: ...


@dataclass(slots=True)
class BrokerAddrs:
    """One broker name's addresses (Java's mutable `BrokerData`)."""

    cluster: str
    broker_name: str
    addrs: dict[int, str] = field(default_factory=dict)

    def to_broker_data(self) -> BrokerData:
        return BrokerData(self.cluster, self.broker_name, dict(sorted(self.addrs.items())))


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update_ms: int
    data_version: DataVersion
    conn: Closable | None
    ha_server_addr: str


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """REGISTER_BROKER answer header: filled only for a slave whose master is registered."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


def queue_data_of(broker_name: str, config: TopicConfig) -> QueueData:
    """`createAndUpdateQueueData`: what the route keeps of a broker's topic config."""
    return QueueData(
        broker_name=broker_name,
        read_queue_nums=config.read_queue_nums,
        write_queue_nums=config.write_queue_nums,
        perm=config.perm,
        topic_sys_flag=config.topic_sys_flag,
    )


class RouteInfoManager:
    """The routing state of one name server; see the module docstring for the rules."""

    def __init__(
        self, clock: Clock = SYSTEM_CLOCK, *, broker_expired_ms: int = BROKER_CHANNEL_EXPIRED_TIME_MS
    ) -> None:
        self.clock = clock
        self.broker_expired_ms = broker_expired_ms
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerAddrs] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, tuple[str, ...]] = {}

    # -- registration -----------------------------------------------------------------------
    def register_broker(
        self,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_wrapper: TopicConfigSerializeWrapper | None,
        filter_servers: Sequence[str] | None,
        conn: Closable | None,
    ) -> RegisterResult:
        self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)

        entry = self.broker_addr_table.get(broker_name)
        register_first = entry is None
        if entry is None:
            entry = BrokerAddrs(cluster, broker_name)
            self.broker_addr_table[broker_name] = entry
        # One ip:port, one id: a slave switched to master re-registers under id 0.
        for other_id in [i for i, a in entry.addrs.items() if a == broker_addr and i != broker_id]:
            del entry.addrs[other_id]
        old_addr = entry.addrs.get(broker_id)
        entry.addrs[broker_id] = broker_addr
        register_first = register_first or old_addr is None

        data_version = topic_config_wrapper.data_version if topic_config_wrapper else DataVersion()
        if (
            topic_config_wrapper is not None
            and broker_id == MASTER_ID
            and (register_first or self.is_broker_topic_config_changed(broker_addr, data_version))
        ):
            for config in topic_config_wrapper.topic_config_table.values():
                self._create_or_update_queue_data(broker_name, config)

        previous = self.broker_live_table.get(broker_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            self.clock.now_ms(), data_version, conn, ha_server_addr
        )
        if previous is None:
            log.info(
                "new broker registered: %s %s id %d (HA %s)",
                broker_name,
                broker_addr,
                broker_id,
                ha_server_addr,
            )

        if filter_servers is not None:
            if filter_servers:
                self.filter_server_table[broker_addr] = tuple(filter_servers)
            else:
                self.filter_server_table.pop(broker_addr, None)

        if broker_id != MASTER_ID:
            master_addr = entry.addrs.get(MASTER_ID)
            if master_addr is not None:
                master_live = self.broker_live_table.get(master_addr)
                if master_live is not None:
                    return RegisterResult(master_live.ha_server_addr, master_addr)
        return RegisterResult()

    def _create_or_update_queue_data(self, broker_name: str, config: TopicConfig) -> None:
        queue_data = queue_data_of(broker_name, config)
        per_broker = self.topic_queue_table.get(config.topic_name)
        if per_broker is None:
            self.topic_queue_table[config.topic_name] = {broker_name: queue_data}
            log.info("new topic registered: %s %s", config.topic_name, queue_data)
            return
        existing = per_broker.get(broker_name)
        if existing == queue_data:
            return
        if existing is not None:
            log.info("topic changed: %s %s -> %s", config.topic_name, existing, queue_data)
            del per_broker[broker_name]  # Java removes and appends: the entry moves to the end
        per_broker[broker_name] = queue_data

    def is_broker_topic_config_changed(self, broker_addr: str, data_version: DataVersion) -> bool:
        live = self.broker_live_table.get(broker_addr)
        return live is None or live.data_version != data_version

    def broker_data_version(self, broker_addr: str) -> DataVersion | None:
        live = self.broker_live_table.get(broker_addr)
        return None if live is None else live.data_version

    def query_data_version(self, broker_addr: str, data_version: DataVersion) -> bool:
        """QUERY_DATA_VERSION: True when `data_version` differs; an unchanged broker counts as alive."""
        changed = self.is_broker_topic_config_changed(broker_addr, data_version)
        if not changed:
            live = self.broker_live_table.get(broker_addr)
            if live is not None:
                live.last_update_ms = self.clock.now_ms()
        return changed

    def unregister_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        """UNREGISTER_BROKER: drop one id of one broker name (and the name when it has no address left)."""
        live = self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        state = "was live" if live is not None else "was not live"
        log.info("unregister broker %s %s id %d (%s)", broker_name, broker_addr, broker_id, state)
        entry = self.broker_addr_table.get(broker_name)
        if entry is None:
            return
        entry.addrs.pop(broker_id, None)
        if entry.addrs:
            return
        del self.broker_addr_table[broker_name]
        names = self.cluster_addr_table.get(cluster)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self.cluster_addr_table[cluster]
        self._remove_topics_of_broker(broker_name)

    # -- removal on close / expiry ----------------------------------------------------------
    def scan_not_active_brokers(self, now_ms: int | None = None) -> list[str]:
        """Close and forget brokers whose last register is older than `broker_expired_ms`."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        expired = [
            addr
            for addr, live in self.broker_live_table.items()
            if live.last_update_ms + self.broker_expired_ms < now
        ]
        for addr in expired:
            live = self.broker_live_table[addr]
            log.warning("broker %s expired: no register for %d ms", addr, now - live.last_update_ms)
            if live.conn is not None:
                live.conn.close()
            self._destroy_broker_addr(addr)
        return expired

    def on_connection_closed(self, conn: Closable) -> list[str]:
        """Forget every broker address registered over `conn`; returns them."""
        addrs = [addr for addr, live in self.broker_live_table.items() if live.conn is conn]
        for addr in addrs:
            log.info("connection of broker %s closed; removing its routes", addr)
            self._destroy_broker_addr(addr)
        return addrs

    def _destroy_broker_addr(self, broker_addr: str) -> None:
        """`onChannelDestroy`: the address leaves every table, emptied broker names take their topics."""
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        emptied: list[str] = []
        for name, entry in list(self.broker_addr_table.items()):
            for broker_id in [i for i, a in entry.addrs.items() if a == broker_addr]:
                del entry.addrs[broker_id]
                log.info("removed %s id %d (%s) from the broker table", name, broker_id, broker_addr)
            if not entry.addrs:
                del self.broker_addr_table[name]
                emptied.append(name)
        for name in emptied:
            for cluster, names in list(self.cluster_addr_table.items()):
                if name in names:
                    names.discard(name)
                    if not names:
                        del self.cluster_addr_table[cluster]
            self._remove_topics_of_broker(name)

    def _remove_topics_of_broker(self, broker_name: str) -> None:
        for topic, per_broker in list(self.topic_queue_table.items()):
            if per_broker.pop(broker_name, None) is not None and not per_broker:
                del self.topic_queue_table[topic]
                log.info("topic %s removed: its last broker %s is gone", topic, broker_name)

    # -- admin ------------------------------------------------------------------------------
    def wipe_write_perm(self, broker_name: str) -> int:
        """WIPE_WRITE_PERM_OF_BROKER: clear PERM_WRITE on the broker's queues; returns the topic count."""
        return self._update_perm(broker_name, lambda perm: perm & ~PERM_WRITE)

    def add_write_perm(self, broker_name: str) -> int:
        """ADD_WRITE_PERM_OF_BROKER: set perm to read+write (Java's value, not `perm | WRITE`)."""
        return self._update_perm(broker_name, lambda _perm: PERM_READ | PERM_WRITE)

    def _update_perm(self, broker_name: str, change: Callable[[int], int]) -> int:
        count = 0
        for per_broker in self.topic_queue_table.values():
            queue_data = per_broker.get(broker_name)
            if queue_data is not None:
                per_broker[broker_name] = dataclasses.replace(queue_data, perm=change(queue_data.perm))
                count += 1
        return count

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV: the whole topic, or only its queues on `cluster`'s brokers."""
        if cluster is None:
            self.topic_queue_table.pop(topic, None)
            return
        per_broker = self.topic_queue_table.get(topic)
        if per_broker is None:
            return
        for name in self.cluster_addr_table.get(cluster, ()):
            per_broker.pop(name, None)
        if not per_broker:
            del self.topic_queue_table[topic]

    # -- queries ----------------------------------------------------------------------------
    def pick_topic_route(self, topic: str) -> TopicRouteData | None:
        """`pickupTopicRouteData`: None unless the topic has queues on at least one known broker."""
        per_broker = self.topic_queue_table.get(topic)
        if not per_broker:
            return None
        broker_datas: list[BrokerData] = []
        filter_servers: dict[str, tuple[str, ...]] = {}
        for name in sorted(per_broker):
            entry = self.broker_addr_table.get(name)
            if entry is None:
                continue
            broker_datas.append(entry.to_broker_data())
            if self.filter_server_table:
                for addr in entry.addrs.values():
                    servers = self.filter_server_table.get(addr)
                    if servers is not None:
                        filter_servers[addr] = servers
        if not broker_datas:
            return None
        return TopicRouteData(tuple(per_broker.values()), tuple(broker_datas), filter_servers)

    def cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            {name: entry.to_broker_data() for name, entry in sorted(self.broker_addr_table.items())},
            {cluster: tuple(sorted(names)) for cluster, names in sorted(self.cluster_addr_table.items())},
        )

    def all_topics(self) -> list[str]:
        return sorted(self.topic_queue_table)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        """Topics with queues on any broker of `cluster` (an unknown cluster has none)."""
        names = self.cluster_addr_table.get(cluster, set())
        return sorted(t for t, per_broker in self.topic_queue_table.items() if names & per_broker.keys())

    def system_topics(self) -> tuple[list[str], str | None]:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS: cluster and broker names (each is a topic the broker creates),
        plus one broker address so the caller can ask that broker for its own system topics."""
        topics: list[str] = []
        for cluster, names in sorted(self.cluster_addr_table.items()):
            topics.append(cluster)
            topics.extend(sorted(names))
        broker_addr = next(
            (entry.addrs[min(entry.addrs)] for entry in self.broker_addr_table.values() if entry.addrs), None
        )
        return list(dict.fromkeys(topics)), broker_addr

    def _topics_by_flag(self, predicate: Callable[[int], bool]) -> list[str]:
        # Java looks at the first QueueData only; all brokers of a topic carry the same flag.
        return sorted(
            topic
            for topic, per_broker in self.topic_queue_table.items()
            if per_broker and predicate(next(iter(per_broker.values())).topic_sys_flag)
        )

    def unit_topics(self) -> list[str]:
        return self._topics_by_flag(lambda flag: flag & FLAG_UNIT == FLAG_UNIT)

    def has_unit_sub_topics(self) -> list[str]:
        return self._topics_by_flag(lambda flag: flag & FLAG_UNIT_SUB == FLAG_UNIT_SUB)

    def has_unit_sub_ununit_topics(self) -> list[str]:
        return self._topics_by_flag(
            lambda flag: flag & FLAG_UNIT != FLAG_UNIT and flag & FLAG_UNIT_SUB == FLAG_UNIT_SUB
        )

    def broker_addrs_of(self, conn: Closable) -> list[str]:
        """Broker addresses registered over `conn` (diagnostics, tests)."""
        return [addr for addr, live in self.broker_live_table.items() if live.conn is conn]
