"""Master/slave replication with real processes on loopback (`python -m rocketlite ...`).

Name server, master and slave are separate processes (see ha_harness); the test drives them with a
raw remoting client and reads the slave's commit-log files from disk. In-process scenarios (fake
slaves, divergence, live configuration, config sync) are in test_inprocess.py.
"""

from __future__ import annotations

import asyncio
import filecmp
import os
import signal
import time
from pathlib import Path

import pytest

from rocketlite.protocol.bodies.route import TopicRouteData
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.formats.record import decode_record
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.headers import GetRouteInfoRequestHeader
from tests.support.aio import run
from tests.support.ha_harness import HaCluster, Proc, Raw, ha_cluster, log_bytes, msg_offset, segments

pytestmark = pytest.mark.timeout(180)

TOPIC = "HaTopic"
QUEUES = 4


async def caught_up(raw: Raw, master: Proc, slave: Proc, timeout: float = 30.0) -> int:
    """Wait until the slave holds the master's whole log (and dispatched it), and the master has
    its acknowledgement of it (the slave reports its end after it wrote it, so the master learns
    it a moment after the slave's own figures show it); returns the offset."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = await raw.runtime(master.addr)
        s = await raw.runtime(slave.addr)
        end = int(m["commitLogMaxOffset"])
        acked = int(m.get("haPush2SlaveMaxOffset", end))
        if int(s["commitLogMaxOffset"]) == end and s["dispatchBehindBytes"] == "0" and acked == end:
            return end
        await asyncio.sleep(0.1)
    raise AssertionError(f"slave never caught up\n{master.log_tail()}\n{slave.log_tail()}")


async def pull_everything(raw: Raw, addr: str) -> list[bytes]:
    bodies: list[bytes] = []
    for qid in range(QUEUES):
        bodies.extend(r.body for r in await raw.pull_all(addr, TOPIC, qid))
    return bodies


async def route(raw: Raw, namesrv: Proc, topic: str) -> TopicRouteData | None:
    ext = GetRouteInfoRequestHeader(topic=topic).to_ext()
    r = await raw.call(namesrv.addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, ext)
    return TopicRouteData.from_json(r.body or b"") if r.code == ResponseCode.SUCCESS else None


def test_sync_master_acks_after_the_slave_holds_the_bytes(tmp_path: Path) -> None:
    """SLAVE_NOT_AVAILABLE without a slave (message stored); with one, every SUCCESS answer comes
    after the record is in the slave's commit-log file. The slave finds its master through the
    name server, and both are registered under one brokerName with ids 0 and 1."""

    async def scenario(c: HaCluster) -> None:
        raw = Raw()
        try:
            ns = c.namesrv()
            master = c.broker("master", "SYNC_MASTER", namesrv=ns)
            r = await raw.send(master.addr, TOPIC, b"before-the-slave")
            assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE, r.remark
            first_offset = msg_offset(r.ext_fields["msgId"])  # stored all the same
            slave = c.broker("slave", "SLAVE", namesrv=ns)
            await raw.wait_runtime(master.addr, "haConnections", lambda v: v == "1")
            assert slave.store is not None
            for i in range(300):
                body = f"sync-{i:04d}-".encode() * (1 + i % 40)
                r = await raw.send(master.addr, TOPIC, body)
                assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
                offset = msg_offset(r.ext_fields["msgId"])
                rec = decode_record(log_bytes(slave.store, offset, 4096))
                assert (rec.body, rec.physical_offset) == (body, offset)
            rec = decode_record(log_bytes(slave.store, first_offset, 4096))
            assert rec.body == b"before-the-slave"
            info = await route(raw, ns, TOPIC)
            assert info is not None
            (broker,) = info.broker_datas
            assert dict(broker.broker_addrs) == {0: master.addr, 1: slave.addr}
            s_info = await raw.runtime(slave.addr)
            assert (
                s_info["haConnected"] == "true"
                and s_info["haMasterAddress"] == f"127.0.0.1:{master.port + 1}"
            )
            # A slave takes no writes.
            r = await raw.send(slave.addr, TOPIC, b"to-the-slave")
            assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE
        finally:
            await raw.close()

    with ha_cluster(tmp_path) as c:
        run(scenario(c))


def test_kill9_master_every_acknowledged_message_is_on_the_slave(tmp_path: Path) -> None:
    """Concurrent SYNC_MASTER load; the master is killed -9 in the middle of it. Every message the
    master acknowledged can be pulled from the slave, which also keeps serving the route."""

    async def scenario(c: HaCluster) -> None:
        raw = Raw()
        try:
            ns = c.namesrv()
            master = c.broker("master", "SYNC_MASTER", namesrv=ns)
            slave = c.broker("slave", "SLAVE", namesrv=ns)
            await raw.wait_runtime(master.addr, "haConnections", lambda v: v == "1")
            acked: list[bytes] = []
            stop = asyncio.Event()

            async def producer(n: int) -> None:
                i = 0
                while not stop.is_set():
                    body = f"p{n}-{i}-".encode() + os.urandom(8).hex().encode() * (1 + i % 30)
                    i += 1
                    try:
                        r = await raw.send(master.addr, TOPIC, body)
                    except (OSError, TimeoutError, ConnectionError):
                        return
                    if r.code == ResponseCode.SUCCESS:
                        acked.append(body)

            tasks = [asyncio.create_task(producer(n)) for n in range(8)]
            while len(acked) < 1500:
                await asyncio.sleep(0.01)
            master.kill9()  # mid-load: some sends are in flight
            stop.set()
            await asyncio.gather(*tasks)
            on_slave = await pull_everything(raw, slave.addr)
            missing = set(acked) - set(on_slave)
            assert not missing, f"{len(missing)} acknowledged messages not on the slave"
            assert len(on_slave) == len(set(on_slave))  # no duplicates
            # The name server dropped the master; the route now leads to the slave alone.
            deadline = time.monotonic() + 10
            while True:
                info = await route(raw, ns, TOPIC)
                if info is not None and dict(info.broker_datas[0].broker_addrs) == {1: slave.addr}:
                    break
                assert time.monotonic() < deadline, info
                await asyncio.sleep(0.1)
        finally:
            await raw.close()

    with ha_cluster(tmp_path) as c:
        run(scenario(c))


def _load(raw: Raw, addr: str, prefix: str, n: int) -> asyncio.Future[list[bytes]]:
    async def one(k: int) -> list[bytes]:
        sent: list[bytes] = []
        for i in range(k, n, 4):
            body = f"{prefix}-{i}-".encode() + b"x" * (i * 37 % 3000)
            r = await raw.send(addr, TOPIC, body, queue_id=i % QUEUES)
            assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
            sent.append(body)
        return sent

    async def all_of() -> list[bytes]:
        parts = await asyncio.gather(*(one(k) for k in range(4)))
        return [b for part in parts for b in part]

    return asyncio.ensure_future(all_of())


def _same_files(a: Path, b: Path) -> list[str]:
    """Names of files under `a` that differ from (or are missing in) `b`, recursively."""
    bad: list[str] = []
    for path in sorted(a.rglob("*")):
        if path.is_file() and path.name.isdigit():
            other = b / path.relative_to(a)
            if not other.is_file() or not filecmp.cmp(path, other, shallow=False):
                bad.append(str(path.relative_to(a)))
    return bad


def test_slave_restart_resumes_and_logs_are_byte_identical(tmp_path: Path) -> None:
    """ASYNC_MASTER under load (commit-log segments roll); the slave is killed -9, more is written,
    the slave restarts and resumes from its own end: afterwards master and slave commit logs (and
    the consume queues the slave built itself) are byte-identical, and nothing is duplicated."""

    async def scenario(c: HaCluster) -> None:
        raw = Raw()
        try:
            master = c.broker("master", "ASYNC_MASTER")
            slave = c.broker("slave", "SLAVE", haMasterAddress=f"127.0.0.1:{master.port + 1}")
            assert master.store is not None and slave.store is not None
            sent = await _load(raw, master.addr, "one", 1200)
            await caught_up(raw, master, slave)
            slave.kill9()
            sent += await _load(raw, master.addr, "two", 1200)
            slave = c.restart(slave)
            end = await caught_up(raw, master, slave)
            assert master.store is not None and slave.store is not None
            assert end > 3 * 256 * 1024  # several segment rolls, replicated at the same offsets
            info = await raw.runtime(master.addr)
            assert int(info["haPush2SlaveMaxOffset"]) == end
            await asyncio.sleep(1.5)  # let the consume-queue flush reach the files on both sides
            names = [p.name for p in segments(master.store)]
            assert names == [p.name for p in segments(slave.store)]
            assert _same_files(master.store / "commitlog", slave.store / "commitlog") == []
            assert _same_files(master.store / "consumequeue", slave.store / "consumequeue") == []
            on_slave = await pull_everything(raw, slave.addr)
            assert sorted(on_slave) == sorted(sent)
        finally:
            await raw.close()

    with ha_cluster(tmp_path) as c:
        run(scenario(c))


def test_live_config_and_topic_reload_in_a_running_broker(tmp_path: Path) -> None:
    """brokerPermission changes take effect at once (sends refused, the name server's route shows
    the masked permission); flushIntervalCommitLog changes; SIGHUP reloads an edited topics.json."""

    async def scenario(c: HaCluster) -> None:
        raw = Raw()
        try:
            ns = c.namesrv()
            b = c.broker("solo", "ASYNC_MASTER", namesrv=ns)
            assert b.store is not None
            assert (await raw.send(b.addr, TOPIC, b"a")).code == ResponseCode.SUCCESS
            r = await raw.call(b.addr, RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4\n")
            assert r.code == ResponseCode.SUCCESS, r.remark
            r = await raw.send(b.addr, TOPIC, b"b")
            assert r.code == ResponseCode.NO_PERMISSION
            assert await raw.pull_all(b.addr, TOPIC, 0) or await raw.pull_all(b.addr, TOPIC, 1) is not None
            deadline = time.monotonic() + 10
            while True:
                info = await route(raw, ns, TOPIC)
                if info is not None and info.queue_datas[0].perm == 4:
                    break
                assert time.monotonic() < deadline, info
                await asyncio.sleep(0.1)
            body = b"brokerPermission=6\nflushIntervalCommitLog=123\n"
            assert (await raw.call(b.addr, RequestCode.UPDATE_BROKER_CONFIG, body=body)).code == 0
            assert (await raw.send(b.addr, TOPIC, b"c")).code == ResponseCode.SUCCESS
            r = await raw.call(b.addr, RequestCode.GET_BROKER_CONFIG)
            lines = dict(line.split("=", 1) for line in (r.body or b"").decode().splitlines())
            assert lines["flushIntervalCommitLog"] == "123" and lines["brokerPermission"] == "6"
            assert fastjson.loads(r.ext_fields["version"])["counter"] == 2

            # topics.json edited by an operator, then SIGHUP.
            path = b.store / "config" / "topics.json"
            doc = fastjson.loads(path.read_text())
            assert isinstance(doc, dict)
            doc["topicConfigTable"]["Reloaded"] = {
                "topicName": "Reloaded", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6,
                "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False,
            }  # fmt: skip
            path.write_text(fastjson.dumps(doc))
            b.popen.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 10
            while (await route(raw, ns, "Reloaded")) is None:
                assert time.monotonic() < deadline, b.log_tail()
                await asyncio.sleep(0.1)
            assert b.popen.poll() is None
        finally:
            await raw.close()

    with ha_cluster(tmp_path) as c:
        run(scenario(c))


def test_real_client_consumes_from_the_slave_after_the_master_is_killed(tmp_path: Path) -> None:
    """ali-ons (an unmodified RocketMQ client) started after the master died reads every
    acknowledged message from the slave: route from the name server, heartbeat, rebalance, offsets
    and pulls all answered by the slave."""
    from tests.support.foreign_clients.real import Clients, require  # noqa: PLC0415

    require("ons")

    async def scenario(c: HaCluster) -> list[bytes]:
        raw = Raw()
        try:
            ns = c.namesrv()
            master = c.broker("master", "SYNC_MASTER", namesrv=ns)
            slave = c.broker("slave", "SLAVE", namesrv=ns)
            await raw.wait_runtime(master.addr, "haConnections", lambda v: v == "1")
            acked: list[bytes] = []
            for i in range(120):
                body = f"ons-{i}".encode()
                r = await raw.send(master.addr, TOPIC, body)
                assert r.code == ResponseCode.SUCCESS
                acked.append(body)
            master.kill9()
            deadline = time.monotonic() + 10
            while True:
                info = await route(raw, ns, TOPIC)
                if info is not None and dict(info.broker_datas[0].broker_addrs) == {1: slave.addr}:
                    return acked
                assert time.monotonic() < deadline, info
                await asyncio.sleep(0.1)
        finally:
            await raw.close()

    clients = Clients(tmp_path)
    with ha_cluster(tmp_path) as c:
        acked = run(scenario(c))
        ns_addr = c.procs[0].addr
        argv = ["--namesrv", ns_addr, "--group", "ha_ons_group", "--topic", TOPIC, "--timeout-ms", "60000"]
        consumer = clients._spawn("ons", "consumer", argv)
        try:
            consumer.wait_event("ready", 30)
            got = consumer.collect(
                lambda evs: {e["body"].encode() for e in evs} >= set(acked), 60, "all acknowledged messages"
            )
            assert {e["body"].encode() for e in got} == set(acked)
        finally:
            consumer.kill()
