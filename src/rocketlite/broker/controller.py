"""`BrokerController`: builds the broker from its configs, serves it, registers it, stops it.

Start order: open (recover) the store, load topics / subscription groups / consumer offsets, bind
the listening sockets (listenPort and the VIP port listenPort-2; port 0 picks free ports, and the
store host — part of every msgId — is the bound address), build every processor and service
(`_build`: each is given its collaborators as constructor arguments, in one place, so what a send
or a pull depends on is read here), register the request table (`requests.register_requests`),
start the background services by name, serve, and register with every name server (then every
`registerNameServerPeriod`). Close runs it backwards and is idempotent.

The controller is the one supervisor: it owns the services (`services`, by name, started in order
and closed in reverse), the name-server registration (`registration.NameServerRegistrar`, whose
task is `broker-register`) and its own task, `broker-persist`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from rocketlite import native
from rocketlite.broker import acl
from rocketlite.broker.auth.checks import AuthChecks, AuthSettings
from rocketlite.broker.auth.guard import AuthRequestTable
from rocketlite.broker.auth.manager import AuthMetadata, parse_user_json
from rocketlite.broker.auth.migrate import migrate_plain_acl
from rocketlite.broker.auth.processor import AuthAdminProcessor
from rocketlite.broker.auth.store import AuthStore
from rocketlite.broker.client_manager import ClientManager
from rocketlite.broker.config import BrokerConfig, BrokerRole
from rocketlite.broker.consumer_filter import ConsumerFilterManager
from rocketlite.broker.delay.levels import ScheduleMessageService
from rocketlite.broker.delay.timer import TimerMessageService
from rocketlite.broker.failover.epochs import EpochFile, epoch_file_path
from rocketlite.broker.front_doors import grpc_endpoint, metrics_server
from rocketlite.broker.ha.master import HAMasterService, bind_ha_socket, ha_listen_port
from rocketlite.broker.ha.slave import HASlaveService
from rocketlite.broker.ha.status import ha_runtime_info
from rocketlite.broker.ha.sync import SlaveSynchronize, TopicLearner
from rocketlite.broker.live_config import LiveConfig
from rocketlite.broker.metrics import BrokerFigures, BrokerView, FeatureView, MetricsServer, RpcLatency
from rocketlite.broker.pop.processor import PopMessageProcessor
from rocketlite.broker.pop.state import PopService
from rocketlite.broker.processors.admin_catalog import AdminCatalogProcessor
from rocketlite.broker.processors.admin_requests import AdminRequestProcessor, RuntimeStatsSampler
from rocketlite.broker.processors.admin_stats import AdminStatsProcessor
from rocketlite.broker.processors.assignment import MessageRequestModes, QueryAssignmentProcessor
from rocketlite.broker.processors.client_relay import ClientRelayProcessor, ResetOffsetGuard
from rocketlite.broker.processors.client_requests import ClientRequestProcessor
from rocketlite.broker.processors.consumer_offset import ConsumerOffsetProcessor
from rocketlite.broker.processors.consumer_send_back import ConsumerSendBackProcessor
from rocketlite.broker.processors.pull import PullMessageProcessor
from rocketlite.broker.processors.query import QueryMessageProcessor
from rocketlite.broker.processors.reply import ReplyMessageProcessor
from rocketlite.broker.processors.send import ReplicaWaiter, SendMessageProcessor
from rocketlite.broker.rebalance_lock import RebalanceLockManager
from rocketlite.broker.registration import NameServerRegistrar
from rocketlite.broker.requests import register_requests
from rocketlite.broker.state_files import ConsumerOffsetTable
from rocketlite.broker.stats import BrokerStats
from rocketlite.broker.stats_items import BrokerStatsItems, StatsSampler
from rocketlite.broker.subscription_group import SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.broker.transaction import TransactionalMessageService
from rocketlite.clock import SYSTEM_CLOCK, Clock
from rocketlite.protocol.message import HostAddress
from rocketlite.protocol.wire.acl_signature import SessionCredentials
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import RequestTable, not_supported
from rocketlite.remoting.server import RemotingServer, check_ports_free
from rocketlite.remoting.tls import ServerTls, TlsConfig, client_context
from rocketlite.store.api import StoreAPI
from rocketlite.store.config import FlushDiskType, StoreConfig
from rocketlite.store.message_store import MessageStore

if TYPE_CHECKING:
    from rocketlite.broker.grpc.endpoint import GrpcEndpoint

log = logging.getLogger("rocketlite.broker")


class BrokerService(Protocol):
    """A background service owned by the broker (asyncio tasks, threads)."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...


class SyncStateReplica(ReplicaWaiter, BrokerService, Protocol):
    """Controller mode: what a master's SYNC sends wait on instead of the HA service (the
    SyncStateSet keeper, broker/failover/sync_state.py), a service of the broker as well."""


# Controller mode's hooks (broker/failover/node.py): the keeper of a master's SyncStateSet, built
# over its HA service; and a call made once the store is recovered, before anything is served.
ReplicaFactory = Callable[[HAMasterService, StoreAPI], SyncStateReplica]
BeforeServing = Callable[[StoreAPI], None]


@dataclass(frozen=True, slots=True)
class BrokerParts:
    """Every processor and service of a started broker, as `BrokerController._build` made them.

    The last five exist only for some roles or settings: `ha_master` on a master (ASYNC_MASTER,
    SYNC_MASTER), `ha_slave` and `slave_sync` on a slave, `metrics` when `metricsPort` is set,
    `grpc` (the 5.x endpoint) on a master when `grpcServerPort` is not 0 and grpcio is installed.
    """

    clients: ClientManager
    client_requests: ClientRequestProcessor
    send: SendMessageProcessor
    pull: PullMessageProcessor
    pop: PopMessageProcessor
    offsets: ConsumerOffsetProcessor
    locks: RebalanceLockManager
    send_back: ConsumerSendBackProcessor
    schedule: ScheduleMessageService
    transactions: TransactionalMessageService
    query: QueryMessageProcessor
    runtime_stats: RuntimeStatsSampler
    admin: AdminRequestProcessor
    live: LiveConfig
    catalog: AdminCatalogProcessor
    admin_stats: AdminStatsProcessor
    relay: ClientRelayProcessor
    resets: ResetOffsetGuard
    stats_sampler: StatsSampler
    ha_master: HAMasterService | None
    ha_slave: HASlaveService | None
    slave_sync: SlaveSynchronize | None
    metrics: MetricsServer | None
    grpc: GrpcEndpoint | None = None
    reply: ReplyMessageProcessor | None = None  # 324/325 (request-reply)
    assignment: QueryAssignmentProcessor | None = None  # 400/401 (server-side assignment)
    timer: TimerMessageService | None = None  # 5.x timer messages; None with timerWheelEnable=false
    sync_state: SyncStateReplica | None = None  # controller mode, on a master

    def services(self) -> dict[str, BrokerService]:
        """The background services by name, in start order (closed in reverse)."""
        named: dict[str, BrokerService | None] = {
            "pop": self.pop,  # first started, last closed: its log is closed after the others
            "client-housekeeping": self.clients,
            "pull-hold": self.pull.hold,
            "schedule": self.schedule,
            "timer": self.timer,
            "transaction-check": self.transactions,
            "runtime-stats": self.runtime_stats,
            "stats-items": self.stats_sampler,
            "ha-master": self.ha_master,
            "sync-state": self.sync_state,
            "ha-slave": self.ha_slave,
            "slave-sync": self.slave_sync,
            "metrics": self.metrics,
            "grpc": self.grpc,
        }
        return {name: svc for name, svc in named.items() if svc is not None}


class BrokerController:
    def __init__(
        self,
        broker: BrokerConfig,
        store_config: StoreConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
        replica_factory: ReplicaFactory | None = None,
        before_serving: BeforeServing | None = None,
        tls: TlsConfig | None = None,
        runtime_info: Callable[[], dict[str, str]] | None = None,
        truncated: Callable[[], tuple[int, int]] | None = None,
    ) -> None:
        self.broker = broker
        self.runtime_info = runtime_info  # more GET_BROKER_RUNTIME_INFO fields (controller mode)
        self.truncated = truncated  # controller mode: (messages, bytes) epoch truncation cut
        self.replica_factory = replica_factory
        self.before_serving = before_serving
        self.tls = tls or TlsConfig()
        server_tls = ServerTls.of(self.tls)  # certificate files read (and checked) now
        self.store_config = store_config
        self.clock = clock
        self.store = MessageStore(store_config, clock=clock, master=not broker.is_slave)
        cfg_dir = store_config.config_dir
        self.topics = TopicConfigManager(
            cfg_dir, broker, clock, len(store_config.delay_levels_ms), on_change=self.request_register
        )
        self.groups = SubscriptionGroupManager(
            cfg_dir, clock, auto_create=broker.auto_create_subscription_group
        )
        self.offsets = ConsumerOffsetTable(cfg_dir)
        self.filters = ConsumerFilterManager(cfg_dir, broker, clock)  # consumerFilter.json (SQL92)
        self.request_modes = MessageRequestModes(cfg_dir)  # messageRequestMode.json (401)
        self.stats = BrokerStats(items=BrokerStatsItems(broker.broker_cluster_name, clock))
        self.table = RequestTable(default=not_supported)
        ports = (broker.listen_port, broker.listen_port - 2) if broker.listen_port else (0, 0)
        served = self.table
        self.acl: acl.AclValidator | None = None
        if broker.acl_enable:  # plain ACL in front of every handler (clients' connections only)
            self.acl = acl.AclValidator(acl.default_acl_path(broker.acl_config_file))
            served = acl.AclRequestTable(self.table, self.acl)
        # ACL 2.0: the users and ACLs are always served (AUTH_* codes), checked only when enabled
        self.auth_metadata = AuthMetadata(AuthStore(cfg_dir))
        self.auth = AuthChecks(
            self.auth_metadata,
            AuthSettings.of(
                broker.broker_cluster_name, broker.authentication_enabled, broker.authorization_enabled,
                broker.authentication_whitelist, broker.authorization_whitelist,
            ),
        )  # fmt: skip
        if broker.authentication_enabled or broker.authorization_enabled:
            served = AuthRequestTable(self.table, self.auth)
        # rocketmq_rpc_latency: every answered request timed (only when metrics are served)
        self.rpc_latency = RpcLatency() if broker.metrics_endpoint is not None else None
        if self.rpc_latency is not None:
            served.observer = self.rpc_latency.observe
        self.server = RemotingServer(
            served,
            host=broker.listen_host,
            ports=ports,
            idle_seconds=float(broker.server_channel_max_idle_time_seconds),
            partial_frame_seconds=broker.server_partial_frame_timeout_millis / 1000,
            tls=server_tls,
        )
        # tls.enable: the broker's own connections (name servers, a slave's master) use TLS.
        self.outbound = RemotingClient(
            self.table, ssl_context=client_context(self.tls) if self.tls.enable else None
        )
        self.parts: BrokerParts | None = None  # built by start(), once the store host is known
        self.services: dict[str, BrokerService] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self.registrar = NameServerRegistrar(
            broker, self.topics, self.outbound, lambda: self.address, lambda: self.ha_address
        )
        self._persist_task: asyncio.Task[None] | None = None
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
        # HA: a master's bound HA port once built, else the configured / default one.
        master = self.parts.ha_master if self.parts is not None else None
        bound = master.port if master is not None else 0
        ha_port = bound or self.broker.ha_listen_port or self.port + 1
        return f"{self.broker.broker_ip1}:{ha_port}"

    async def reload(self) -> None:
        """Re-read topics.json (SIGHUP to `rocketlite broker`): live_config.LiveConfig.reload_topics."""
        if self.parts is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.parts.live.reload_topics)

    def fixed_endpoints(self) -> list[tuple[str, int]]:
        """The (host, port) pairs this broker will listen on that are fixed by its config: remoting
        and VIP, a master's HA port, metrics (the gRPC endpoint only logs a taken port)."""
        b = self.broker
        out = [(b.listen_host, port) for port in self.server.requested_ports]
        if not b.is_slave:
            out.append((b.listen_host, ha_listen_port(b.ha_listen_port, b.listen_port, b.listen_port)))
        metrics = b.metrics_endpoint
        if metrics is not None:
            out.append(metrics)
        return out

    async def start(self) -> None:
        native.warn_if_missing()
        # A port in use stops the start before the store is created and preallocated (a second
        # `rocketlite dev` used to leave a new 129 MB store behind).
        check_ports_free(self.fixed_endpoints())
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
        if self.before_serving is not None:
            self.before_serving(self.store)
        self.topics.start()
        self.groups.start()
        self.offsets.load()
        self._init_auth()
        self.filters.load()
        self.request_modes.load()
        self.server.bind()
        store_host = HostAddress.of(self.broker.broker_ip1, self.port)
        parts = self._build(loop, store_host)
        self.parts = parts
        self._loop = loop
        register_requests(
            self.table,
            send=parts.send,
            pull=parts.pull,
            pop=parts.pop,
            query=parts.query,
            offsets=parts.offsets,
            send_back=parts.send_back,
            clients=parts.client_requests,
            locks=parts.locks,
            transactions=parts.transactions,
            schedule=parts.schedule,
            admin=parts.admin,
            live=parts.live,
            catalog=parts.catalog,
            admin_stats=parts.admin_stats,
            relay=parts.relay,
            resets=parts.resets,
            auth=AuthAdminProcessor(self.auth_metadata),
            reply=parts.reply,
            assignment=parts.assignment,
        )
        self.services = parts.services()
        for name, svc in self.services.items():
            log.debug("starting %s", name)
            await svc.start()
        await self.server.start()
        self.started = True
        if parts.ha_slave is not None:  # HA: a slave learns its master's addresses from each answer
            self.registrar.on_result = parts.ha_slave.on_register_result
        await self.registrar.start()
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

    def _init_auth(self) -> None:
        """ACL 2.0's first users, as RocketMQ creates them on start: `initAuthenticationUser` and
        `innerClientAuthenticationCredentials` as super users if missing, then, with
        `migrateAuthFromV1Enabled`, the accounts of plain_acl.yml (`aclConfigFile`)."""
        b = self.broker
        for text, key in (
            (b.init_authentication_user, "initAuthenticationUser"),
            (b.inner_client_authentication_credentials, "innerClientAuthenticationCredentials"),
        ):
            if text and self.auth_metadata.init_user(*parse_user_json(text, key)):
                log.info("%s: super user created", key)
        if b.migrate_auth_from_v1_enabled:
            migrate_plain_acl(acl.default_acl_path(b.acl_config_file), self.auth_metadata)

    # -- wiring -----------------------------------------------------------------------------
    def _build(self, loop: asyncio.AbstractEventLoop, store_host: HostAddress) -> BrokerParts:
        """Every processor and service, each with its collaborators; the store's arrival
        listeners (long polling, HA) are subscribed here too."""
        b, store, topics, groups, offsets, stats, clock = (
            self.broker, self.store, self.topics, self.groups, self.offsets, self.stats, self.clock
        )  # fmt: skip
        filters = self.filters
        clients = ClientManager(b, topics, groups, clock, filters=filters)
        resets = ResetOffsetGuard(store, offsets)
        pull = PullMessageProcessor(
            b, store, topics, groups, clients, offsets, stats, loop, filters, resets.answer_reset
        )
        store.add_arrival_listener(pull.hold.on_arrival)
        store.dispatch_on(loop)  # sends' dispatch rounds run on this loop
        schedule = ScheduleMessageService(
            store, stats, clock, store_host, self.store_config.config_dir, self.store_config.delay_levels_ms,
            enabled=not b.is_slave,
        )  # fmt: skip
        schedule.load()
        timer: TimerMessageService | None = None
        if self.store_config.timer_wheel_enable:
            timer = TimerMessageService(
                store, topics, stats, clock, store_host, self.store_config.config_dir,
                enabled=not b.is_slave,
            )  # fmt: skip
            timer.load()
        pop_service = PopService(
            store, offsets, clock, self.store_config.config_dir, b.broker_name,
            sync_flush=self.store_config.flush_disk_type is FlushDiskType.SYNC_FLUSH,
        )  # fmt: skip
        pop_service.load()
        pop = PopMessageProcessor(b, pop_service, topics, groups)
        store.add_arrival_listener(pop.on_arrival)  # wakes held POPs
        transactions = TransactionalMessageService(
            b, store, topics, offsets, stats, clock, store_host,
            clients.producer_channels,  # 4.x connections and 5.x Telemetry streams alike
        )  # fmt: skip
        ha_master: HAMasterService | None = None
        ha_slave: HASlaveService | None = None
        slave_sync: SlaveSynchronize | None = None
        if b.is_slave:
            ha_slave = HASlaveService(
                store, b, on_refused=self._refused_by_master, request_register=self.request_register
            )
            slave = ha_slave
            slave_sync = SlaveSynchronize(
                self.outbound, topics, groups, offsets, self.store_config.config_dir,
                lambda: slave.master_addr, on_topics_changed=self.request_register,
                credentials=self._inner_credentials(),
            )  # fmt: skip
            store.add_arrival_listener(TopicLearner(topics, b.default_topic_queue_nums))
        else:
            port = ha_listen_port(b.ha_listen_port, b.listen_port, store_host.port)
            ha_master = HAMasterService(store, b, bind_ha_socket(b.listen_host, port), loop)
            store.add_arrival_listener(ha_master.on_dispatch)
        replica: ReplicaWaiter | None = ha_master if b.broker_role is BrokerRole.SYNC_MASTER else None
        sync_state: SyncStateReplica | None = None
        if ha_master is not None and self.replica_factory is not None:
            sync_state = self.replica_factory(ha_master, store)
            replica = sync_state
        live = LiveConfig(
            b, store, topics, groups, clock, self.request_register,
            listeners=(ha_slave.on_config_change,) if ha_slave is not None else (),
        )  # fmt: skip
        send = SendMessageProcessor(
            b, store, topics, groups, stats, clock, store_host,
            half_message_hook=transactions.to_half_message,
            timer_hook=timer.park if timer is not None else None,
            replica=replica,
        )  # fmt: skip
        figures = BrokerFigures(b, store, stats, offsets, clients)
        runtime_stats = RuntimeStatsSampler(store, clock)
        ha = ha_master or ha_slave

        def extra_runtime_info() -> dict[str, str]:
            more = self.runtime_info() if self.runtime_info is not None else {}
            return {**(ha.runtime_info() if ha is not None else {}), **figures.runtime_figures(), **more}

        admin = AdminRequestProcessor(
            b, self.store_config, store, topics, groups, offsets, clock, runtime_stats, clients,
            extra_runtime_info,
        )  # fmt: skip
        addr = f"{b.broker_ip1}:{store_host.port}"
        admin_stats = AdminStatsProcessor(
            b, store, topics, groups, offsets, clients, stats.items, addr,
            lambda: ha_runtime_info(b, store.max_phy_offset, ha_master, ha_slave),
        )  # fmt: skip
        return BrokerParts(
            catalog=AdminCatalogProcessor(b, store, topics, groups, offsets, clients, addr),
            admin_stats=admin_stats,
            relay=ClientRelayProcessor(b, store, topics, groups, offsets, clients),
            resets=resets,
            stats_sampler=StatsSampler(stats.items),
            clients=clients,
            client_requests=ClientRequestProcessor(clients),
            send=send,
            pull=pull,
            pop=pop,
            offsets=ConsumerOffsetProcessor(store, offsets),
            locks=RebalanceLockManager(clock),
            send_back=ConsumerSendBackProcessor(b, store, topics, groups, stats, store_host),
            schedule=schedule,
            timer=timer,
            transactions=transactions,
            query=QueryMessageProcessor(store),
            runtime_stats=runtime_stats,
            admin=admin,
            live=live,
            ha_master=ha_master,
            ha_slave=ha_slave,
            slave_sync=slave_sync,
            sync_state=sync_state,
            metrics=metrics_server(
                BrokerView(
                    b,
                    store,
                    stats,
                    topics,
                    groups,
                    clients,
                    offsets,
                    clock,
                    rpc=self.rpc_latency,
                    send_waiters=lambda: send.flush_waiters,
                ),
                FeatureView(b, timer, pop_service, transactions, self._epoch_reader(), self.truncated),
                figures,
            ),
            grpc=grpc_endpoint(
                b,
                self.store_config,
                topics,
                groups,
                send,
                pop,
                transactions,
                clients,
                acl=self.acl,
                auth=self.auth if b.authentication_enabled or b.authorization_enabled else None,
            ),
            reply=ReplyMessageProcessor(
                b, store, stats, clock, store_host, msg_check=send.msg_check, find_client=clients.find_channel
            ),
            assignment=QueryAssignmentProcessor(
                b,
                topics,
                clients,
                self.request_modes,
                self.registrar.route_of if b.namesrv_addrs else None,
            ),
        )

    def _inner_credentials(self) -> SessionCredentials | None:
        """innerClientAuthenticationCredentials: what the broker signs its own requests to other
        brokers with (a slave's sync from its master)."""
        text = self.broker.inner_client_authentication_credentials
        if not text:
            return None
        return SessionCredentials(*parse_user_json(text, "innerClientAuthenticationCredentials"))

    def _epoch_reader(self) -> Callable[[], int] | None:
        """In controller mode, what `rocketlite_broker_epoch` reads: the epoch file's last epoch."""
        if not self.broker.enable_controller_mode:
            return None
        path = epoch_file_path(self.broker.store_path_epoch_file, self.store_config.store_path_root_dir)

        return lambda: EpochFile(path).last_epoch

    def _refused_by_master(self, reason: str) -> None:
        """The HA slave's master refused it (its log diverged; called from the replication thread):
        stop serving reads by setting brokerPermission to 0 (see broker/ha/)."""
        parts, loop = self.parts, self._loop
        if parts is not None and loop is not None:
            loop.call_soon_threadsafe(
                parts.live.set_broker_permission, 0, f"diverged from the master: {reason}"
            )

    def request_register(self) -> None:
        """Called when topics change: register with the name servers at once (from any thread)."""
        self.registrar.request_register()

    async def _persist_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.broker.flush_consumer_offset_interval / 1000)
            try:
                await loop.run_in_executor(None, self._persist_configs)
            except Exception:
                log.exception("persisting consumer offsets failed")

    def _persist_configs(self) -> None:
        """Consumer offsets every round; consumer filters when they changed; topics and groups
        when a write of theirs failed."""
        self.offsets.persist()
        self.filters.persist_if_changed()
        self.topics.persist_if_dirty()
        self.groups.persist_if_dirty()

    # -- shutdown ---------------------------------------------------------------------------
    async def close(self) -> None:
        await self._close(persist=True)

    async def _close(self, *, persist: bool) -> None:
        if self.closed:
            return
        self.closed = True
        self.registrar.cancel()
        if self._persist_task is not None:
            self._persist_task.cancel()
        if self.started:
            await self.registrar.unregister_all()
        # Services first, while connections are open: held pulls get their answers.
        for name, svc in reversed(self.services.items()):
            try:
                await svc.close()
            except Exception:
                log.exception("closing the broker service %s failed", name)
        await self.server.close()
        await self.outbound.close()
        loop = asyncio.get_running_loop()
        if persist:
            await loop.run_in_executor(None, self.offsets.persist)
            await loop.run_in_executor(None, self.filters.persist_if_changed)
        await loop.run_in_executor(None, self.store.shutdown)
        log.info("broker %s stopped", self.broker.broker_name)
