"""Store exchange: a store rocketlite wrote is opened by RocketMQ 5.3.3's broker, and the other way
round, and every message reads back the same, byte for byte, at the same offsets.

This is the byte-compatibility claim checked by the implementation that defines the format. The
writer gets the same requests either way (`write`): messages of many shapes over several
commit-log segments and consume-queue files (1 MiB and 1,000 units here, both brokers configured
alike), a batch, a compressed body, a delivered delayed message and one still parked, a committed
transaction, a topic and a consumer group of its own, committed consumer offsets. What a client
would read is taken from the writer (`snapshot`: every queue pulled whole, offsets, topic and
group tables, delay cursors), the writer stops cleanly, the store is copied, the reader opens the
copy, and its snapshot must equal the writer's; then it takes one more message on top.

The abnormal direction is checked too: RocketMQ killed (SIGKILL) after its answers, rocketlite
recovering its store.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocketlite.embedded import embedded
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.formats.record import decode_record
from rocketlite.protocol.message import MessageSysFlag, parse_msg_id
from rocketlite.protocol.requests.offsets import (
    build_get_max_offset,
    build_get_min_offset,
    build_query_consumer_offset,
    build_search_offset,
    build_update_consumer_offset,
)
from rocketlite.protocol.requests.query import build_query_message, build_view_message
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.command import make_request
from rocketlite.remoting.client import RemotingClient
from tests.peers.rocketmq.steps import batch, create_topic, heartbeat, pull, send
from tests.peers.rocketmq.test_message_paths import COMMIT, TRANSACTION_PREPARED, end
from tests.support import processes
from tests.support.aio import run
from tests.support.foreign_clients.rocketmq_peer import CLEAN_EXIT, JavaServer, start_broker
from tests.support.ports import broker_port

pytestmark = pytest.mark.timeout(900)

# Small files on both sides, so the exchange crosses segment, consume-queue and index files.
COMMIT_LOG_FILE = 1024 * 1024
CQ_UNITS = 1000
HASH_SLOTS, INDEX_ENTRIES = 1000, 2000
# Level 1: 1 s (delivered before the writer stops), level 2: 2 h (still parked when it stops).
DELAY_LEVELS = "1s 2h"
ROCKETMQ_STORE: dict[str, object] = {
    "mappedFileSizeCommitLog": COMMIT_LOG_FILE,
    "mappedFileSizeConsumeQueue": CQ_UNITS * 20,
    "maxHashSlotNum": HASH_SLOTS,
    "maxIndexNum": INDEX_ENTRIES,
    "messageDelayLevel": DELAY_LEVELS,
}
ROCKETLITE_STORE: dict[str, Any] = {
    "grpc_server_port": 0,
    "store_maped_file_size_commit_log": COMMIT_LOG_FILE,
    "store_maped_file_size_consume_queue": CQ_UNITS * 20,
    "store_max_hash_slot_num": HASH_SLOTS,
    "store_max_index_num": INDEX_ENTRIES,
    "store_message_delay_level": DELAY_LEVELS,
}

MAIN, DELAYED, TX, CREATED = "XchgMain", "XchgDelayed", "XchgTx", "XchgCreated"
GROUP, TX_GROUP = "xchg_cg", "xchg_txpg"
N_QUEUE0, N_QUEUE1 = 1100, 120  # queue 0 spans two consume-queue files
SCHEDULE = "SCHEDULE_TOPIC_XXXX"


@dataclass
class Broker:
    """A broker's remoting address and a client to it, inside one event loop."""

    addr: str
    client: RemotingClient

    async def call(self, request: Any, code: int = ResponseCode.SUCCESS) -> Any:
        response = await self.client.invoke(self.addr, request, 30)
        assert response.code == code, (request.code, response.code, response.remark)
        return response


def body_of(i: int) -> bytes:
    """Bodies of 0.2 to 2 KB that differ in content and length."""
    return (f"message {i} ".encode() * (20 + (i * 37) % 180))[: 200 + (i * 53) % 1800]


async def wait_count(b: Broker, topic: str, queue_id: int, count: int, timeout: float = 60) -> None:
    """Until the queue holds `count` messages (dispatch and delayed delivery run in the background)."""
    deadline = time.monotonic() + timeout
    while int((await b.call(build_get_max_offset(topic, queue_id))).ext_fields["offset"]) < count:
        assert time.monotonic() < deadline, f"{topic}/{queue_id} never held {count} messages"
        await asyncio.sleep(0.1)


async def write(b: Broker) -> None:
    """The same content on either broker."""
    await b.call(create_topic(MAIN, 2))
    await b.call(create_topic(CREATED, 3, perm=6, order=False))
    await b.call(create_topic(DELAYED, 1))
    await b.call(create_topic(TX, 1))
    await b.call(
        make_request(
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            body=b'{"groupName":"xchg_cg","retryMaxTimes":5,"consumeBroadcastEnable":false}',
        )
    )
    await b.call(heartbeat(GROUP, MAIN))
    for i in range(N_QUEUE0 + N_QUEUE1):
        queue_id = 0 if i < N_QUEUE0 else 1
        extra = {"seq": str(i)}
        if i % 7 == 0:
            extra["note"] = "ünïcödé ✓"
        await b.call(
            send(
                MAIN,
                body_of(i),
                queue_id=queue_id,
                tags=f"t{i % 3}",
                keys=f"k{i} all",
                uniq=f"U{i:05d}",
                extra=extra,
                flag=i % 5,
            )
        )
    await b.call(batch(MAIN, [f"batched {i}".encode() for i in range(10)], queue_id=1, uniq_prefix="BX"))
    packed = zlib.compress(b"compressed " * 300)
    await b.call(send(MAIN, packed, queue_id=1, uniq="ZIP", sys_flag=MessageSysFlag.COMPRESSED_FLAG))
    await b.call(send(DELAYED, b"delivered", uniq="DL1", extra={"DELAY": "1"}))
    await b.call(send(DELAYED, b"parked", uniq="DL2", extra={"DELAY": "2"}))
    half = await b.call(
        send(
            TX,
            b"committed",
            uniq="TX1",
            sys_flag=TRANSACTION_PREPARED,
            group=TX_GROUP,
            extra={"TRAN_MSG": "true", "PGROUP": TX_GROUP},
        )
    )
    await b.call(end(TX_GROUP, half, COMMIT))
    await b.call(build_update_consumer_offset(GROUP, MAIN, 0, 123))
    await b.call(build_update_consumer_offset(GROUP, MAIN, 1, 7))
    await wait_count(b, MAIN, 0, N_QUEUE0)
    await wait_count(b, MAIN, 1, N_QUEUE1 + 11)
    await wait_count(b, DELAYED, 0, 1)
    await wait_count(b, TX, 0, 1)


def split_records(body: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(body):
        size = int.from_bytes(body[pos : pos + 4], "big")
        out.append(body[pos : pos + size])
        pos += size
    return out


async def queue_bytes(b: Broker, topic: str, queue_id: int) -> list[bytes]:
    """Every record of a queue, as the broker sends it (the stored bytes)."""
    out: list[bytes] = []
    while True:
        r = await b.client.invoke(b.addr, pull("xchg_reader", topic, len(out), queue_id=queue_id), 30)
        if r.code != ResponseCode.SUCCESS:
            return out
        out.extend(split_records(r.body or b""))


async def snapshot(b: Broker) -> dict[str, Any]:
    """What a client reads back from the broker, for comparison with the other one's."""
    snap: dict[str, Any] = {}
    for topic, queues in ((MAIN, 2), (DELAYED, 1), (TX, 1), (SCHEDULE, 2)):
        for q in range(queues):
            records = await queue_bytes(b, topic, q)
            snap[f"{topic}/{q} records"] = records
            snap[f"{topic}/{q} min,max"] = (
                (await b.call(build_get_min_offset(topic, q))).ext_fields["offset"],
                (await b.call(build_get_max_offset(topic, q))).ext_fields["offset"],
            )
            if topic == MAIN:
                snap[f"{topic}/{q} committed"] = (
                    await b.call(build_query_consumer_offset(GROUP, topic, q))
                ).ext_fields
    main0 = [decode_record(r) for r in snap[f"{MAIN}/0 records"]]
    stamp = main0[500].store_timestamp
    snap["search by the 500th store time"] = (await b.call(build_search_offset(MAIN, 0, stamp))).ext_fields
    for key, unique in (("k77", False), ("U00042", True), ("k1199", False)):
        found = await b.call(build_query_message(MAIN, key, max_num=32, unique=unique))
        snap[f"query {key}"] = sorted(split_records(found.body or b""))
    snap["view 999"] = (await b.call(build_view_message(parse_msg_id(main0[999].msg_id).offset))).body
    topics = fastjson.loads((await b.call(make_request(RequestCode.GET_ALL_TOPIC_CONFIG))).body)
    snap["topics"] = {
        name: {k: tc[k] for k in ("readQueueNums", "writeQueueNums", "perm", "topicFilterType", "order")}
        for name, tc in topics["topicConfigTable"].items()
        if name in (MAIN, CREATED, DELAYED, TX)
    }
    groups = fastjson.loads((await b.call(make_request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))).body)
    group = groups["subscriptionGroupTable"][GROUP]
    snap["group"] = {k: group[k] for k in ("groupName", "retryMaxTimes", "consumeBroadcastEnable")}
    delay = fastjson.loads((await b.call(make_request(RequestCode.GET_ALL_DELAY_OFFSET))).body)
    snap["delay offsets"] = {int(k): v for k, v in delay["offsetTable"].items()}
    return snap


async def add_one(b: Broker, expected_offset: int) -> None:
    """The reader takes a message on top of the writer's, at the next offset, and reads it back."""
    r = await b.call(send(MAIN, b"on top", queue_id=0, uniq="TOP"))
    assert int(r.ext_fields["queueOffset"]) == expected_offset
    await wait_count(b, MAIN, 0, expected_offset + 1)
    top = await b.call(pull("xchg_top", MAIN, expected_offset))
    assert [decode_record(r).body for r in split_records(top.body)] == [b"on top"]


@contextlib.contextmanager
def rocketlite_broker(root: Path) -> Iterator[Broker]:
    with embedded(root, **ROCKETLITE_STORE) as cluster:
        yield Broker(cluster.broker_addr, RemotingClient())


def rocketmq_broker(work: Path, root: Path) -> JavaServer:
    return start_broker(work, root, None, overrides=ROCKETMQ_STORE)


def in_loop(coro_fn: Any, addr: str) -> Any:
    async def go() -> Any:
        b = Broker(addr, RemotingClient())
        try:
            return await coro_fn(b)
        finally:
            await b.client.close()

    return run(go())


def test_rocketlite_store_opened_by_rocketmq(tmp_path: Path) -> None:
    written = tmp_path / "written"
    with embedded(written, **ROCKETLITE_STORE) as lite:
        in_loop(write, lite.broker_addr)
        expected = in_loop(snapshot, lite.broker_addr)
    copy = tmp_path / "copy"
    shutil.copytree(written, copy)
    java = rocketmq_broker(tmp_path / "rocketmq", copy)
    try:
        got = in_loop(snapshot, java.addr)
        assert_same(expected, got)
        in_loop(lambda b: add_one(b, N_QUEUE0), java.addr)
    finally:
        assert java.stop() in CLEAN_EXIT, java.diagnostics()


def test_rocketmq_store_opened_by_rocketlite(tmp_path: Path) -> None:
    written = tmp_path / "written"
    java = rocketmq_broker(tmp_path / "rocketmq", written)
    try:
        in_loop(write, java.addr)
        expected = in_loop(snapshot, java.addr)
    finally:
        assert java.stop() in CLEAN_EXIT, java.diagnostics()
    assert not (written / "abort").exists(), "RocketMQ did not shut down cleanly"
    copy = tmp_path / "copy"
    shutil.copytree(written, copy)
    with embedded(copy, **ROCKETLITE_STORE) as lite:
        assert lite.broker.store.recovery_report is not None
        got = in_loop(snapshot, lite.broker_addr)
        assert_same(expected, got)
        in_loop(lambda b: add_one(b, N_QUEUE0), lite.broker_addr)


def assert_same(expected: dict[str, Any], got: dict[str, Any]) -> None:
    """Equal snapshots; a delay level whose cursor is 0 counts as absent (RocketMQ lists every level
    it has parked messages for, rocketlite only the levels it delivered from)."""
    for snap in (expected, got):
        snap["delay offsets"] = {level: at for level, at in snap["delay offsets"].items() if at}
    assert expected.keys() == got.keys()
    for key, want in expected.items():
        if key.endswith(" records"):
            a, b = want, got[key]
            assert len(a) == len(b), (key, len(a), len(b))
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                assert x == y, f"{key}: record {i} differs"
        else:
            assert want == got[key], key
    assert len(expected[f"{MAIN}/0 records"]) == N_QUEUE0
    assert len(expected[f"{MAIN}/1 records"]) == N_QUEUE1 + 11


# -- after a crash -----------------------------------------------------------------------------------
CRASH_MESSAGES = 300


async def write_and_read_back(b: Broker) -> list[bytes]:
    """CRASH_MESSAGES sends over two segments, each answered; then every stored record."""
    await b.call(create_topic(MAIN, 1))
    for i in range(CRASH_MESSAGES):
        await b.call(send(MAIN, body_of(i) * 3, uniq=f"C{i:05d}", keys=f"k{i}"))
    await wait_count(b, MAIN, 0, CRASH_MESSAGES)
    return await queue_bytes(b, MAIN, 0)


async def read_back(b: Broker) -> list[bytes]:
    return await queue_bytes(b, MAIN, 0)


def test_rocketmq_killed_then_rocketlite_recovers_its_store(tmp_path: Path) -> None:
    written = tmp_path / "written"
    java = rocketmq_broker(tmp_path / "rocketmq", written)
    try:
        expected = in_loop(write_and_read_back, java.addr)
    finally:
        java.kill9()
    assert (written / "abort").exists()  # RocketMQ's own mark of an unclean stop
    copy = tmp_path / "copy"
    shutil.copytree(written, copy)
    with embedded(copy, **ROCKETLITE_STORE) as lite:
        report = lite.broker.store.recovery_report
        assert report is not None and report.abnormal
        assert in_loop(read_back, lite.broker_addr) == expected
        in_loop(lambda b: add_one(b, CRASH_MESSAGES), lite.broker_addr)


def rocketlite_process(tmp_path: Path, root: Path) -> tuple[Any, int]:
    port = broker_port()
    conf = processes.write_conf(
        tmp_path / "broker.conf",
        {
            "listenPort": str(port),
            "listenHost": "127.0.0.1",
            "brokerIP1": "127.0.0.1",
            "haListenPort": str(port + 1),
            "grpcServerPort": "0",
            "storePathRootDir": str(root),
            "mappedFileSizeCommitLog": str(COMMIT_LOG_FILE),
            "mappedFileSizeConsumeQueue": str(CQ_UNITS * 20),
            "maxHashSlotNum": str(HASH_SLOTS),
            "maxIndexNum": str(INDEX_ENTRIES),
        },
    )
    popen = processes.spawn(["broker", "-c", str(conf)], tmp_path / "rocketlite.log")
    processes.wait_listening(popen, port, "rocketlite broker", timeout=60)
    return popen, port


def crashed_rocketlite_store(tmp_path: Path) -> tuple[Path, list[bytes]]:
    """A store rocketlite was writing when it got SIGKILL (its answers all given), copied."""
    written = tmp_path / "written"
    popen, port = rocketlite_process(tmp_path, written)
    try:
        expected = in_loop(write_and_read_back, f"127.0.0.1:{port}")
    finally:
        processes.kill9(popen)
    copy = tmp_path / "copy"
    shutil.copytree(written, copy)
    return copy, expected


def test_rocketlite_killed_then_rocketmq_recovers_its_store(tmp_path: Path) -> None:
    """SIGKILL leaves rocketlite's staged next segment behind, beside commitlog/ (in
    commitlog.alloc/, `mapped_file.staging_dir`), never inside it: RocketMQ, which loads every
    file of commitlog/ as a segment, opens the crashed store as it is and recovers every message."""
    copy, expected = crashed_rocketlite_store(tmp_path)
    assert [p.name for p in (copy / "commitlog").iterdir() if not p.name.isdigit()] == []
    assert list((copy / "commitlog.alloc").iterdir()), "the crash left no staged segment to test with"
    java = rocketmq_broker(tmp_path / "rocketmq", copy)
    try:
        assert in_loop(read_back, java.addr) == expected
        in_loop(lambda b: add_one(b, CRASH_MESSAGES), java.addr)
    finally:
        assert java.stop() in CLEAN_EXIT, java.diagnostics()
