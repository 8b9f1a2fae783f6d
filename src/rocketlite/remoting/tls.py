"""TLS on the remoting protocol, with RocketMQ's keys (`TlsSystemConfig`, `TlsHelper`, `TlsMode`).

The same keys serve the name server and the broker (their properties files, or the file named by
`tls.config.file`, whose values win, as Java's `TlsHelper.extractTlsConfigFromFile` makes them):

- `tls.server.mode`: `disabled` (plaintext only: a TLS handshake is not understood and the
  connection closes), `permissive` (the default: both, told apart by the first byte a client
  sends, 0x16 opening a TLS handshake record, as Netty's `TlsModeHandler` in RocketMQ does) or
  `enforcing` (TLS only: a plaintext connection is closed). Without `tls.server.certPath` and
  `tls.server.keyPath` a permissive server serves plaintext only; an enforcing one is refused.
- `tls.server.certPath` / `keyPath` / `keyPassword`: the server's PEM certificate chain and key.
- `tls.server.need.client.auth`: `none` (the default), `optional` or `require` (mutual TLS). A
  client certificate is verified against `tls.server.trustCertPath`, so the two come together
  (Java may accept any client certificate with `tls.server.authClient=false`; Python's `ssl`
  cannot, so rocketlite always verifies).
- client side (a broker registering with TLS name servers, and the SDK's `use_tls`):
  `tls.enable` (the broker's outbound connections use TLS), `tls.test.mode.enable` (default true:
  the server is not verified and no client certificate is sent, Java's test mode),
  `tls.client.authServer` (verify the server against `tls.client.trustCertPath`),
  `tls.client.certPath` / `keyPath` / `keyPassword` (the client certificate, sent when test mode
  is off). Host names are not checked, as Netty's `SslContext` does not by default.

Java reads these as JVM system properties; rocketlite reads them from the config files. The
self-signed certificate Java's server makes in test mode is not made here: a TLS server needs its
certificate files.
"""

from __future__ import annotations

import enum
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from rocketlite.config import build_config, config_keys, load_properties, require
from rocketlite.protocol.errors import ConfigError

TLS_HANDSHAKE_RECORD: Final = 0x16  # the content type of a TLS record that opens a handshake


class TlsMode(enum.Enum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


class ClientAuth(enum.Enum):
    NONE = "none"
    OPTIONAL = "optional"
    REQUIRE = "require"


def _key(name: str) -> dict[str, str]:
    return {"key": name}


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """The `tls.*` keys (RocketMQ's names and defaults)."""

    server_mode: TlsMode = field(default=TlsMode.PERMISSIVE, metadata=_key("tls.server.mode"))
    enable: bool = field(default=False, metadata=_key("tls.enable"))
    test_mode_enable: bool = field(default=True, metadata=_key("tls.test.mode.enable"))
    config_file: str | None = field(default=None, metadata=_key("tls.config.file"))
    server_need_client_auth: ClientAuth = field(
        default=ClientAuth.NONE, metadata=_key("tls.server.need.client.auth")
    )
    server_key_path: str | None = field(default=None, metadata=_key("tls.server.keyPath"))
    server_key_password: str | None = field(default=None, repr=False, metadata=_key("tls.server.keyPassword"))
    server_cert_path: str | None = field(default=None, metadata=_key("tls.server.certPath"))
    server_auth_client: bool = field(default=False, metadata=_key("tls.server.authClient"))
    server_trust_cert_path: str | None = field(default=None, metadata=_key("tls.server.trustCertPath"))
    client_key_path: str | None = field(default=None, metadata=_key("tls.client.keyPath"))
    client_key_password: str | None = field(default=None, repr=False, metadata=_key("tls.client.keyPassword"))
    client_cert_path: str | None = field(default=None, metadata=_key("tls.client.certPath"))
    client_auth_server: bool = field(default=False, metadata=_key("tls.client.authServer"))
    client_trust_cert_path: str | None = field(default=None, metadata=_key("tls.client.trustCertPath"))

    def __post_init__(self) -> None:
        require(
            bool(self.server_cert_path) == bool(self.server_key_path),
            "tls.server.certPath and tls.server.keyPath go together: set both or neither",
        )
        require(
            self.server_mode is not TlsMode.ENFORCING or bool(self.server_cert_path),
            "tls.server.mode=enforcing needs tls.server.certPath and tls.server.keyPath",
        )
        require(
            self.server_need_client_auth is ClientAuth.NONE or bool(self.server_trust_cert_path),
            f"tls.server.need.client.auth={self.server_need_client_auth.value} needs "
            "tls.server.trustCertPath (the CA client certificates are verified against)",
        )
        require(
            bool(self.client_cert_path) == bool(self.client_key_path),
            "tls.client.certPath and tls.client.keyPath go together: set both or neither",
        )

    @property
    def serves_tls(self) -> bool:
        """The server takes TLS connections (permissive with a certificate, or enforcing)."""
        return self.server_mode is not TlsMode.DISABLED and bool(self.server_cert_path)


def tls_config_keys() -> set[str]:
    return config_keys(TlsConfig)


def load_tls_config(props: dict[str, str]) -> TlsConfig:
    """`TlsConfig` from a server's properties, the `tls.config.file` (if named) overriding them."""
    name = props.get("tls.config.file", "").strip()
    merged = dict(props)
    if name:
        merged.update(load_properties(Path(name).expanduser()))
    return build_config(TlsConfig, merged)


def _load_chain(ctx: ssl.SSLContext, cert: str, key: str, password: str | None, what: str) -> None:
    try:
        ctx.load_cert_chain(cert, key, password)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{what}: cannot load certificate {cert} with key {key}: {exc}") from exc


def _load_trust(ctx: ssl.SSLContext, path: str, key: str) -> None:
    try:
        ctx.load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{key}: cannot load trusted certificates from {path}: {exc}") from exc


def server_context(cfg: TlsConfig) -> ssl.SSLContext | None:
    """The server side's context, or None when the server takes no TLS (`serves_tls` false)."""
    if not cfg.serves_tls or cfg.server_cert_path is None or cfg.server_key_path is None:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_chain(
        ctx, cfg.server_cert_path, cfg.server_key_path, cfg.server_key_password, "tls.server.certPath"
    )
    if cfg.server_trust_cert_path:
        _load_trust(ctx, cfg.server_trust_cert_path, "tls.server.trustCertPath")
    ctx.verify_mode = {
        ClientAuth.NONE: ssl.CERT_NONE,
        ClientAuth.OPTIONAL: ssl.CERT_OPTIONAL,
        ClientAuth.REQUIRE: ssl.CERT_REQUIRED,
    }[cfg.server_need_client_auth]
    return ctx


def client_context(cfg: TlsConfig) -> ssl.SSLContext:
    """The client side's context (`TlsHelper.buildSslContext(true)`): in test mode the server is
    not verified and no certificate is sent; else the server is verified when
    `tls.client.authServer` and the client certificate, if set, is sent."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    if cfg.test_mode_enable or not cfg.client_auth_server:
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx.verify_mode = ssl.CERT_REQUIRED
        if cfg.client_trust_cert_path:
            _load_trust(ctx, cfg.client_trust_cert_path, "tls.client.trustCertPath")
        else:
            ctx.load_default_certs()
    if not cfg.test_mode_enable and cfg.client_cert_path and cfg.client_key_path:
        _load_chain(
            ctx, cfg.client_cert_path, cfg.client_key_path, cfg.client_key_password, "tls.client.certPath"
        )
    return ctx


@dataclass(frozen=True, slots=True)
class ServerTls:
    """What a `RemotingServer` needs: the mode and the context (None: plaintext only)."""

    mode: TlsMode
    context: ssl.SSLContext | None

    @classmethod
    def of(cls, cfg: TlsConfig) -> ServerTls:
        return cls(cfg.server_mode, server_context(cfg))
