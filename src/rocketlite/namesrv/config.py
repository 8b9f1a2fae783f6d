"""`NamesrvConfig`: the name server's settings, with RocketMQ's key names and defaults.

Built once at the edge from a `namesrv.conf` properties file (`rocketlite.config.build_config`) and
passed to `NameServer`; nothing else in the name server reads configuration. Keys follow RocketMQ's
`NamesrvConfig` / `NettyServerConfig` where those exist (`listenPort`, `kvConfigPath`,
`orderMessageEnable`, `clusterTest`, `scanNotActiveBrokerInterval`). The broker expiry, a constant
(`BROKER_CHANNEL_EXPIRED_TIME`) in 4.x, is configurable here as `brokerChannelExpiredTime`.

This object is never updated over the wire: UPDATE_NAMESRV_CONFIG (318) is refused, because a
remote config write is what CVE-2023-37582 exploited (`configStorePath` / `kvConfigPath`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from rocketlite.config import config_keys, key_of, require

DEFAULT_LISTEN_PORT = 9876
BROKER_CHANNEL_EXPIRED_TIME_MS = 120_000  # 4.x `RouteInfoManager.BROKER_CHANNEL_EXPIRED_TIME`
SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS = 10_000  # 4.x schedules `scanNotActiveBroker` every 10 s


def default_kv_config_path() -> Path:
    """Java's `user.home/namesrv/kvConfig.json`."""
    return Path.home() / "namesrv" / "kvConfig.json"


@dataclass(frozen=True, slots=True)
class NamesrvConfig:
    """Validated at construction; every violation is a `ConfigError` naming the key."""

    listen_port: int = DEFAULT_LISTEN_PORT  # 0 = any free port (tests)
    listen_host: str = field(default="0.0.0.0", metadata={"aliases": ("bindAddress",)})
    broker_expired_ms: int = field(
        default=BROKER_CHANNEL_EXPIRED_TIME_MS, metadata={"key": "brokerChannelExpiredTime"}
    )
    scan_not_active_broker_interval: int = SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS
    order_message_enable: bool = False
    cluster_test: bool = False
    kv_config_path: Path = field(default_factory=default_kv_config_path)
    server_channel_max_idle_time_seconds: int = 120
    server_partial_frame_timeout_millis: int = 30_000
    # Controller mode's controller in this process, on this port (the CLI adds it; its keys, e.g.
    # etcdEndpoints, come from the same file): brokers set controllerAddr to this name server.
    enable_controller_in_namesrv: bool = False

    def __post_init__(self) -> None:
        require(0 <= self.listen_port <= 65535, f"listenPort must be within 0..65535, got {self.listen_port}")
        require(bool(self.listen_host.strip()), "listenHost must not be empty")
        require(
            self.broker_expired_ms > 0,
            f"brokerChannelExpiredTime must be positive (ms), got {self.broker_expired_ms}",
        )
        require(
            self.scan_not_active_broker_interval > 0,
            f"scanNotActiveBrokerInterval must be positive (ms), got {self.scan_not_active_broker_interval}",
        )
        require(
            self.server_partial_frame_timeout_millis > 0,
            f"serverPartialFrameTimeoutMillis must be > 0, got {self.server_partial_frame_timeout_millis}",
        )
        require(
            self.server_channel_max_idle_time_seconds > 0,
            "serverChannelMaxIdleTimeSeconds must be positive, "
            f"got {self.server_channel_max_idle_time_seconds}",
        )
        require(
            self.kv_config_path.name not in ("", ".", ".."),
            f"kvConfigPath must name a file, got {str(self.kv_config_path)!r}",
        )

    def to_properties(self) -> dict[str, str]:
        """`key -> value` text, as GET_NAMESRV_CONFIG (319) reports it."""
        result: dict[str, str] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            text = ("true" if value else "false") if isinstance(value, bool) else str(value)
            result[key_of(f)] = text
        return result


def namesrv_config_keys() -> frozenset[str]:
    """Every key a `namesrv.conf` may set, aliases included (`bindAddress`); docs/configuration.md
    names each."""
    return frozenset(config_keys(NamesrvConfig))
