"""RocketMQ 5's timer, POP and transaction families, and the controller-mode role and epoch,
read at each scrape from the services that keep them.

Names and labels are RocketMQ 5.3's (`DefaultStoreMetricsConstant`, `PopMetricsConstant`,
`BrokerMetricsConstant`); what each is read from (RocketMQ's source in brackets):

- timer (broker/delay/timer), with the store's `storage_type` / `storage_medium` labels:
  `rocketmq_timer_enqueue_lag` / `_latency`: units of the timer queue not read into the pending
  heap yet, and the age (ms) of the oldest [`getEnqueueBehindMessages/Millis`];
  `rocketmq_timer_dequeue_lag` / `_latency`: timers due and not delivered, and how long (ms) the
  oldest is overdue [`getDequeueBehindMessages`, `getDequeueBehind`];
  `rocketmq_timing_messages` {topic}: timers pending per real topic;
  `rocketmq_timer_enqueue_total` / `_dequeue_total` {topic}: timers read from the timer queue /
  delivered to their topic; `rocketmq_timer_message_snapshot` {timer_bound_s}: pending timers due
  within each of RocketMQ's bounds (5 s ... 24 h) from now; `rocketmq_delay_message_latency`
  {topic}: deliver time minus born time in seconds, one observation per timer read (RocketMQ's
  buckets 60 s ... 3 d). Only while the timer runs (a master with timerWheelEnable), as RocketMQ
  registers them only with timerWheelEnable.
- POP (broker/pop): `rocketmq_pop_revive_in_message_total` {consumer_group, topic,
  revive_message_type, put_status}: checkpoints (CK, one per POP record) and acks (ACK) written
  to the POP log, where RocketMQ writes them to its revive topic; `put_status` is PUT_OK (a log
  append cannot fail short of the process); `rocketmq_pop_revive_out_message_total`
  {consumer_group, topic, queue_id, revive_message_type}: due checkpoints taken back (CK;
  queue_id 0: there is one "revive queue", the POP state); `rocketmq_pop_revive_retry_messages_total`
  {consumer_group, topic, put_status}: messages delivered again after their invisible time (RocketMQ
  puts them to the POP retry topic; here they come back in place); `rocketmq_pop_revive_lag` /
  `_latency` {queue_id}: messages past their invisible time that no pop took back yet, and how long
  (ms) the oldest has waited. rocketlite's own: `rocketlite_pop_log_flushed_bytes` /
  `_written_bytes`: the length of `config/popState.log` at its last fdatasync, and now (page
  cache included): under ASYNC_FLUSH a power loss keeps the first flushed bytes, of the file of
  `rocketlite_pop_log_epoch` (a compaction starts the file over under the next epoch).
- transactions (broker/transaction.py), {topic} = the real topic:
  `rocketmq_half_messages`: halves sent since start and not ended; `rocketmq_commit_messages_total`,
  `rocketmq_rollback_messages_total`; `rocketmq_finish_message_latency`: seconds from the half's
  birth to its commit (RocketMQ records commits only, in seconds, buckets 5 s ... 24 h).
- controller mode (broker/failover), rocketlite's own names (RocketMQ 5.3's broker exports
  neither): `rocketlite_broker_role` {role}: 1 for this broker's role (SYNC_MASTER, ASYNC_MASTER
  or SLAVE), always; `rocketlite_broker_epoch`: the last master epoch in the epoch file, with
  enableControllerMode; `rocketlite_broker_truncated_messages_total` / `_bytes_total`: what epoch
  truncation cut from this replica's log since the process started (the runtime-info keys
  controllerModeTruncatedMessages / Bytes), with enableControllerMode under a controller-mode
  process (`FailoverBroker`, which keeps them across its role changes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client.core import HistogramMetricFamily, Metric

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.delay.timer.service import TimerMessageService
from rocketlite.broker.histogram import Histogram
from rocketlite.broker.metrics.rocketmq import STORAGE_LABELS, LabelledCollector, le
from rocketlite.broker.pop.state import PopService
from rocketlite.broker.transaction import TransactionalMessageService

PUT_OK = "PUT_OK"
REVIVE_QUEUE_ID = "0"


@dataclass(slots=True)
class FeatureView:
    broker: BrokerConfig
    timer: TimerMessageService | None
    pop: PopService
    transactions: TransactionalMessageService
    epoch: Callable[[], int] | None = None
    truncated: Callable[[], tuple[int, int]] | None = None  # (messages, bytes) cut since start


class FeatureCollector(LabelledCollector):
    def __init__(self, view: FeatureView) -> None:
        super().__init__(view.broker)
        self.view = view

    def collect(self) -> Iterator[Metric]:
        yield from self._timer()
        yield from self._pop()
        yield from self._transactions()
        yield from self._role()

    def _histograms(self, fam: HistogramMetricFamily, hists: dict[str, Histogram], *extra: str) -> None:
        for topic, hist in sorted(hists.items()):
            buckets = [(le(bound), n) for bound, n in hist.cumulative()]
            fam.add_metric(self._values(*extra, topic), buckets, hist.total)

    # -- timer ---------------------------------------------------------------------------------
    def _timer(self) -> Iterator[Metric]:
        timer = self.view.timer
        if timer is None or not timer.enabled:
            return
        store = tuple(STORAGE_LABELS)
        svalues = tuple(STORAGE_LABELS.values())
        enq, enq_ms = timer.enqueue_behind()
        deq, deq_ms = timer.dequeue_behind()
        for name, doc, value in (
            ("rocketmq_timer_enqueue_lag", "Timer enqueue messages lag", enq),
            ("rocketmq_timer_enqueue_latency", "Timer enqueue latency (milliseconds)", enq_ms),
            ("rocketmq_timer_dequeue_lag", "Timer dequeue messages lag", deq),
            ("rocketmq_timer_dequeue_latency", "Timer dequeue latency (milliseconds)", deq_ms),
        ):
            gauge = self._gauge(name, doc, store)
            gauge.add_metric(self._values(*svalues), value)
            yield gauge
        labels = (*store, "topic")
        timing = self._gauge("rocketmq_timing_messages", "Current message number in timing", labels)
        for topic, n in sorted(timer.timing.items()):
            timing.add_metric(self._values(*svalues, topic), n)
        yield timing
        for name, doc, counts in (
            ("rocketmq_timer_enqueue_total", "Total number of timer enqueue", timer.enqueued),
            ("rocketmq_timer_dequeue_total", "Total number of timer dequeue", timer.dequeued),
        ):
            counter = self._counter(name, doc, labels)
            for topic, n in sorted(counts.items()):
                counter.add_metric(self._values(*svalues, topic), n)
            yield counter
        snap = self._gauge(
            "rocketmq_timer_message_snapshot",
            "Timer message distribution snapshot, only count timing messages in 24h.",
            (*store, "timer_bound_s"),
        )
        for bound, n in timer.snapshot():
            snap.add_metric(self._values(*svalues, str(bound)), n)
        yield snap
        hist = self._histogram(
            "rocketmq_delay_message_latency", "Timer message set latency distribution (seconds)", labels
        )
        self._histograms(hist, timer.delay_latency, *svalues)
        yield hist

    # -- POP -----------------------------------------------------------------------------------
    def _pop(self) -> Iterator[Metric]:
        pop = self.view.pop
        fam = self._counter(
            "rocketmq_pop_revive_in_message_total", "Total number of put message to revive topic",
            ("consumer_group", "topic", "revive_message_type", "put_status"),
        )  # fmt: skip
        for (group, topic, kind), n in sorted(pop.revive_in.items()):
            fam.add_metric(self._values(group, topic, kind, PUT_OK), n)
        yield fam
        fam = self._counter(
            "rocketmq_pop_revive_out_message_total", "Total number of get message from revive topic",
            ("consumer_group", "topic", "queue_id", "revive_message_type"),
        )  # fmt: skip
        for (group, topic, kind), n in sorted(pop.revive_out.items()):
            fam.add_metric(self._values(group, topic, REVIVE_QUEUE_ID, kind), n)
        yield fam
        fam = self._counter(
            "rocketmq_pop_revive_retry_messages_total", "Total number of put message to pop retry topic",
            ("consumer_group", "topic", "put_status"),
        )  # fmt: skip
        for (group, topic), n in sorted(pop.retried.items()):
            fam.add_metric(self._values(group, topic, PUT_OK), n)
        yield fam
        lag, latency = pop.revive_behind()
        for name, doc, value in (
            ("rocketmq_pop_revive_lag", "The processing lag of revive topic", lag),
            ("rocketmq_pop_revive_latency", "The processing latency of revive topic (milliseconds)", latency),
        ):
            gauge = self._gauge(name, doc, ("queue_id",))
            gauge.add_metric(self._values(REVIVE_QUEUE_ID), value)
            yield gauge
        epoch, flushed, written = pop.table.log.positions()
        for name, doc, value in (
            (
                "rocketlite_pop_log_epoch",
                "Generation of config/popState.log (a compaction starts the next)",
                epoch,
            ),
            (
                "rocketlite_pop_log_flushed_bytes",
                "Length of config/popState.log at its last fdatasync",
                flushed,
            ),
            (
                "rocketlite_pop_log_written_bytes",
                "Length of config/popState.log, page cache included",
                written,
            ),
        ):
            gauge = self._gauge(name, doc)
            gauge.add_metric(self._values(), value)
            yield gauge

    # -- transactions --------------------------------------------------------------------------
    def _transactions(self) -> Iterator[Metric]:
        tx = self.view.transactions
        half = self._gauge("rocketmq_half_messages", "Half messages of all topics", ("topic",))
        for topic, n in sorted(tx.half_counts.items()):
            half.add_metric(self._values(topic), n)
        yield half
        for name, doc, counts in (
            ("rocketmq_commit_messages_total", "Total number of commit messages", tx.commits),
            ("rocketmq_rollback_messages_total", "Total number of rollback messages", tx.rollbacks),
        ):
            counter = self._counter(name, doc, ("topic",))
            for topic, n in sorted(counts.items()):
                counter.add_metric(self._values(topic), n)
            yield counter
        hist = self._histogram("rocketmq_finish_message_latency", "Transaction finish latency", ("topic",))
        self._histograms(hist, tx.finish_latency)
        yield hist

    # -- role and epoch ------------------------------------------------------------------------
    def _role(self) -> Iterator[Metric]:
        broker = self.view.broker
        role = self._gauge("rocketlite_broker_role", "This broker's role (1 for the role it has)", ("role",))
        role.add_metric(self._values(broker.broker_role.name), 1)
        yield role
        if self.view.epoch is not None:
            epoch = self._gauge("rocketlite_broker_epoch", "The last master epoch in the epoch file")
            epoch.add_metric(self._values(), self.view.epoch())
            yield epoch
        if self.view.truncated is not None:
            messages, cut_bytes = self.view.truncated()
            for name, what, value in (
                ("rocketlite_broker_truncated_messages", "Messages", messages),
                ("rocketlite_broker_truncated_bytes", "Bytes", cut_bytes),
            ):
                doc = f"{what} epoch truncation cut from this replica's log since the process started"
                counter = self._counter(name, doc)
                counter.add_metric(self._values(), value)
                yield counter
