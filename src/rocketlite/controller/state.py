"""A broker group's replica state as the controller keeps it in etcd, and the election rule.

One JSON value per group, key `<etcdKeyPrefix>/groups/<brokerName>/state`::

    {"clusterName": "DefaultCluster", "brokerName": "broker-a",
     "masterBrokerId": 1, "masterEpoch": 3, "syncStateSet": [1, 2], "syncStateSetEpoch": 5,
     "replicas": {"1": {"address": "10.0.0.1:10911", "haAddress": "10.0.0.1:10912"}, ...}}

and one key per live broker, `<prefix>/groups/<brokerName>/alive/<brokerId>`, attached to that
broker's etcd lease (so it disappears when the broker stops heartbeating), whose value is the
broker's last heartbeat (`AliveBroker`).

Election (`elect`): the new master is a live member of the SyncStateSet — the replicas the last
master confirmed hold everything it acknowledged — preferring the one that reported the largest
commit-log offset; with `enableElectUncleanMaster` any live replica when no member is alive. The
winner's epoch is the old one + 1 and its SyncStateSet is itself alone (the others rejoin as they
catch up with it). Pure functions: the service applies the result with a compare-and-swap.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from rocketlite.protocol.wire.controller import NO_MASTER


@dataclass(frozen=True, slots=True)
class Replica:
    address: str
    ha_address: str = ""


@dataclass(frozen=True, slots=True)
class AliveBroker:
    """A broker's last heartbeat, the value of its `alive` key."""

    broker_id: int
    address: str
    ha_address: str = ""
    epoch: int = 0
    max_offset: int = 0

    def encode(self) -> bytes:
        return json.dumps(
            {"brokerId": self.broker_id, "address": self.address, "haAddress": self.ha_address,
             "epoch": self.epoch, "maxOffset": self.max_offset}
        ).encode()  # fmt: skip

    @classmethod
    def decode(cls, data: bytes) -> AliveBroker:
        obj = json.loads(data)
        return cls(
            int(obj["brokerId"]), str(obj["address"]), str(obj.get("haAddress", "")),
            int(obj.get("epoch", 0)), int(obj.get("maxOffset", 0)),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class GroupState:
    cluster_name: str
    broker_name: str
    master_broker_id: int = NO_MASTER
    master_epoch: int = 0
    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0
    replicas: dict[int, Replica] = field(default_factory=dict)

    @property
    def master_address(self) -> str:
        replica = self.replicas.get(self.master_broker_id)
        return replica.address if replica is not None else ""

    @property
    def master_ha_address(self) -> str:
        replica = self.replicas.get(self.master_broker_id)
        return replica.ha_address if replica is not None else ""

    def encode(self) -> bytes:
        obj: dict[str, Any] = {
            "clusterName": self.cluster_name,
            "brokerName": self.broker_name,
            "masterBrokerId": self.master_broker_id,
            "masterEpoch": self.master_epoch,
            "syncStateSet": sorted(self.sync_state_set),
            "syncStateSetEpoch": self.sync_state_set_epoch,
            "replicas": {
                str(i): {"address": r.address, "haAddress": r.ha_address}
                for i, r in sorted(self.replicas.items())
            },
        }
        return json.dumps(obj).encode()

    @classmethod
    def decode(cls, data: bytes) -> GroupState:
        obj = json.loads(data)
        return cls(
            cluster_name=str(obj["clusterName"]),
            broker_name=str(obj["brokerName"]),
            master_broker_id=int(obj.get("masterBrokerId", NO_MASTER)),
            master_epoch=int(obj.get("masterEpoch", 0)),
            sync_state_set=frozenset(int(i) for i in obj.get("syncStateSet") or ()),
            sync_state_set_epoch=int(obj.get("syncStateSetEpoch", 0)),
            replicas={
                int(i): Replica(str(r.get("address", "")), str(r.get("haAddress", "")))
                for i, r in (obj.get("replicas") or {}).items()
            },
        )

    def with_replica(self, broker_id: int, replica: Replica) -> GroupState:
        return dataclasses.replace(self, replicas={**self.replicas, broker_id: replica})


class ElectionRefused(Exception):  # noqa: N818 - an outcome, not a programming error
    """No replica may become master; the text says why (the admin verb shows it)."""


def elect(
    state: GroupState,
    alive: dict[int, AliveBroker],
    *,
    designated: int | None = None,
    unclean: bool = False,
) -> GroupState:
    """The state after electing a new master, or `ElectionRefused`.

    Without `designated` this is the automatic election: only when the master is not alive.
    With it (admin `electMaster -i`), that replica, if alive and in the SyncStateSet (or
    `unclean`), even while the master lives (a manual switch)."""
    in_sync = [i for i in sorted(state.sync_state_set) if i in alive]
    if designated is not None:
        if designated not in alive:
            raise ElectionRefused(f"broker {designated} of {state.broker_name} is not alive")
        if designated not in state.sync_state_set and not unclean:
            raise ElectionRefused(
                f"broker {designated} is not in the SyncStateSet {sorted(state.sync_state_set)} of "
                f"{state.broker_name} (enableElectUncleanMaster is false)"
            )
        winner = designated
    else:
        if state.master_broker_id in alive:
            raise ElectionRefused(f"the master {state.master_broker_id} of {state.broker_name} is alive")
        candidates = in_sync or (sorted(alive) if unclean else [])
        if not candidates:
            raise ElectionRefused(
                f"no live replica of {state.broker_name} is in its SyncStateSet "
                f"{sorted(state.sync_state_set)}"
            )
        winner = max(candidates, key=lambda i: (alive[i].max_offset, -i))
    info = alive[winner]
    replicas = {**state.replicas, winner: Replica(info.address, info.ha_address)}
    return dataclasses.replace(
        state,
        master_broker_id=winner,
        master_epoch=state.master_epoch + 1,
        sync_state_set=frozenset({winner}),
        sync_state_set_epoch=state.sync_state_set_epoch + 1,
        replicas=replicas,
    )


def alter_sync_state_set(
    state: GroupState,
    alive: dict[int, AliveBroker],
    *,
    master_broker_id: int,
    master_epoch: int,
    new_set: frozenset[int],
    sync_state_set_epoch: int,
) -> GroupState:
    """The state after the master's request to change its SyncStateSet, or `ElectionRefused` (the
    reason). Fenced by both epochs: a deposed master's request changes nothing."""
    if master_broker_id != state.master_broker_id or master_epoch != state.master_epoch:
        raise ElectionRefused(
            f"fenced: broker {master_broker_id} epoch {master_epoch} is not the master "
            f"(master {state.master_broker_id}, epoch {state.master_epoch})"
        )
    if sync_state_set_epoch != state.sync_state_set_epoch:
        raise ElectionRefused(
            f"fenced: syncStateSetEpoch {sync_state_set_epoch}, current {state.sync_state_set_epoch}"
        )
    if master_broker_id not in new_set:
        raise ElectionRefused("the new SyncStateSet must hold the master")
    added = new_set - state.sync_state_set
    dead = sorted(i for i in added if i not in alive)
    if dead:
        raise ElectionRefused(f"brokers {dead} are not alive")
    return dataclasses.replace(
        state, sync_state_set=new_set, sync_state_set_epoch=state.sync_state_set_epoch + 1
    )
