"""The RocketMQ 4.9.8 Java client over TLS (`setUseTLS(true)`) against rocketlite's TLS ports.

An embedded name server + broker with `tls.server.mode=enforcing` and certificates made for the
test (tests/support/certs.py). The Java client reads its side from JVM system properties
(`TlsSystemConfig`): `tls.test.mode.enable` (the default, true: any server certificate is trusted
and none is sent), or `tls.client.authServer` / `tls.client.trustCertPath` to verify the server
and `tls.client.certPath` / `keyPath` to send a certificate (mutual TLS). With TLS on, every
connection of the client instance uses it, the name server's as well as the broker's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.bodies.route import TopicConfig
from rocketlite.remoting.tls import ClientAuth, TlsConfig, TlsMode
from tests.support.certs import Certs, make_certs
from tests.support.foreign_clients.java import JavaClients, events, received
from tests.support.foreign_clients.real import ClientProc
from tests.support.names import unique
from tests.support.topics import wait_until

pytestmark = pytest.mark.timeout(120)

LINE = "client4"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def enforcing(certs: Certs, **kw: object) -> TlsConfig:
    settings: dict[str, object] = {
        "server_mode": TlsMode.ENFORCING,
        "enable": True,  # the broker registers with the (TLS-only) name server over TLS
        "server_cert_path": str(certs.server_cert),
        "server_key_path": str(certs.server_key),
        **kw,
    }
    return TlsConfig(**settings)  # type: ignore[arg-type]


@pytest.fixture
def cluster(tmp_path: Path, certs: Certs) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path / "store", tls=enforcing(certs)) as c:
        yield c


def tls_topic(cluster: EmbeddedCluster) -> str:
    """A topic of 4 queues, routed by the name server (looked up in its table: it speaks no plaintext)."""
    topic = unique("JTls")
    cluster.broker.topics.update(TopicConfig(topic, 4, 4))
    routes = cluster.namesrv.route_info
    wait_until(lambda: routes.pick_topic_route(topic) is not None, 15, f"a route for {topic}")
    return topic


def assert_all_received(java: JavaClients, cluster: EmbeddedCluster, jvm: dict[str, str]) -> None:
    topic, group = tls_topic(cluster), unique("jtls")
    cp = java.run(LINE, "push", cluster.namesrv_addr, jvm=jvm, topic=topic, group=group, n=8, tls="true")
    sent = events(cp, "sent")
    assert len(sent) == 8 and all(s["status"] == "SEND_OK" for s in sent)
    assert Counter(m["msgId"] for m in received(cp)) == Counter(s["msgId"] for s in sent)
    assert cluster.broker.offsets.query_all(group, topic) == dict(
        Counter(s["queueId"] for s in sent)
    )  # offsets committed over TLS at shutdown


def test_producer_and_push_consumer_over_tls(cluster: EmbeddedCluster, java: JavaClients) -> None:
    # Test mode (Java's default): the server's certificate is not verified.
    assert_all_received(java, cluster, {"tls.test.mode.enable": "true"})


def test_client_verifies_the_server_against_its_ca(
    cluster: EmbeddedCluster, java: JavaClients, certs: Certs
) -> None:
    verify = {"tls.test.mode.enable": "false", "tls.client.authServer": "true"}
    assert_all_received(java, cluster, {**verify, "tls.client.trustCertPath": str(certs.ca)})
    # Trusting another certificate only: the client refuses the server's, so the lookup fails.
    cp = java.start(
        LINE,
        "produce",
        cluster.namesrv_addr,
        jvm={**verify, "tls.client.trustCertPath": str(certs.stranger_cert)},
        topic=tls_topic(cluster),
        group=unique("jwrong"),
        mode="sync",
        n=1,
        tls="true",
    )
    assert f"<{cluster.namesrv_addr}>" in refused(cp)


def refused(cp: ClientProc) -> str:
    """The driver dies on its first send (its route lookup fails); the first line of why."""
    with pytest.raises(AssertionError, match=r"client4-produce-\d+ died") as died:
        cp.drain(60)
    assert events(cp, "sent") == []
    return str(died.value).split("\n", 1)[0]


def test_a_plaintext_client_cannot_reach_an_enforcing_cluster(
    cluster: EmbeddedCluster, java: JavaClients, caplog: pytest.LogCaptureFixture
) -> None:
    topic = tls_topic(cluster)
    cp = java.start(
        LINE, "produce", cluster.namesrv_addr, topic=topic, group=unique("jplain"), mode="sync", n=1
    )
    error = refused(cp)
    assert f"RemotingSendRequestException: send request to <{cluster.namesrv_addr}> failed" in error
    assert "a plaintext connection, while TLS is enforcing" in caplog.text


def test_mutual_tls(tmp_path: Path, certs: Certs, java: JavaClients) -> None:
    server = enforcing(
        certs,
        server_need_client_auth=ClientAuth.REQUIRE,
        server_trust_cert_path=str(certs.ca),
        test_mode_enable=False,  # the broker's registration sends its client certificate too
        client_cert_path=str(certs.client_cert),
        client_key_path=str(certs.client_key),
    )
    with embedded(tmp_path / "store", tls=server) as c:
        assert_all_received(
            java,
            c,
            {
                "tls.test.mode.enable": "false",
                "tls.client.authServer": "true",
                "tls.client.trustCertPath": str(certs.ca),
                "tls.client.certPath": str(certs.client_cert),
                "tls.client.keyPath": str(certs.client_key),
            },
        )
        # Test mode sends no certificate: the server rejects the handshake, and the route lookup
        # gets no answer (with TLS 1.3 the client learns it only by its request's timeout).
        topic = tls_topic(c)
        cp = java.start(
            LINE,
            "produce",
            c.namesrv_addr,
            topic=topic,
            group=unique("jnocert"),
            mode="sync",
            n=1,
            tls="true",
        )
        error = refused(cp)
        assert f"RemotingTimeoutException: wait response on the channel <{c.namesrv_addr}>" in error
