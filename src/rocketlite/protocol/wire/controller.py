"""Controller mode on the wire (RocketMQ 5.x RIP-44): request and response codes, headers, bodies.

Brokers in controller mode (`enableControllerMode`) talk to a controller (`rocketlite controller`)
with RocketMQ's codes and header names; admin tools use the same codes (mqadmin `getSyncStateSet`,
`electMaster`, `getControllerMetaData`), and GET_BROKER_EPOCH_CACHE goes to a broker.

| code | name | header (ext fields) | body |
|---|---|---|---|
| 904 | BROKER_HEARTBEAT | clusterName brokerAddr brokerName brokerId epoch maxOffset (...) | - |
| 1001 | CONTROLLER_ALTER_SYNC_STATE_SET | brokerName masterBrokerId masterEpoch | `SyncStateSet` JSON |
| 1002 | CONTROLLER_ELECT_MASTER | clusterName brokerName brokerId designateElect | - |
| 1003 | CONTROLLER_REGISTER_BROKER | clusterName brokerName brokerId brokerAddress (+ haAddress) | - |
| 1004 | CONTROLLER_GET_REPLICA_INFO | brokerName | answer: `ReplicaInfo` header + `SyncStateSet` body |
| 1005 | CONTROLLER_GET_METADATA_INFO | - | answer: `GetMetaDataResponseHeader` |
| 1006 | CONTROLLER_GET_SYNC_STATE_DATA | - | JSON list of brokerNames; answer: JSON per brokerName |
| 1007 | GET_BROKER_EPOCH_CACHE | - | answer: `EpochEntryCache` JSON |

rocketlite's one addition is `haAddress` on registration and heartbeat (the broker's HA listen
address, so a slave can connect to a new master without waiting for the name server).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.custom_header import CustomHeader, Long
from rocketlite.protocol.wire.custom_header import header_dataclass as _header

NO_MASTER = -1  # masterBrokerId when the group has no master


class ControllerRequestCode(IntEnum):
    BROKER_HEARTBEAT = 904
    CONTROLLER_ALTER_SYNC_STATE_SET = 1001
    CONTROLLER_ELECT_MASTER = 1002
    CONTROLLER_REGISTER_BROKER = 1003
    CONTROLLER_GET_REPLICA_INFO = 1004
    CONTROLLER_GET_METADATA_INFO = 1005
    CONTROLLER_GET_SYNC_STATE_DATA = 1006
    GET_BROKER_EPOCH_CACHE = 1007


class ControllerResponseCode(IntEnum):
    """RocketMQ's controller response codes (2000+)."""

    CONTROLLER_FENCED_MASTER_EPOCH = 2000
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001
    CONTROLLER_INVALID_MASTER = 2002
    CONTROLLER_INVALID_REPLICAS = 2003
    CONTROLLER_MASTER_NOT_AVAILABLE = 2004
    CONTROLLER_INVALID_REQUEST = 2005
    CONTROLLER_BROKER_NOT_ALIVE = 2006
    CONTROLLER_NOT_LEADER = 2007
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008
    CONTROLLER_ELECT_MASTER_FAILED = 2012
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013


@_header
class BrokerHeartbeatRequestHeader(CustomHeader):
    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: Long | None = None
    epoch: int | None = None
    max_offset: Long | None = None
    confirm_offset: Long | None = None
    heartbeat_timeout_mills: Long | None = None
    ha_address: str | None = None


@_header
class RegisterBrokerToControllerRequestHeader(CustomHeader):
    cluster_name: str
    broker_name: str
    broker_id: Long
    broker_address: str
    ha_address: str | None = None
    invoke_time: Long | None = None


@_header
class AlterSyncStateSetRequestHeader(CustomHeader):
    broker_name: str
    master_broker_id: Long
    master_epoch: int
    invoke_time: Long | None = None


@_header
class AlterSyncStateSetResponseHeader(CustomHeader):
    new_sync_state_set_epoch: int


@_header
class ElectMasterRequestHeader(CustomHeader):
    cluster_name: str
    broker_name: str
    broker_id: Long | None = None  # the designated new master (designateElect), else any
    designate_elect: bool = False
    invoke_time: Long | None = None


@_header
class ElectMasterResponseHeader(CustomHeader):
    master_broker_id: Long
    master_address: str
    master_epoch: int
    sync_state_set_epoch: int


@_header
class GetReplicaInfoRequestHeader(CustomHeader):
    broker_name: str


@_header
class GetReplicaInfoResponseHeader(CustomHeader):
    master_broker_id: Long
    master_address: str
    master_epoch: int
    master_ha_address: str | None = None


@_header
class GetMetaDataResponseHeader(CustomHeader):
    group: str
    controller_leader_id: str
    controller_leader_address: str
    is_leader: bool
    peers: str


@dataclass(frozen=True, slots=True)
class SyncStateSet:
    """The body of ALTER_SYNC_STATE_SET and GET_REPLICA_INFO: the in-sync replicas' broker ids."""

    sync_state_set: frozenset[int]
    sync_state_set_epoch: int

    def encode(self) -> bytes:
        return fastjson.dumps(
            {"syncStateSet": sorted(self.sync_state_set), "syncStateSetEpoch": self.sync_state_set_epoch}
        ).encode()

    @classmethod
    def decode(cls, body: bytes | None) -> SyncStateSet:
        obj = fastjson.loads(body or b"{}")
        if not isinstance(obj, dict):
            raise ValueError("SyncStateSet: expected a JSON object")
        return cls(
            frozenset(int(i) for i in obj.get("syncStateSet") or ()), int(obj.get("syncStateSetEpoch", 0))
        )


@dataclass(frozen=True, slots=True)
class EpochEntryCache:
    """GET_BROKER_EPOCH_CACHE's answer: a broker's epoch entries (see `formats.epoch_file`)."""

    cluster_name: str
    broker_name: str
    broker_id: int
    epochs: tuple[tuple[int, int], ...]  # (epoch, startOffset), ascending
    max_offset: int

    def encode(self) -> bytes:
        entries = []
        for i, (epoch, start) in enumerate(self.epochs):
            end = self.epochs[i + 1][1] if i + 1 < len(self.epochs) else self.max_offset
            entries.append({"epoch": epoch, "startOffset": start, "endOffset": end})
        return fastjson.dumps(
            {
                "clusterName": self.cluster_name,
                "brokerName": self.broker_name,
                "brokerId": self.broker_id,
                "epochList": entries,
                "maxOffset": self.max_offset,
            }
        ).encode()

    @classmethod
    def decode(cls, body: bytes | None) -> EpochEntryCache:
        obj = fastjson.loads(body or b"{}")
        if not isinstance(obj, dict):
            raise ValueError("EpochEntryCache: expected a JSON object")
        epochs = tuple((int(e["epoch"]), int(e["startOffset"])) for e in obj.get("epochList") or ())
        return cls(
            str(obj.get("clusterName", "")),
            str(obj.get("brokerName", "")),
            int(obj.get("brokerId", 0)),
            epochs,
            int(obj.get("maxOffset", 0)),
        )
