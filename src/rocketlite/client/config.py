"""`ClientConfig`: the settings of a shared `ClientInstance` (Java's `ClientConfig`), ACL keys included.

`access_key` / `secret_key` (and an optional `security_token`) are Java's `SessionCredentials`
handed to an `AclClientRPCHook`: when set, the instance signs every request it sends (see
`rocketlite.protocol.wire.acl_signature`), so a broker with `aclEnable=true` lets it through. The
secret is left out of the repr. Producers and consumers take the same keys as keyword arguments
(`AsyncProducer("pg", ns, access_key=..., secret_key=...)`), which `make_config` turns into a
config.

`use_tls` is Java's `ClientConfig.setUseTLS(true)`: every connection (name servers and brokers)
uses TLS, set up by `tls` (the `tls.client.*` keys and `tls.test.mode.enable` of
`rocketlite.remoting.tls.TlsConfig`; by default Java's test mode: the server is not verified and no
client certificate is sent).

`clock` is the instance's time: the milliseconds in the message ids (UNIQ_KEY) its producers make
and the interval of its consumers' warnings. Tests pass a `ManualClock` to set it to any instant.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TypedDict

from rocketlite.client.errors import ClientStateError
from rocketlite.clock import SYSTEM_CLOCK, Clock
from rocketlite.protocol.wire.acl_signature import SessionCredentials
from rocketlite.remoting.tls import TlsConfig

__all__ = ["ClientConfig", "ClientOptions", "check_namesrv_addr", "make_config"]

_ADDR_FORM = "give host:port, e.g. '127.0.0.1:9876' (several name servers: separated by ';')"


def check_namesrv_addr(namesrv_addr: str) -> None:
    """Raise `ClientStateError` naming the argument unless every `;`-separated entry is
    `host:port` (`[v6 address]:port`). Java takes no default port either: an address without one
    would only fail at the first request, with a parse error that names neither."""
    entries = [a.strip() for a in namesrv_addr.split(";") if a.strip()]
    if not entries:
        raise ClientStateError(f"namesrv_addr {namesrv_addr!r} names no name server: {_ADDR_FORM}")
    for entry in entries:
        host, colon, port = entry.rpartition(":")
        if not colon or not host:
            problem = "has no port"
        elif not port.isdigit() or not 0 < int(port) < 65536:
            problem = f"has no valid port ({port!r} is not 1..65535)"
        elif ":" in host and not (host.startswith("[") and host.endswith("]")):
            problem = "is an IPv6 address without brackets ('[::1]:9876')"
        else:
            continue
        where = "" if entry == namesrv_addr.strip() else f" ({entry!r})"
        raise ClientStateError(f"namesrv_addr {namesrv_addr!r}{where} {problem}: {_ADDR_FORM}")


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Settings of the shared instance (the first client to create it decides; Java's `ClientConfig`)."""

    namesrv_addr: str
    instance_name: str = "DEFAULT"
    client_ip: str | None = None
    request_timeout: float = 3.0
    poll_name_server_interval: float = 30.0
    heartbeat_broker_interval: float = 30.0
    persist_consumer_offset_interval: float = 5.0
    rebalance_interval: float = 20.0
    unit_name: str | None = None
    # Plain ACL (AclClientRPCHook + SessionCredentials): sign every request with these keys.
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    security_token: str | None = field(default=None, repr=False)
    # TLS (Java's setUseTLS and the tls.client.* system properties)
    use_tls: bool = False
    tls: TlsConfig | None = None
    clock: Clock = field(default=SYSTEM_CLOCK, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_namesrv_addr(self.namesrv_addr)
        if self.tls is not None and not self.use_tls:
            raise ClientStateError("tls= sets up TLS connections: pass use_tls=True with it")
        if (self.access_key is None) != (self.secret_key is None):
            raise ClientStateError("access_key and secret_key must be given together")
        if self.security_token is not None and self.access_key is None:
            raise ClientStateError("security_token needs access_key and secret_key")

    @property
    def credentials(self) -> SessionCredentials | None:
        """The ACL keys requests are signed with, or None (requests go unsigned)."""
        if self.access_key is None or self.secret_key is None:
            return None
        return SessionCredentials(self.access_key, self.secret_key, self.security_token)

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    def resolved_instance_name(self) -> str:
        return str(os.getpid()) if self.instance_name == "DEFAULT" else self.instance_name


class ClientOptions(TypedDict, total=False):
    """The config keywords every producer and consumer takes (`**options: Unpack[ClientOptions]`).

    Spelled out once here rather than in each client's signature; `make_config` gives the defaults.
    """

    config: ClientConfig | None
    instance_name: str
    access_key: str | None
    secret_key: str | None
    security_token: str | None
    use_tls: bool
    tls: TlsConfig | None
    clock: Clock


def make_config(
    namesrv_addr: str | None,
    config: ClientConfig | None = None,
    *,
    instance_name: str = "DEFAULT",
    access_key: str | None = None,
    secret_key: str | None = None,
    security_token: str | None = None,
    use_tls: bool = False,
    tls: TlsConfig | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> ClientConfig:
    """A producer's or consumer's `ClientConfig`: `config`, else one built from the arguments."""
    if config is not None:
        if access_key is not None or secret_key is not None or security_token is not None:
            raise ClientStateError("pass the ACL keys in config= or as access_key=/secret_key=, not both")
        if clock is not SYSTEM_CLOCK:
            raise ClientStateError("pass the clock in config= or as clock=, not both")
        if use_tls or tls is not None:
            raise ClientStateError("pass use_tls/tls in config= or as keywords, not both")
        return config
    if not namesrv_addr:
        raise ClientStateError("namesrv_addr is required")
    return ClientConfig(
        namesrv_addr,
        instance_name=instance_name,
        access_key=access_key,
        secret_key=secret_key,
        security_token=security_token,
        use_tls=use_tls,
        tls=tls,
        clock=clock,
    )
