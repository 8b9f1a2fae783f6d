"""TLS on the remoting ports of the name server and the broker (remoting/tls.py), with our SDK:
enforcing, permissive (TLS and plaintext side by side), mutual TLS, and the config's refusals."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import pytest

from rocketlite.client import AsyncProducer, AsyncPullConsumer, ClientError, Message, SendStatus
from rocketlite.config import build_config
from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.bodies.route import TopicConfig
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.errors import ConfigError
from rocketlite.protocol.wire.command import make_request
from rocketlite.protocol.wire.frame import FrameDecoder, encode_command
from rocketlite.remoting.tls import ClientAuth, TlsConfig, TlsMode, load_tls_config
from tests.support.aio import run
from tests.support.certs import Certs, make_certs
from tests.support.names import unique
from tests.support.sdk import wait_messages, wait_route

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def server_tls(certs: Certs, mode: TlsMode, **kw: object) -> TlsConfig:
    settings: dict[str, object] = {
        "server_mode": mode,
        "enable": True,  # the broker registers with the (TLS) name server over TLS
        "server_cert_path": str(certs.server_cert),
        "server_key_path": str(certs.server_key),
        **kw,
    }
    return TlsConfig(**settings)  # type: ignore[arg-type]


def round_trip(cluster: EmbeddedCluster, n: int, **client: object) -> list[bytes]:
    """n messages sent and read back through the SDK with the given client options."""
    topic = unique("Tls")
    cluster.broker.topics.update(TopicConfig(topic, 1, 1))  # routed with the next registration

    async def main() -> list[bytes]:
        async with (
            AsyncProducer(unique("tp"), cluster.namesrv_addr, **client) as producer,  # type: ignore[arg-type]
            AsyncPullConsumer(unique("tc"), cluster.namesrv_addr, heartbeat=False, **client) as reader,  # type: ignore[arg-type]
        ):
            await wait_route(reader, topic)
            for i in range(n):
                result = await producer.send(Message(topic, f"m{i}".encode()))
                assert result.status is SendStatus.SEND_OK
            return [m.body for m in await wait_messages(reader, topic, n)]

    return run(main())


def plain_request(addr: str) -> tuple[int | None, bytes]:
    """One GET_BROKER_RUNTIME_INFO in plaintext: (response code or None if closed, bytes read)."""
    host, _, port = addr.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(encode_command(make_request(RequestCode.GET_BROKER_RUNTIME_INFO, opaque=1)))
        data = b""
        decoder = FrameDecoder(16 << 20)
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:  # closed with our request unread
                chunk = b""
            if not chunk:
                return None, data
            data += chunk
            for cmd in decoder.feed(chunk):
                return cmd.code, data


def tls_handshake(addr: str, ctx: ssl.SSLContext) -> str:
    host, _, port = addr.rpartition(":")
    with (
        socket.create_connection((host, int(port)), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname=host) as tls,
    ):
        tls.sendall(encode_command(make_request(RequestCode.GET_BROKER_RUNTIME_INFO, opaque=1)))
        decoder = FrameDecoder(16 << 20)
        while True:
            chunk = tls.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            for cmd in decoder.feed(chunk):
                assert cmd.code == ResponseCode.SUCCESS
                return str(tls.version())


def insecure() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def test_enforcing_serves_tls_clients_and_closes_plaintext_ones(tmp_path: Path, certs: Certs) -> None:
    with embedded(tmp_path / "store", tls=server_tls(certs, TlsMode.ENFORCING)) as c:
        assert round_trip(c, 3, use_tls=True) == [b"m0", b"m1", b"m2"]
        assert plain_request(c.broker_addr)[0] is None  # closed without an answer
        assert plain_request(c.namesrv_addr)[0] is None
        assert tls_handshake(c.broker_addr, insecure()).startswith("TLS")
        with pytest.raises(ClientError):  # the SDK without TLS cannot reach the name server
            run(_send_plain(c))


async def _send_plain(c: EmbeddedCluster) -> None:
    async with AsyncProducer(unique("plain"), c.namesrv_addr) as producer:
        await producer.send(Message(unique("TlsPlain"), b"x"))


def test_permissive_serves_both(tmp_path: Path, certs: Certs) -> None:
    with embedded(tmp_path / "store", tls=server_tls(certs, TlsMode.PERMISSIVE, enable=False)) as c:
        assert round_trip(c, 2, use_tls=True) == [b"m0", b"m1"]
        assert round_trip(c, 2) == [b"m0", b"m1"]
        assert plain_request(c.broker_addr)[0] == ResponseCode.SUCCESS
        assert tls_handshake(c.broker_addr, insecure()).startswith("TLS")


def test_client_verifies_the_server_against_its_trusted_ca(tmp_path: Path, certs: Certs) -> None:
    with embedded(tmp_path / "store", tls=server_tls(certs, TlsMode.ENFORCING)) as c:
        verified = TlsConfig(
            test_mode_enable=False, client_auth_server=True, client_trust_cert_path=str(certs.ca)
        )
        assert round_trip(c, 1, use_tls=True, tls=verified) == [b"m0"]
        wrong = TlsConfig(
            test_mode_enable=False, client_auth_server=True, client_trust_cert_path=str(certs.stranger_cert)
        )
        with pytest.raises(ClientError):
            round_trip(c, 1, use_tls=True, tls=wrong)


def test_mutual_tls_requires_a_client_certificate_of_the_trusted_ca(tmp_path: Path, certs: Certs) -> None:
    server = server_tls(
        certs,
        TlsMode.ENFORCING,
        server_need_client_auth=ClientAuth.REQUIRE,
        server_trust_cert_path=str(certs.ca),
        test_mode_enable=False,  # the broker's own registration sends its client certificate
        client_cert_path=str(certs.client_cert),
        client_key_path=str(certs.client_key),
    )
    with embedded(tmp_path / "store", tls=server) as c:
        with_cert = TlsConfig(
            test_mode_enable=False,
            client_cert_path=str(certs.client_cert),
            client_key_path=str(certs.client_key),
        )
        assert round_trip(c, 2, use_tls=True, tls=with_cert) == [b"m0", b"m1"]
        with pytest.raises(ClientError):  # test mode: no certificate sent
            round_trip(c, 1, use_tls=True)
        stranger = TlsConfig(
            test_mode_enable=False,
            client_cert_path=str(certs.stranger_cert),
            client_key_path=str(certs.stranger_key),
        )
        with pytest.raises(ClientError):
            round_trip(c, 1, use_tls=True, tls=stranger)
        with pytest.raises((ssl.SSLError, ConnectionError)):
            tls_handshake(c.broker_addr, insecure())  # no certificate: the handshake fails


def test_disabled_closes_a_tls_handshake(tmp_path: Path, certs: Certs) -> None:
    with embedded(tmp_path / "store", tls=server_tls(certs, TlsMode.DISABLED, enable=False)) as c:
        assert plain_request(c.broker_addr)[0] == ResponseCode.SUCCESS
        with pytest.raises((ssl.SSLError, ConnectionError)):
            tls_handshake(c.broker_addr, insecure())


def test_config_refusals_name_the_key(tmp_path: Path, certs: Certs) -> None:
    with pytest.raises(ConfigError, match=r"tls\.server\.mode"):
        build_config(TlsConfig, {"tls.server.mode": "strict"})
    with pytest.raises(ConfigError, match=r"tls\.server\.mode=enforcing needs tls\.server\.certPath"):
        build_config(TlsConfig, {"tls.server.mode": "enforcing"})
    with pytest.raises(ConfigError, match=r"tls\.server\.trustCertPath"):
        build_config(
            TlsConfig,
            {
                "tls.server.certPath": str(certs.server_cert),
                "tls.server.keyPath": str(certs.server_key),
                "tls.server.need.client.auth": "require",
            },
        )
    with pytest.raises(ConfigError, match=r"tls\.enable"):
        build_config(TlsConfig, {"tls.enable": "yes"})
    with pytest.raises(ConfigError, match=r"tls\.server\.certPath: cannot load certificate"):
        embedded_bad = server_tls(certs, TlsMode.PERMISSIVE, server_cert_path=str(tmp_path / "missing.pem"))
        with embedded(tmp_path / "store", tls=embedded_bad):
            pass
    # tls.config.file: its values win over the properties file's, as Java's TlsHelper reads them
    (tmp_path / "tls.properties").write_text(
        f"tls.server.mode=enforcing\ntls.server.certPath={certs.server_cert}\n"
    )
    cfg = load_tls_config(
        {
            "tls.config.file": str(tmp_path / "tls.properties"),
            "tls.server.mode": "disabled",
            "tls.server.keyPath": str(certs.server_key),
        }
    )
    assert cfg.server_mode is TlsMode.ENFORCING and cfg.server_cert_path == str(certs.server_cert)
