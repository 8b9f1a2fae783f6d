"""Controller-mode verbs (RocketMQ 5 mqadmin): getControllerMetaData, getSyncStateSet, electMaster
(to a controller, `-a`) and getBrokerEpoch (to the brokers of `-b brokerName`, found through the
name server). Codes and bodies: `protocol.wire.controller`."""

from __future__ import annotations

from typing import Any

from rocketlite.admin.client import AdminClient, AdminError
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.controller import (
    ControllerRequestCode,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    EpochEntryCache,
    GetMetaDataResponseHeader,
)


async def get_controller_metadata(admin: AdminClient, *, controller: str) -> dict[str, Any]:
    r = await admin.call(controller, ControllerRequestCode.CONTROLLER_GET_METADATA_INFO, role="controller")
    h = GetMetaDataResponseHeader.from_ext(r.ext_fields)
    return {
        "ControllerGroup": h.group,
        "ControllerLeaderId": h.controller_leader_id,
        "ControllerLeaderAddress": h.controller_leader_address,
        "IsLeader": h.is_leader,
        "Peers": h.peers,
    }


async def get_sync_state_set(admin: AdminClient, *, controller: str, broker_name: str) -> dict[str, Any]:
    body = fastjson.dumps([broker_name]).encode()
    r = await admin.call(
        controller, ControllerRequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=body, role="controller"
    )
    data = fastjson.loads(r.body or b"{}")
    if not isinstance(data, dict) or broker_name not in data:
        raise AdminError(f"the controller knows no broker group {broker_name}")
    return {"brokerName": broker_name, **data[broker_name]}


async def elect_master(
    admin: AdminClient, *, controller: str, cluster: str, broker_name: str, broker_id: int
) -> dict[str, Any]:
    header = ElectMasterRequestHeader(
        cluster_name=cluster, broker_name=broker_name, broker_id=broker_id, designate_elect=True
    )
    r = await admin.call(
        controller, ControllerRequestCode.CONTROLLER_ELECT_MASTER, header.to_ext(), role="controller"
    )
    h = ElectMasterResponseHeader.from_ext(r.ext_fields)
    return {
        "brokerName": broker_name,
        "masterBrokerId": h.master_broker_id,
        "masterAddress": h.master_address,
        "masterEpoch": h.master_epoch,
        "syncStateSetEpoch": h.sync_state_set_epoch,
    }


async def get_broker_epoch(admin: AdminClient, *, broker_name: str) -> dict[str, Any]:
    info = await admin.cluster_info()
    data = info.broker_addr_table.get(broker_name)
    if data is None:
        raise AdminError(f"the name server knows no broker {broker_name}")
    out: dict[str, Any] = {}
    for broker_id, addr in sorted(data.broker_addrs.items()):
        r = await admin.call(addr, ControllerRequestCode.GET_BROKER_EPOCH_CACHE, ok=(ResponseCode.SUCCESS,))
        cache = EpochEntryCache.decode(r.body)
        entries = []
        for i, (epoch, start) in enumerate(cache.epochs):
            end = cache.epochs[i + 1][1] if i + 1 < len(cache.epochs) else cache.max_offset
            entries.append({"epoch": epoch, "startOffset": start, "endOffset": end})
        out[addr] = {"brokerId": broker_id, "replicaId": cache.broker_id, "epochs": entries,
                     "maxOffset": cache.max_offset}  # fmt: skip
    return {"brokerName": broker_name, "brokers": out}
