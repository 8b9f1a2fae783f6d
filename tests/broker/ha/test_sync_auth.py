"""A slave's config sync (SlaveSynchronize) from a master with ACL 2.0 on: signed with
`innerClientAuthenticationCredentials`, the topics, groups and offsets reach the slave; a slave
without them is refused by the master and copies nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rocketlite.broker.config import BrokerRole
from rocketlite.broker.subscription_group import SubscriptionGroupConfig
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.wire.acl_signature import sign
from rocketlite.protocol.wire.command import make_request
from rocketlite.protocol.wire.headers import CreateTopicRequestHeader
from tests.broker.ha.test_inprocess import master_kw, slave_kw
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test

pytestmark = pytest.mark.timeout(60)

ADMIN = ("rocketmq", "12345678")
INNER = ("inner-broker", "inner-secret")
AUTH: dict[str, Any] = {
    "authentication_enabled": True,
    "authorization_enabled": True,
    "init_authentication_user": json.dumps({"username": ADMIN[0], "password": ADMIN[1]}),
}
INNER_KEY = json.dumps({"accessKey": INNER[0], "secretKey": INNER[1]})


async def create_topic(m: BrokerUnderTest, topic: str) -> None:
    ext = CreateTopicRequestHeader(
        topic=topic, default_topic="TBW102", read_queue_nums=3, write_queue_nums=3, perm=6,
        topic_filter_type="SINGLE_TAG", order=False,
    ).to_ext()  # fmt: skip
    request = make_request(RequestCode.UPDATE_AND_CREATE_TOPIC, sign(ext, None, *ADMIN))
    assert (await m.client.invoke(m.addr, request, 5.0)).code == ResponseCode.SUCCESS


@pytest.mark.parametrize("signed", [True, False])
def test_slave_sync_signs_with_the_inner_credentials(tmp_path: Path, signed: bool) -> None:
    async def scenario() -> None:
        master_auth = {**AUTH, "inner_client_authentication_credentials": INNER_KEY}
        slave_auth = master_auth if signed else AUTH
        async with (
            broker_under_test(
                tmp_path / "m", **master_kw(broker_role=BrokerRole.ASYNC_MASTER, **master_auth)
            ) as m,
            broker_under_test(tmp_path / "s", **slave_kw(m, **slave_auth)) as s,
        ):
            ctx = s.controller.parts
            assert ctx is not None and ctx.slave_sync is not None and ctx.ha_slave is not None
            ctx.ha_slave.master_addr = m.addr  # ephemeral ports: not haMasterAddress - 1
            await create_topic(m, "SyncedAuth")
            m.controller.groups.update(SubscriptionGroupConfig("synced_auth_group", retry_max_times=5))
            m.controller.offsets.commit("synced_auth_group", "SyncedAuth", 1, 7)
            assert await ctx.slave_sync.sync_all() is signed
            tc = s.controller.topics.select("SyncedAuth")
            if not signed:  # refused (unsigned): nothing copied
                assert tc is None
                assert s.controller.offsets.query("synced_auth_group", "SyncedAuth", 1) < 0
                return
            assert tc is not None and tc.read_queue_nums == 3
            g = s.controller.groups.find("synced_auth_group")
            assert g is not None and g.retry_max_times == 5
            assert s.controller.offsets.query("synced_auth_group", "SyncedAuth", 1) == 7

    run(scenario())
