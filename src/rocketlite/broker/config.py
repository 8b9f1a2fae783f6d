"""`BrokerConfig`: the broker's own settings, with RocketMQ's `broker.conf` key names and defaults.

Store settings live in `StoreConfig`; both are built from the same properties file.

The broker's components share one `BrokerConfig` and read it on every use, so a change made at
run time (UPDATE_BROKER_CONFIG, `live_config.LiveConfig`) takes effect on the next request, as
in Java, where the config objects are mutable. Here only the `LIVE_BROKER_FIELDS` are: every
field is set once, by the constructor, and assigning any other one later raises
`FrozenInstanceError`. (The store's config is frozen whole: the store takes a new one,
`MessageStore.apply_live_settings`.)
"""

from __future__ import annotations

import enum
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Final

from rocketlite.broker.auth.manager import parse_user_json
from rocketlite.config import config_keys, require
from rocketlite.protocol.bodies.assignment import MessageRequestMode

# BrokerConfig field names that may change at run time (read on every use, or pushed on change).
LIVE_BROKER_FIELDS: Final = frozenset(
    {
        "broker_permission",
        "auto_create_topic_enable",
        "auto_create_subscription_group",
        "default_topic_queue_nums",
        "long_polling_enable",
        "short_polling_time_mills",
        "transaction_timeout",
        "transaction_check_max",
        "transaction_check_interval",
        "reject_transaction_message",
        "flush_consumer_offset_interval",
        "channel_expired_timeout",
        "notify_consumer_ids_changed_enable",
        "region_id",
        "trace_on",
        "slow_put_warning_ms",
        "register_broker_timeout_mills",
        "ha_master_address",
        "ha_max_gap_not_in_sync",
        "ha_send_heartbeat_interval",
        "ha_housekeeping_interval",
        "ha_transfer_batch_size",
        "slave_read_enable",
        "access_message_in_memory_max_ratio",
        "enable_property_filter",
        "filter_support_retry",
        "store_reply_message_enable",
    }
)


class MetricsExporterType(enum.Enum):
    """RocketMQ 5's `metricsExporterType`; rocketlite serves DISABLE and PROM."""

    DISABLE = "DISABLE"
    OTLP_GRPC = "OTLP_GRPC"
    PROM = "PROM"
    LOG = "LOG"


class GrpcServerImpl(enum.Enum):
    """The 5.x endpoint's HTTP/2 server (rocketlite's own key, `grpcServerImpl`): the compiled
    core over libnghttp2 on the broker's loop (the default; grpc.aio where it is not built), or
    grpcio's `grpc.aio`, the reference."""

    GRPCIO = "grpcio"
    NGHTTP2 = "nghttp2"


class BrokerRole(enum.Enum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


@dataclass(slots=True)
class BrokerConfig:
    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = 0
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    namesrv_addr: str | None = None
    listen_port: int = 10911
    listen_host: str = "0.0.0.0"
    broker_ip1: str = field(default="127.0.0.1", metadata={"key": "brokerIP1", "aliases": ("brokerIp1",)})
    ha_listen_port: int = 0  # 0: listenPort + 1 (an ephemeral port when listenPort is 0)
    # The 5.x gRPC endpoint (broker/grpc/); 0: off; an ephemeral port when listenPort is 0.
    grpc_server_port: int = 8081
    # Which server serves it: the compiled HTTP/2 core (remoting/h2) or grpc.aio (the reference).
    grpc_server_impl: GrpcServerImpl = GrpcServerImpl.NGHTTP2
    # A gRPC connection with no call open this long is ended with GOAWAY (RocketMQ proxy's key and
    # default: its Netty server's maxConnectionIdle), so a client that vanished without a FIN does
    # not hold the connection forever; the clients reconnect on their next call.
    grpc_client_idle_time_mills: int = 120_000
    # TLS on the gRPC endpoint (RocketMQ proxy's key names): both PEM paths set, TLS only; else plaintext.
    tls_cert_path: str | None = None
    tls_key_path: str | None = None
    # HA (replication); RocketMQ keeps these in MessageStoreConfig, broker.conf names them alike.
    ha_master_address: str | None = None  # a slave's master HA address; else from the name server
    ha_max_gap_not_in_sync: int = 256 * 1024 * 1024
    ha_send_heartbeat_interval: int = 5000
    ha_housekeeping_interval: int = 20_000
    ha_transfer_batch_size: int = 32 * 1024
    slave_read_enable: bool = False
    access_message_in_memory_max_ratio: int = 40
    broker_permission: int = 6
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 8
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    register_name_server_period: int = 30_000
    register_broker_timeout_mills: int = 6000
    force_register: bool = True
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1000
    long_polling_check_interval_ms: int = 5000
    transaction_timeout: int = field(default=6000, metadata={"key": "transactionTimeOut"})
    transaction_check_max: int = 15
    transaction_check_interval: int = 60_000
    reject_transaction_message: bool = False
    lite_pull_message_enable: bool = True  # false: LITE_PULL_MESSAGE (361) answers NO_PERMISSION
    # QUERY_ASSIGNMENT (400): the broker balances; false: every client gets every queue
    server_load_balancer_enable: bool = True
    default_message_request_mode: MessageRequestMode = MessageRequestMode.PULL  # a group with no 401 mode
    default_pop_share_queue_num: int = -1  # POP: <= 0 every client POPs every queue
    flush_consumer_offset_interval: int = 5000
    channel_expired_timeout: int = 120_000
    notify_consumer_ids_changed_enable: bool = True
    use_server_side_reset_offset: bool = True  # false: a reset is relayed to consumers (220)
    acl_enable: bool = False
    acl_config_file: str | None = None  # plain_acl.yml; default $ROCKETMQ_HOME/conf/plain_acl.yml
    # ACL 2.0 (RocketMQ 5.3's AuthConfig keys; broker/auth/): users and ACLs in config/auth.json
    authentication_enabled: bool = False
    authorization_enabled: bool = False
    authentication_whitelist: str | None = None  # remoting codes / gRPC request types, comma-separated
    authorization_whitelist: str | None = None
    init_authentication_user: str | None = None  # {"username":..,"password":..}: the first super user
    inner_client_authentication_credentials: str | None = None  # {"accessKey":..,"secretKey":..}
    migrate_auth_from_v1_enabled: bool = False  # import plain_acl.yml (aclConfigFile) on start
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    store_reply_message_enable: bool = True  # replies (324/325) stored in <cluster>_REPLY_TOPIC too
    slow_put_warning_ms: int = 500
    enable_property_filter: bool = False  # SQL92 filters served (PULL, POP, gRPC); off: refused
    filter_support_retry: bool = False  # a retry topic's messages filtered by their topic's SQL92
    filter_data_clean_time_span: int = 24 * 3600 * 1000  # a dead consumer filter is kept this long
    expect_consumer_num_use_filter: int = 32  # bloom filter size of consumerFilter.json entries
    max_error_rate_of_bloom_filter: int = 20  # ... and its error rate in percent (1..99)
    # GET /metrics (broker/metrics/): RocketMQ 5's keys; the host "" is brokerIP1, as in Java
    metrics_exporter_type: MetricsExporterType = MetricsExporterType.DISABLE
    metrics_prom_exporter_host: str = ""
    metrics_prom_exporter_port: int = 5557
    metrics_label: str = ""  # "k1:v1,k2:v2": extra labels on every RocketMQ sample
    metrics_port: int = 0  # rocketlite's older key for the same endpoint; 0 = off
    metrics_host: str = "127.0.0.1"
    max_sync_flush_waiters: int = 10_000  # SYNC_FLUSH sends awaiting the group commit; more: SYSTEM_BUSY
    server_channel_max_idle_time_seconds: int = 120  # a connection silent this long is closed
    server_partial_frame_timeout_millis: int = 30_000  # a frame begun but not finished this long: closed
    # Controller mode (RocketMQ 5.x RIP-44; broker/failover/): the controller decides the role.
    enable_controller_mode: bool = False
    controller_addr: str | None = None  # the controllers' host:port, ';'-separated
    broker_heartbeat_interval: int = 1000  # ms between heartbeats (and replica-info polls)
    controller_heart_beat_timeout_mills: int = 10_000  # lease TTL; a master this long unheard fences
    sync_broker_metadata_period: int = 5000
    check_sync_state_set_period: int = 5000
    ha_max_time_slave_not_catchup: int = 15_000  # SyncStateSet shrink: not caught up this long
    all_ack_in_sync_state_set: bool = False  # a SYNC send waits for every SyncStateSet member
    min_in_sync_replicas: int = 1  # a SYNC send is refused while the SyncStateSet is smaller
    async_learner: bool = False  # this replica replicates but never joins the SyncStateSet
    store_path_epoch_file: str | None = None  # default storePathRootDir/epochFileCheckpoint

    def __post_init__(self) -> None:
        require(1 <= self.listen_port <= 65535 or self.listen_port == 0, "listenPort must be 0..65535")
        require(
            self.listen_port == 0 or self.listen_port > 2,
            "listenPort must be above 2 (VIP port is listenPort-2)",
        )
        require(self.broker_id >= 0, "brokerId must be >= 0")
        require(
            (self.broker_id == 0) == (self.broker_role is not BrokerRole.SLAVE),
            "brokerId 0 is the master: use brokerRole ASYNC_MASTER or SYNC_MASTER; slaves need brokerId >= 1",
        )
        require(self.broker_permission & ~0xF == 0, "brokerPermission must be a PermName bit set (0..15)")
        require(1 <= self.default_topic_queue_nums <= 1024, "defaultTopicQueueNums must be in 1..1024")
        require(bool(self.broker_name) and "%" not in self.broker_name, "brokerName must be set, without '%'")
        require(self.register_name_server_period > 0, "registerNameServerPeriod must be positive")
        require(0 <= self.ha_listen_port <= 65535, "haListenPort must be 0..65535")
        require(0 <= self.metrics_port <= 65535, "metricsPort must be 0..65535")
        require(
            self.metrics_exporter_type in (MetricsExporterType.DISABLE, MetricsExporterType.PROM),
            f"metricsExporterType {self.metrics_exporter_type.value} is not served by rocketlite: "
            "use PROM (Prometheus, GET /metrics) or DISABLE",
        )
        require(0 <= self.metrics_prom_exporter_port <= 65535, "metricsPromExporterPort must be 0..65535")
        require(
            not (self.metrics_port and self.metrics_exporter_type is MetricsExporterType.PROM),
            "metricsPort and metricsExporterType=PROM both serve GET /metrics: set one of them",
        )
        require(0 <= self.grpc_server_port <= 65535, "grpcServerPort must be 0..65535 (0: off)")
        require(self.grpc_client_idle_time_mills > 0, "grpcClientIdleTimeMills must be > 0")
        require(
            bool(self.tls_cert_path) == bool(self.tls_key_path),
            "tlsCertPath and tlsKeyPath go together: set both (TLS on the gRPC endpoint) or neither",
        )
        require(self.max_sync_flush_waiters > 0, "maxSyncFlushWaiters must be positive")
        require(self.server_channel_max_idle_time_seconds > 0, "serverChannelMaxIdleTimeSeconds must be > 0")
        require(self.server_partial_frame_timeout_millis > 0, "serverPartialFrameTimeoutMillis must be > 0")
        require(self.ha_max_gap_not_in_sync > 0, "haMaxGapNotInSync must be positive")
        require(self.ha_send_heartbeat_interval > 0, "haSendHeartbeatInterval must be positive")
        require(
            self.ha_housekeeping_interval > self.ha_send_heartbeat_interval,
            "haHousekeepingInterval must be longer than haSendHeartbeatInterval",
        )
        require(
            4096 <= self.ha_transfer_batch_size <= 64 * 1024 * 1024,
            "haTransferBatchSize must be in 4 KiB..64 MiB",
        )
        require(
            0 <= self.access_message_in_memory_max_ratio <= 100,
            "accessMessageInMemoryMaxRatio must be in 0..100",
        )
        require(
            not (self.acl_enable and (self.authentication_enabled or self.authorization_enabled)),
            "aclEnable (ACL 1.0, plain_acl.yml) and authenticationEnabled/authorizationEnabled (ACL 2.0)"
            " exclude each other: turn aclEnable off (migrateAuthFromV1Enabled=true imports"
            " plain_acl.yml into ACL 2.0)",
        )
        if self.init_authentication_user:
            parse_user_json(self.init_authentication_user, "initAuthenticationUser")
        if self.inner_client_authentication_credentials:
            parse_user_json(
                self.inner_client_authentication_credentials, "innerClientAuthenticationCredentials"
            )
        require(1 <= self.max_error_rate_of_bloom_filter < 100, "maxErrorRateOfBloomFilter must be in 1..99")
        require(self.expect_consumer_num_use_filter > 0, "expectConsumerNumUseFilter must be positive")
        require(self.filter_data_clean_time_span >= 0, "filterDataCleanTimeSpan must not be negative")
        require(self.broker_heartbeat_interval > 0, "brokerHeartbeatInterval must be positive (ms)")
        require(
            self.controller_heart_beat_timeout_mills >= 1000,
            "controllerHeartBeatTimeoutMills must be at least 1000 (ms; etcd leases count whole seconds)",
        )
        require(self.check_sync_state_set_period > 0, "checkSyncStateSetPeriod must be positive (ms)")
        require(self.min_in_sync_replicas >= 1, "minInSyncReplicas must be 1 or more (the master counts)")
        require(self.sync_broker_metadata_period > 0, "syncBrokerMetadataPeriod must be positive (ms)")
        require(self.ha_max_time_slave_not_catchup > 0, "haMaxTimeSlaveNotCatchup must be positive (ms)")
        if self.enable_controller_mode:
            require(bool(self.controller_addrs), "enableControllerMode needs controllerAddr (host:port;...)")
        if self.ha_master_address:
            host, _, port = self.ha_master_address.strip().rpartition(":")
            require(bool(host) and port.isdigit(), "haMasterAddress must be host:port")

    def __setattr__(self, name: str, value: object) -> None:
        """Set once by the constructor; after that, only the live fields (module docstring)."""
        if name not in LIVE_BROKER_FIELDS and hasattr(self, name):
            raise FrozenInstanceError(f"cannot assign to field {name!r}: it changes only with a restart")
        super(BrokerConfig, self).__setattr__(name, value)

    @property
    def metrics_endpoint(self) -> tuple[str, int] | None:
        """(host, port) of GET /metrics, or None when metrics are off."""
        if self.metrics_exporter_type is MetricsExporterType.PROM:
            return (self.metrics_prom_exporter_host or self.broker_ip1, self.metrics_prom_exporter_port)
        if self.metrics_port:
            return (self.metrics_host, self.metrics_port)
        return None

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in (self.namesrv_addr or "").split(";") if a.strip()]

    @property
    def controller_addrs(self) -> list[str]:
        return [a.strip() for a in (self.controller_addr or "").split(";") if a.strip()]

    @property
    def is_slave(self) -> bool:
        return self.broker_role is BrokerRole.SLAVE

    @property
    def effective_register_period_ms(self) -> int:
        """RocketMQ clamps registerNameServerPeriod to 10..60 s."""
        return min(max(self.register_name_server_period, 10_000), 60_000)


def broker_config_keys() -> frozenset[str]:
    """Every broker key a `broker.conf` may set, spelling aliases included (`brokerIp1`); the store
    keys of the same file are `store.config.store_config_keys`. docs/configuration.md names each of them."""
    return frozenset(config_keys(BrokerConfig))
