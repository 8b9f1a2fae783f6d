"""`ControllerService`: the controller's remoting server; every decision is an etcd transaction.

Requests (codes and headers: `protocol.wire.controller`):

* BROKER_HEARTBEAT: refresh the broker's lease and its `alive` key (address, epoch, max offset).
  The lease is granted on the first heartbeat (TTL = the broker's heartbeatTimeoutMills, whole
  seconds) and kept alive by later ones, through whichever controller receives them.
* CONTROLLER_REGISTER_BROKER: the replica is added to the group's state; the first replica of a
  new group becomes its master at epoch 1. Answers like GET_REPLICA_INFO. (Brokers heartbeat
  first, so the lease has their TTL.)
* CONTROLLER_GET_REPLICA_INFO: master id, address, HA address, epoch; the SyncStateSet.
* CONTROLLER_ALTER_SYNC_STATE_SET: the master shrinks or expands its SyncStateSet, fenced by the
  master epoch and the syncStateSetEpoch (`state.alter_sync_state_set`).
* CONTROLLER_ELECT_MASTER: a manual election (admin `electMaster`).
* CONTROLLER_GET_METADATA_INFO, CONTROLLER_GET_SYNC_STATE_DATA: for admin tools.

Every `scanNotActiveBrokerInterval` ms each controller looks for groups whose master's `alive`
key is gone (its lease expired) and elects a new master (`state.elect`). A broker whose
connection to this controller closes is inactive at once, as in RocketMQ's controller
(`onBrokerChannelClose`): a process that dies — kill -9 included — has its sockets closed by the
kernel, so its lease is revoked and its group's election runs without waiting for the lease to
expire. A partition closes nothing; there the lease decides. The write is a txn that
succeeds only if the group's state is unchanged since it was read AND the old master's alive key
is still absent: of several controllers scanning at once exactly one wins, and one master per
epoch follows from the epoch being part of the compared state.

etcd is blocking I/O (`etcd.EtcdClient`): each call runs in the default executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable
from typing import Any, TypeVar

from rocketlite.controller.config import ControllerConfig
from rocketlite.controller.etcd import Compare, EtcdClient, EtcdError, Put
from rocketlite.controller.state import (
    AliveBroker,
    ElectionRefused,
    GroupState,
    Replica,
    alter_sync_state_set,
    elect,
)
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.protocol.wire.controller import (
    NO_MASTER,
    AlterSyncStateSetRequestHeader,
    AlterSyncStateSetResponseHeader,
    BrokerHeartbeatRequestHeader,
    ControllerRequestCode,
    ControllerResponseCode,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
    SyncStateSet,
)
from rocketlite.remoting.connection import Connection, RequestTable, not_supported
from rocketlite.remoting.server import RemotingServer
from rocketlite.runtime import cancel_tasks

log = logging.getLogger("rocketlite.controller")

T = TypeVar("T")
_CAS_ATTEMPTS = 8


class ControllerService:
    """One controller; `await start()`, `await close()`. Several may serve the same etcd."""

    def __init__(self, config: ControllerConfig, *, etcd: EtcdClient | None = None) -> None:
        self.config = config
        self.etcd = etcd or EtcdClient(config.endpoints)
        self.prefix = config.etcd_key_prefix.rstrip("/").encode()
        self.table = RequestTable(default=not_supported)
        for code, handler in (
            (ControllerRequestCode.BROKER_HEARTBEAT, self._heartbeat),
            (ControllerRequestCode.CONTROLLER_REGISTER_BROKER, self._register),
            (ControllerRequestCode.CONTROLLER_GET_REPLICA_INFO, self._replica_info),
            (ControllerRequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, self._alter),
            (ControllerRequestCode.CONTROLLER_ELECT_MASTER, self._elect),
            (ControllerRequestCode.CONTROLLER_GET_METADATA_INFO, self._metadata),
            (ControllerRequestCode.CONTROLLER_GET_SYNC_STATE_DATA, self._sync_state_data),
        ):
            self.table.register(code, handler)
        self.server = RemotingServer(
            self.table,
            host=config.listen_host,
            ports=(config.listen_port,),
            on_connection_closed=self._connection_closed,
        )
        self._leases: dict[bytes, int] = {}
        self._heartbeats: dict[Connection, tuple[str, int, int]] = {}  # conn -> name, id, lease
        # The log end each broker last reported to this controller: name, id -> offset
        self._last_offsets: dict[tuple[str, int], int] = {}
        self._gone: set[asyncio.Task[None]] = set()
        self._scan_task: asyncio.Task[None] | None = None
        self._embedded_port: int | None = None  # inside a name server: its port
        self.elections = 0

    @property
    def port(self) -> int:
        return self._embedded_port if self._embedded_port is not None else self.server.ports[0]

    @property
    def address(self) -> str:
        return f"{self.config.controller_addr}:{self.port}"

    async def start(self) -> None:
        self.server.bind()
        await self.server.start()
        self._scan_task = asyncio.create_task(self._scan_loop(), name="controller-scan")
        log.info("controller serving on %s, etcd %s", self.address, ",".join(self.etcd.endpoints))

    async def start_embedded(self, port: int) -> None:
        """Serve through a name server's port (`enableControllerInNamesrv`): it answers `table`'s
        codes and reports closed connections (`connection_closed`); no server of its own."""
        self._embedded_port = port
        self._scan_task = asyncio.create_task(self._scan_loop(), name="controller-scan")
        log.info("controller in the name server on %s, etcd %s", self.address, ",".join(self.etcd.endpoints))

    async def close(self) -> None:
        await cancel_tasks(self._scan_task, *self._gone)
        self._scan_task = None
        self._heartbeats.clear()
        if self._embedded_port is None:
            await self.server.close()

    def connection_closed(self, conn: Connection) -> None:
        self._connection_closed(conn)

    # -- etcd helpers -----------------------------------------------------------------------
    def _key(self, broker_name: str, *rest: str) -> bytes:
        return b"/".join([self.prefix, b"groups", broker_name.encode(), *(r.encode() for r in rest)])

    async def _io(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    def _read_group(self, broker_name: str) -> tuple[GroupState | None, int, dict[int, AliveBroker]]:
        kv = self.etcd.get(self._key(broker_name, "state"))
        alive = {}
        for akv in self.etcd.get_prefix(self._key(broker_name, "alive") + b"/"):
            with contextlib.suppress(ValueError, KeyError):
                info = AliveBroker.decode(akv.value)
                alive[info.broker_id] = info
        if kv is None:
            return None, 0, alive
        return GroupState.decode(kv.value), kv.mod_revision, alive

    def _update(
        self,
        broker_name: str,
        change: Callable[[GroupState | None, dict[int, AliveBroker]], GroupState | None],
    ) -> GroupState | None:
        """Apply `change` with a compare-and-swap, retried on conflict; None when it changed nothing."""
        for _ in range(_CAS_ATTEMPTS):
            state, revision, alive = self._read_group(broker_name)
            new = change(state, alive)
            if new is None or new == state:
                return state
            key = self._key(broker_name, "state")
            compare = [Compare(key, "MOD", revision)] if state is not None else [Compare(key, "VERSION", 0)]
            if (
                state is not None
                and new.master_epoch != state.master_epoch
                and state.master_broker_id not in (NO_MASTER, new.master_broker_id)
                and state.master_broker_id not in alive
            ):  # automatic election: only while the old master's lease is still gone
                old_alive = self._key(broker_name, "alive", str(state.master_broker_id))
                compare.append(Compare(old_alive, "VERSION", 0))
            if self.etcd.txn(compare, [Put(key, new.encode())]):
                return new
        raise EtcdError(
            f"{broker_name}: the group's state kept changing; gave up after {_CAS_ATTEMPTS} tries"
        )

    def _beat(self, broker_name: str, info: AliveBroker, ttl_ms: int) -> int:
        key = self._key(broker_name, "alive", str(info.broker_id))
        lease = self._leases.get(key)
        if lease is None:
            current = self.etcd.get(key)
            lease = current.lease if current is not None and current.lease else None
        if lease is not None and self.etcd.keepalive(lease) <= 0:
            lease = None
        if lease is None:
            lease = self.etcd.grant(max(1, math.ceil(ttl_ms / 1000)))
        self._leases[key] = lease
        self.etcd.put(key, info.encode(), lease)
        return lease

    # -- handlers ---------------------------------------------------------------------------
    async def _guard(self, request: RemotingCommand, work: Callable[[], RemotingCommand]) -> RemotingCommand:
        try:
            return await self._io(work)
        except ElectionRefused as exc:
            return make_response(request, ControllerResponseCode.CONTROLLER_INVALID_REQUEST, str(exc))
        except EtcdError as exc:
            log.warning("etcd: %s", exc)
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"controller: {exc}")
        except ValueError as exc:
            return make_response(request, ControllerResponseCode.CONTROLLER_INVALID_REQUEST, str(exc))

    def _ttl(self, value: int | None) -> int:
        return value if value else self.config.controller_heart_beat_timeout_mills

    async def _heartbeat(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = BrokerHeartbeatRequestHeader.from_ext(request.ext_fields)

        def work() -> RemotingCommand:
            if h.broker_id is None:
                raise ValueError("BROKER_HEARTBEAT without brokerId")
            info = AliveBroker(
                h.broker_id, h.broker_addr, h.ha_address or "", h.epoch or 0, h.max_offset or 0
            )
            lease = self._beat(h.broker_name, info, self._ttl(h.heartbeat_timeout_mills))
            self._last_offsets[h.broker_name, h.broker_id] = info.max_offset
            if not conn.closed:
                self._heartbeats[conn] = (h.broker_name, h.broker_id, lease)
            return make_response(request, ResponseCode.SUCCESS)

        return await self._guard(request, work)

    def _connection_closed(self, conn: Connection) -> None:
        who = self._heartbeats.pop(conn, None)
        if who is None or self._scan_task is None:
            return
        task = asyncio.create_task(self._io(self.broker_gone, *who), name="controller-broker-gone")
        self._gone.add(task)
        task.add_done_callback(self._gone.discard)

    def broker_gone(self, broker_name: str, broker_id: int, lease: int) -> None:
        """The connection a broker heartbeat on closed: revoke its lease (unless it has beaten
        with another one since) and elect its group's next master now if it was the master."""
        key = self._key(broker_name, "alive", str(broker_id))
        try:
            current = self.etcd.get(key)
            if current is None or current.lease != lease:
                return
            self.etcd.revoke(lease)
            self._leases.pop(key, None)
            log.info("%s: broker %d's connection closed: inactive, its lease revoked", broker_name, broker_id)
            kv = self.etcd.get(self._key(broker_name, "state"))
            if kv is not None:
                self._elect_if_master_gone(GroupState.decode(kv.value))
        except EtcdError as exc:
            log.warning("%s: broker %d gone, but etcd: %s (its lease decides)", broker_name, broker_id, exc)

    def _replica_answer(self, request: RemotingCommand, state: GroupState | None) -> RemotingCommand:
        if state is None:
            return make_response(
                request, ControllerResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, "no such broker group"
            )
        header = GetReplicaInfoResponseHeader(
            master_broker_id=state.master_broker_id,
            master_address=state.master_address,
            master_epoch=state.master_epoch,
            master_ha_address=state.master_ha_address,
        )
        body = SyncStateSet(state.sync_state_set, state.sync_state_set_epoch).encode()
        return make_response(request, ResponseCode.SUCCESS, None, header.to_ext(), body)

    async def _register(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        h = RegisterBrokerToControllerRequestHeader.from_ext(request.ext_fields)

        def change(state: GroupState | None, alive: dict[int, AliveBroker]) -> GroupState:
            del alive
            replica = Replica(h.broker_address, h.ha_address or "")
            if state is None:
                log.info("new group %s: broker %d (%s) is its first master, epoch 1",
                         h.broker_name, h.broker_id, h.broker_address)  # fmt: skip
                return GroupState(
                    h.cluster_name, h.broker_name, h.broker_id, 1, frozenset({h.broker_id}), 1,
                    {h.broker_id: replica},
                )  # fmt: skip
            return state.with_replica(h.broker_id, replica)

        def work() -> RemotingCommand:
            # Liveness comes from BROKER_HEARTBEAT alone (it carries the broker's lease TTL).
            return self._replica_answer(request, self._update(h.broker_name, change))

        return await self._guard(request, work)

    async def _replica_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        h = GetReplicaInfoRequestHeader.from_ext(request.ext_fields)
        return await self._guard(
            request, lambda: self._replica_answer(request, self._read_group(h.broker_name)[0])
        )

    async def _alter(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        h = AlterSyncStateSetRequestHeader.from_ext(request.ext_fields)
        wanted = SyncStateSet.decode(request.body)

        def change(state: GroupState | None, alive: dict[int, AliveBroker]) -> GroupState:
            if state is None:
                raise ElectionRefused(f"no broker group {h.broker_name}")
            return alter_sync_state_set(
                state, alive, master_broker_id=h.master_broker_id, master_epoch=h.master_epoch,
                new_set=wanted.sync_state_set, sync_state_set_epoch=wanted.sync_state_set_epoch,
            )  # fmt: skip

        def work() -> RemotingCommand:
            try:
                new = self._update(h.broker_name, change)
            except ElectionRefused as exc:
                code = (
                    ControllerResponseCode.CONTROLLER_FENCED_MASTER_EPOCH
                    if "fenced" in str(exc)
                    else ControllerResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
                )
                return make_response(request, code, str(exc))
            assert new is not None
            log.info("%s: SyncStateSet %s (epoch %d)", h.broker_name, sorted(new.sync_state_set),
                     new.sync_state_set_epoch)  # fmt: skip
            header = AlterSyncStateSetResponseHeader(new_sync_state_set_epoch=new.sync_state_set_epoch)
            body = SyncStateSet(new.sync_state_set, new.sync_state_set_epoch).encode()
            return make_response(request, ResponseCode.SUCCESS, None, header.to_ext(), body)

        return await self._guard(request, work)

    async def _elect(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        h = ElectMasterRequestHeader.from_ext(request.ext_fields)
        designated = (
            h.broker_id if h.designate_elect or (h.broker_id is not None and h.broker_id > 0) else None
        )

        def change(state: GroupState | None, alive: dict[int, AliveBroker]) -> GroupState:
            if state is None:
                raise ElectionRefused(f"no broker group {h.broker_name}")
            return elect(state, alive, designated=designated, unclean=self.config.enable_elect_unclean_master)

        def work() -> RemotingCommand:
            try:
                new = self._update(h.broker_name, change)
            except ElectionRefused as exc:
                return make_response(request, ControllerResponseCode.CONTROLLER_ELECT_MASTER_FAILED, str(exc))
            assert new is not None
            self.elections += 1
            log.info("%s: broker %d elected master by request, epoch %d",
                     h.broker_name, new.master_broker_id, new.master_epoch)  # fmt: skip
            header = ElectMasterResponseHeader(
                master_broker_id=new.master_broker_id, master_address=new.master_address,
                master_epoch=new.master_epoch, sync_state_set_epoch=new.sync_state_set_epoch,
            )  # fmt: skip
            body = SyncStateSet(new.sync_state_set, new.sync_state_set_epoch).encode()
            return make_response(request, ResponseCode.SUCCESS, None, header.to_ext(), body)

        return await self._guard(request, work)

    async def _metadata(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn

        def work() -> RemotingCommand:
            status = self.etcd.status()
            header = GetMetaDataResponseHeader(
                group=f"etcd:{status.get('header', {}).get('cluster_id', '')}",
                controller_leader_id=str(status.get("leader", "")),
                controller_leader_address=self.address,
                is_leader=True,  # every controller may serve: etcd orders the writes
                peers=";".join(self.etcd.endpoints),
            )
            return make_response(request, ResponseCode.SUCCESS, None, header.to_ext())

        return await self._guard(request, work)

    async def _sync_state_data(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        names = fastjson.loads(request.body or b"[]")
        if not isinstance(names, list):
            return make_response(
                request, ControllerResponseCode.CONTROLLER_INVALID_REQUEST, "body: a JSON list"
            )

        def work() -> RemotingCommand:
            out: dict[str, Any] = {}
            for name in names:
                state, _, alive = self._read_group(str(name))
                if state is None:
                    continue
                out[str(name)] = group_view(state, alive)
            return make_response(request, ResponseCode.SUCCESS, None, None, fastjson.dumps(out).encode())

        return await self._guard(request, work)

    # -- the election scan ------------------------------------------------------------------
    async def _scan_loop(self) -> None:
        interval = self.config.scan_not_active_broker_interval / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self._io(self.scan_once)
            except EtcdError as exc:
                log.warning("controller scan: %s", exc)
            except Exception:
                log.exception("controller scan failed")

    def scan_once(self) -> list[str]:
        """Elect a master for every group whose master is not alive; the groups changed."""
        changed = []
        for kv in self.etcd.get_prefix(self.prefix + b"/groups/"):
            if kv.key.endswith(b"/state") and self._elect_if_master_gone(GroupState.decode(kv.value)):
                changed.append(GroupState.decode(kv.value).broker_name)
        return changed

    def _elect_if_master_gone(self, state: GroupState) -> bool:
        """Elect the group's next master if its master is not alive; whether this controller did."""
        _, _, alive = self._read_group(state.broker_name)
        if state.master_broker_id in alive or not alive:
            return False

        mine: list[GroupState] = []

        def change(current: GroupState | None, alive_now: dict[int, AliveBroker]) -> GroupState | None:
            if current is None or current.master_broker_id in alive_now:
                return None
            try:
                mine.append(elect(current, alive_now, unclean=self.config.enable_elect_unclean_master))
            except ElectionRefused as exc:
                log.warning("%s: no election: %s", current.broker_name, exc)
                return None
            return mine[-1]

        new = self._update(state.broker_name, change)
        if new is None or not mine or new is not mine[-1]:
            return False
        self.elections += 1
        log.info("%s: master %d gone; broker %d elected, epoch %d", state.broker_name,
                 state.master_broker_id, new.master_broker_id, new.master_epoch)  # fmt: skip
        self._report_shorter_log(state, new)
        return True

    def _report_shorter_log(self, old: GroupState, new: GroupState) -> None:
        """Warn when the new master's log is shorter than the old master's last reported one: what
        lies between was stored by the old master and never replicated — with ASYNC replication
        (allAckInSyncStateSet=false) possibly acknowledged. The old master cuts it, and says exactly
        which messages, when it rejoins (`broker.failover.node`). Only the heartbeats this
        controller received are known here, so it is a lower bound and may be missing."""
        name = old.broker_name
        before = self._last_offsets.get((name, old.master_broker_id))
        after = self._last_offsets.get((name, new.master_broker_id))
        if before is not None and after is not None and before > after:
            log.warning("%s: new master %d (epoch %d) holds the log up to offset %d, %d bytes short of "
                        "the %d the old master %d last reported: messages stored there are lost unless "
                        "replicated elsewhere", name, new.master_broker_id, new.master_epoch, after,
                        before - after, before, old.master_broker_id)  # fmt: skip


def group_view(state: GroupState, alive: dict[int, AliveBroker]) -> dict[str, Any]:
    """A group as GET_SYNC_STATE_DATA reports it (mqadmin `getSyncStateSet` prints this)."""

    def member(i: int) -> dict[str, Any]:
        replica = state.replicas.get(i)
        return {"brokerId": i, "brokerAddress": replica.address if replica else "", "alive": i in alive}

    return {
        "clusterName": state.cluster_name,
        "masterBrokerId": state.master_broker_id,
        "masterAddress": state.master_address,
        "masterEpoch": state.master_epoch,
        "syncStateSetEpoch": state.sync_state_set_epoch,
        "inSyncReplicas": [member(i) for i in sorted(state.sync_state_set)],
        "notInSyncReplicas": [member(i) for i in sorted(state.replicas) if i not in state.sync_state_set],
    }
