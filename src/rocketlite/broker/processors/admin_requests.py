"""Admin requests (`AdminBrokerProcessor`): topics, subscription groups, statistics, configuration.

What mqadmin / the dashboard send to a broker, answered as a 4.9.8 broker does:

- topics: UPDATE_AND_CREATE_TOPIC (17; illegal names and system topics refused with SYSTEM_ERROR,
  success persists topics.json and re-registers with the name servers; 5.x's `attributes` changes
  applied as `protocol.topic_attributes` says, a refused one answered SYSTEM_ERROR with RocketMQ's
  text, message.type MIXED INVALID_PARAMETER as with enableMixedMessageType=false), DELETE_TOPIC_IN_BROKER
  (215; config, consume queues and the topic's consumer offsets), GET_ALL_TOPIC_CONFIG (21),
  GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305), GET_TOPIC_STATS_INFO (202);
- groups: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201),
  DELETE_SUBSCRIPTIONGROUP (207, optionally with the group's offsets),
  QUERY_TOPIC_CONSUME_BY_WHO (300);
- broker: GET_BROKER_RUNTIME_INFO (28), DELETE_EXPIRED_COMMITLOG (329). GET_BROKER_CONFIG (26) and
  UPDATE_BROKER_CONFIG (25) are live_config.py's.

The 5.x admin requests are beside it: `admin_catalog` (topic and group batches and lookups,
producers, cleaning), `admin_stats` (GET_CONSUME_STATS and the other consumption and traffic
figures) and `client_relay` (the requests relayed to a consumer).

`RuntimeStatsSampler` samples the store's counters every second, for the TPS figures of
GET_BROKER_RUNTIME_INFO (10 s / 1 min / 10 min windows, as Java's StoreStatsService) and the
"today / yesterday morning" totals mqadmin's brokerStatus and clusterList print.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import os
import shutil
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rocketlite.broker.client_manager import ClientManager
from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.state_files import ConsumerOffsetTable
from rocketlite.broker.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.clock import Clock
from rocketlite.protocol import perm, reserved, topic_attributes
from rocketlite.protocol.bodies.json_body import expect_obj
from rocketlite.protocol.bodies.lists import KVTable, TopicList
from rocketlite.protocol.bodies.message_queue import MessageQueue, TopicOffset, TopicStatsTable
from rocketlite.protocol.bodies.route import TopicConfig
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.admin import INVALID_PARAMETER
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.protocol.wire.custom_header import CustomHeader
from rocketlite.protocol.wire.headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetTopicStatsInfoRequestHeader,
)
from rocketlite.remoting.connection import Connection, HandlerResult
from rocketlite.runtime import cancel_tasks
from rocketlite.store.api import StoreAPI
from rocketlite.store.config import StoreConfig
from rocketlite.store.stats import DISTRIBUTE_BOUNDS_MS, DISTRIBUTE_LABELS

log = logging.getLogger("rocketlite.broker.admin")

BROKER_VERSION = 409  # MQVersion.Version.V4_9_8.ordinal()
BROKER_VERSION_DESC = "V4_9_8"
TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")
# TopicValidator.SYSTEM_TOPIC_SET (4.9.8); names starting with "rmq_sys_" are system topics too.
SYSTEM_TOPICS = frozenset(
    {reserved.DEFAULT_TOPIC, reserved.SCHEDULE_TOPIC, reserved.BENCHMARK_TOPIC, reserved.TRANS_HALF_TOPIC,
     "RMQ_SYS_TRACE_TOPIC", reserved.TRANS_OP_HALF_TOPIC, reserved.TRANS_CHECK_MAX_TIME_TOPIC,
     reserved.SELF_TEST_TOPIC, reserved.OFFSET_MOVED_EVENT}
)  # fmt: skip
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
# Java's thread-pool queue figures: no such queues here, so empty queues of Java's default capacity.
_POOL_FIGURES = {
    "sendThreadPoolQueueSize": "0", "sendThreadPoolQueueCapacity": "10000",
    "pullThreadPoolQueueSize": "0", "pullThreadPoolQueueCapacity": "100000",
    "queryThreadPoolQueueSize": "0", "queryThreadPoolQueueCapacity": "20000",
    "EndTransactionQueueSize": "0", "EndTransactionThreadPoolQueueCapacity": "100000",
    "sendThreadPoolQueueHeadWaitTimeMills": "0", "pullThreadPoolQueueHeadWaitTimeMills": "0",
    "queryThreadPoolQueueHeadWaitTimeMills": "0",
    # 5.x's lite-pull and ack pools (clusterList prints the ack pool's figures)
    "litePullThreadPoolQueueSize": "0", "litePullThreadPoolQueueCapacity": "100000",
    "litePullThreadPoolQueueHeadWaitTimeMills": "0",
    "ackThreadPoolQueueSize": "0", "ackThreadPoolQueueCapacity": "100000",
    "ackThreadPoolQueueHeadWaitTimeMills": "0",
}  # fmt: skip


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def human_bytes(n: float) -> str:
    """`MixAll.humanReadableByteCount(bytes, false)`: "512 B", "1.5 KiB", "39.2 GiB"."""
    if n < 1024:
        return f"{int(n)} B"
    for unit in "KMGTPE":
        n /= 1024
        if n < 1024 or unit == "E":
            return f"{n:.1f} {unit}iB"
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------- headers Java has, we lacked


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteSubscriptionGroupRequestHeader(CustomHeader):
    """`removeOffset` is 4.9's name of the flag, `cleanOffset` 5.x's (mqadmin 5.3 sends it)."""

    group_name: str
    remove_offset: bool = False
    clean_offset: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryTopicConsumeByWhoRequestHeader(CustomHeader):
    topic: str


# --------------------------------------------------------------------------------------- statistics


@dataclass(frozen=True, slots=True)
class _Sample:
    at: float  # monotonic seconds
    put: int
    get_found: int
    get_miss: int


class RuntimeStatsSampler:
    """Per-second samples of the store's counters: TPS windows and day-boundary totals."""

    WINDOWS_S = (10, 60, 600)

    def __init__(self, store: StoreAPI, clock: Clock, *, interval_s: float = 1.0) -> None:
        self.store = store
        self.clock = clock
        self.interval_s = interval_s
        self.samples: deque[_Sample] = deque(maxlen=int(self.WINDOWS_S[-1] / interval_s) + 2)
        self._day = self._today()
        # StoreStatsService's putMessageDistributeTime: the last full minute's put latencies
        self._minute_start = time.monotonic()
        self._minute_base = list(store.stats.put_distribution)
        self.last_minute_distribution = [0] * len(self._minute_base)
        first = self.sample()
        self.today_morning = (first.put, first.get_found)
        self.yesterday_morning = (0, 0)
        self._task: asyncio.Task[None] | None = None

    def _today(self) -> datetime.date:
        return datetime.datetime.fromtimestamp(self.clock.now_ms() / 1000).date()

    def current(self) -> _Sample:
        s = self.store.stats
        return _Sample(time.monotonic(), s.put_count, s.get_found, s.get_miss)

    def sample(self) -> _Sample:
        """Record one sample (the loop's job); roll the day totals over at local midnight."""
        snap = self.current()
        self.samples.append(snap)
        if snap.at - self._minute_start >= 60:
            now = list(self.store.stats.put_distribution)
            self.last_minute_distribution = [a - b for a, b in zip(now, self._minute_base, strict=True)]
            self._minute_base, self._minute_start = now, snap.at
        day = self._today()
        if day != self._day:
            self._day = day
            self.yesterday_morning = self.today_morning
            self.today_morning = (snap.put, snap.get_found)
        return snap

    def tps(self, pick: Callable[[_Sample], int]) -> str:
        """Java's "%.4f %.4f %.4f" over the three windows (shorter while the broker is young)."""
        now = self.current()
        rates: list[float] = []
        for window in self.WINDOWS_S:
            base = next((s for s in self.samples if now.at - s.at <= window), now)
            elapsed = now.at - base.at
            rates.append((pick(now) - pick(base)) / elapsed if elapsed > 0 else 0.0)
        return " ".join(f"{r:.4f}" for r in rates)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            self.sample()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="broker-stats-sampler")

    async def close(self) -> None:
        task, self._task = self._task, None
        await cancel_tasks(task)


def _used_ratio(path: Path, fallback: Path) -> float:
    """`UtilAll.getDiskPartitionSpaceUsedPercent` of `path` (else `fallback`): used / (used +
    available to us), as df's Use%; -1 when neither can be read."""
    for p in (path, fallback):
        try:
            st = os.statvfs(p)
        except OSError:
            continue
        used = (st.f_blocks - st.f_bfree) * st.f_frsize
        entire = used + st.f_bavail * st.f_frsize
        return used / entire if entire else 0.0
    return -1.0


def percentile(distribution: list[int], px: float) -> float:
    """`StoreStatsService.findPutMessageEntireTimePX` over the 13 buckets: the bucket reaching `px`
    of the puts, interpolated linearly within it (ms)."""
    total = sum(distribution)
    target = int(total * px)
    passed = 0
    lower = 0.0
    for upper, count in zip((0, *DISTRIBUTE_BOUNDS_MS, DISTRIBUTE_BOUNDS_MS[-1]), distribution, strict=True):
        if count and target <= passed + count:
            return lower + (upper - lower) * (target - passed) / count
        passed += count
        lower = float(upper)
    return 0.0


def _runtime_text(ms: int) -> str:
    """`StoreStatsService.getFormatRuntime`: "[ 0 days, 1 hours, 2 minutes, 3 seconds ]"."""
    secs = max(ms, 0) // 1000
    days, secs = divmod(secs, 86_400)
    hours, secs = divmod(secs, 3600)
    minutes, secs = divmod(secs, 60)
    return f"[ {days} days, {hours} hours, {minutes} minutes, {secs} seconds ]"


# ------------------------------------------------------------------------------------------ processor


class AdminRequestProcessor:
    """The admin request codes (the controller registers them, see `broker/requests.py`).

    `clients` answers which groups are online and what they subscribe to; `extra_info` adds the
    figures other parts own (HA, metrics) to GET_BROKER_RUNTIME_INFO.
    """

    def __init__(
        self,
        broker: BrokerConfig,
        store_config: StoreConfig,
        store: StoreAPI,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetTable,
        clock: Clock,
        sampler: RuntimeStatsSampler,
        clients: ClientManager,
        extra_info: Callable[[], dict[str, str]],
    ) -> None:
        self.broker = broker
        self.store_config = store_config
        self.store = store
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.clock = clock
        self.sampler = sampler
        self.clients = clients
        self.extra_info = extra_info

    @staticmethod
    def _ok(request: RemotingCommand, body: bytes | None = None) -> RemotingCommand:
        return make_response(request, ResponseCode.SUCCESS, body=body)

    @staticmethod
    def _error(
        request: RemotingCommand, remark: str, code: int = ResponseCode.SYSTEM_ERROR
    ) -> RemotingCommand:
        return make_response(request, code, remark)

    # -- topics -----------------------------------------------------------------------------
    def _topic_refusal(self, topic: str) -> str | None:
        problem = perm.topic_name_problem(topic)
        if problem is not None:
            return problem
        if is_system_topic(topic):
            return f"The topic[{topic}] is conflict with system topic."
        if topic == self.broker.broker_cluster_name:
            return f"the topic[{topic}] is conflict with system reserved words."
        return None

    def update_and_create_topic(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = CreateTopicRequestHeader.from_ext(request.ext_fields)
        refusal = self._topic_refusal(header.topic)
        if refusal is not None:
            return self._error(request, refusal)
        if header.topic_filter_type not in TOPIC_FILTER_TYPES:
            return self._error(request, f"No enum constant TopicFilterType.{header.topic_filter_type}")
        if header.read_queue_nums < 0 or header.write_queue_nums < 0 or not 0 <= header.perm <= 15:
            return self._error(request, "queue numbers must not be negative and perm must be 0..15")
        tc = TopicConfig(
            header.topic,
            header.read_queue_nums,
            header.write_queue_nums,
            header.perm,
            header.topic_filter_type,
            header.topic_sys_flag or 0,
            header.order,
        )
        try:
            changes = topic_attributes.parse_modification(header.attributes)
            if changes.get(f"+{topic_attributes.MESSAGE_TYPE}") == "MIXED":  # enableMixedMessageType=false
                mixed = "MIXED message type is not supported."
                return self._error(request, mixed, INVALID_PARAMETER)
            log.info("topic %s created/updated by %s: %s %s", header.topic, conn.remote_address, tc, changes)
            self.topics.update(tc, changes)  # persists and asks for a name-server registration
        except topic_attributes.TopicAttributeError as exc:
            return self._error(request, str(exc))
        return self._ok(request)

    def delete_topic(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = DeleteTopicRequestHeader.from_ext(request.ext_fields)
        refusal = self._topic_refusal(header.topic)
        if refusal is not None:
            return self._error(request, refusal)
        log.info("topic %s deleted by %s", header.topic, conn.remote_address)
        self.topics.delete(header.topic)
        self.offsets.remove_topic(header.topic)
        self.store.delete_topics({header.topic})
        return self._ok(request)

    def get_all_topic_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        return self._ok(request, self.topics.wrapper().to_bytes())

    def get_system_topic_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """`TopicConfigManager.getSystemTopic()`: the topics the broker creates for itself."""
        del conn
        b = self.broker
        names = [reserved.SELF_TEST_TOPIC, reserved.DEFAULT_TOPIC, reserved.BENCHMARK_TOPIC,
                 b.broker_cluster_name, b.broker_name, reserved.OFFSET_MOVED_EVENT, reserved.SCHEDULE_TOPIC,
                 b.msg_trace_topic_name, reserved.reply_topic(b.broker_cluster_name)]  # fmt: skip
        present = tuple(n for n in names if self.topics.select(n) is not None)
        return self._ok(request, TopicList(present).to_bytes())

    def get_topic_stats_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = GetTopicStatsInfoRequestHeader.from_ext(request.ext_fields)
        tc = self.topics.select(header.topic)
        if tc is None:
            return self._error(request, f"topic[{header.topic}] not exist", ResponseCode.TOPIC_NOT_EXIST)
        table: dict[MessageQueue, TopicOffset] = {}
        for qid in range(tc.write_queue_nums):
            low = max(self.store.get_min_offset_in_queue(header.topic, qid), 0)
            high = max(self.store.get_max_offset_in_queue(header.topic, qid), 0)
            stamp = self.store.get_message_store_timestamp(header.topic, qid, high - 1) if high > 0 else 0
            mq = MessageQueue(header.topic, self.broker.broker_name, qid)
            table[mq] = TopicOffset(low, high, max(stamp, 0))
        return self._ok(request, TopicStatsTable(table).to_bytes())

    # -- subscription groups ----------------------------------------------------------------
    def update_and_create_subscription_group(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        obj = expect_obj(fastjson.loads(request.body or b"{}"), "SubscriptionGroupConfig")
        cfg = SubscriptionGroupConfig.from_json_obj(dict(obj))
        log.info("subscription group %s created/updated by %s", cfg.group_name, conn.remote_address)
        self.groups.update(cfg)
        return self._ok(request)

    def get_all_subscription_group(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        with self.groups.lock:
            text = self.groups.encode()
        return self._ok(request, text.encode("utf-8"))

    def delete_subscription_group(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = DeleteSubscriptionGroupRequestHeader.from_ext(request.ext_fields)
        log.info("subscription group %s deleted by %s", header.group_name, conn.remote_address)
        self.groups.delete(header.group_name)
        if header.remove_offset or header.clean_offset:
            self.offsets.remove_group(header.group_name)
        return self._ok(request)

    def query_topic_consume_by_who(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = QueryTopicConsumeByWhoRequestHeader.from_ext(request.ext_fields)
        groups = set(self.offsets.groups_of_topic(header.topic))
        groups |= self.clients.consumer_groups_of_topic(header.topic)
        body = fastjson.dumps({"groupList": sorted(groups)}).encode("utf-8")
        return self._ok(request, body)

    # -- broker -----------------------------------------------------------------------------
    def runtime_info(self) -> dict[str, str]:
        """`AdminBrokerProcessor.prepareRuntimeInfo` + `DefaultMessageStore.getRuntimeInfo`."""
        store, sampler = self.store, self.sampler
        info = dict(store.runtime_info())
        now = self.clock.now_ms()
        stats = store.stats
        root = self.store_config.store_path_root_dir
        earliest = -1
        first = store.look_message_by_offset(store.min_phy_offset) if store.max_phy_offset else None
        if first is not None:
            earliest = first.store_timestamp
        info.update(
            {
                # `isSpecialServiceRunning`: the schedule and transaction-check services run on
                # a master only (clusterList's ACTIVATED)
                "brokerActive": str(store.master).lower(),
                "brokerVersion": str(BROKER_VERSION),
                "brokerVersionDesc": BROKER_VERSION_DESC,
                "msgPutTotalYesterdayMorning": str(sampler.yesterday_morning[0]),
                "msgPutTotalTodayMorning": str(sampler.today_morning[0]),
                "msgPutTotalTodayNow": str(stats.put_count),
                "msgGetTotalYesterdayMorning": str(sampler.yesterday_morning[1]),
                "msgGetTotalTodayMorning": str(sampler.today_morning[1]),
                "msgGetTotalTodayNow": str(stats.get_found),
                "putTps": sampler.tps(lambda s: s.put),
                "getFoundTps": sampler.tps(lambda s: s.get_found),
                "getMissTps": sampler.tps(lambda s: s.get_miss),
                "getTotalTps": sampler.tps(lambda s: s.get_found + s.get_miss),
                "getTransferedTps": sampler.tps(lambda s: s.get_found),  # 4.x's spelling
                "getTransferredTps": sampler.tps(lambda s: s.get_found),  # 5.x's (mqadmin exportMetrics)
                "bootTimestamp": str(stats.started_ms),
                "runtime": _runtime_text(now - stats.started_ms),
                "earliestMessageTimeStamp": str(earliest),
                "startAcceptSendRequestTimeStamp": "0",
                "pageCacheLockTimeMills": "0",
                "remainHowManyDataToFlush": human_bytes(max(store.max_phy_offset - store.durable_end, 0)),
                # the StoreStatsService keys rocketmq-exporter parses (BrokerRuntimeStats)
                "putMessageDistributeTime": "".join(
                    f"{label}:{n} "
                    for label, n in zip(DISTRIBUTE_LABELS, sampler.last_minute_distribution, strict=True)
                ),
                "putMessageAverageSize": repr(stats.put_bytes / max(stats.put_count, 1)),
                "dispatchMaxBuffer": "0",  # Java's StoreStatsService never raises it from 0
                "getMessageEntireTimeMax": str(int(stats.get_max_ms)),
                "putLatency99": f"{percentile(sampler.last_minute_distribution, 0.99):.2f}",
                "putLatency999": f"{percentile(sampler.last_minute_distribution, 0.999):.2f}",
            }
        )
        info.update(_POOL_FIGURES)
        info.update(self.extra_info())
        info["consumeQueueDiskRatio"] = f"{_used_ratio(Path(root) / 'consumequeue', Path(root)):.2f}"
        with contextlib.suppress(OSError):
            usage = shutil.disk_usage(Path(root))
            # The disk guard's figure (df's Use%), so clusterList's SPACE is the number that acts.
            info["commitLogDiskRatio"] = f"{store.disk_used_ratio():.6f}"
            info["commitLogDirCapacity"] = (
                f"Total : {human_bytes(usage.total)}, Free : {human_bytes(usage.free)}."
            )
        return info

    def get_broker_runtime_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        return self._ok(request, KVTable(self.runtime_info()).to_bytes())

    def delete_expired_commitlog(self, conn: Connection, request: RemotingCommand) -> HandlerResult:
        """`executeDeleteFilesManually`: one forced retention pass, off the event loop."""
        log.info("manual commit-log clean requested by %s", conn.remote_address)
        return self._clean(request)

    async def _clean(self, request: RemotingCommand) -> RemotingCommand:
        loop = asyncio.get_running_loop()
        deleted = await loop.run_in_executor(None, lambda: self.store.run_clean_pass(force=True))
        log.info("manual clean deleted %d file(s)", deleted)
        return self._ok(request)
