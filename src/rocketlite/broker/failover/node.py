"""`FailoverBroker`: a controller-mode broker process (see the package docstring).

Its loop, every `brokerHeartbeatInterval` ms:

1. BROKER_HEARTBEAT to a controller (the first of `controllerAddr` that answers), with this
   replica's epoch and log end; then CONTROLLER_REGISTER_BROKER, once, and again after an error.
2. CONTROLLER_GET_REPLICA_INFO: who is master, at which epoch, with which SyncStateSet.
3. Follow it:
   * master is this replica at an epoch it does not serve yet -> `_become_master`: (re)start the
     `BrokerController` as brokerId 0 (SYNC_MASTER with `allAckInSyncStateSet`, else
     ASYNC_MASTER); once its store is recovered and before it serves, the epoch is appended to
     the epoch file with the log end as its start offset.
   * master is another replica at an epoch this one does not follow yet -> `_become_slave`: stop
     serving, ask the new master for its epoch entries (GET_BROKER_EPOCH_CACHE, until it answers
     with the new epoch), cut the log at the end of the last epoch both share
     (`epoch_file.consistent_end`), take the master's entries as its own, and restart as a
     SLAVE (brokerId = this replica's id) replicating from the master's HA address.
   * no master: a slave keeps what it has; a master stops serving.
4. The lease fence: a master stops serving once `controllerHeartBeatTimeoutMills` ms, less a
   tenth, have passed since it SENT its last heartbeat that a controller acknowledged. etcd
   expires the lease no sooner than that TTL after it handled that heartbeat, which is later
   than the sending, so — with clocks that run at the same rate — the old master has stopped
   before its lease can expire and a controller can elect another: two masters never serve at
   once. A clock that runs slow breaks this (the clock-skew test); what still holds then is that
   a SYNC send is acknowledged only when the whole SyncStateSet holds it, and the replicas of a
   new master no longer acknowledge the old one. The fence runs on its own timer, so a tick
   stuck on an unreachable controller cannot delay it.

Restarting the `BrokerController` in the process (same ports, same store) is how the role
changes: the store is closed while the log is cut, and every component is built for its role.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass

from rocketlite.broker.config import BrokerConfig, BrokerRole
from rocketlite.broker.controller import BrokerController, SyncStateReplica
from rocketlite.broker.failover.epochs import EpochFile, epoch_file_path
from rocketlite.broker.failover.sync_state import SyncStateKeeper
from rocketlite.broker.ha.master import HAMasterService
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import ConfigError, ProtocolError
from rocketlite.protocol.formats.epoch_file import EpochEntry, append_epoch, consistent_end
from rocketlite.protocol.wire.command import RemotingCommand, make_request, make_response
from rocketlite.protocol.wire.controller import (
    NO_MASTER,
    AlterSyncStateSetRequestHeader,
    BrokerHeartbeatRequestHeader,
    ControllerRequestCode,
    EpochEntryCache,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
    SyncStateSet,
)
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import Connection
from rocketlite.remoting.tls import TlsConfig
from rocketlite.runtime import cancel_tasks
from rocketlite.store.api import StoreAPI
from rocketlite.store.config import StoreConfig
from rocketlite.store.truncation import TailReport

log = logging.getLogger("rocketlite.broker.failover")

_TIMEOUT_S = 3.0
_NO_CUT = 1 << 62  # "as far as this replica's log goes"
_FENCE_CHECK_S = 0.05


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    master_broker_id: int
    master_address: str
    master_ha_address: str
    master_epoch: int
    sync_state: SyncStateSet


class FailoverBroker:
    """One controller-mode broker: `await start()`, `await close()` (the CLI's `Server`)."""

    def __init__(self, broker: BrokerConfig, store: StoreConfig, *, tls: TlsConfig | None = None) -> None:
        if not broker.enable_controller_mode:
            raise ConfigError("FailoverBroker needs enableControllerMode=true")
        if broker.broker_id < 1:
            raise ConfigError(
                "brokerId: in controller mode it is this replica's fixed id, 1 or more "
                "(the controller decides who is master; the master registers as brokerId 0)"
            )
        self.base = broker
        self.store_config = store
        self.tls = tls  # the remoting port's TLS, the same in either role
        self.replica_id = broker.broker_id
        self.epochs = EpochFile(epoch_file_path(broker.store_path_epoch_file, store.store_path_root_dir))
        # A controller that does not answer within a quarter of the lease is skipped for the next
        # one: a controller cut from etcd's majority must not cost a live broker its lease.
        self.controller_timeout = min(_TIMEOUT_S, max(0.5, broker.controller_heart_beat_timeout_mills / 4000))
        self.client = RemotingClient(connect_timeout=self.controller_timeout)
        self.current: BrokerController | None = None
        self.role: tuple[str, int, int] | None = None  # ("master"|"slave", master id, epoch)
        self.info: ReplicaInfo | None = None
        self.keeper: SyncStateKeeper | None = None
        self.registered = False
        self.lease_until = time.monotonic()  # a master serves only before this (monotonic s)
        self.role_changes = 0
        self.cut_messages = 0  # what epoch truncation removed since this process started
        self.cut_bytes = 0
        self.last_cut = ""
        self.last_cut_offset = -1  # the commit-log offset of the last cut (-1: none)
        self._controller_index = 0
        self._role_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._fence_task: asyncio.Task[None] | None = None
        self._closed = False

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="broker-controller-mode")
        self._fence_task = asyncio.create_task(self._fence_loop(), name="broker-lease-fence")
        log.info("broker %s replica %d in controller mode; controllers %s",
                 self.base.broker_name, self.replica_id, self.base.controller_addr)  # fmt: skip

    async def close(self) -> None:
        self._closed = True
        await cancel_tasks(self._task, self._fence_task)
        await self._stop_serving()
        await self.client.close()

    async def reload(self) -> None:
        if self.current is not None:
            await self.current.reload()

    @property
    def port(self) -> int:
        return self.current.port if self.current is not None else self.base.listen_port

    # -- talking to the controller ----------------------------------------------------------
    async def _invoke(self, request: RemotingCommand) -> RemotingCommand:
        addrs = self.base.controller_addrs
        last: Exception | None = None
        for i in range(len(addrs)):
            index = (self._controller_index + i) % len(addrs)
            try:
                response = await self.client.invoke(addrs[index], request, self.controller_timeout)
            except (OSError, TimeoutError) as exc:
                last = exc
                continue
            if response.code == ResponseCode.SYSTEM_ERROR:  # its etcd unreachable: try another
                last = ProtocolError(response.remark or "controller error")
                continue
            self._controller_index = index
            return response
        raise ProtocolError(f"no controller answered ({last})")

    def _my_addr(self) -> str:
        port = self.base.listen_port
        return f"{self.base.broker_ip1}:{port}"

    def _my_ha_addr(self) -> str:
        port = self.base.ha_listen_port or self.base.listen_port + 1
        return f"{self.base.broker_ip1}:{port}"

    async def _register(self) -> None:
        header = RegisterBrokerToControllerRequestHeader(
            cluster_name=self.base.broker_cluster_name, broker_name=self.base.broker_name,
            broker_id=self.replica_id, broker_address=self._my_addr(), ha_address=self._my_ha_addr(),
            invoke_time=int(time.time() * 1000),
        )  # fmt: skip
        response = await self._invoke(
            make_request(ControllerRequestCode.CONTROLLER_REGISTER_BROKER, header.to_ext())
        )
        if response.code != ResponseCode.SUCCESS:
            raise ProtocolError(f"controller refused the registration: {response.remark}")
        self.registered = True

    async def _heartbeat(self) -> None:
        store = self.current.store if self.current is not None else None
        header = BrokerHeartbeatRequestHeader(
            cluster_name=self.base.broker_cluster_name, broker_addr=self._my_addr(),
            broker_name=self.base.broker_name, broker_id=self.replica_id,
            epoch=self.epochs.last_epoch, max_offset=store.max_phy_offset if store and store.started else 0,
            heartbeat_timeout_mills=self.base.controller_heart_beat_timeout_mills,
            ha_address=self._my_ha_addr(),
        )  # fmt: skip
        sent = time.monotonic()
        response = await self._invoke(make_request(ControllerRequestCode.BROKER_HEARTBEAT, header.to_ext()))
        if response.code != ResponseCode.SUCCESS:
            raise ProtocolError(f"heartbeat refused: {response.remark}")
        self.lease_until = sent + self.base.controller_heart_beat_timeout_mills * 0.9 / 1000

    async def _replica_info(self) -> ReplicaInfo:
        header = GetReplicaInfoRequestHeader(broker_name=self.base.broker_name)
        response = await self._invoke(
            make_request(ControllerRequestCode.CONTROLLER_GET_REPLICA_INFO, header.to_ext())
        )
        if response.code != ResponseCode.SUCCESS:
            self.registered = False
            raise ProtocolError(f"replica info refused: {response.remark}")
        h = GetReplicaInfoResponseHeader.from_ext(response.ext_fields)
        return ReplicaInfo(
            h.master_broker_id, h.master_address, h.master_ha_address or "", h.master_epoch,
            SyncStateSet.decode(response.body),
        )  # fmt: skip

    async def _alter(self, wanted: frozenset[int], sync_set_epoch: int) -> SyncStateSet | None:
        role = self.role
        if role is None or role[0] != "master":
            return None
        header = AlterSyncStateSetRequestHeader(
            broker_name=self.base.broker_name, master_broker_id=self.replica_id, master_epoch=role[2],
            invoke_time=int(time.time() * 1000),
        )  # fmt: skip
        body = SyncStateSet(wanted, sync_set_epoch).encode()
        try:
            response = await self._invoke(
                make_request(ControllerRequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, header.to_ext(), body)
            )
        except ProtocolError as exc:
            log.warning("SyncStateSet change to %s: %s", sorted(wanted), exc)
            return None
        if response.code != ResponseCode.SUCCESS:
            log.warning("controller refused SyncStateSet %s: %s", sorted(wanted), response.remark)
            return None
        return SyncStateSet.decode(response.body)

    # -- the loop ---------------------------------------------------------------------------
    async def _loop(self) -> None:
        interval = self.base.broker_heartbeat_interval / 1000
        while not self._closed:
            try:
                await self.tick()
            except ProtocolError as exc:
                log.warning("controller mode: %s", exc)
            except Exception:
                log.exception("controller mode: step failed")
            await asyncio.sleep(interval)

    async def tick(self) -> None:
        await self._heartbeat()  # first: the lease is granted with this broker's TTL
        if not self.registered:
            await self._register()
        info = await self._replica_info()
        self.info = info
        async with self._role_lock:
            await self._follow(info)

    async def _follow(self, info: ReplicaInfo) -> None:
        if info.master_broker_id == self.replica_id:
            if self.role != ("master", self.replica_id, info.master_epoch):
                await self._become_master(info)
            elif self.keeper is not None:
                self.keeper.adopt(info.sync_state)
        elif info.master_broker_id == NO_MASTER:
            if self.role is not None and self.role[0] == "master":
                log.warning("the controller names no master; this master stops serving")
                await self._stop_serving()
        elif self.role != ("slave", info.master_broker_id, info.master_epoch):
            await self._become_slave(info)

    def _serving_past_lease(self) -> bool:
        return self.role is not None and self.role[0] == "master" and time.monotonic() >= self.lease_until

    async def _fence_loop(self) -> None:
        while True:
            await asyncio.sleep(_FENCE_CHECK_S)
            if not self._serving_past_lease():
                continue
            async with self._role_lock:
                if self._serving_past_lease():
                    assert self.role is not None
                    log.error(
                        "lease fence: no heartbeat acknowledged for %d ms; this master (epoch %d) stops "
                        "serving (it may be replaced)", self.base.controller_heart_beat_timeout_mills,
                        self.role[2],
                    )  # fmt: skip
                    await self._stop_serving()

    # -- role changes -----------------------------------------------------------------------
    async def _stop_serving(self) -> None:
        current, self.current, self.role, self.keeper = self.current, None, None, None
        if current is not None:
            await current.close()

    def _serve_epoch_cache(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        current = self.current
        end = current.store.max_phy_offset if current is not None and current.store.started else 0
        cache = EpochEntryCache(
            self.base.broker_cluster_name, self.base.broker_name, self.replica_id,
            tuple((e.epoch, e.start_offset) for e in self.epochs.entries), end,
        )  # fmt: skip
        return make_response(request, ResponseCode.SUCCESS, None, None, cache.encode())

    async def _start_as(self, config: BrokerConfig, controller: BrokerController) -> None:
        controller.table.register(ControllerRequestCode.GET_BROKER_EPOCH_CACHE, self._serve_epoch_cache)
        self.current = controller
        try:
            await controller.start()
        except BaseException:
            self.current = None
            raise
        self.role_changes += 1
        log.info(
            "broker %s replica %d now %s (brokerId %d), epoch %d", config.broker_name, self.replica_id,
            config.broker_role.value, config.broker_id, self.epochs.last_epoch,
        )  # fmt: skip

    async def _become_master(self, info: ReplicaInfo) -> None:
        await self._stop_serving()
        epoch = info.master_epoch
        config = dataclasses.replace(
            self.base,
            broker_id=0,
            broker_role=BrokerRole.SYNC_MASTER
            if self.base.all_ack_in_sync_state_set
            else BrokerRole.ASYNC_MASTER,
            ha_master_address=None,
        )
        epoch_start = [0]

        def before_serving(store: StoreAPI) -> None:
            end = store.max_phy_offset
            if self.epochs.last_epoch < epoch:
                self.epochs.save(append_epoch(self.epochs.entries, epoch, end))
            epoch_start[0] = next((e.start_offset for e in self.epochs.entries if e.epoch == epoch), end)

        def keeper(ha: HAMasterService, store: StoreAPI) -> SyncStateReplica:
            self.keeper = SyncStateKeeper(
                ha, store, config, me=self.replica_id, epoch_start=epoch_start[0],
                current=info.sync_state, alter=self._alter,
            )  # fmt: skip
            return self.keeper

        controller = BrokerController(
            config, self.store_config, replica_factory=keeper, before_serving=before_serving, tls=self.tls,
            runtime_info=self.runtime_info, truncated=self.truncated,
        )  # fmt: skip
        self.role = ("master", self.replica_id, epoch)
        try:
            await self._start_as(config, controller)
        except BaseException:
            self.role = None
            raise

    def _note_cut(self, cut: TailReport, epoch: int) -> None:
        """Say what the cut removed: messages this replica stored (as a deposed master, acknowledged
        to their senders with ASYNC replication) that the new master never received."""
        if not cut.messages and not cut.cut_bytes:
            return
        self.cut_messages += cut.messages
        self.cut_bytes += cut.record_bytes
        self.last_cut = f"epoch {epoch}: {cut.describe()}"
        self.last_cut_offset = cut.offset
        if cut.messages:
            log.warning("replica %d: cut %s, not held by the new master of epoch %d (lost unless "
                        "replicated elsewhere)", self.replica_id, cut.describe(), epoch)  # fmt: skip
        else:
            log.info("replica %d: log cut at offset %d for epoch %d (no messages past it)",
                     self.replica_id, cut.offset, epoch)  # fmt: skip

    def truncated(self) -> tuple[int, int]:
        """What `rocketlite_broker_truncated_messages_total` / `_bytes_total` read."""
        return self.cut_messages, self.cut_bytes

    def runtime_info(self) -> dict[str, str]:
        """Controller mode's part of GET_BROKER_RUNTIME_INFO: the epoch, the master's SyncStateSet,
        and what epoch truncation cut since this process started (rocketlite's own keys)."""
        info = {
            "controllerModeReplicaId": str(self.replica_id),
            "controllerModeEpoch": str(self.epochs.last_epoch),
            "controllerModeTruncatedMessages": str(self.cut_messages),
            "controllerModeTruncatedBytes": str(self.cut_bytes),
            "controllerModeLastTruncation": self.last_cut,
            "controllerModeLastTruncationOffset": str(self.last_cut_offset),
        }
        if self.keeper is not None and self.role is not None and self.role[0] == "master":
            info.update(self.keeper.runtime_info())
        return info

    async def _master_epochs(self, info: ReplicaInfo) -> EpochEntryCache | None:
        try:
            response = await self.client.invoke(
                info.master_address, make_request(ControllerRequestCode.GET_BROKER_EPOCH_CACHE), _TIMEOUT_S
            )
        except (OSError, TimeoutError) as exc:
            log.info("new master %s not reachable yet: %s", info.master_address, exc)
            return None
        if response.code != ResponseCode.SUCCESS:
            return None
        cache = EpochEntryCache.decode(response.body)
        if not cache.epochs or cache.epochs[-1][0] != info.master_epoch:
            return None  # not serving the new epoch yet
        return cache

    async def _become_slave(self, info: ReplicaInfo) -> None:
        if self.role is not None and self.role[0] == "master":
            await self._stop_serving()  # a deposed master stops taking writes first
        cache = await self._master_epochs(info)
        if cache is None:
            return  # the next tick asks again
        await self._stop_serving()
        theirs = [EpochEntry(e, s) for e, s in cache.epochs]
        cut = consistent_end(self.epochs.entries, _NO_CUT, theirs, cache.max_offset)
        config = dataclasses.replace(
            self.base, broker_id=self.replica_id, broker_role=BrokerRole.SLAVE,
            ha_master_address=info.master_ha_address or None,
        )  # fmt: skip
        controller = BrokerController(
            config, self.store_config, tls=self.tls, runtime_info=self.runtime_info, truncated=self.truncated
        )
        if cut < _NO_CUT:
            self._note_cut(controller.store.truncate_log_before_start(cut), info.master_epoch)
        self.epochs.save(theirs)
        self.role = ("slave", info.master_broker_id, info.master_epoch)
        try:
            await self._start_as(config, controller)
        except BaseException:
            self.role = None
            raise
