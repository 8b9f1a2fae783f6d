"""`SyncStateKeeper`: a controller-mode master's SyncStateSet, and what SYNC sends wait for.

* Acknowledgements: every report of a slave that said who it is (the HA handshake,
  `protocol.formats.ha_frames`) is an ack of that replica. A replica counts as caught up at time T
  when it acknowledged the master's log end as it was at T. The master notes its log end every
  `_MARK_S` (`_marks`, kept for `haMaxTimeSlaveNotCatchup`); an ack at offset O makes the replica
  caught up as of the latest mark at or below O. (One shared mark would not do: a replica a
  little slower than another never reaches the mark the faster one keeps moving.)
* `wait_replicated(end)` (the send processor's `ReplicaWaiter`): with `allAckInSyncStateSet`,
  PUT_OK once every member of the SyncStateSet but the master holds the log up to `end`;
  FLUSH_SLAVE_TIMEOUT after `syncFlushTimeout` ms (the message is stored on the master all the
  same, but the client was not told it is safe).
* Every `checkSyncStateSetPeriod` ms: a member not caught up for `haMaxTimeSlaveNotCatchup` ms
  is removed — through the controller FIRST, and only once the controller agreed do sends stop
  waiting for it (else the controller could elect a replica that lacks acknowledged messages);
  a connected replica that is caught up and holds this epoch's start is added — locally at once
  (sends wait for it from now on, which is only stricter), then through the controller, asked
  again at every check until it agrees (`confirmed` is the controller's set, `sync_set` what
  sends wait for).
* `accepts_put` (`minInSyncReplicas`): a SYNC send is refused before it is stored while the
  controller's SyncStateSet, the master included, has fewer members (RocketMQ's CommitLog answers
  IN_SYNC_REPLICAS_NOT_ENOUGH, which the send processor turns into SYSTEM_ERROR
  "in-sync replicas not enough").
* `asyncLearner` replicas (their HA handshake says so) are streamed the log and acknowledge it, but
  are never added to the set, and are removed from it should one reconnect as a learner.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.ha.master import HAConnection, HAMasterService
from rocketlite.protocol.wire.controller import SyncStateSet
from rocketlite.runtime import cancel_tasks, result_within
from rocketlite.store.api import StoreAPI
from rocketlite.store.results import PutMessageStatus

log = logging.getLogger("rocketlite.broker.failover")

_MARK_S = 0.2
# Ask the controller to change the set; the set it holds after (None: refused or unreachable).
AlterSyncStateSet = Callable[[frozenset[int], int], Awaitable[SyncStateSet | None]]


class SyncStateKeeper:
    def __init__(
        self,
        ha: HAMasterService,
        store: StoreAPI,
        config: BrokerConfig,
        *,
        me: int,
        epoch_start: int,
        current: SyncStateSet,
        alter: AlterSyncStateSet,
        on_change: Callable[[SyncStateSet], None] = lambda s: None,
    ) -> None:
        self.ha = ha
        self.store = store
        self.config = config
        self.me = me
        self.epoch_start = epoch_start
        self.confirmed = current.sync_state_set | {me}  # the controller's SyncStateSet
        self.sync_set = self.confirmed  # what sends wait for: confirmed + joining members
        self.sync_set_epoch = current.sync_state_set_epoch
        self.alter = alter
        self.on_change = on_change
        now = time.monotonic()
        self.caught_up: dict[int, float] = dict.fromkeys(self.sync_set, now)
        self._marks: deque[tuple[float, int]] = deque([(now, store.max_phy_offset)])
        self._waiters: list[tuple[int, int, asyncio.Future[bool]]] = []
        self._seq = itertools.count()
        self._task: asyncio.Task[None] | None = None
        ha.add_ack_listener(self.on_ack)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._check_loop(), name="broker-sync-state")

    async def close(self) -> None:
        await cancel_tasks(self._task)
        for _, _, fut in self._waiters:
            if not fut.done():
                fut.set_result(False)
        self._waiters.clear()

    # -- acknowledgements -------------------------------------------------------------------
    def acked(self, replica: int) -> int:
        offsets = [c.acked_offset for c in self.ha.accepted_slaves if c.replica_id == replica]
        return max(offsets, default=-1)

    def _needed_offset(self) -> int:
        """The offset every member but the master holds (the master's own end when alone)."""
        others = self.sync_set - {self.me}
        if not others:
            return self.store.max_phy_offset
        return min(self.acked(i) for i in others)

    def accepts_put(self) -> bool:
        return len(self.confirmed) >= self.config.min_in_sync_replicas

    def on_ack(self, conn: HAConnection, offset: int) -> None:
        if conn.replica_id is None or conn.async_learner:
            return
        self._take_mark(time.monotonic())
        for mark_time, mark_offset in reversed(self._marks):
            if mark_offset <= offset:
                if mark_time > self.caught_up.get(conn.replica_id, -1.0):
                    self.caught_up[conn.replica_id] = mark_time
                break
        self._release()

    def _take_mark(self, now: float) -> None:
        if now - self._marks[-1][0] < _MARK_S:
            return
        self._marks.append((now, self.store.max_phy_offset))
        keep = self.config.ha_max_time_slave_not_catchup / 1000 + 1
        while len(self._marks) > 2 and self._marks[1][0] < now - keep:
            self._marks.popleft()

    def _release(self) -> None:
        if not self._waiters:
            return
        held = self._needed_offset()
        while self._waiters and self._waiters[0][0] <= held:
            fut = heapq.heappop(self._waiters)[2]
            if not fut.done():
                fut.set_result(True)

    async def wait_replicated(self, end_offset: int) -> PutMessageStatus:
        if not self.config.all_ack_in_sync_state_set or self._needed_offset() >= end_offset:
            return PutMessageStatus.PUT_OK
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (end_offset, next(self._seq), fut))
        self.ha.wake()
        try:
            ok = await result_within(fut, self.store.config.sync_flush_timeout / 1000)
        except TimeoutError:
            ok = False
        if not ok:
            log.warning(
                "SyncStateSet %s did not all acknowledge offset %d within %d ms",
                sorted(self.sync_set), end_offset, self.store.config.sync_flush_timeout,
            )  # fmt: skip
            return PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        return PutMessageStatus.PUT_OK

    # -- shrink / expand --------------------------------------------------------------------
    async def _check_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.check_sync_state_set_period / 1000)
            try:
                await self.check_once()
            except Exception:
                log.exception("SyncStateSet check failed")

    async def check_once(self) -> None:
        now = time.monotonic()
        limit = self.config.ha_max_time_slave_not_catchup / 1000
        learners = {
            c.replica_id for c in self.ha.accepted_slaves if c.async_learner and c.replica_id is not None
        }
        lagging = {i for i in self.confirmed - {self.me} if now - self.caught_up.get(i, 0.0) > limit}
        lagging |= learners & self.confirmed
        connected = {
            c.replica_id for c in self.ha.accepted_slaves if c.replica_id is not None and not c.async_learner
        }
        joining = {
            i for i in connected - self.confirmed
            if now - self.caught_up.get(i, -limit - 1) <= limit and self.acked(i) >= self.epoch_start
        }  # fmt: skip
        # Joining members are waited for at once (only stricter); one the controller has not
        # confirmed yet is asked for again at the next check, until it agrees or it lags.
        self.sync_set = self.confirmed | joining
        self._release()  # a pending member that lags again is no longer waited for
        if not lagging and not joining:
            return
        wanted = frozenset((self.confirmed | joining) - lagging)
        answer = await self.alter(wanted, self.sync_set_epoch)
        if answer is None:
            return
        self.confirmed = self.sync_set = answer.sync_state_set | {self.me}
        self.sync_set_epoch = answer.sync_state_set_epoch
        log.info("SyncStateSet now %s (epoch %d)", sorted(self.sync_set), self.sync_set_epoch)
        self.on_change(answer)
        self._release()

    def adopt(self, current: SyncStateSet) -> None:
        """The controller's SyncStateSet (from the broker's replica-info poll), when newer than
        this one's: the controller applied a change whose answer never arrived (a timeout),
        and every later request would be fenced by the stale syncStateSetEpoch."""
        if current.sync_state_set_epoch <= self.sync_set_epoch:
            return
        self.confirmed = self.sync_set = current.sync_state_set | {self.me}
        self.sync_set_epoch = current.sync_state_set_epoch
        log.warning("SyncStateSet %s (epoch %d) taken from the controller", sorted(self.sync_set),
                    self.sync_set_epoch)  # fmt: skip
        self.on_change(current)
        self._release()

    def runtime_info(self) -> dict[str, str]:
        return {
            "syncStateSet": ",".join(str(i) for i in sorted(self.sync_set)),
            "syncStateSetEpoch": str(self.sync_set_epoch),
        }
