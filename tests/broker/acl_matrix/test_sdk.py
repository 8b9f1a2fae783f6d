"""The full ACL matrix through rocketlite.client (see the package docstring)."""

from __future__ import annotations

import asyncio
import json
import re
import uuid

import pytest

from rocketlite.broker.subscription_group import SubscriptionGroupConfig
from rocketlite.client import ClientConfig, Message, NoPermissionError, PullStatus
from rocketlite.client.instance import ClientInstance
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.headers import CreateTopicRequestHeader
from tests.broker.acl_matrix.matrix import (
    ADMIN_OPS,
    CREDS,
    G_DENY,
    G_SUB,
    NO_PERMISSION,
    OK,
    AclCluster,
    admin_cases,
    body_of,
    read_back,
    reason,
    resource_cases,
    sdk_producer,
    sdk_puller,
)

pytestmark = pytest.mark.timeout(120)


# -- rocketlite.client: the full matrix ----------------------------------------------------------------
def expect_refusal(exc: NoPermissionError, pattern: str) -> None:
    assert exc.response_code == NO_PERMISSION
    remark = str(exc).removeprefix("NO_PERMISSION (16): ")
    assert re.fullmatch(pattern, remark), f"remark {remark!r} does not match {pattern!r}"


@pytest.mark.parametrize(("creds_name", "op", "topic", "outcome"), resource_cases())
def test_sdk_resource_matrix(
    acl_cluster: AclCluster, creds_name: str, op: str, topic: str, outcome: str
) -> None:
    cluster = acl_cluster.cluster
    creds = CREDS[creds_name]
    group = G_DENY if op == "pull G_DENY" else G_SUB
    pattern = (
        "" if outcome == OK else reason(outcome, topic=topic, group=group, access_key=creds.access_key or "")
    )

    async def scenario() -> None:
        if op == "send":
            body = body_of(f"{creds_name}-{topic}")
            async with sdk_producer(cluster, creds) as producer:
                if outcome != OK:
                    with pytest.raises(NoPermissionError) as info:
                        await producer.send(Message(topic, body))
                    expect_refusal(info.value, pattern)
                    return
                result = await producer.send(Message(topic, body))
            assert await read_back(cluster, result.queue, result.queue_offset) == body
            return
        queue, offset, seeded = acl_cluster.seeds[topic]
        async with sdk_puller(cluster, creds, group) as consumer:
            if outcome != OK:
                with pytest.raises(NoPermissionError) as info:
                    await consumer.fetch(queue, offset, 1)
                expect_refusal(info.value, pattern)
                return
            pulled = await consumer.fetch(queue, offset, 1)
        assert pulled.status is PullStatus.FOUND, pulled
        assert [m.body for m in pulled.messages] == [seeded]

    asyncio.run(scenario())


@pytest.mark.parametrize(("creds_name", "op", "outcome"), admin_cases())
def test_sdk_admin_matrix(acl_cluster: AclCluster, creds_name: str, op: str, outcome: str) -> None:
    cluster = acl_cluster.cluster
    creds = CREDS[creds_name]
    code = ADMIN_OPS[op]
    name = f"NEW_{creds_name.replace('-', '_')}_{uuid.uuid4().hex[:6]}"
    if code == RequestCode.UPDATE_AND_CREATE_TOPIC:
        ext = CreateTopicRequestHeader(
            topic=name, default_topic="TBW102", read_queue_nums=4, write_queue_nums=4, perm=6,
            topic_filter_type="SINGLE_TAG", topic_sys_flag=0, order=False,
        ).to_ext()  # fmt: skip
        body = None
    else:
        ext = {}
        body = json.dumps(SubscriptionGroupConfig(name).to_json_obj()).encode()

    async def scenario() -> RemotingCommand:
        config = ClientConfig(
            cluster.namesrv_addr, instance_name=creds.instance_name,
            access_key=creds.access_key, secret_key=creds.secret_key,
        )  # fmt: skip
        instance = await ClientInstance.acquire(config)
        try:
            return await instance.invoke(cluster.broker_addr, instance.command(code, ext, body))
        finally:
            await instance.release()

    response = asyncio.run(scenario())
    broker = cluster.broker
    created = (
        broker.topics.select(name)
        if code == RequestCode.UPDATE_AND_CREATE_TOPIC
        else broker.groups.table.get(name)
    )
    if outcome == OK:
        assert response.code == ResponseCode.SUCCESS, response
        assert created is not None
        return
    assert response.code == NO_PERMISSION, response
    pattern = reason(outcome, code=code, access_key=creds.access_key or "")
    assert re.fullmatch(pattern, response.remark or ""), f"remark {response.remark!r} != {pattern!r}"
    assert created is None
