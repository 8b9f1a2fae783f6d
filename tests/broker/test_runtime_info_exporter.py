"""GET_BROKER_RUNTIME_INFO as rocketmq-exporter parses it: every key its `BrokerRuntimeStats`
constructor reads is there, in a form Java's parsers take.

The rules are those of apache/rocketmq-exporter at e1ab2dd569d4,
src/main/java/org/apache/rocketmq/exporter/model/BrokerRuntimeStats.java (cited by line below) and
src/main/java/org/apache/rocketmq/exporter/util/Utils.java:28-38, rewritten in Python: a missing
key there is a NullPointerException (`Long.parseLong(null)`, `null.split`) and a malformed one a
NumberFormatException, either of which loses all of the exporter's `rocketmq_brokeruntime_*`
series for the broker (MetricsCollectTask.java:686-691 catches and logs it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from rocketlite.protocol.bodies.lists import KVTable
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.wire.headers import PullMessageRequestHeader
from tests.support.aio import run
from tests.support.broker_harness import broker_under_test

_LONG = re.compile(r"[+-]?\d+")
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)")


def parse_long(text: str | None) -> int:
    """`Long.parseLong`: decimal digits with an optional sign, in range."""
    assert text is not None, "Long.parseLong(null): NumberFormatException"
    assert _LONG.fullmatch(text), f"Long.parseLong({text!r}): NumberFormatException"
    value = int(text)
    assert -(2**63) <= value < 2**63
    return value


def parse_int(text: str | None) -> int:
    value = parse_long(text)
    assert -(2**31) <= value < 2**31, f"Integer.parseInt({text!r}): out of range"
    return value


def parse_double(text: str | None) -> float:
    """`Double.parseDouble` (surrounding blanks are trimmed, as Java does)."""
    assert text is not None, "Double.parseDouble(null): NullPointerException"
    assert _DOUBLE.fullmatch(text.strip()), f"Double.parseDouble({text!r}): NumberFormatException"
    return float(text.strip().replace("Infinity", "inf"))


def machine_readable_byte_count(text: str) -> float:
    """Utils.java:28-38."""
    base_text, unit = text.split(" ", maxsplit=1)[0], text.split(" ")[1]
    base = parse_double(base_text)
    if unit == "B":
        return base
    exp = "KMGTPE".index(unit[0]) + 1  # indexOf: -1 + 1 = 0 for an unknown unit
    return float(base * 1024**exp)


def exporter_parse(table: Mapping[str, str]) -> dict[str, object]:
    """BrokerRuntimeStats(KVTable) (l.86-142), returning what it read."""
    get = table.get
    out: dict[str, object] = {"msgPutTotalTodayNow": parse_long(get("msgPutTotalTodayNow"))}  # l.87
    for key, offsets in table.items():  # loadScheduleMessageOffsets, l.185-196
        if key.startswith("scheduleMessageOffset"):
            delay, max_offset = offsets.split(",")[:2]
            parse_long(delay), parse_long(max_offset)
    distribute = get("putMessageDistributeTime")  # l.90, loadPutMessageDistributeTime l.166-183
    assert distribute is not None, "null.split: NullPointerException"
    buckets: dict[str, int] = {}
    if distribute.lower() != "null":
        for part in distribute.split(" "):
            pieces = part.split(":")
            if len(pieces) < 2:
                continue  # logged and skipped (l.175-177)
            buckets[pieces[0].replace("[", "").replace("]", "")] = parse_int(pieces[1])
    out["putMessageDistributeTime"] = buckets
    tps_keys = ["putTps", "getMissTps", "getTotalTps", "getFoundTps"]  # l.92-100, loadTps l.152-164
    tps_keys.append("getTransferredTps" if "getTransferredTps" in table else "getTransferedTps")
    for key in tps_keys:
        rates = get(key)
        assert rates is not None, f"{key}: null.split"
        out[key] = [parse_double(v) for v in rates.split(" ")[:3]]
    capacity = get("commitLogDirCapacity")  # l.102, loadCommitLogDirCapacity l.144-150
    assert capacity is not None, "commitLogDirCapacity: null.split"
    arr = capacity.split(" ")
    out["commitLogDirCapacityTotal"] = machine_readable_byte_count(f"{arr[2]} {arr[3][:-1]}")
    out["commitLogDirCapacityFree"] = machine_readable_byte_count(f"{arr[6]} {arr[7][:-1]}")
    longs = [  # l.104-138
        "sendThreadPoolQueueHeadWaitTimeMills", "queryThreadPoolQueueHeadWaitTimeMills",
        "msgGetTotalTodayNow", "queryThreadPoolQueueSize", "bootTimestamp", "msgPutTotalYesterdayMorning",
        "msgGetTotalYesterdayMorning", "pullThreadPoolQueueSize", "commitLogMinOffset",
        "pullThreadPoolQueueHeadWaitTimeMills", "dispatchMaxBuffer", "pageCacheLockTimeMills",
        "commitLogMaxOffset", "getMessageEntireTimeMax", "msgPutTotalTodayMorning", "putMessageTimesTotal",
        "msgGetTotalTodayMorning", "sendThreadPoolQueueSize", "startAcceptSendRequestTimeStamp",
        "putMessageEntireTimeMax", "earliestMessageTimeStamp", "remainTransientStoreBufferNumbs",
        "queryThreadPoolQueueCapacity", "dispatchBehindBytes", "putMessageSizeTotal",
        "sendThreadPoolQueueCapacity", "pullThreadPoolQueueCapacity",
    ]  # fmt: skip
    for key in longs:
        out[key] = parse_long(get(key))
    for key in ("consumeQueueDiskRatio", "commitLogDiskRatio", "putMessageAverageSize"):
        out[key] = parse_double(get(key))
    flush = get("remainHowManyDataToFlush")  # l.107
    assert flush is not None
    out["remainHowManyDataToFlush"] = parse_double(flush.split(" ")[0])
    out["brokerVersion"] = parse_int(get("brokerVersion"))  # l.118
    for key in ("putLatency99", "putLatency999"):  # l.139-140, getOrDefault "-1"
        out[key] = parse_double(table.get(key, "-1"))
    return out


def test_runtime_info_parses_as_rocketmq_exporter_does(tmp_path: Path) -> None:
    async def scenario() -> dict[str, object]:
        async with broker_under_test(tmp_path) as b:
            for _ in range(5):
                assert (await b.send("RT", b"y" * 200)).code == ResponseCode.SUCCESS
            b.controller.store.wait_dispatched()
            pull = PullMessageRequestHeader(
                consumer_group="RG", topic="RT", queue_id=0, queue_offset=0, max_msg_nums=32, sys_flag=4,
                commit_offset=0, suspend_timeout_millis=0, subscription="*", sub_version=0,
            ).to_ext()  # fmt: skip
            assert (await b.call(RequestCode.PULL_MESSAGE, pull)).code in (
                ResponseCode.SUCCESS,
                ResponseCode.PULL_NOT_FOUND,
            )
            r = await b.call(RequestCode.GET_BROKER_RUNTIME_INFO)
            assert r.code == ResponseCode.SUCCESS
            return exporter_parse(KVTable.from_json(r.body or b"").table)

    parsed = run(scenario())
    assert parsed["msgPutTotalTodayNow"] == 5
    assert parsed["putMessageTimesTotal"] == 5
    assert parsed["dispatchMaxBuffer"] == 0
    assert parsed["remainTransientStoreBufferNumbs"] == 2**31 - 1  # no transient store pool
    size_total = parsed["putMessageSizeTotal"]
    assert isinstance(size_total, int) and size_total > 5 * 200
    assert parsed["putMessageAverageSize"] == size_total / 5
    assert 0 <= parsed["consumeQueueDiskRatio"] <= 1  # type: ignore[operator]
    buckets = parsed["putMessageDistributeTime"]
    assert isinstance(buckets, dict) and list(buckets)[:3] == ["<=0ms", "0~10ms", "10~50ms"]
    assert len(buckets) == 13  # the last full minute's: zeros in the broker's first minute
    assert parsed["brokerVersion"] == 409
    assert parsed["commitLogDirCapacityTotal"] > parsed["commitLogDirCapacityFree"] > 0  # type: ignore[operator]
