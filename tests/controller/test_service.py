"""`ControllerService` in this process over a real etcd member (`make etcd`): brokers are remoting
clients sending RocketMQ's controller requests, each on its own connection.

A broker whose connection closes is inactive at once (RocketMQ's `onBrokerChannelClose`): the
master's lease here is a minute long, so only the closed connection can explain the election.
The same test runs against a controller inside a name server (`enableControllerInNamesrv=true`):
there the name server's port answers the controller's requests and reports its closed connections.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rocketlite.cli import build_name_server
from rocketlite.controller.config import ControllerConfig
from rocketlite.controller.service import ControllerService
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.wire.command import make_request
from rocketlite.protocol.wire.controller import (
    AlterSyncStateSetRequestHeader,
    BrokerHeartbeatRequestHeader,
    ControllerRequestCode,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
    SyncStateSet,
)
from rocketlite.remoting.client import RemotingClient
from tests.support import processes
from tests.support.aio import run
from tests.support.controller_mode.cluster import EtcdCluster

NAME = "broker-svc"
MINUTE_MS = 60_000


class Broker:
    """One replica as the controller sees it: heartbeats and requests on its own connection."""

    def __init__(self, controller: str, broker_id: int) -> None:
        self.controller, self.broker_id = controller, broker_id
        self.client = RemotingClient()
        self.addr = f"127.0.0.1:{20000 + broker_id}"

    async def heartbeat(self, max_offset: int = 0) -> None:
        h = BrokerHeartbeatRequestHeader(
            cluster_name="C", broker_addr=self.addr, broker_name=NAME, broker_id=self.broker_id,
            epoch=1, max_offset=max_offset, heartbeat_timeout_mills=MINUTE_MS,
        )  # fmt: skip
        r = await self.client.invoke(
            self.controller, make_request(ControllerRequestCode.BROKER_HEARTBEAT, h.to_ext())
        )
        assert r.code == ResponseCode.SUCCESS, r.remark

    async def register(self) -> GetReplicaInfoResponseHeader:
        h = RegisterBrokerToControllerRequestHeader(
            cluster_name="C", broker_name=NAME, broker_id=self.broker_id, broker_address=self.addr
        )
        r = await self.client.invoke(
            self.controller, make_request(ControllerRequestCode.CONTROLLER_REGISTER_BROKER, h.to_ext())
        )
        assert r.code == ResponseCode.SUCCESS, r.remark
        return GetReplicaInfoResponseHeader.from_ext(r.ext_fields)

    async def replica_info(self) -> tuple[GetReplicaInfoResponseHeader, SyncStateSet]:
        h = GetReplicaInfoRequestHeader(broker_name=NAME)
        r = await self.client.invoke(
            self.controller, make_request(ControllerRequestCode.CONTROLLER_GET_REPLICA_INFO, h.to_ext())
        )
        assert r.code == ResponseCode.SUCCESS, r.remark
        return GetReplicaInfoResponseHeader.from_ext(r.ext_fields), SyncStateSet.decode(r.body)

    async def alter(self, members: set[int], epoch: int, set_epoch: int) -> None:
        h = AlterSyncStateSetRequestHeader(
            broker_name=NAME, master_broker_id=self.broker_id, master_epoch=epoch
        )
        body = SyncStateSet(frozenset(members), set_epoch).encode()
        r = await self.client.invoke(
            self.controller,
            make_request(ControllerRequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, h.to_ext(), body),
        )
        assert r.code == ResponseCode.SUCCESS, r.remark


@contextlib.asynccontextmanager
async def serving(where: str, tmp: Path, etcd: EtcdCluster) -> AsyncIterator[tuple[str, ControllerService]]:
    """A controller, alone or in a name server (`enableControllerInNamesrv`, built from a
    namesrv.conf as `rocketlite namesrv -c` does); its address."""
    if where == "alone":
        config = ControllerConfig(listen_port=0, listen_host="127.0.0.1", etcd_endpoints=etcd.endpoints[0],
                                  scan_not_active_broker_interval=MINUTE_MS)  # fmt: skip
        service = ControllerService(config)
        await service.start()
        try:
            yield service.address, service
        finally:
            await service.close()
        return
    conf = processes.write_conf(tmp / "namesrv.conf", {
        "listenPort": "0", "listenHost": "127.0.0.1", "kvConfigPath": str(tmp / "kv.json"),
        "enableControllerInNamesrv": "true", "etcdEndpoints": etcd.endpoints[0],
        "scanNotActiveBrokerInterval": str(MINUTE_MS),
    })  # fmt: skip
    namesrv = build_name_server(conf)
    assert isinstance(namesrv.embedded, ControllerService)
    await namesrv.start()
    try:
        yield f"127.0.0.1:{namesrv.port}", namesrv.embedded
    finally:
        await namesrv.close()


@pytest.mark.parametrize("where", ["alone", "in the name server"])
def test_a_closed_connection_makes_the_master_inactive_at_once(tmp_path: Path, where: str) -> None:
    etcd = EtcdCluster(tmp_path, members=1)

    async def scenario() -> None:
        async with serving(where, tmp_path, etcd) as (address, service):
            await elect_on_close(address, service)

    try:
        run(scenario(), timeout=60)
    finally:
        etcd.close()


async def elect_on_close(address: str, service: ControllerService) -> None:
    """The master's connection closes: the controller elects the other replica at once."""
    first, second = Broker(address, 1), Broker(address, 2)
    try:
        await first.heartbeat()
        assert (await first.register()).master_broker_id == 1
        await second.heartbeat(max_offset=10)
        await second.register()
        await first.alter({1, 2}, epoch=1, set_epoch=1)
        info, sync_set = await second.replica_info()
        assert (info.master_broker_id, sync_set.sync_state_set) == (1, frozenset({1, 2}))

        await first.client.close()  # the master's process is gone: its socket closes
        for _ in range(100):
            info, sync_set = await second.replica_info()
            if info.master_broker_id == 2:
                break
            await asyncio.sleep(0.05)
        # A one-minute lease and a one-minute scan: only the closed connection explains it.
        assert (info.master_broker_id, info.master_epoch, sync_set.sync_state_set) == (
            2,
            2,
            frozenset({2}),
        )
        assert service.elections == 1
        # A slave's connection closing elects nobody: the master is alive.
        third = Broker(address, 3)
        await third.heartbeat()
        await third.register()
        await third.client.close()
        await asyncio.sleep(0.3)
        assert (await second.replica_info())[0].master_broker_id == 2 and service.elections == 1
    finally:
        await second.client.close()
