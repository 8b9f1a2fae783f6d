"""What the SDK says when it cannot work: the request's name instead of its number, and the
user's topic with the cause instead of TBW102. Real name server processes and sockets."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from rocketlite.client import (
    AsyncPushConsumer,
    BrokerError,
    ClientConfig,
    ClientStateError,
    ConsumeStatus,
    Message,
    NoRouteError,
    Producer,
    PullConsumer,
    PushConsumer,
    RemotingConnectError,
)
from rocketlite.clock import ManualClock
from rocketlite.embedded import embedded
from tests.support.aio import run
from tests.support.lone_namesrv import lone_namesrv
from tests.support.ports import free_port
from tests.support.topics import create_topic


@pytest.mark.parametrize(
    ("addr", "problem"),
    [
        ("127.0.0.1", "'127.0.0.1' has no port"),
        ("127.0.0.1:98760", "'127.0.0.1:98760' has no valid port ('98760' is not 1..65535)"),
        ("127.0.0.1:9876;localhost", "'127.0.0.1:9876;localhost' ('localhost') has no port"),
        ("::1", "'::1' is an IPv6 address without brackets ('[::1]:9876')"),
        (" ; ", "' ; ' names no name server"),
    ],
)
def test_a_name_server_address_without_host_and_port_fails_at_construction(addr: str, problem: str) -> None:
    """At `Producer(...)` (any client, and `ClientConfig`), naming the argument and the form, not
    at the first send with `invalid literal for int()`."""
    form = "give host:port, e.g. '127.0.0.1:9876' (several name servers: separated by ';')"
    for make in (
        lambda: Producer("pg_err_addr", addr),
        lambda: PushConsumer("cg_err_addr", addr),
        lambda: PullConsumer("cg_err_addr", addr),
        lambda: ClientConfig(addr),
    ):
        with pytest.raises(ClientStateError) as caught:
            make()
        assert str(caught.value) == f"namesrv_addr {problem}: {form}"
    for fine in ("127.0.0.1:9876;", "localhost:9876", "[::1]:9876", "a:1; b:2"):
        ClientConfig(fine)


def test_name_server_down_names_the_request() -> None:
    addr = f"127.0.0.1:{free_port()}"  # nothing listens there
    producer = Producer("pg_err_down", addr)
    producer.start()
    try:
        with pytest.raises(RemotingConnectError) as caught:
            producer.send(Message("TopicTest", b"x"))
    finally:
        producer.close()
    assert str(caught.value) == f"GET_ROUTEINFO_BY_TOPIC (105) to {addr} failed: connection refused"


def test_no_broker_registered_names_the_topic_and_the_cause(tmp_path: Path) -> None:
    with lone_namesrv(tmp_path) as addr:
        producer = Producer("pg_err_nobroker", addr)
        producer.start()
        try:
            with pytest.raises(NoRouteError) as caught:
                producer.send(Message("TopicTest", b"x"))
        finally:
            producer.close()
    text = str(caught.value)
    assert text.startswith(
        f"no route for topic TopicTest: no broker is registered with the name server {addr}"
    ), text
    assert "TBW102" not in text


def test_topic_missing_without_auto_create_says_how_to_create_it() -> None:
    with embedded(auto_create_topic_enable=False) as cluster:
        producer = Producer("pg_err_noauto", cluster.namesrv_addr)
        producer.start()
        try:
            with pytest.raises(NoRouteError) as caught:
                producer.send(Message("NoSuchTopicErr", b"x"))
        finally:
            producer.close()
    text = str(caught.value)
    assert text.startswith(f"no route for topic NoSuchTopicErr: the name server {cluster.namesrv_addr}")
    assert "autoCreateTopicEnable=false" in text
    assert "`rocketlite admin updateTopic -c DefaultCluster -t NoSuchTopicErr`" in text


def test_rebalance_failure_is_said_once_with_the_name_server(caplog: pytest.LogCaptureFixture) -> None:
    addr = f"127.0.0.1:{free_port()}"
    consumer = PushConsumer("cg_err_down", addr)
    consumer.subscribe("TopicTest", "*")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS)
    with caplog.at_level(logging.DEBUG, logger="rocketlite.client.rebalance"):
        consumer.start()
        try:
            repeats = 0
            deadline = time.monotonic() + 10
            while repeats < 3 and time.monotonic() < deadline:  # retries back off: 0.2 s, 0.4 s, ...
                repeats = sum("failed again" in r.getMessage() for r in caplog.records)
                time.sleep(0.1)
        finally:
            consumer.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    first = [w for w in warnings if w.startswith("rebalance of group cg_err_down")]
    assert len(first) == 1, warnings
    assert f"GET_ROUTEINFO_BY_TOPIC (105) to {addr} failed: connection refused" in first[0]
    assert f"; name servers {addr};" in first[0]
    assert repeats >= 3  # the repeats went to DEBUG


def test_the_broker_port_given_as_the_name_server_says_so() -> None:
    """The broker answers GET_ROUTEINFO_BY_TOPIC with REQUEST_CODE_NOT_SUPPORTED (3); the SDK says
    which address answered as a broker instead of `request type 105 not supported`. A real name
    server later in the list is still used."""
    with embedded() as cluster:
        broker = cluster.broker_addr
        expected = (
            f"{broker} answered as a broker, not a name server "
            "(GET_ROUTEINFO_BY_TOPIC (105) not supported): point the name server address at the "
            "name server's port (9876 by default), not the broker's"
        )
        with Producer("pg_err_brokerport", broker) as producer, pytest.raises(BrokerError) as caught:
            producer.send(Message("TopicTest", b"x"))
        assert str(caught.value) == expected
        assert caught.value.response_code == 3  # REQUEST_CODE_NOT_SUPPORTED
        with PullConsumer("cg_err_brokerport", broker) as reader, pytest.raises(BrokerError) as caught:
            reader.fetch_queues("TopicTest")
        assert str(caught.value) == expected
        with Producer("pg_err_brokerport2", f"{broker};{cluster.namesrv_addr}") as producer:
            for _ in range(2):  # whichever of the two is tried first
                assert producer.send(Message("TopicTest", b"x")).status.name == "SEND_OK"


def test_a_subscribed_topic_without_route_is_warned_at_start_and_every_30_s(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A push consumer of a misspelt topic does not wait in silence: a WARNING at start naming the
    topic and the name server, again each time 30 s of its clock have passed, none once the topic
    exists. The clock is the SDK's (`clock=`), moved by hand: nothing waits 30 s."""
    clock = ManualClock()
    with embedded() as cluster:
        ns = cluster.namesrv_addr

        def warnings() -> list[str]:
            return [
                r.getMessage()
                for r in caplog.records
                if r.levelno == logging.WARNING and r.name == "rocketlite.client.rebalance"
            ]

        async def main() -> None:
            consumer = AsyncPushConsumer("cg_err_noroute", ns, clock=clock)
            consumer.subscribe("QuikStart", "*")
            consumer.register_message_listener(lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS)
            await consumer.start()
            try:
                assert warnings() == [
                    f"consumer group cg_err_noroute subscribes to QuikStart, which has no route: no "
                    f"route for topic QuikStart: the name server {ns} knows no such topic (brokers "
                    "broker-a); create it with `rocketlite admin updateTopic -c DefaultCluster -t "
                    "QuikStart`; it is consumed once it has one (this warning repeats every 30 s "
                    "until then)"
                ]
                for _ in range(3):
                    await consumer.do_rebalance()
                clock.advance(29_999)
                await consumer.do_rebalance()
                assert len(warnings()) == 1
                clock.advance(1)
                await consumer.do_rebalance()
                assert len(warnings()) == 2 and warnings()[0] == warnings()[1]
                await asyncio.to_thread(create_topic, cluster, "QuikStart")
                await consumer.do_rebalance()
                clock.advance(60_000)
                await consumer.do_rebalance()
                assert len(warnings()) == 2
                assert any(m.endswith("topic QuikStart has a route now") for m in caplog.messages)
            finally:
                await consumer.close()

        with caplog.at_level(logging.INFO, logger="rocketlite.client"):
            run(main())
