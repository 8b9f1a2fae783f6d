"""`BrokerController`: builds the broker from its configs, serves it, registers it, stops it.

Start order: open (recover) the store, load topics / subscription groups / consumer offsets, bind
the listening sockets (listenPort and the VIP port listenPort-2; port 0 picks free ports, and the
store host — part of every msgId — is the bound address), install the processor modules, start
their services, serve, and register with every name server (then every
`registerNameServerPeriod`). Close runs it backwards and is idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable

from rocketlite.broker import acl, client_manager, live_config, metrics, rebalance_lock, schedule, transaction
from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.context import BrokerContext, BrokerService
from rocketlite.broker.ha import service as ha
from rocketlite.broker.processors import (
    admin_requests,
    consumer_offset,
    consumer_send_back,
    pull,
    query,
)
from rocketlite.broker.processors.send import SendMessageProcessor
from rocketlite.broker.state_files import ConsumerOffsetTable
from rocketlite.broker.stats import BrokerStats
from rocketlite.broker.subscription_group import SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.clock import SYSTEM_CLOCK, Clock
from rocketlite.protocol import perm
from rocketlite.protocol.bodies import RegisterBrokerBody, TopicConfigSerializeWrapper, register_body_crc32
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import make_request
from rocketlite.protocol.headers import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)
from rocketlite.protocol.message import HostAddress
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import RequestTable, not_supported
from rocketlite.remoting.server import RemotingServer
from rocketlite.store.config import StoreConfig
from rocketlite.store.message_store import MessageStore

log = logging.getLogger("rocketlite.broker")

Installer = Callable[[BrokerContext, RequestTable], list[BrokerService]]

REGISTER_RETRY_S = 3.0  # after a failed registration

# Order matters: later modules use what earlier ones publish on the context.
INSTALLERS: tuple[Installer, ...] = (
    client_manager.install,
    pull.install,
    consumer_offset.install,
    rebalance_lock.install,
    consumer_send_back.install,
    schedule.install,
    transaction.install,
    query.install,
    admin_requests.install,
    live_config.install,  # HA: UPDATE/GET_BROKER_CONFIG, published as ctx.live
    ha.install,  # HA: master service or slave replication + config sync (uses ctx.send, ctx.live)
    metrics.install,  # GET /metrics on metricsPort (0 = off)
)


class BrokerController:
    def __init__(
        self, broker: BrokerConfig, store_config: StoreConfig, *, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.broker = broker
        self.store_config = store_config
        self.clock = clock
        self.store = MessageStore(store_config, clock=clock, master=not broker.is_slave)
        cfg_dir = store_config.config_dir
        self.topics = TopicConfigManager(cfg_dir, broker, clock, len(store_config.delay_levels_ms))
        self.groups = SubscriptionGroupManager(
            cfg_dir, clock, auto_create=broker.auto_create_subscription_group
        )
        self.offsets = ConsumerOffsetTable(cfg_dir)
        self.stats = BrokerStats()
        self.table = RequestTable(default=not_supported)
        ports = (broker.listen_port, broker.listen_port - 2) if broker.listen_port else (0, 0)
        served = self.table
        self.acl: acl.AclValidator | None = None
        if broker.acl_enable:  # plain ACL in front of every handler (clients' connections only)
            self.acl = acl.AclValidator(acl.default_acl_path(broker.acl_config_file))
            served = acl.AclRequestTable(self.table, self.acl)
        self.server = RemotingServer(
            served,
            host=broker.listen_host,
            ports=ports,
            idle_seconds=float(broker.server_channel_max_idle_time_seconds),
            partial_frame_seconds=broker.server_partial_frame_timeout_millis / 1000,
        )
        self.outbound = RemotingClient(self.table)
        self.services: list[BrokerService] = []
        self.context: BrokerContext | None = None
        self._register_task: asyncio.Task[None] | None = None
        self._persist_task: asyncio.Task[None] | None = None
        self._register_soon = asyncio.Event()
        self.started = False
        self.closed = False

    @property
    def port(self) -> int:
        return self.server.ports[0] if self.server.ports else self.broker.listen_port

    @property
    def address(self) -> str:
        return f"{self.broker.broker_ip1}:{self.port}"

    @property
    def ha_address(self) -> str:
        # HA: the master's bound HA port (ha.py) once installed.
        bound = self.context.ha_port if self.context is not None else 0
        ha_port = bound or self.broker.ha_listen_port or self.port + 1
        return f"{self.broker.broker_ip1}:{ha_port}"

    async def reload(self) -> None:
        """Re-read topics.json (SIGHUP to `rocketlite broker`): live_config.LiveConfig.reload_topics."""
        if self.context is not None and self.context.live is not None:
            live = self.context.live
            await asyncio.get_running_loop().run_in_executor(None, live.reload_topics)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.store.start)
        try:
            await self._start_after_store(loop)
        except BaseException:
            # An unreadable config file or a port in use: stop the store cleanly (no abort file
            # left to force an abnormal recovery) and write nothing over the files we could
            # not load.
            await self._close(persist=False)
            raise

    async def _start_after_store(self, loop: asyncio.AbstractEventLoop) -> None:
        self.topics.start()
        self.groups.start()
        self.offsets.load()
        self.server.bind()
        store_host = HostAddress.of(self.broker.broker_ip1, self.port)
        ctx = BrokerContext(
            broker=self.broker,
            store_config=self.store_config,
            store=self.store,
            topics=self.topics,
            groups=self.groups,
            offsets=self.offsets,
            stats=self.stats,
            clock=self.clock,
            store_host=store_host,
            loop=loop,
            outbound=self.outbound,
            request_register=self.request_register,
        )
        self.context = ctx
        send = SendMessageProcessor(
            self.broker, self.store, self.topics, self.groups, self.stats, self.clock, store_host
        )
        send.register(self.table)
        ctx.send = send
        for install in INSTALLERS:
            self.services.extend(install(ctx, self.table))
        self.topics.on_change = self.request_register
        for svc in self.services:
            await svc.start()
        await self.server.start()
        self.started = True
        if self.broker.namesrv_addrs:
            registered = await self.register_all()
            self._register_task = asyncio.create_task(self._register_loop(registered), name="broker-register")
        self._persist_task = asyncio.create_task(self._persist_loop(), name="broker-persist")
        log.info(
            "broker %s (%s, id %d) serving on %s, ports %s, store %s",
            self.broker.broker_name,
            self.broker.broker_role.value,
            self.broker.broker_id,
            self.address,
            self.server.ports,
            self.store_config.store_path_root_dir,
        )

    # -- name server registration -----------------------------------------------------------
    def request_register(self) -> None:
        """Called when topics change: register with the name servers at once (from any thread)."""
        ctx = self.context
        if ctx is not None and not self.closed:
            ctx.loop.call_soon_threadsafe(self._register_soon.set)

    def _register_request(self) -> tuple[RegisterBrokerRequestHeader, bytes]:
        wrapper = self.topics.wrapper()
        broker_perm = self.broker.broker_permission
        if not (perm.is_readable(broker_perm) and perm.is_writeable(broker_perm)):
            # Java's registerBrokerAll: topic permissions are masked by brokerPermission.
            wrapper = TopicConfigSerializeWrapper(
                {name: dataclasses.replace(tc, perm=tc.perm & broker_perm)
                 for name, tc in wrapper.topic_config_table.items()},
                wrapper.data_version,
            )  # fmt: skip
        body = RegisterBrokerBody(wrapper).encode()
        header = RegisterBrokerRequestHeader(
            broker_name=self.broker.broker_name,
            broker_addr=self.address,
            cluster_name=self.broker.broker_cluster_name,
            ha_server_addr=self.ha_address,
            broker_id=self.broker.broker_id,
            compressed=False,
            body_crc32=register_body_crc32(body),
        )
        return header, body

    async def register_all(self) -> bool:
        """Register with every name server; True if all accepted."""
        header, body = self._register_request()
        ok = True
        timeout = self.broker.register_broker_timeout_mills / 1000
        for addr in self.broker.namesrv_addrs:
            request = make_request(RequestCode.REGISTER_BROKER, header.to_ext(), body)
            try:
                response = await self.outbound.invoke(addr, request, timeout)
            except (OSError, TimeoutError) as exc:
                log.warning("register to name server %s failed: %s", addr, exc)
                ok = False
                continue
            if response.code != ResponseCode.SUCCESS:
                log.warning("name server %s refused registration: %s", addr, response.remark)
                ok = False
                continue
            if self.context is not None:  # HA: a slave learns its master's addresses here
                result = RegisterBrokerResponseHeader.from_ext(response.ext_fields)
                for listener in self.context.register_listeners:
                    listener(result)
        return ok

    async def _register_loop(self, registered: bool) -> None:
        period = self.broker.effective_register_period_ms / 1000
        while True:
            # A failed registration is retried soon, not a whole period later: a slave learns
            # its master's address only once the master is registered (HA).
            wait = period if registered else min(period, REGISTER_RETRY_S)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._register_soon.wait(), wait)
            self._register_soon.clear()
            try:
                registered = await self.register_all()
            except Exception:
                registered = False
                log.exception("registration failed")

    async def _unregister_all(self) -> None:
        header = UnregisterBrokerRequestHeader(
            broker_name=self.broker.broker_name,
            broker_addr=self.address,
            cluster_name=self.broker.broker_cluster_name,
            broker_id=self.broker.broker_id,
        )
        for addr in self.broker.namesrv_addrs:
            with contextlib.suppress(OSError, TimeoutError):
                await self.outbound.invoke(
                    addr, make_request(RequestCode.UNREGISTER_BROKER, header.to_ext()), 3
                )

    async def _persist_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.broker.flush_consumer_offset_interval / 1000)
            try:
                await loop.run_in_executor(None, self._persist_configs)
            except Exception:
                log.exception("persisting consumer offsets failed")

    def _persist_configs(self) -> None:
        """Consumer offsets every round; topics and groups when a write of theirs failed."""
        self.offsets.persist()
        self.topics.persist_if_dirty()
        self.groups.persist_if_dirty()

    # -- shutdown ---------------------------------------------------------------------------
    async def close(self) -> None:
        await self._close(persist=True)

    async def _close(self, *, persist: bool) -> None:
        if self.closed:
            return
        self.closed = True
        for task in (self._register_task, self._persist_task):
            if task is not None:
                task.cancel()
        if self.started and self.broker.namesrv_addrs:
            await self._unregister_all()
        # Services first, while connections are open: held pulls get their answers.
        for svc in reversed(self.services):
            try:
                await svc.close()
            except Exception:
                log.exception("closing a broker service failed")
        await self.server.close()
        await self.outbound.close()
        loop = asyncio.get_running_loop()
        if persist:
            await loop.run_in_executor(None, self.offsets.persist)
        await loop.run_in_executor(None, self.store.shutdown)
        log.info("broker %s stopped", self.broker.broker_name)
