"""Long polling over dispatch rounds: sends made on the broker's loop are dispatched by a round on
that loop, and the round answers a held pull at once, with everything the queue then holds."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.formats.record import MessageInner, decode_records
from rocketlite.protocol.message import HostAddress, properties_to_string
from rocketlite.protocol.wire.command import make_request, make_response
from rocketlite.protocol.wire.headers import PullMessageRequestHeader
from rocketlite.remoting.connection import Connection, RequestTable
from tests.support.aio import run
from tests.support.broker_harness import broker_under_test

SUSPEND, SUBSCRIPTION = 0x2, 0x4
HOST = HostAddress.parse("127.0.0.1:10911")


def held_pull(topic: str) -> dict[str, str]:
    return PullMessageRequestHeader(
        consumer_group="P", topic=topic, queue_id=0, queue_offset=0, max_msg_nums=32,
        sys_flag=SUBSCRIPTION | SUSPEND, commit_offset=0, suspend_timeout_millis=10_000,
        subscription="*", sub_version=0,
    ).to_ext()  # fmt: skip


def message(topic: str, body: bytes) -> MessageInner:
    return MessageInner(
        topic=topic, body=body, born_host=HOST, store_host=HOST, queue_id=0,
        properties_string=properties_to_string({"TAGS": "a"}), born_timestamp=1,
    )  # fmt: skip


def test_a_burst_of_appends_answers_the_held_pull_once_with_all_of_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            parts = b.controller.parts
            assert parts is not None and parts.pull is not None
            hold = parts.pull.hold
            b.controller.topics.create_in_send_back("T", 1, 6)
            task = asyncio.ensure_future(b.call(RequestCode.PULL_MESSAGE, held_pull("T"), timeout=15))
            # Requests on one connection are handled in order: once this answers, the pull is parked.
            await b.call(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"})
            assert not task.done() and hold.held_count == 1
            (held,) = hold.holds[("T", 0)]
            assert held.header is not None and held.header.queue_offset == 0  # decoded once, kept
            store = b.controller.store
            for body in (b"one", b"two", b"three"):  # appended on the loop, as sends are
                assert store.put_message_nowait(message("T", body)).result.ok
            await asyncio.sleep(0)  # the loop's dispatch round ran, and answered the pull
            assert hold.held_count == 0
            r = await asyncio.wait_for(task, 5)
            assert r.code == ResponseCode.SUCCESS
            assert [x.body for x in decode_records(r.body or b"")] == [b"one", b"two", b"three"]
            assert r.ext_fields["nextBeginOffset"] == "3"

    run(scenario())


class _Transport:
    """Records each write (the one call the output bracketing is about)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)


def test_answers_bracketed_by_open_output_go_out_in_one_write_at_once() -> None:
    async def scenario() -> None:
        conn = Connection(RequestTable())
        transport = _Transport()
        conn.transport = transport  # type: ignore[assignment]
        conn.loop = asyncio.get_running_loop()
        request = make_request(RequestCode.PULL_MESSAGE, {})
        conn.send(make_response(request, ResponseCode.SUCCESS))  # deferred: one loop turn later
        assert conn.open_output()
        assert not conn.open_output()  # already collecting: the outer bracket flushes
        conn.send(make_response(request, ResponseCode.PULL_NOT_FOUND))
        conn.send(make_response(request, ResponseCode.SUCCESS))
        assert transport.writes == []
        conn.flush_output()
        assert len(transport.writes) == 1  # the deferred frame first, then both answers, one write
        await asyncio.sleep(0)  # the deferred flush finds nothing left
        assert len(transport.writes) == 1
        conn.send(make_response(request, ResponseCode.SUCCESS))  # outside a bracket: deferred again
        await asyncio.sleep(0)
        assert len(transport.writes) == 2

    run(scenario())
