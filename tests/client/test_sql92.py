"""SQL92 selectors in the SDK (`MessageSelector.by_sql`), end to end against an embedded cluster:
push and pull consumers get only the messages whose properties match; a malformed expression
raises before anything is sent, naming the error; a push consumer of a broker without
`enablePropertyFilter` fails to start with the broker's answer (CHECK_CLIENT_CONFIG)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rocketlite.client import (
    AsyncProducer,
    AsyncPullConsumer,
    AsyncPushConsumer,
    BrokerSystemError,
    ConsumeFromWhere,
    Message,
    MessageSelector,
    SubscriptionParseError,
)
from rocketlite.embedded import EmbeddedCluster, embedded
from tests.client.test_consumer import create_topic, ok_listener
from tests.support.aio import run
from tests.support.names import unique
from tests.support.sdk import Collector

PRICES = [5, 50, 500, 42, 7, 120]  # message i has price PRICES[i], tag TagA for even i else TagB
EXPRESSION = "price BETWEEN 10 AND 200 OR (TAGS = 'TagA' AND price < 6)"
WANTED = [b"m0", b"m1", b"m3", b"m5"]


@pytest.fixture(scope="module")
def sql_cluster() -> Iterator[EmbeddedCluster]:
    with embedded(enable_property_filter=True) as c:
        yield c


def messages(topic: str) -> list[Message]:
    return [
        Message(topic, f"m{i}".encode(), tags="TagA" if i % 2 == 0 else "TagB", properties={"price": str(p)})
        for i, p in enumerate(PRICES)
    ]


def test_a_malformed_expression_raises_naming_the_error() -> None:
    with pytest.raises(SubscriptionParseError) as info:
        MessageSelector.by_sql("price >")
    assert info.value.response_code == 23 and "line 1, column 8" in str(info.value)
    with pytest.raises(SubscriptionParseError, match="only numbers"):
        MessageSelector.by_sql("price > 'cheap'")
    assert MessageSelector.by_sql("a > 1").expression_type == "SQL92"
    assert MessageSelector.by_tag("TagA").expression_type == "TAG"


def test_push_consumer_with_an_sql92_selector(sql_cluster: EmbeddedCluster) -> None:
    topic, group = unique("SdkSql"), unique("cg")

    async def main() -> None:
        got = Collector()
        # from the first offset: a new group reading from the last one may start past "last" when
        # it asks for its offset while that queue is still empty, then reads the end once it is not
        consumer = AsyncPushConsumer(
            group, sql_cluster.namesrv_addr, instance_name="sql-push",
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )  # fmt: skip
        consumer.subscribe(topic, MessageSelector.by_sql(EXPRESSION))
        consumer.register_message_listener(ok_listener(got))
        async with AsyncProducer(unique("pg"), sql_cluster.namesrv_addr) as producer:
            queues = await create_topic(producer, topic)  # "create" has no price: never delivered
            await consumer.start()
            await producer.send_batch(messages(topic), queue=queues[0])
            await producer.send(Message(topic, b"last", properties={"price": "100"}), queue=queues[1])
            await got.wait_for(lambda items: len(items) >= len(WANTED) + 1)
            await consumer.close()
        assert sorted(m.body for m in got.items) == sorted([*WANTED, b"last"])

    run(main(), timeout=60)


def test_pull_consumer_with_an_sql92_selector(sql_cluster: EmbeddedCluster) -> None:
    topic = unique("SdkSqlPull")

    async def main() -> None:
        async with AsyncProducer(unique("pg"), sql_cluster.namesrv_addr) as producer:
            queues = await create_topic(producer, topic)
            await producer.send_batch(messages(topic), queue=queues[0])
            async with AsyncPullConsumer(unique("cg"), sql_cluster.namesrv_addr, heartbeat=False) as pc:
                selector = MessageSelector.by_sql(EXPRESSION)
                result = await pc.fetch(queues[0], 0, 32, expression=selector)
                assert [m.body for m in result.messages] == WANTED
                pc.assign([queues[0]], MessageSelector.by_sql("price > 100"))
                pc.seek(queues[0], 0)
                assert [m.body for m in await pc.poll(2)] == [b"m2", b"m5"]

    run(main(), timeout=60)


def test_push_consumer_refused_by_a_broker_without_property_filter() -> None:
    topic = unique("SdkSqlOff")

    async def main(namesrv: str) -> None:
        async with AsyncProducer(unique("pg"), namesrv) as producer:
            await create_topic(producer, topic)
        consumer = AsyncPushConsumer(unique("cg"), namesrv, instance_name="sql-off")
        consumer.subscribe(topic, MessageSelector.by_sql("price > 1"))
        consumer.register_message_listener(ok_listener(Collector()))
        with pytest.raises(BrokerSystemError, match="does not support consumer to filter message by SQL92"):
            await consumer.start()

    with embedded() as off:
        run(main(off.namesrv_addr), timeout=60)
