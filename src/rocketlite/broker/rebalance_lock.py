"""Queue locks for orderly consumers: LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42).

An orderly consumer only consumes a queue while it holds that queue's lock on the broker, so two
clients of a group never process one queue at the same time during a rebalance. The rules are
`RebalanceLockManager`'s: a lock is granted if the queue is free, already held by the same client
(which refreshes it), or held by a client that has not refreshed it for `lockMaxLiveTime` (60 s;
clients re-lock every 20 s). Unlocking releases only the caller's own locks.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from rocketlite.clock import Clock
from rocketlite.protocol.bodies.message_queue import LockBatchRequestBody, LockBatchResponseBody, MessageQueue
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.remoting.connection import Connection

log = logging.getLogger("rocketlite.broker.lock")

# `rocketmq.broker.rebalance.lockMaxLiveTime` default.
LOCK_MAX_LIVE_TIME_MS = 60_000


@dataclass(slots=True)
class LockEntry:
    client_id: str
    last_update: int


class RebalanceLockManager:
    """(group, queue) -> the client holding it. Thread-safe, though the broker uses it from the loop."""

    def __init__(self, clock: Clock, *, max_live_ms: int = LOCK_MAX_LIVE_TIME_MS) -> None:
        self.clock = clock
        self.max_live_ms = max_live_ms
        self.table: dict[str, dict[MessageQueue, LockEntry]] = {}
        self._lock = threading.Lock()

    def _expired(self, entry: LockEntry, now: int) -> bool:
        return now - entry.last_update > self.max_live_ms

    def try_lock_batch(
        self, group: str, mqs: Iterable[MessageQueue], client_id: str, now_ms: int | None = None
    ) -> set[MessageQueue]:
        """Lock what can be locked for `client_id`; returns the queues it now holds."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        locked: set[MessageQueue] = set()
        with self._lock:
            entries = self.table.setdefault(group, {})
            for mq in mqs:
                entry = entries.get(mq)
                if entry is None:
                    entries[mq] = LockEntry(client_id, now)
                    log.info("group %s: %s locked by %s", group, mq, client_id)
                elif entry.client_id == client_id:
                    entry.last_update = now
                elif self._expired(entry, now):
                    log.warning(
                        "group %s: %s lock of %s expired, now held by %s",
                        group,
                        mq,
                        entry.client_id,
                        client_id,
                    )
                    entry.client_id, entry.last_update = client_id, now
                else:
                    log.warning(
                        "group %s: %s not locked for %s: held by %s", group, mq, client_id, entry.client_id
                    )
                    continue
                locked.add(mq)
            if not entries:
                del self.table[group]
        return locked

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        """Release the queues `client_id` holds; others' locks are left alone."""
        with self._lock:
            entries = self.table.get(group)
            if entries is None:
                return
            for mq in mqs:
                entry = entries.get(mq)
                if entry is None:
                    continue
                if entry.client_id == client_id:
                    del entries[mq]
                    log.info("group %s: %s unlocked by %s", group, mq, client_id)
                else:
                    log.warning(
                        "group %s: %s unlock by %s refused: held by %s", group, mq, client_id, entry.client_id
                    )
            if not entries:
                del self.table[group]

    def is_locked(self, group: str, mq: MessageQueue, client_id: str, now_ms: int | None = None) -> bool:
        """True if `client_id` holds a live lock on `mq`."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        with self._lock:
            entry = self.table.get(group, {}).get(mq)
            return entry is not None and entry.client_id == client_id and not self._expired(entry, now)

    # -- wire -------------------------------------------------------------------------------
    def handle_lock(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        body = LockBatchRequestBody.from_json(request.body or b"")
        ok = self.try_lock_batch(body.consumer_group, body.mq_set, body.client_id)
        return make_response(
            request, ResponseCode.SUCCESS, body=LockBatchResponseBody(frozenset(ok)).to_bytes()
        )

    def handle_unlock(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """Sync or one-way (the connection sends nothing back for one-way requests)."""
        del conn
        body = LockBatchRequestBody.from_json(request.body or b"")
        self.unlock_batch(body.consumer_group, body.mq_set, body.client_id)
        return make_response(request, ResponseCode.SUCCESS)
