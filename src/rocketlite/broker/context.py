"""`BrokerContext`: the collaborators a processor module may be wired with, gathered once.

Each processor module exposes `install(ctx, table) -> list[BrokerService]`: it builds its objects
from the collaborators it needs (passing them explicitly to constructors, never the context itself),
registers its request handlers, and returns the background services to start. Modules installed
earlier may publish collaborators for later ones (the client manager, the pull hold service).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.state_files import ConsumerOffsetTable
from rocketlite.broker.stats import BrokerStats
from rocketlite.broker.subscription_group import SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.clock import Clock
from rocketlite.protocol.headers import RegisterBrokerResponseHeader
from rocketlite.protocol.message import HostAddress
from rocketlite.remoting.client import RemotingClient
from rocketlite.store.config import StoreConfig
from rocketlite.store.message_store import MessageStore

if TYPE_CHECKING:
    from rocketlite.broker.client_manager import ClientManager
    from rocketlite.broker.ha.master import HAMasterService
    from rocketlite.broker.ha.slave import HASlaveService
    from rocketlite.broker.ha.sync import SlaveSynchronize
    from rocketlite.broker.live_config import LiveConfig
    from rocketlite.broker.processors.pull import PullMessageProcessor
    from rocketlite.broker.processors.send import SendMessageProcessor
    from rocketlite.broker.rebalance_lock import RebalanceLockManager


class BrokerService(Protocol):
    """A background service owned by the broker (asyncio tasks, threads)."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...


@dataclass
class BrokerContext:
    broker: BrokerConfig
    store_config: StoreConfig
    store: MessageStore
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetTable
    stats: BrokerStats
    clock: Clock
    store_host: HostAddress
    loop: asyncio.AbstractEventLoop
    outbound: RemotingClient
    # Asks the broker to re-register with the name servers soon (topics changed).
    request_register: Callable[[], None] = field(default=lambda: None)
    # Called with the name server's answer to every registration (a slave learns its master).
    register_listeners: list[Callable[[RegisterBrokerResponseHeader], None]] = field(default_factory=list)
    # Published by modules as they are installed:
    send: SendMessageProcessor | None = None
    clients: ClientManager | None = None
    pull: PullMessageProcessor | None = None
    locks: RebalanceLockManager | None = None
    live: LiveConfig | None = None
    ha_port: int = 0  # the bound haListenPort of a master (registered as haServerAddr)
    ha_master: HAMasterService | None = None
    ha_slave: HASlaveService | None = None
    slave_sync: SlaveSynchronize | None = None
