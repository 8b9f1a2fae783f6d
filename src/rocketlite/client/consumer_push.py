"""`AsyncPushConsumer`: long-polling pull loops that feed a listener (`DefaultMQPushConsumer`).

Start: routes for the subscribed topics (plus `%RETRY%group`, subscribed automatically in
clustering mode), a heartbeat to every broker, then an immediate rebalance. For every queue the
rebalance hands us (`claim_queue`) the consumer finds its start offset (the broker's committed
offset, else `consume_from_where`), and runs one pull loop:

* flow control: no new pull while the queue holds more than `pull_threshold_for_queue` messages
  or `pull_threshold_size_for_queue` MiB (or, for concurrent consumers, spans more than 2000
  offsets); the loop waits on the process queue's `space` event instead of polling;
* PULL_MESSAGE with the SUSPEND flag: the broker holds the request up to 15 s when there is
  nothing new, so an idle consumer costs one request per 15 s per queue; the socket timeout is 30 s;
* the committed offset rides along (COMMIT_OFFSET flag) in clustering mode;
* FOUND feeds the consume service, NO_NEW/NO_MATCHED move on, OFFSET_ILLEGAL resets the queue.

Orderly consumers in clustering mode only claim queues whose broker lock (LOCK_BATCH_MQ) they
get, renew all locks every 20 s and unlock on release. Close stops the pull loops, lets running
listeners finish, commits offsets, unlocks, and sends UNREGISTER_CLIENT.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from pathlib import Path
from typing import Final, Unpack

from rocketlite.client.api import BrokerApi, build_subscription
from rocketlite.client.config import ClientConfig, ClientOptions
from rocketlite.client.consume_service import (
    ConcurrentConsumeService,
    ConcurrentListener,
    OrderlyConsumeService,
    OrderlyListener,
    consume_directly,
)
from rocketlite.client.consume_stats import ConsumerStats
from rocketlite.client.errors import ClientError, ClientStateError
from rocketlite.client.lifecycle import AsyncConsumerBase
from rocketlite.client.message import Message, MessageExt, MessageQueue, PullStatus
from rocketlite.client.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
    UnstartedOffsetStore,
)
from rocketlite.client.process_queue import ProcessQueue
from rocketlite.client.producer import AsyncProducer
from rocketlite.client.rebalance import AllocateStrategy, QueueListener, Rebalancer
from rocketlite.client.selector import MessageSelector
from rocketlite.protocol.allocate import allocate_averagely
from rocketlite.protocol.bodies.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData
from rocketlite.protocol.bodies.running_info import ConsumeMessageDirectlyResult
from rocketlite.protocol.codes import PullSysFlag
from rocketlite.protocol.message import MessageConst
from rocketlite.protocol.reserved import RETRY_GROUP_TOPIC_PREFIX as RETRY_PREFIX
from rocketlite.protocol.subscription import TAG_EXPRESSION
from rocketlite.runtime import acquire_within, wait_event

log = logging.getLogger("rocketlite.client.consumer")

BROKER_SUSPEND_MAX_TIME_MS: Final = 15_000
CONSUMER_TIMEOUT_WHEN_SUSPEND: Final = 30.0
PULL_DELAY_WHEN_EXCEPTION: Final = 3.0
LOCK_INTERVAL: Final = 20.0
CONSUME_CONCURRENTLY_MAX_SPAN: Final = 2000
DEFAULT_MAX_RECONSUME_TIMES: Final = 16
LAST_OFFSET_KINDS: Final = frozenset(
    {
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST,
        ConsumeFromWhere.CONSUME_FROM_MIN_OFFSET,
        ConsumeFromWhere.CONSUME_FROM_MAX_OFFSET,
    }
)


class AsyncPushConsumer(AsyncConsumerBase):
    """Subscribe, register one listener, `start()`; `close()` when done (or `async with`).

    `max_reconsume_times=None` leaves the limit to the broker's subscription-group setting
    (`retryMaxTimes`, 16 by default); Java always sends 16, which hides the group setting.
    `config=` / `instance_name=` / the ACL keys: see `ClientOptions`.
    """

    consume_type = ConsumeType.CONSUME_PASSIVELY

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: int | None = None,
        allocate_strategy: AllocateStrategy = allocate_averagely,
        consume_thread_max: int = 20,
        consume_message_batch_max_size: int = 1,
        pull_batch_size: int = 32,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue: int = 100,
        pull_interval: float = 0.0,
        max_reconsume_times: int | None = None,
        suspend_current_queue_time: float = 1.0,
        offset_store_dir: str | Path | None = None,
        post_subscription_when_pull: bool = False,
        await_termination: float = 10.0,
        queue_listener: QueueListener | None = None,
        **options: Unpack[ClientOptions],
    ) -> None:
        super().__init__(group, namesrv_addr, **options)
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.consume_timestamp = (
            consume_timestamp if consume_timestamp is not None else int((time.time() - 1800) * 1000)
        )
        self.allocate_strategy = allocate_strategy
        self.consume_thread_max = consume_thread_max
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue
        self.pull_interval = pull_interval
        self.max_reconsume_times = max_reconsume_times
        self.suspend_current_queue_time = suspend_current_queue_time
        self.offset_store_dir = (
            Path(offset_store_dir) if offset_store_dir else Path.home() / ".rocketmq_offsets"
        )
        self.post_subscription_when_pull = post_subscription_when_pull
        self.await_termination = await_termination
        self.queue_listener = queue_listener
        self._concurrent: ConcurrentListener | None = None
        self._orderly: OrderlyListener | None = None
        self._service: ConcurrentConsumeService | OrderlyConsumeService | None = None
        self._rebalancer: Rebalancer | None = None
        self._lock_task: asyncio.Task[None] | None = None
        self._rebalance_lock = asyncio.Lock()
        self._running = False
        self.flow_control_times = 0
        self.executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=consume_thread_max, thread_name_prefix=f"rocketlite-consume-{group}"
        )
        self.offset_store: OffsetStore = UnstartedOffsetStore()
        self.api: BrokerApi | None = None
        self.stats = ConsumerStats()
        self.start_timestamp = 0  # epoch ms of the last start (ConsumerRunningInfo)

    # -- configuration ---------------------------------------------------------------------
    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Subscribe with a TAG expression (`"*"`, `"TagA || TagB"`) or a `MessageSelector`
        (`MessageSelector.by_sql("a > 5")`, filtered by the broker); may be called while running."""
        self._subs[topic] = build_subscription(topic, expression, int(time.time() * 1000))
        self._subscriptions_changed(topic)

    def unsubscribe(self, topic: str) -> None:
        self._subs.pop(topic, None)
        self._subscriptions_changed(None)

    def _subscriptions_changed(self, new_topic: str | None) -> None:
        """While running, tell the brokers at once (they filter pulls by the heartbeat's subscriptions)."""
        instance = self._instance
        if instance is None or not self._running:
            return

        async def announce() -> None:
            if new_topic is not None:
                await instance.update_topic_route(new_topic)
            await instance.send_heartbeat_to_all()
            instance.rebalance_immediately()

        instance.spawn(announce(), f"subscription change of {self.group}")

    def register_message_listener(self, listener: ConcurrentListener) -> None:
        """A concurrent listener: `(msgs, ctx) -> ConsumeStatus` (plain function or coroutine)."""
        self._concurrent, self._orderly = listener, None

    def register_message_listener_orderly(self, listener: OrderlyListener) -> None:
        """An orderly listener: `(msgs, ctx) -> ConsumeOrderlyStatus`; one queue's messages in order."""
        self._orderly, self._concurrent = listener, None

    @property
    def orderly(self) -> bool:
        return self._orderly is not None

    @property
    def retry_topic(self) -> str:
        return RETRY_PREFIX + self.group

    def assigned_queues(self) -> list[MessageQueue]:
        return self._rebalancer.assigned() if self._rebalancer else []

    def process_queues(self) -> dict[MessageQueue, ProcessQueue]:
        """The queues held now, with what each has cached (ConsumerRunningInfo's mqTable)."""
        return dict(self._rebalancer.process_queues) if self._rebalancer else {}

    # -- what the broker relays from an admin (client/ops.py) ------------------------------
    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (`MQClientInstance.resetOffset`): each held queue of
        `topic` named in `offsets` is dropped (work in flight for it is discarded), its offset set
        and committed to the broker, and the next rebalance takes it up again from there."""
        async with self._rebalance_lock:
            rebalancer = self._rebalancer
            if rebalancer is None or not self._running:
                return
            for mq, pq in list(rebalancer.process_queues.items()):
                if mq.topic != topic or mq not in offsets:
                    continue
                pq.dropped = True
                pq.space.set()
                if pq.pull_task is not None and not pq.pull_task.done():
                    pq.pull_task.cancel()
                self.offset_store.update(mq, offsets[mq])
                await self.offset_store.persist([mq], oneway=False)
                self.offset_store.remove(mq)
                del rebalancer.process_queues[mq]
                log.info("%s: offset of %s reset to %d", self.group, mq, offsets[mq])
        self.instance.rebalance_immediately()

    async def consume_directly(self, msg: MessageExt, broker_name: str) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY: `msg` through the listener, outside the pull loop."""
        msg.broker_name = broker_name
        return await consume_directly(self, self._concurrent, self._orderly, msg)

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        if self._instance is not None:
            return
        if self._concurrent is None and self._orderly is None:
            raise ClientStateError("register a message listener before start()")
        if not self._subs:
            raise ClientStateError("subscribe to a topic before start()")
        if self.message_model is MessageModel.CLUSTERING:
            self._subs[self.retry_topic] = build_subscription(self.retry_topic, "*", int(time.time() * 1000))
        instance = await self._acquire_instance(new_inner_producer)
        self._instance = instance
        self.api = BrokerApi(instance)
        if self.message_model is MessageModel.BROADCASTING:
            self.offset_store = LocalFileOffsetStore(self.offset_store_dir, instance.client_id, self.group)
        else:
            self.offset_store = RemoteBrokerOffsetStore(self.api, self.group)
        await self.offset_store.load()
        if self._orderly is not None:
            max_times = self.max_reconsume_times if self.max_reconsume_times is not None else 2**31 - 1
            self._service = OrderlyConsumeService(
                self,
                self._orderly,
                max_reconsume_times=max_times,
                suspend_time=self.suspend_current_queue_time,
            )
        else:
            assert self._concurrent is not None
            self._service = ConcurrentConsumeService(self, self._concurrent, self.consume_thread_max)
        self._rebalancer = Rebalancer(self, instance, self.api, self.allocate_strategy, self.queue_listener)
        self._running = True
        self.start_timestamp = int(time.time() * 1000)
        for topic in list(self._subs):
            try:
                route = await instance.update_topic_route(topic)
            except ClientError as exc:
                log.warning("route of %s unavailable at start: %s", topic, exc)
            else:
                if route is None:
                    await self._rebalancer.warn_no_route(topic)
        try:
            await self._check_client_config()
        except ClientError:
            await self.close()
            raise
        await instance.send_heartbeat_to_all()
        if self._orderly is not None and self.message_model is MessageModel.CLUSTERING:
            self._lock_task = asyncio.get_running_loop().create_task(self._lock_loop())
        instance.rebalance_immediately()
        log.info(
            "push consumer %s started (%s, client %s)",
            self.group,
            self.message_model.name,
            instance.client_id,
        )

    async def _check_client_config(self) -> None:
        """`checkClientInBroker`: a broker of each topic subscribed by an SQL92 selector must say
        it can filter it (enablePropertyFilter, the expression parses); else start fails."""
        assert self.api is not None
        for sub in list(self._subs.values()):
            if sub.expression_type and sub.expression_type != TAG_EXPRESSION:
                await self.api.check_client_config(self.group, sub)

    async def close(self) -> None:
        instance = self._instance
        if instance is None or not self._running:
            return
        self._running = False
        async with self._rebalance_lock:  # let a rebalance round in flight finish first
            pass
        if self._lock_task is not None:
            self._lock_task.cancel()
            await asyncio.wait({self._lock_task})
        rebalancer = self._rebalancer
        assert rebalancer is not None and self._service is not None
        pulls = [pq.pull_task for pq in rebalancer.process_queues.values() if pq.pull_task is not None]
        for task in pulls:
            task.cancel()
        await asyncio.gather(*pulls, return_exceptions=True)
        await self._service.shutdown(self.await_termination)
        await self.offset_store.persist(rebalancer.process_queues, oneway=False)
        if self.orderly and self.message_model is MessageModel.CLUSTERING:
            await self._unlock_all(rebalancer.process_queues)
        for pq in rebalancer.process_queues.values():
            pq.dropped = True
        rebalancer.process_queues.clear()
        await self._unregister(instance)
        self.executor.shutdown(wait=False, cancel_futures=True)
        self._instance = None
        await instance.release()
        log.info("push consumer %s closed", self.group)

    # -- ClientInstance member protocol -----------------------------------------------------
    def subscriptions(self) -> dict[str, SubscriptionData]:
        return dict(self._subs)

    async def do_rebalance(self) -> bool:
        async with self._rebalance_lock:
            if not self._running or self._rebalancer is None:
                return True
            return await self._rebalancer.do_rebalance()

    async def persist_offsets(self) -> None:
        if self._running and self._rebalancer is not None:
            await self.offset_store.persist(self._rebalancer.process_queues, oneway=True)

    # -- rebalance owner -------------------------------------------------------------------
    async def claim_queue(self, mq: MessageQueue) -> ProcessQueue | None:
        if not self._running:
            return None
        pq = ProcessQueue()
        locking = self.orderly and self.message_model is MessageModel.CLUSTERING
        if locking and not await self._lock(mq, pq):
            log.info("%s: queue %s is still locked by another consumer", self.group, mq)
            return None
        self.offset_store.remove(mq)
        try:
            offset = await self.compute_pull_from_where(mq)
        except ClientError as exc:
            log.warning("%s: start offset of %s unavailable: %s", self.group, mq, exc)
            return None
        if offset < 0 or not self._running:
            return None
        pq.pull_task = asyncio.get_running_loop().create_task(
            self._pull_loop(mq, pq, offset),
            name=f"pull-{self.group}-{mq.topic}-{mq.broker_name}-{mq.queue_id}",
        )
        pq.pull_task.add_done_callback(_log_crash)
        return pq

    async def release_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        pq.dropped = True
        pq.space.set()
        if pq.pull_task is not None and not pq.pull_task.done():
            pq.pull_task.cancel()
        if self.orderly and self.message_model is MessageModel.CLUSTERING:
            if not await acquire_within(pq.consume_lock, 1.0):
                return False
            try:
                await self.offset_store.persist([mq], oneway=False)
                self.offset_store.remove(mq)
                await self._unlock({mq})
            finally:
                pq.consume_lock.release()
            return True
        await self.offset_store.persist([mq], oneway=False)
        self.offset_store.remove(mq)
        return True

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """`computePullFromWhereWithException`: the stored offset, else per `consume_from_where`."""
        assert self.api is not None
        last = await self.offset_store.read(mq, ReadOffsetType.STORE)
        if last >= 0:
            return last
        retry = mq.topic.startswith(RETRY_PREFIX)
        cfw = self.consume_from_where
        if cfw in LAST_OFFSET_KINDS:
            return 0 if retry else await self.api.get_max_offset(mq)
        if cfw is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return 0
        if retry:
            return await self.api.get_max_offset(mq)
        return await self.api.search_offset(mq, self.consume_timestamp)

    # -- locks (orderly, clustering) -------------------------------------------------------
    async def _lock(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        assert self.api is not None
        try:
            locked = await self.api.lock_batch(self.group, mq.broker_name, {mq})
        except ClientError as exc:
            log.warning("locking %s failed: %s", mq, exc)
            return False
        if mq in locked:
            pq.locked, pq.last_lock_time = True, time.monotonic()
            return True
        return False

    async def lock_queue(self, mq: MessageQueue) -> bool:
        pq = self._rebalancer.process_queues.get(mq) if self._rebalancer else None
        return pq is not None and not pq.dropped and await self._lock(mq, pq)

    async def _unlock(self, mqs: set[MessageQueue]) -> None:
        assert self.api is not None
        by_broker: dict[str, set[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, set()).add(mq)
        for broker, group in by_broker.items():
            try:
                await self.api.unlock_batch(self.group, broker, group)
            except ClientError as exc:
                log.warning("unlocking %d queue(s) on %s failed: %s", len(group), broker, exc)

    async def _unlock_all(self, pqs: dict[MessageQueue, ProcessQueue]) -> None:
        await self._unlock(set(pqs))
        for pq in pqs.values():
            pq.locked = False

    async def _lock_loop(self) -> None:
        """Renew every held lock (`lockAll`): the broker forgets a lock after 60 s without renewal."""
        while True:
            await asyncio.sleep(LOCK_INTERVAL)
            if self._rebalancer is None or self.api is None:
                continue
            by_broker: dict[str, set[MessageQueue]] = {}
            for mq in self._rebalancer.process_queues:
                by_broker.setdefault(mq.broker_name, set()).add(mq)
            for broker, mqs in by_broker.items():
                try:
                    locked = await self.api.lock_batch(self.group, broker, mqs)
                except ClientError as exc:
                    log.warning("renewing locks on %s failed: %s", broker, exc)
                    continue
                for mq in mqs:
                    pq = self._rebalancer.process_queues.get(mq)
                    if pq is not None:
                        pq.locked = mq in locked
                        if pq.locked:
                            pq.last_lock_time = time.monotonic()

    # -- the pull loop ---------------------------------------------------------------------
    def _throttled(self, pq: ProcessQueue) -> bool:
        if pq.count > self.pull_threshold_for_queue:
            return True
        if pq.msg_size > self.pull_threshold_size_for_queue * 1024 * 1024:
            return True
        return not self.orderly and pq.span() > CONSUME_CONCURRENTLY_MAX_SPAN

    def flow_released(self, pq: ProcessQueue) -> None:
        if not self._throttled(pq):
            pq.space.set()

    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        assert self.api is not None and self._service is not None
        clustering = self.message_model is MessageModel.CLUSTERING
        broker_id = 0
        while not pq.dropped and self._running:
            if self._throttled(pq):
                self.flow_control_times += 1
                pq.space.clear()
                await wait_event(pq.space, 1.0)
                continue
            if self.orderly and clustering and not pq.locked:
                await asyncio.sleep(PULL_DELAY_WHEN_EXCEPTION)
                continue
            sub = self._subs.get(mq.topic)
            if sub is None:
                await asyncio.sleep(PULL_DELAY_WHEN_EXCEPTION)
                continue
            sys_flag = PullSysFlag.SUSPEND
            commit_offset = 0
            if clustering:
                stored = await self.offset_store.read(mq, ReadOffsetType.MEMORY)
                if stored > 0:
                    commit_offset, sys_flag = stored, sys_flag | PullSysFlag.COMMIT_OFFSET
            if self.post_subscription_when_pull:
                sys_flag |= PullSysFlag.SUBSCRIPTION
            pq.last_pull_time = began = time.monotonic()
            try:
                raw = await self.api.pull(
                    self.group, mq, sub, offset, self.pull_batch_size,
                    sys_flag=sys_flag, commit_offset=commit_offset,
                    suspend_timeout_ms=BROKER_SUSPEND_MAX_TIME_MS, timeout=CONSUMER_TIMEOUT_WHEN_SUSPEND,
                    broker_id=broker_id,
                )  # fmt: skip
            except ClientError as exc:
                if pq.dropped:
                    return
                log.warning("%s: pull of %s at %d failed: %s", self.group, mq, offset, exc)
                await asyncio.sleep(PULL_DELAY_WHEN_EXCEPTION)
                continue
            if pq.dropped:
                return
            if self.instance.broker_addr(mq.broker_name, raw.suggest_which_broker_id):
                broker_id = raw.suggest_which_broker_id
            result = raw.result
            self.stats.record_pull(mq.topic, (time.monotonic() - began) * 1000, len(result.messages))
            if result.status is PullStatus.FOUND:
                offset = result.next_begin_offset
                if result.messages:
                    pq.put(result.messages)
                    self._service.submit(result.messages, pq, mq)
            elif result.status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
                offset = result.next_begin_offset
                if pq.count == 0:
                    self.offset_store.update(mq, offset, increase_only=True)
            else:
                await self._offset_illegal(mq, pq, result.next_begin_offset)
                return
            if self.pull_interval > 0:
                await asyncio.sleep(self.pull_interval)

    async def _offset_illegal(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        """OFFSET_ILLEGAL: commit the broker's suggestion, drop the queue, let rebalance re-create it."""
        log.warning("%s: offset of %s illegal, moving to %d", self.group, mq, next_offset)
        pq.dropped = True
        self.offset_store.update(mq, next_offset)
        await self.offset_store.persist([mq], oneway=False)
        if self._rebalancer is not None and self._rebalancer.process_queues.get(mq) is pq:
            del self._rebalancer.process_queues[mq]
        self.instance.rebalance_immediately()

    # -- consume-service callbacks ---------------------------------------------------------
    def reset_retry_topic(self, msgs: list[MessageExt]) -> None:
        """Messages from `%RETRY%group` show their original topic (`resetRetryAndNamespace`)."""
        for m in msgs:
            original = m.properties.get(MessageConst.RETRY_TOPIC)
            if original and m.topic == self.retry_topic:
                m.topic = original

    async def send_message_back(self, msg: MessageExt, delay_level: int) -> bool:
        """CONSUMER_SEND_MSG_BACK, falling back to producing to `%RETRY%group` (Java's order)."""
        assert self.api is not None
        try:
            await self.api.send_back(msg, self.group, delay_level, self.max_reconsume_times)
            return True
        except ClientError as exc:
            log.warning(
                "%s: send-back of %s failed (%s); re-sending to %s",
                self.group,
                msg.msg_id,
                exc,
                self.retry_topic,
            )
        max_times = (
            self.max_reconsume_times if self.max_reconsume_times is not None else DEFAULT_MAX_RECONSUME_TIMES
        )
        return await self._resend_to_retry(msg, msg.reconsume_times + 1, max_times)

    async def send_to_dlq_orderly(self, msg: MessageExt) -> bool:
        """Orderly give-up: re-send with the count exhausted so the broker routes it to the DLQ."""
        max_times = self.max_reconsume_times if self.max_reconsume_times is not None else 2**31 - 1
        return await self._resend_to_retry(msg, msg.reconsume_times, max_times)

    async def _resend_to_retry(self, msg: MessageExt, reconsume: int, max_times: int) -> bool:
        props = dict(msg.properties)
        props.setdefault(MessageConst.RETRY_TOPIC, msg.topic)
        if not props.get(MessageConst.ORIGIN_MESSAGE_ID):
            props[MessageConst.ORIGIN_MESSAGE_ID] = msg.msg_id
        props[MessageConst.RECONSUME_TIME] = str(reconsume)
        props[MessageConst.MAX_RECONSUME_TIMES] = str(max_times)
        props.pop(MessageConst.TRANSACTION_PREPARED, None)
        new = Message(self.retry_topic, msg.body, properties=props, flag=msg.flag)
        new.delay_level = 3 + msg.reconsume_times
        try:
            producer = await self.instance.inner_producer()
            await producer.send(new)
            return True
        except ClientError as exc:
            log.error("%s: re-sending %s to %s failed: %s", self.group, msg.msg_id, self.retry_topic, exc)
            return False


def new_inner_producer(group: str, config: ClientConfig) -> AsyncProducer:
    """The client instance's own producer (`ClientInstance.inner_producer`), through which a push
    consumer sends back what the broker's send-back refused."""
    return AsyncProducer(group, config=config)


def _log_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("pull loop %s crashed", task.get_name(), exc_info=task.exception())
