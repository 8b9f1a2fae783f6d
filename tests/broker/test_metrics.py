"""Broker metrics (GET /metrics, Prometheus text 0.0.4) and flow control (issue 7)."""

from __future__ import annotations

import asyncio
import socket
import struct
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rocketlite.broker.config import MetricsExporterType
from rocketlite.broker.processors.send import SYSTEM_BUSY_REMARK
from rocketlite.protocol.bodies.lists import KVTable
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.wire.command import make_request
from rocketlite.protocol.wire.frame import encode_command
from rocketlite.protocol.wire.headers import PullMessageRequestHeader, UpdateConsumerOffsetRequestHeader
from rocketlite.remoting import connection
from rocketlite.store.config import FlushDiskType
from tests.support.aio import run
from tests.support.broker_harness import broker_under_test
from tests.support.ports import free_port

LABELS = 'cluster="DefaultCluster",node_type="broker",node_id="broker-a"'
LEGACY = 'cluster="DefaultCluster",broker="broker-a"'


async def http_get(port: int, path: str) -> tuple[str, dict[str, str], str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n".encode())
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    head, _, body = raw.decode().partition("\r\n\r\n")
    status, *lines = head.split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    assert int(headers["content-length"]) == len(body.encode())
    return status, headers, body


def samples(text: str) -> dict[str, float]:
    """Sample -> value, each sample written `name{k="v",...}` with its labels sorted by name."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return out


def key(name: str, *labels: str) -> str:
    """A sample's key in `samples`: `labels` are `k="v"` pieces (comma-joined groups too)."""
    pieces = sorted(p for group in labels for p in group.split(",") if p)
    return f"{name}{{{','.join(pieces)}}}"


def test_metrics_endpoint(tmp_path: Path) -> None:
    """RocketMQ 5's families with RocketMQ's labels after sends and a pull, and rocketlite's own
    families where RocketMQ has none; exposition by prometheus_client."""

    async def scenario() -> None:
        port = free_port()
        async with broker_under_test(
            tmp_path, metrics_exporter_type=MetricsExporterType.PROM, metrics_prom_exporter_port=port,
            metrics_label="env:test",
        ) as b:  # fmt: skip
            for _ in range(3):
                r = await b.send("MT", b"x" * 100)
                assert r.code == ResponseCode.SUCCESS
            header = UpdateConsumerOffsetRequestHeader(
                consumer_group="MG", topic="MT", queue_id=0, commit_offset=1
            )
            assert (await b.call(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext())).code == 0
            b.controller.store.wait_dispatched()
            pull = PullMessageRequestHeader(
                consumer_group="MG", topic="MT", queue_id=0, queue_offset=0, max_msg_nums=32, sys_flag=4,
                commit_offset=0, suspend_timeout_millis=0, subscription="*", sub_version=0,
            ).to_ext()  # fmt: skip
            pulled = await b.call(RequestCode.PULL_MESSAGE, pull)
            assert pulled.code == ResponseCode.SUCCESS
            view = b.controller.store.queue("MT", 0)
            assert view is not None
            sizes = [unit[1] for unit in (view.unit(i) for i in range(3)) if unit is not None]
            assert len(sizes) == 3
            status, headers, body = await http_get(port, "/metrics")
            assert status == "HTTP/1.1 200 OK"
            assert headers["content-type"].startswith("text/plain; version=")
            assert "# TYPE rocketmq_messages_in_total counter" in body
            m = samples(body)
            base = f'env="test",{LABELS}'
            topic = 'topic="MT",message_type="normal",is_system="false"'
            assert m[key("rocketmq_messages_in_total", base, topic)] == 3
            assert m[key("rocketmq_throughput_in_total", base, topic)] == sum(sizes)
            assert m[key("rocketmq_message_size_bucket", base, topic, 'le="1024.0"')] == 3
            assert m[key("rocketmq_message_size_count", base, topic)] == 3
            out = 'topic="MT",consumer_group="MG",is_system="false"'
            assert m[key("rocketmq_messages_out_total", base, out)] == 3
            assert m[key("rocketmq_throughput_out_total", base, out)] == len(pulled.body or b"")
            assert m[key("rocketmq_topic_number", base)] == len(b.controller.topics.table)
            assert m[key("rocketmq_broker_permission", base)] == 6
            assert m[key("rocketmq_processor_watermark", base, 'processor="send"')] == 0
            rpc = 'protocol_type="remoting",request_code="pull_message",response_code="success",'
            rpc += 'is_long_polling="false",result="success"'
            assert m[key("rocketmq_rpc_latency_count", base, rpc)] == 1
            storage = f'{base},storage_type="local",storage_medium="disk"'
            assert key("rocketmq_storage_dispatch_behind_bytes", storage) in m
            assert m[key("rocketmq_storage_size", storage)] > 0
            # rocketlite's own families stay where RocketMQ has no equivalent
            assert m[key("rocketlite_store_put_messages_total", LEGACY)] == 3
            assert m[key("rocketlite_commitlog_max_offset", LEGACY)] == b.controller.store.max_phy_offset > 0
            assert 0 < m[key("rocketlite_disk_used_ratio", LEGACY)] <= 1
            buckets = [v for k, v in m.items() if k.startswith("rocketlite_store_put_latency_total{")]
            assert len(buckets) == 5 and sum(buckets) == 3
            assert not any(k.startswith("rocketlite_topic_put_messages_total") for k in m)  # RocketMQ's now
            assert (await http_get(port, "/other"))[0] == "HTTP/1.1 404 Not Found"
            # The same figures in GET_BROKER_RUNTIME_INFO (rocketlite admin brokerStatus).
            r = await b.call(RequestCode.GET_BROKER_RUNTIME_INFO)
            info = KVTable.from_json(r.body or b"").table
            assert info["consumerLagTotal"] == "2"
            assert info["putLatencyBuckets"].startswith("<1ms:")

    run(scenario())


def test_metrics_off_by_default(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            assert not any(type(s).__name__ == "MetricsServer" for s in b.controller.services.values())

    run(scenario())


def test_send_system_busy_when_sync_flush_waiters_exceed_bound(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(
            tmp_path, max_sync_flush_waiters=2, store_flush_disk_type=FlushDiskType.SYNC_FLUSH
        ) as b:
            send = b.controller.parts.send if b.controller.parts else None
            assert send is not None
            assert (await b.send("BT")).code == ResponseCode.SUCCESS
            assert send.flush_waiters == 0  # released once answered
            send.flush_waiters = 2  # as if two SYNC_FLUSH sends were waiting on the group commit
            r = await b.send("BT")
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_BUSY, SYSTEM_BUSY_REMARK)
            send.flush_waiters = 0
            assert (await b.send("BT")).code == ResponseCode.SUCCESS
            assert b.controller.store.get_max_offset_in_queue("BT", 0) == 2  # the refused one not stored

    run(scenario())


def test_slow_reader_is_paused_and_others_are_served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    high = 256 * 1024
    monkeypatch.setattr(connection, "WRITE_HIGH_WATER", high)
    n_pulls = 60

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            for _ in range(64):
                assert (await b.send("FC", b"y" * 16 * 1024)).code == ResponseCode.SUCCESS
            b.controller.store.wait_dispatched()
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", b.controller.port))
            reader, writer = await asyncio.open_connection(sock=sock, limit=16 * 1024)
            local_port = sock.getsockname()[1]
            conn = next(
                c for c in b.controller.server.connections if c.remote_address.endswith(f":{local_port}")
            )
            ext = PullMessageRequestHeader(
                consumer_group="FG", topic="FC", queue_id=0, queue_offset=0, max_msg_nums=32, sys_flag=4,
                commit_offset=0, suspend_timeout_millis=0, subscription="*", sub_version=0,
            ).to_ext()  # fmt: skip
            peak = 0
            for i in range(n_pulls):  # ~256 KiB answered per pull; nobody reads them
                writer.write(encode_command(make_request(RequestCode.PULL_MESSAGE, ext, opaque=i + 1)))
                await asyncio.sleep(0.005)
                assert conn.transport is not None
                peak = max(peak, conn.transport.get_write_buffer_size())
            assert conn.reading_paused and conn.pause_count >= 1
            # Bounded: the high-water mark plus the answers of one read (a few pulls), not 60 x 256 KiB.
            assert peak <= high + 4 * 300 * 1024
            # Other connections are served meanwhile.
            assert (await b.send("FC", b"z")).code == ResponseCode.SUCCESS
            # The reader catches up: every pull is answered, reading resumes.
            answered = 0
            while answered < n_pulls:
                length = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))[0]
                await asyncio.wait_for(reader.readexactly(length), 10)
                answered += 1
            assert not conn.reading_paused
            writer.close()

    run(scenario())
