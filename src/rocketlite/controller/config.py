"""`ControllerConfig`: the controller's settings (`rocketlite controller -c FILE`).

RocketMQ's `ControllerConfig` keys where they carry over (`listenPort`, `scanNotActiveBrokerInterval`,
`enableElectUncleanMaster`); the Raft keys of RocketMQ's DLedger/JRaft controller do not, since the
consensus engine here is etcd: `etcdEndpoints` (`host:port` client URLs, `;` or `,` separated) and
`etcdKeyPrefix` (where the controller's keys live) are rocketlite's own. The same keys, with
`enableControllerInNamesrv=true`, run a controller inside `rocketlite namesrv`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rocketlite.config import config_keys, require

DEFAULT_LISTEN_PORT = 9878


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    listen_port: int = DEFAULT_LISTEN_PORT  # 0: any free port (tests)
    listen_host: str = "0.0.0.0"
    controller_addr: str = "127.0.0.1"  # the host this controller reports as its address
    etcd_endpoints: str = "127.0.0.1:2379"
    etcd_key_prefix: str = "/rocketlite/controller"
    scan_not_active_broker_interval: int = 1000  # ms between scans for groups whose master died
    enable_elect_unclean_master: bool = False
    # A broker's lease TTL when its heartbeat does not say (heartbeatTimeoutMills), ms.
    controller_heart_beat_timeout_mills: int = 10_000

    def __post_init__(self) -> None:
        require(0 <= self.listen_port <= 65535, f"listenPort must be within 0..65535, got {self.listen_port}")
        require(bool(self.endpoints), "etcdEndpoints must name at least one host:port")
        for endpoint in self.endpoints:
            host, _, port = endpoint.removeprefix("http://").rpartition(":")
            require(bool(host) and port.isdigit(), f"etcdEndpoints: {endpoint!r} is not host:port")
        require(self.etcd_key_prefix.startswith("/"), "etcdKeyPrefix must start with '/'")
        require(self.scan_not_active_broker_interval > 0, "scanNotActiveBrokerInterval must be positive (ms)")
        require(
            self.controller_heart_beat_timeout_mills >= 1000,
            "controllerHeartBeatTimeoutMills must be at least 1000 (etcd leases count whole seconds)",
        )

    @property
    def endpoints(self) -> list[str]:
        return [e.strip() for e in re.split(r"[;,]", self.etcd_endpoints) if e.strip()]


def controller_config_keys() -> frozenset[str]:
    return frozenset(config_keys(ControllerConfig))
