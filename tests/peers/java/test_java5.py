"""The RocketMQ 5.3.3 remoting client (rocketmq-client 5.x from Maven Central) against rocketlite:
what the 4.9.8 suite (test_java4.py) cannot reach, 5.x timer messages and POP consumption
(tests/peers/java/src/rocketlite/peers/Scenarios5.java)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.bodies.assignment import MessageRequestMode
from rocketlite.protocol.message import MessageConst
from rocketlite.protocol.reserved import TIMER_TOPIC
from tests.support.foreign_clients.java import JavaClients, events, received
from tests.support.foreign_clients.real import stored
from tests.support.names import unique
from tests.support.topics import create_topic

pytestmark = pytest.mark.timeout(120)

LINE = "client5"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path / "store") as c:
        yield c


def test_timer_message_deliver_time(cluster: EmbeddedCluster, java: JavaClients) -> None:
    """Message.setDeliverTimeMs: parked in rmq_sys_wheel_timer, delivered at (not before) its time."""
    topic = unique("J5Timer")
    create_topic(cluster, topic)
    cp = java.run(LINE, "timer", cluster.namesrv_addr, topic=topic, group=unique("j5t"), delayMs=3000)
    sent = {s["body"]: s for s in events(cp, "sent")}
    got = {m["body"]: m for m in received(cp)}
    timed = got["timed"]
    assert timed["msgId"] == sent["timed"]["msgId"] and timed["topic"] == topic
    assert timed["storeTimestamp"] >= sent["timed"]["deliverAt"], timed
    assert timed["receivedAt"] >= sent["timed"]["deliverAt"]
    # the message without a time was stored at once, not held with the timed one. (The order of
    # receipt says nothing: a consumer that starts after the deliver time finds both waiting, in
    # queues pulled on their own, and got "now" 3 ms after "timed" once.)
    assert got["now"]["storeTimestamp"] < sent["timed"]["deliverAt"], got["now"]
    assert timed["properties"]["TIMER_DELIVER_MS"] == str(sent["timed"]["deliverAt"])
    parked = [r for q in range(4) for r in stored(cluster, TIMER_TOPIC, q)]
    uniq = [r.get_property(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) for r in parked]
    assert sent["timed"]["msgId"] in uniq


def test_pop_with_broker_rebalance(tmp_path: Path, java: JavaClients) -> None:
    """DefaultMQPushConsumer.setClientRebalance(false): the broker assigns the queues (QUERY_ASSIGNMENT),
    in POP mode (defaultMessageRequestMode=POP) every client pops every queue (queueId -1); each
    message arrives once and carries the POP_CK handle."""
    with embedded(tmp_path / "store", default_message_request_mode=MessageRequestMode.POP) as c:
        topic = unique("J5Pop")
        create_topic(c, topic)
        cp = java.run(LINE, "pop", c.namesrv_addr, topic=topic, group=unique("j5p"), n=4)
        sent = [s["msgId"] for s in events(cp, "sent")]
        got = received(cp)
        assert Counter(m["msgId"] for m in got) == Counter(sent)
        assert all(m["properties"].get("POP_CK") for m in got), got
