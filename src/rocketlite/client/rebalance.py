"""Rebalance: which queues this consumer owns (`RebalanceImpl`), and the allocation strategies.

In clustering mode every member of a group computes the same answer independently: it takes
the topic's readable queues and the group's client ids (GET_CONSUMER_LIST_BY_GROUP), sorts both
and applies the strategy, so members agree without talking to each other as long as they see
the same membership (brokers send NOTIFY_CONSUMER_IDS_CHANGED when it changes, and every client
also rebalances every 20 s). In broadcasting mode a consumer owns every queue.

`Rebalancer.do_rebalance` then reconciles the process-queue table: queues no longer owned are
given up through the owner's `release_queue` (commit offset, unlock for orderly consumers, drop
the process queue) and new ones are taken through `claim_queue` (lock for orderly consumers,
find the start offset, start pulling). A queue that cannot be claimed now (its lock is held by
the previous owner, its offset unreadable) is simply tried again on the next round.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from rocketlite.client.api import BrokerApi
from rocketlite.client.errors import ClientError
from rocketlite.client.instance import ClientInstance
from rocketlite.client.message import MessageQueue
from rocketlite.client.process_queue import ProcessQueue
from rocketlite.protocol.allocate import allocate_averagely
from rocketlite.protocol.bodies.heartbeat import MessageModel, SubscriptionData
from rocketlite.protocol.reserved import RETRY_GROUP_TOPIC_PREFIX

log = logging.getLogger("rocketlite.client.rebalance")

AllocateStrategy = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]
QueueListener = Callable[[str, list[MessageQueue], list[MessageQueue]], None]


REPEAT_LOG_S = 60
NO_ROUTE_WARN_S = 30.0  # a subscribed topic without a route is warned about this often


@dataclass(slots=True)
class _Failure:
    """When a rebalance failure's cause was last reported, and the repeats since."""

    logged: float
    count: int = 0


class RebalanceOwner(Protocol):
    """What the rebalancer needs from its consumer."""

    group: str
    message_model: MessageModel

    def subscriptions(self) -> dict[str, SubscriptionData]: ...

    async def claim_queue(self, mq: MessageQueue) -> ProcessQueue | None: ...

    async def release_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool: ...


class Rebalancer:
    """The process-queue table of one consumer and the logic that keeps it in line with ownership."""

    def __init__(
        self,
        owner: RebalanceOwner,
        instance: ClientInstance,
        api: BrokerApi,
        strategy: AllocateStrategy = allocate_averagely,
        listener: QueueListener | None = None,
    ) -> None:
        self.owner = owner
        self.instance = instance
        self.api = api
        self.strategy = strategy
        self.listener = listener
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self._assigned: dict[str, list[MessageQueue]] = {}
        self._failing: dict[str, _Failure] = {}
        self._no_route: dict[str, float] = {}  # topic -> clock.monotonic() of its last warning
        self.clock = instance.config.clock

    def _report_failure(self, topic: str, exc: ClientError) -> None:
        """A new cause once, at WARNING, with the name servers; the same cause again (for any
        topic of the group: a down name server fails them all) at most every REPEAT_LOG_S, since
        the instance retries at once with backoff and would otherwise print a line per retry."""
        now = time.monotonic()
        text = str(exc)
        seen = self._failing.get(text)
        if seen is None:
            self._failing[text] = _Failure(now)
            log.warning(
                "rebalance of group %s failed: %s (topic %s; name servers %s; retrying with backoff, "
                "repeats are logged every %d s)",
                self.owner.group, text, topic, ";".join(self.instance.namesrv_addrs), REPEAT_LOG_S,
            )  # fmt: skip
            return
        seen.count += 1
        if now - seen.logged < REPEAT_LOG_S:
            log.debug("rebalance of group %s, topic %s failed again: %s", self.owner.group, topic, text)
            return
        log.warning(
            "rebalance of group %s still failing (%d times since the last report): %s",
            self.owner.group, seen.count, text,
        )  # fmt: skip
        seen.logged, seen.count = now, 0

    async def warn_no_route(self, topic: str) -> None:
        """A subscribed topic has no route: a WARNING naming it and the name server (which says
        whether the topic or the broker is missing), at once and then every NO_ROUTE_WARN_S while
        it lasts, as Java's client warns on each rebalance. Retry topics get theirs from the
        broker shortly after the first heartbeat: not worth a warning."""
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            log.debug("rebalance of %s: topic %s has no route yet", self.owner.group, topic)
            return
        now = self.clock.monotonic()
        last = self._no_route.get(topic)
        if last is not None and now - last < NO_ROUTE_WARN_S:
            log.debug("rebalance of %s: topic %s still has no route", self.owner.group, topic)
            return
        self._no_route[topic] = now
        reason = await self.instance.no_route_reason(topic, for_send=False)
        log.warning(
            "consumer group %s subscribes to %s, which has no route: %s; it is consumed once it has "
            "one (this warning repeats every %d s until then)",
            self.owner.group, topic, reason, NO_ROUTE_WARN_S,
        )  # fmt: skip

    async def _route_found(self, topic: str) -> None:
        """After a warning: say so, and heartbeat before asking for the group's members, since
        the topic's brokers may not have heard of this consumer yet (a broker is heartbeated once
        a route names it, and this one had none)."""
        if self._no_route.pop(topic, None) is not None:
            log.info("consumer group %s: topic %s has a route now", self.owner.group, topic)
            await self.instance.send_heartbeat_to_all()

    async def do_rebalance(self) -> bool:
        """One round for every subscribed topic; False when some topic could not be settled yet."""
        complete, failed = True, False
        subs = self.owner.subscriptions()
        for topic in sorted(subs):
            try:
                complete = await self._rebalance_topic(topic) and complete
            except ClientError as exc:
                self._report_failure(topic, exc)
                failed = True
                complete = False
        if self._failing and not failed:
            self._failing.clear()
            log.info("rebalance of group %s works again", self.owner.group)
        for mq in [mq for mq in self.process_queues if mq.topic not in subs]:
            pq = self.process_queues[mq]
            if await self.owner.release_queue(mq, pq):
                del self.process_queues[mq]
        return complete

    async def _rebalance_topic(self, topic: str) -> bool:
        mq_all = self.instance.subscribe_info(topic)
        if not mq_all:
            await self.instance.update_topic_route(topic)
            mq_all = self.instance.subscribe_info(topic)
        if not mq_all:
            await self.warn_no_route(topic)
            return False
        await self._route_found(topic)
        if self.owner.message_model is MessageModel.BROADCASTING:
            mine = list(mq_all)
        else:
            cids = sorted(await self.api.consumer_id_list(self.owner.group, topic))
            if not cids:
                log.debug("rebalance of %s: no consumer ids for %s yet", self.owner.group, topic)
                return False
            mine = self.strategy(self.owner.group, self.instance.client_id, sorted(mq_all), cids)
            if self.instance.client_id not in cids:
                return False
        settled = await self._update_table(topic, set(mine))
        if sorted(mine) != self._assigned.get(topic):
            self._assigned[topic] = sorted(mine)
            log.info(
                "rebalance %s/%s: %d of %d queues: %s",
                self.owner.group, topic, len(mine), len(mq_all),
                [f"{mq.broker_name}:{mq.queue_id}" for mq in sorted(mine)],
            )  # fmt: skip
            if self.listener is not None:
                try:
                    self.listener(topic, sorted(mq_all), sorted(mine))
                except Exception:
                    log.exception("queue listener failed")
        return settled

    async def _update_table(self, topic: str, mine: set[MessageQueue]) -> bool:
        settled = True
        for mq in [mq for mq in self.process_queues if mq.topic == topic]:
            pq = self.process_queues[mq]
            if mq not in mine or pq.dropped:
                if await self.owner.release_queue(mq, pq):
                    del self.process_queues[mq]
                else:
                    settled = False
        for mq in sorted(mine - set(self.process_queues)):
            claimed = await self.owner.claim_queue(mq)
            if claimed is None:
                settled = False
            else:
                self.process_queues[mq] = claimed
        return settled

    def assigned(self) -> list[MessageQueue]:
        return sorted(mq for mq, pq in self.process_queues.items() if not pq.dropped)

    async def release_all(self) -> None:
        for mq, pq in list(self.process_queues.items()):
            await self.owner.release_queue(mq, pq)
        self.process_queues.clear()
