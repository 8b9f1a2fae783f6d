"""The `rocketmq` reader's pull channel against a real broker and against peers that misbehave.

A misbehaving peer is a plain TCP server on 127.0.0.1 that answers a request with the bytes a
test gives it: the channel must fail with a `PullChannelError` naming the broker, never hang or
hand back bytes of another answer.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

pytest.importorskip("pyarrow")

from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.frame import encode_command
from rocketlite.protocol.wire.frame_codec import LENGTH
from rocketlite.spark.broker_client import PullAnswer, PullOutcome, client_for, close_clients
from rocketlite.spark.offsets import QueueRef
from rocketlite.spark.pull_channel import BatchBuffer, PullChannel, PullChannelError, channel_for, release
from rocketlite.spark.records import decode_batch, scan_positions
from tests.support.spark.broker import fill
from tests.support.topics import create_topic


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    with embedded(store_max_transfer_count_on_message_in_memory=64) as c:
        create_topic(c, "PullChannelT", queues=1)
        fill(c, "PullChannelT", {0: 200})
        yield c
    close_clients()


def test_bodies_of_several_answers_are_received_back_to_back(cluster: EmbeddedCluster) -> None:
    client = client_for(cluster.namesrv_addr, "pull-channel-test")
    ref = QueueRef("PullChannelT", cluster.broker.broker.broker_name, 0)
    channel = channel_for(client.broker_address(ref), 5.0)
    batch = BatchBuffer(16)  # far too small: the buffer grows
    offset = 0
    try:
        channel.send(client.pull_command(ref, offset, 64))
        while True:
            answer = channel.read_header()
            result = PullAnswer.of(answer.command)
            if result.outcome != PullOutcome.FOUND:
                channel.read_body(answer, None)
                break
            offset = result.next_begin
            if offset < 200:
                channel.send(client.pull_command(ref, offset, 64))  # before the body is read
            channel.read_body(answer, batch)
            if offset >= 200:
                break
    finally:
        release(channel)
    buf = batch.view()
    rows = decode_batch(buf, scan_positions(buf, 0, len(buf), max_count=len(buf)).positions)
    assert rows.column("body").to_pylist() == [
        f"PullChannelT-0-{i}-".encode().ljust(16, b".") for i in range(200)
    ]
    assert rows.column("queueOffset").to_pylist() == list(range(200))
    again = channel_for(channel.addr, 5.0)
    release(again)
    assert again is channel  # idle: kept for the next task


def test_a_channel_left_owing_an_answer_is_closed_not_reused(cluster: EmbeddedCluster) -> None:
    client = client_for(cluster.namesrv_addr, "pull-channel-test")
    ref = QueueRef("PullChannelT", cluster.broker.broker.broker_name, 0)
    channel = channel_for(client.broker_address(ref), 5.0)
    channel.send(client.pull_command(ref, 0, 8))
    release(channel)  # a task stopped early: its answer is still on the wire
    assert channel.closed
    fresh = channel_for(channel.addr, 5.0)
    assert fresh is not channel and fresh.idle
    release(fresh)


class _Peer:
    """A TCP server that reads one request frame and answers with `reply`, then closes."""

    def __init__(self, reply: bytes) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.reply = reply
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.server.accept()
        with conn:
            (length,) = LENGTH.unpack(conn.recv(4, socket.MSG_WAITALL))
            conn.recv(length, socket.MSG_WAITALL)
            conn.sendall(self.reply)
        self.server.close()


def _answer(opaque: int, body: bytes = b"", code: int = 0) -> bytes:
    cmd = RemotingCommand(code=code, opaque=opaque, flag=1, ext_fields={
        "nextBeginOffset": "1", "minOffset": "0", "maxOffset": "1", "suggestWhichBrokerId": "0"})  # fmt: skip
    cmd.body = body
    return encode_command(cmd)


def _request() -> RemotingCommand:
    return RemotingCommand(code=11, ext_fields={"topic": "T"})


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (_answer(opaque=99), "where the answer to 1 was due"),
        (_answer(opaque=1, body=b"x" * 100)[:-40], "closed the connection"),
        (struct.pack(">i", 200 * 1024 * 1024) + b"\0" * 8, "exceeds the limit"),
        (struct.pack(">ii", 20, 1000) + b"\0" * 16, "header length 1000 exceeds"),
        (b"", "closed the connection"),
    ],
    ids=["wrong-opaque", "torn-body", "huge-frame", "bad-header-length", "closed"],
)
def test_a_misbehaving_peer_fails_the_read_naming_the_broker(reply: bytes, words: str) -> None:
    peer = _Peer(reply)
    channel = PullChannel(peer.addr, 5.0)
    channel.send(_request())
    with pytest.raises(PullChannelError, match=words) as caught:
        answer = channel.read_header()
        channel.read_body(answer, BatchBuffer(64))
    assert peer.addr in str(caught.value)
    assert channel.closed and not channel.idle
    peer.thread.join(5)


def test_an_answer_that_is_not_a_pull_answer_names_the_code() -> None:
    peer = _Peer(_answer(opaque=1, code=17))  # TOPIC_NOT_EXIST
    channel = PullChannel(peer.addr, 5.0)
    channel.send(_request())
    answer = channel.read_header()
    with pytest.raises(Exception, match="17"):
        PullAnswer.of(answer.command)
    channel.close()
    peer.thread.join(5)


def test_status_of_a_found_answer() -> None:
    peer = _Peer(_answer(opaque=1, body=b"records"))
    channel = PullChannel(peer.addr, 5.0)
    channel.send(_request())
    answer = channel.read_header()
    assert PullAnswer.of(answer.command).outcome == PullOutcome.FOUND
    assert channel.read_body(answer, None) == b"records"
    assert channel.idle
    channel.close()
    peer.thread.join(5)


def test_connecting_to_nothing_names_the_address() -> None:
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    with pytest.raises(PullChannelError, match=f"127.0.0.1:{port}"):
        PullChannel(f"127.0.0.1:{port}", 2.0)
