"""HA and live configuration, in-process: brokers on one event loop (the slave's replication is a
thread), fake slaves speaking the HA protocol, and the protocol helpers on real commit logs."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from rocketlite.broker.config import BrokerRole
from rocketlite.broker.ha.master import transfer_start
from rocketlite.broker.subscription_group import SubscriptionGroupConfig
from rocketlite.clock import SYSTEM_CLOCK
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.formats.ha_frames import HEADER, REPORT, whole_records
from rocketlite.protocol.formats.record import BLANK_MAGIC_CODE, SIZE_MAGIC
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.headers import CreateTopicRequestHeader, PullMessageRequestHeader
from rocketlite.store.commit_log import CommitLog
from rocketlite.store.config import StoreConfig
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test
from tests.support.store import StoreFactory

pytestmark = pytest.mark.timeout(120)

SEG = 64 * 1024


def master_kw(**kw: Any) -> dict[str, Any]:
    return {"broker_role": BrokerRole.SYNC_MASTER, "store_maped_file_size_commit_log": SEG, **kw}


def slave_kw(master: BrokerUnderTest, **kw: Any) -> dict[str, Any]:
    ha = master.controller.parts.ha_master if master.controller.parts else None
    assert ha is not None
    return {
        "broker_role": BrokerRole.SLAVE,
        "broker_id": 1,
        "ha_master_address": f"127.0.0.1:{ha.port}",
        "ha_send_heartbeat_interval": 200,
        "ha_housekeeping_interval": 2000,
        "store_maped_file_size_commit_log": SEG,
        **kw,
    }


async def eventually(pred: Any, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"{what} not reached"
        await asyncio.sleep(0.02)


def pull_ext(topic: str, offset: int, n: int = 32) -> dict[str, str]:
    return PullMessageRequestHeader(
        consumer_group="g", topic=topic, queue_id=0, queue_offset=offset, max_msg_nums=n, sys_flag=0x4,
        commit_offset=0, suspend_timeout_millis=0, subscription="*", sub_version=0,
    ).to_ext()  # fmt: skip


def test_a_master_closing_under_a_connected_slave_logs_no_error(tmp_path: Path) -> None:
    """Closing the HA service cancels the handler of each slave connection. Python 3.11's
    start_server calls task.exception() on a cancelled handler and logs the CancelledError as an
    ERROR of the event loop ('Exception in callback StreamReaderProtocol.connection_made'), so a
    handler the service's own close cancelled must end normally."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        errors: list[str] = []
        loop.set_exception_handler(lambda _loop, ctx: errors.append(str(ctx.get("message"))))
        async with broker_under_test(tmp_path / "m", **master_kw()) as m:
            ha = m.controller.parts.ha_master if m.controller.parts else None
            assert ha is not None
            sock = await loop.run_in_executor(None, socket.create_connection, ("127.0.0.1", ha.port))
            try:
                sock.sendall(REPORT.pack(0))
                await eventually(lambda: len(ha.accepted_slaves) == 1, what="fake slave accepted")
                await ha.close()
                await asyncio.sleep(0)  # the handler task's done callbacks
            finally:
                sock.close()
        assert errors == []

    run(scenario())


# -- SYNC_MASTER statuses --------------------------------------------------------------------
def test_fake_slave_that_never_acks_gives_flush_slave_timeout(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "m", **master_kw(store_sync_flush_timeout=300)) as m:
            assert (await m.send("T", b"no slave yet")).code == ResponseCode.SLAVE_NOT_AVAILABLE
            ha = m.controller.parts.ha_master if m.controller.parts else None
            assert ha is not None
            loop = asyncio.get_running_loop()
            sock = await loop.run_in_executor(None, socket.create_connection, ("127.0.0.1", ha.port))
            try:
                sock.sendall(REPORT.pack(0))  # "I hold nothing", and never a word again
                await eventually(lambda: len(ha.accepted_slaves) == 1, what="fake slave accepted")
                began = time.monotonic()
                r = await m.send("T", b"waits for the slave")
                assert r.code == ResponseCode.FLUSH_SLAVE_TIMEOUT and r.ext_fields["msgId"]
                assert 0.25 <= time.monotonic() - began < 3
                # The slave lags by more than haMaxGapNotInSync: SLAVE_NOT_AVAILABLE at once.
                live = m.controller.parts.live if m.controller.parts else None
                assert live is not None
                live.update({"haMaxGapNotInSync": "16"})
                began = time.monotonic()
                assert (await m.send("T", b"gap too large")).code == ResponseCode.SLAVE_NOT_AVAILABLE
                assert time.monotonic() - began < 0.2
                # The fake slave acknowledges everything: in sync again.
                sock.sendall(REPORT.pack(m.controller.store.max_phy_offset))
                live.update({"haMaxGapNotInSync": str(256 * 1024 * 1024)})
                await eventually(lambda: ha.push2slave_max_offset == m.controller.store.max_phy_offset)
                head = sock.recv(HEADER.size)  # the master streamed the log from offset 0
                assert len(head) == HEADER.size and HEADER.unpack(head)[0] == 0
            finally:
                sock.close()
            await eventually(lambda: not ha.accepted_slaves, what="fake slave gone")
            assert (await m.send("T", b"alone again")).code == ResponseCode.SLAVE_NOT_AVAILABLE

    run(scenario())


def test_in_process_slave_builds_its_queues_and_serves_pulls(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with (
            broker_under_test(tmp_path / "m", **master_kw()) as m,
            broker_under_test(tmp_path / "s", **slave_kw(m)) as s,
        ):
            ha = m.controller.parts.ha_master if m.controller.parts else None
            assert ha is not None
            await eventually(lambda: bool(ha.accepted_slaves), what="slave connected")
            for i in range(200):  # several 64 KiB segments
                r = await m.send("T", f"m{i}".encode() * 100)
                assert r.code == ResponseCode.SUCCESS, r.remark
            assert s.controller.store.wait_dispatched(5)
            assert s.controller.store.get_max_offset_in_queue("T", 0) == 200
            r = await s.call(RequestCode.PULL_MESSAGE, pull_ext("T", 0))
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["suggestWhichBrokerId"] == "0"
            info = await s.call(RequestCode.GET_BROKER_RUNTIME_INFO)
            assert b'"haConnected":"true"' in (info.body or b"")

    run(scenario())


# -- divergence ------------------------------------------------------------------------------------
@pytest.mark.parametrize("other_body_size", [2000, 200])
def test_diverged_slave_is_refused_and_stops_serving(tmp_path: Path, other_body_size: int) -> None:
    """A store written by another master (ahead of this one with 2000-byte bodies, or ending inside
    one of its records with 200-byte ones) is refused; the slave stops serving reads."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "m", **master_kw(broker_role=BrokerRole.ASYNC_MASTER)) as m:
            for i in range(20):
                assert (await m.send("T", b"x" * 500 + str(i).encode())).code == ResponseCode.SUCCESS
            async with broker_under_test(tmp_path / "s", store_maped_file_size_commit_log=SEG) as other:
                for _ in range(12):
                    await other.send("T", b"y" * other_body_size)
                other_end = other.controller.store.max_phy_offset
            async with broker_under_test(tmp_path / "s", **slave_kw(m)) as s:
                slave = s.controller.parts.ha_slave if s.controller.parts else None
                assert slave is not None
                await eventually(lambda: s.controller.broker.broker_permission == 0, what="perm 0")
                assert slave.refused is not None and "diverged" in slave.refused
                r = await s.call(RequestCode.PULL_MESSAGE, pull_ext("T", 0))
                assert r.code == ResponseCode.NO_PERMISSION
                assert s.controller.store.max_phy_offset == other_end  # nothing was appended

    run(scenario())


def test_transfer_start_and_whole_records(open_store: StoreFactory, tmp_path: Path) -> None:
    from rocketlite.protocol.formats.record import MessageInner  # noqa: PLC0415
    from rocketlite.protocol.message import HostAddress  # noqa: PLC0415

    store = open_store(maped_file_size_commit_log=4096)
    host = HostAddress.of("127.0.0.1", 10911)
    ends: list[int] = []
    for i in range(30):
        msg = MessageInner(topic="T", body=b"z" * (100 + i), born_host=host, store_host=host)
        res = store.put_message(msg)
        assert res.ok and res.append is not None
        ends.append(res.append.end_offset)
    log = store.commit_log
    assert transfer_start(store, 0) == 0
    assert transfer_start(store, ends[3]) == ends[3]
    assert transfer_start(store, log.max_offset) == log.max_offset
    assert "ahead" in str(transfer_start(store, log.max_offset + 10))
    assert "no record boundary" in str(transfer_start(store, ends[3] + 5))
    assert transfer_start(store, 4096) == 4096  # a segment start
    data = bytes(log.get_data(0) or b"")
    cut, stamp = whole_records(data[: ends[2] + 7], 0, 4096)
    assert cut == ends[2] and stamp > 0
    blank_at = ends[[e < 4096 for e in ends].index(False) - 1]
    assert SIZE_MAGIC.unpack_from(data, blank_at) == (4096 - blank_at, BLANK_MAGIC_CODE)
    assert whole_records(data[:4095], 0, 4096)[0] == blank_at  # a blank needs all its zeros
    assert whole_records(data, 0, 4096)[0] == 4096
    with pytest.raises(ProtocolError):
        whole_records(b"\x00" * 64, 0, 4096)
    # append_raw: verbatim at the end only, the first segment aligned.
    copy_config = StoreConfig(store_path_root_dir=tmp_path / "copy", maped_file_size_commit_log=4096)
    copy = CommitLog(copy_config, SYSTEM_CLOCK)
    with pytest.raises(ValueError, match="segment boundary"):
        copy.append_raw(100, data[100:200])
    assert copy.append_raw(0, data[:1000]) == 1000
    with pytest.raises(ValueError, match="ends at 1000"):
        copy.append_raw(999, b"x")
    assert copy.append_raw(1000, data[1000:] + bytes(log.get_data(4096) or b"")) == log.max_offset
    assert bytes(copy.get_data(4096) or b"") == bytes(log.get_data(4096) or b"")
    copy.close()


# -- live configuration ----------------------------------------------------------------------------
def test_update_broker_config_at_run_time(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:

            async def update(text: str) -> tuple[int, str]:
                r = await b.call(RequestCode.UPDATE_BROKER_CONFIG, body=text.encode())
                return r.code, r.remark or ""

            assert (await b.send("T", b"1")).code == ResponseCode.SUCCESS
            assert (await update("brokerPermission=4"))[0] == ResponseCode.SUCCESS
            r = await b.send("T", b"2")
            assert r.code == ResponseCode.NO_PERMISSION
            assert (await b.call(RequestCode.PULL_MESSAGE, pull_ext("T", 0))).code == ResponseCode.SUCCESS
            assert (await update("brokerPermission=2"))[0] == ResponseCode.SUCCESS
            assert (
                await b.call(RequestCode.PULL_MESSAGE, pull_ext("T", 0))
            ).code == ResponseCode.NO_PERMISSION
            assert (await update("brokerPermission=6"))[0] == ResponseCode.SUCCESS

            code, remark = await update("brokerName=other\nbrokerPermission=4")
            assert code == ResponseCode.SYSTEM_ERROR and "brokerName cannot change" in remark
            assert b.controller.broker.broker_permission == 6  # nothing applied
            code, remark = await update("flushIntervalCommitLog=0")
            assert code == ResponseCode.SYSTEM_ERROR and "flushIntervalCommitLog" in remark
            assert (await update("brokerName=broker-a"))[0] == ResponseCode.SUCCESS  # unchanged value

            assert (await update("flushIntervalCommitLog=77\nsyncFlushTimeout=1234"))[
                0
            ] == ResponseCode.SUCCESS
            services = b.controller.store.services
            assert services is not None and services.flusher is not None
            assert services.flusher.interval_s == pytest.approx(0.077)
            assert b.controller.store.config.sync_flush_timeout == 1234

            assert (await update("maxMessageSize=1024"))[0] == ResponseCode.SUCCESS
            assert (await b.send("T", b"x" * 2000)).code == ResponseCode.MESSAGE_ILLEGAL
            assert (await update("maxMessageSize=4194304"))[0] == ResponseCode.SUCCESS
            assert (await b.send("T", b"x" * 2000)).code == ResponseCode.SUCCESS

            assert (await update("autoCreateSubscriptionGroup=false"))[0] == ResponseCode.SUCCESS
            assert b.controller.groups.auto_create is False
            r = await b.call(RequestCode.GET_BROKER_CONFIG)
            lines = dict(line.split("=", 1) for line in (r.body or b"").decode().splitlines())
            assert lines["flushIntervalCommitLog"] == "77" and lines["autoCreateSubscriptionGroup"] == "false"
            assert fastjson.loads(r.ext_fields["version"])["counter"] == 7  # one per applied update

    run(scenario())


def test_close_and_open_a_topics_queues_without_restart(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:

            async def topic(perm: int, write: int = 4) -> None:
                ext = CreateTopicRequestHeader(
                    topic="Q", default_topic="TBW102", read_queue_nums=4, write_queue_nums=write, perm=perm,
                    topic_filter_type="SINGLE_TAG", order=False,
                ).to_ext()  # fmt: skip
                assert (await b.call(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)).code == ResponseCode.SUCCESS

            await topic(6)
            assert (await b.send("Q", b"open")).code == ResponseCode.SUCCESS
            await topic(4)  # writes closed, reads open
            assert (await b.send("Q", b"closed")).code == ResponseCode.NO_PERMISSION
            assert (await b.call(RequestCode.PULL_MESSAGE, pull_ext("Q", 0))).code == ResponseCode.SUCCESS
            await topic(2)  # reads closed
            assert (
                await b.call(RequestCode.PULL_MESSAGE, pull_ext("Q", 0))
            ).code == ResponseCode.NO_PERMISSION
            await topic(6, write=2)  # queues 2 and 3: no longer offered to producers, still readable
            tc = b.controller.topics.select("Q")
            assert tc is not None and (tc.write_queue_nums, tc.read_queue_nums) == (2, 4)
            assert (await b.send("Q", b"reopened")).code == ResponseCode.SUCCESS

    run(scenario())


# -- slave config sync and pull suggestions --------------------------------------------------------
def test_slave_copies_the_masters_config_files(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with (
            broker_under_test(tmp_path / "m", **master_kw(broker_role=BrokerRole.ASYNC_MASTER)) as m,
            broker_under_test(tmp_path / "s", **slave_kw(m)) as s,
        ):
            ctx = s.controller.parts
            assert ctx is not None and ctx.slave_sync is not None and ctx.ha_slave is not None
            ctx.ha_slave.master_addr = m.addr  # ephemeral ports: not haMasterAddress - 1
            ext = CreateTopicRequestHeader(
                topic="Synced", default_topic="TBW102", read_queue_nums=3, write_queue_nums=3, perm=6,
                topic_filter_type="SINGLE_TAG", order=False,
            ).to_ext()  # fmt: skip
            assert (await m.call(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)).code == ResponseCode.SUCCESS
            m.controller.groups.update(SubscriptionGroupConfig("synced_group", retry_max_times=3))
            m.controller.offsets.commit("synced_group", "Synced", 2, 42)
            assert await ctx.slave_sync.sync_all()
            tc = s.controller.topics.select("Synced")
            assert tc is not None and tc.read_queue_nums == 3
            assert s.controller.topics.data_version == m.controller.topics.data_version
            g = s.controller.groups.find("synced_group")
            assert g is not None and g.retry_max_times == 3
            assert s.controller.offsets.query("synced_group", "Synced", 2) == 42
            assert (tmp_path / "s" / "config" / "delayOffset.json").is_file()
            assert "Synced" in (tmp_path / "s" / "config" / "topics.json").read_text()

    run(scenario())


def test_suggest_which_broker_id(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(
            tmp_path, slave_read_enable=True, access_message_in_memory_max_ratio=0
        ) as b:
            for i in range(3):
                await b.send("T", str(i).encode())
            assert b.controller.store.wait_dispatched(5)
            r = await b.call(RequestCode.PULL_MESSAGE, pull_ext("T", 0, n=1))
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["suggestWhichBrokerId"] == "1"
            live = b.controller.parts.live if b.controller.parts else None
            assert live is not None
            live.update({"accessMessageInMemoryMaxRatio": "40"})  # bytes behind < 40% of RAM
            r = await b.call(RequestCode.PULL_MESSAGE, pull_ext("T", 0, n=1))
            assert r.ext_fields["suggestWhichBrokerId"] == "0"  # the group's brokerId
            live.update({"slaveReadEnable": "false", "accessMessageInMemoryMaxRatio": "0"})
            r = await b.call(RequestCode.PULL_MESSAGE, pull_ext("T", 0, n=1))
            assert r.ext_fields["suggestWhichBrokerId"] == "0"

    run(scenario())


def test_concurrent_persists_of_one_config_file(tmp_path: Path) -> None:
    """The slave's sync and the broker's periodic persist write consumerOffset.json concurrently."""
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    from rocketlite.broker.state_files import ConsumerOffsetTable  # noqa: PLC0415

    table = ConsumerOffsetTable(tmp_path)
    for i in range(200):
        table.commit("g", "t", i, i)
    with ThreadPoolExecutor(8) as pool:
        for f in [pool.submit(table.persist) for _ in range(64)]:
            f.result()
    again = ConsumerOffsetTable(tmp_path)
    assert again.load() and again.query("g", "t", 199) == 199


def test_ha_keys_in_broker_conf() -> None:
    from rocketlite.broker.config import BrokerConfig  # noqa: PLC0415
    from rocketlite.config import build_config  # noqa: PLC0415
    from rocketlite.protocol.errors import ConfigError  # noqa: PLC0415

    props = {
        "brokerIP1": "10.1.2.3", "brokerRole": "SLAVE", "brokerId": "1", "haMasterAddress": "10.1.2.4:10912",
        "haMaxGapNotInSync": "1024", "haSendHeartbeatInterval": "1000", "slaveReadEnable": "true",
    }  # fmt: skip
    cfg = build_config(BrokerConfig, props)
    assert (cfg.broker_ip1, cfg.ha_master_address, cfg.ha_max_gap_not_in_sync) == (
        "10.1.2.3",
        "10.1.2.4:10912",
        1024,
    )
    with pytest.raises(ConfigError, match="haMasterAddress"):
        build_config(BrokerConfig, {**props, "haMasterAddress": "nope"})


def test_new_slave_of_a_master_whose_oldest_segment_is_gone(tmp_path: Path) -> None:
    """A fresh slave copies from the master's oldest retained segment; its consume queues start at
    the queue offsets found there, and later messages are served from the slave."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "m", **master_kw(broker_role=BrokerRole.ASYNC_MASTER)) as m:
            for i in range(300):  # 3 segments of 64 KiB
                assert (await m.send("T", f"old-{i}-".encode() * 60)).code == ResponseCode.SUCCESS
            store = m.controller.store
            assert store.wait_dispatched(5)
            store.commit_log.queue.delete_first()
            store.cq_store.delete_expired(store.commit_log.min_offset)
            first = store.commit_log.min_offset
            assert first == SEG
            async with broker_under_test(tmp_path / "s", **slave_kw(m)) as s:
                for i in range(20):
                    assert (await m.send("T", f"new-{i}".encode())).code == ResponseCode.SUCCESS
                await eventually(lambda: s.controller.store.max_phy_offset == store.max_phy_offset)
                assert s.controller.store.wait_dispatched(5)
                assert s.controller.store.min_phy_offset == first
                names = sorted(p.name for p in (tmp_path / "s" / "commitlog").iterdir() if p.name.isdigit())
                assert names == sorted(
                    p.name for p in (tmp_path / "m" / "commitlog").iterdir() if p.name.isdigit()
                )
                low = s.controller.store.get_min_offset_in_queue("T", 0)
                assert low == store.get_min_offset_in_queue("T", 0) > 0
                assert s.controller.store.get_max_offset_in_queue("T", 0) == 320
                r = await s.call(RequestCode.PULL_MESSAGE, pull_ext("T", 319))
                assert r.code == ResponseCode.SUCCESS

    run(scenario())
