"""RocketMQ's broker statistics by name and key (`BrokerStatsManager`'s `StatsItemSet`s), for
VIEW_BROKER_STATS_DATA (315) and the consumeTps of GET_CONSUME_STATS / GET_BROKER_CONSUME_STATS.

A statistic is a name (`TOPIC_PUT_NUMS`...) and a key (a topic, `topic@group`, the cluster
name), counted as a running sum (`value`) and a number of calls (`times`):

    TOPIC_PUT_NUMS / TOPIC_PUT_SIZE     topic          messages / bytes stored, per send
    GROUP_GET_NUMS / GROUP_GET_SIZE     topic@group    messages / bytes pulled, per found pull
    SNDBCK_PUT_NUMS                     topic@group    messages sent back by consumers
    BROKER_PUT_NUMS / BROKER_GET_NUMS   cluster name   all of the above, broker-wide

Each item keeps snapshots (time, times, value) as Java's `StatsItem` does: every 10 s (the last
7: a minute), every 10 min (7: an hour), every hour (25: a day), the first of each list a
made-up (creation - period, 0, 0). A window's figures run from its oldest snapshot to now:
`sum` is what was counted since, `tps` the sum per second, `avgpt` the sum per call. One
difference from Java, on purpose: Java's windows end at their last snapshot, and the first day
snapshot is taken when the item is made, so for an hour a young topic's "messages in 24 h" is
whatever it had counted in its first milliseconds; here every window ends at the live counters.

No thread of its own: `StatsSampler` is the broker service that takes the snapshots. Counting
runs on the event loop (the send and pull paths), a dict lookup and two adds.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Final

from rocketlite.clock import SYSTEM_CLOCK, Clock
from rocketlite.protocol.bodies.admin import BrokerStatsData, BrokerStatsItem
from rocketlite.runtime import cancel_tasks

TOPIC_PUT_NUMS: Final = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE: Final = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS: Final = "GROUP_GET_NUMS"
GROUP_GET_SIZE: Final = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS: Final = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS: Final = "BROKER_PUT_NUMS"
BROKER_GET_NUMS: Final = "BROKER_GET_NUMS"
STATS_NAMES: Final = (
    TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS,
    BROKER_PUT_NUMS, BROKER_GET_NUMS,
)  # fmt: skip

MINUTE_PERIOD_MS: Final = 10_000
HOUR_PERIOD_MS: Final = 600_000
DAY_PERIOD_MS: Final = 3_600_000

# (timestamp ms, times, value)
Snapshot = tuple[int, int, int]


def stats_key(topic: str, group: str) -> str:
    """`BrokerStatsManager.buildStatsKey(topic, group)`: "topic@group"."""
    return f"{topic}@{group}"


class StatsItem:
    """One statistic of one key: running value and call count, and its three snapshot lists."""

    __slots__ = ("day", "hour", "minute", "times", "value")

    def __init__(self, now_ms: int) -> None:
        self.value = 0
        self.times = 0
        self.minute: deque[Snapshot] = deque([(now_ms - MINUTE_PERIOD_MS, 0, 0)], maxlen=7)
        self.hour: deque[Snapshot] = deque([(now_ms - HOUR_PERIOD_MS, 0, 0)], maxlen=7)
        self.day: deque[Snapshot] = deque([(now_ms - DAY_PERIOD_MS, 0, 0)], maxlen=25)

    def window(self, snapshots: deque[Snapshot], now_ms: int) -> BrokerStatsItem:
        """`StatsItem.computeStatsData`, from the oldest snapshot to the live counters."""
        at, times, value = snapshots[0]
        total = self.value - value
        elapsed = now_ms - at
        calls = self.times - times
        return BrokerStatsItem(
            total, total * 1000.0 / elapsed if elapsed > 0 else 0.0, total / calls if calls > 0 else 0.0
        )

    def data(self, now_ms: int) -> BrokerStatsData:
        return BrokerStatsData(
            self.window(self.minute, now_ms), self.window(self.hour, now_ms), self.window(self.day, now_ms)
        )


class StatsItemSet:
    """Every key of one statistic (`StatsItemSet`); an item is made at its key's first count."""

    __slots__ = ("clock", "items", "name")

    def __init__(self, name: str, clock: Clock) -> None:
        self.name = name
        self.clock = clock
        self.items: dict[str, StatsItem] = {}

    def add(self, key: str, value: int, times: int = 1) -> None:
        item = self.items.get(key)
        if item is None:
            item = self.items[key] = StatsItem(self.clock.now_ms())
        item.value += value
        item.times += times

    def get(self, key: str) -> StatsItem | None:
        return self.items.get(key)

    def sample(self, pick: Callable[[StatsItem], deque[Snapshot]], now_ms: int) -> None:
        for item in self.items.values():
            pick(item).append((now_ms, item.times, item.value))


class BrokerStatsItems:
    """The statistics a broker keeps, by name (`BrokerStatsManager.statsTable`)."""

    def __init__(self, cluster: str, clock: Clock = SYSTEM_CLOCK) -> None:
        self.cluster = cluster
        self.clock = clock
        self.sets = {name: StatsItemSet(name, clock) for name in STATS_NAMES}
        self._topic_put_nums = self.sets[TOPIC_PUT_NUMS]
        self._topic_put_size = self.sets[TOPIC_PUT_SIZE]
        self._group_get_nums = self.sets[GROUP_GET_NUMS]
        self._group_get_size = self.sets[GROUP_GET_SIZE]
        self._broker_put = self.sets[BROKER_PUT_NUMS]
        self._broker_get = self.sets[BROKER_GET_NUMS]

    # -- counting (the send and pull paths) -------------------------------------------------
    def put(self, topic: str, nums: int, size: int) -> None:
        """A send stored `nums` messages of `size` bytes in `topic`."""
        self._topic_put_nums.add(topic, nums)
        self._topic_put_size.add(topic, size)
        self._broker_put.add(self.cluster, nums)

    def put_items(self, topic: str) -> tuple[StatsItem, StatsItem, StatsItem]:
        """The three items a send to `topic` adds to (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, the
        cluster's BROKER_PUT_NUMS), made now if not yet counted: `BrokerStats` keeps them per
        topic and adds to them itself (no item is ever removed, so the references stay live)."""
        found = []
        for stats, key in (
            (self._topic_put_nums, topic), (self._topic_put_size, topic), (self._broker_put, self.cluster)
        ):  # fmt: skip
            item = stats.items.get(key)
            if item is None:
                item = stats.items[key] = StatsItem(self.clock.now_ms())
            found.append(item)
        return found[0], found[1], found[2]

    def get(self, topic: str, group: str, nums: int, size: int) -> None:
        """A pull of `group` found `nums` messages of `size` bytes in `topic`."""
        key = stats_key(topic, group)
        self._group_get_nums.add(key, nums)
        self._group_get_size.add(key, size)
        self._broker_get.add(self.cluster, nums)

    def send_back(self, topic: str, group: str) -> None:
        self.sets[SNDBCK_PUT_NUMS].add(stats_key(topic, group), 1)

    # -- reading ----------------------------------------------------------------------------
    def data(self, name: str, key: str) -> BrokerStatsData | None:
        """VIEW_BROKER_STATS_DATA: None for an unknown name or a key never counted."""
        stats = self.sets.get(name)
        item = stats.get(key) if stats is not None else None
        return item.data(self.clock.now_ms()) if item is not None else None

    def group_get_tps(self, group: str, topic: str) -> float:
        """`tpsGroupGetNums`: messages per second a group pulled from a topic, last minute."""
        item = self._group_get_nums.get(stats_key(topic, group))
        return item.window(item.minute, self.clock.now_ms()).tps if item is not None else 0.0

    # -- sampling ---------------------------------------------------------------------------
    def sample(self, *, minute: bool, hour: bool, day: bool) -> None:
        now = self.clock.now_ms()
        for stats in self.sets.values():
            if minute:
                stats.sample(lambda i: i.minute, now)
            if hour:
                stats.sample(lambda i: i.hour, now)
            if day:
                stats.sample(lambda i: i.day, now)


class StatsSampler:
    """The broker service that snapshots every statistic: each 10 s, 10 min and hour."""

    TICK_S = MINUTE_PERIOD_MS / 1000

    def __init__(self, items: BrokerStatsItems) -> None:
        self.items = items
        self._task: asyncio.Task[None] | None = None

    async def _loop(self) -> None:
        ticks = 0
        while True:
            await asyncio.sleep(self.TICK_S)
            ticks += 1
            self.items.sample(
                minute=True,
                hour=ticks % (HOUR_PERIOD_MS // MINUTE_PERIOD_MS) == 0,
                day=ticks % (DAY_PERIOD_MS // MINUTE_PERIOD_MS) == 0,
            )

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="broker-stats-items")

    async def close(self) -> None:
        task, self._task = self._task, None
        await cancel_tasks(task)
