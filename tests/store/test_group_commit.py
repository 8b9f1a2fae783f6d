"""The SYNC_FLUSH group commit (`store/flush.py` GroupCommitService) over a real commit log: a waiter
that gave up (its future cancelled, as `asyncio.wait_for` on `wrap_future` does at its timeout)
must not stop the round, whose other waiters still learn that their data is on disk."""

from __future__ import annotations

from rocketlite.protocol.formats.record import MessageInner
from rocketlite.protocol.message import HostAddress
from rocketlite.store.flush import GroupCommitService
from tests.support.store import StoreFactory

HOST = HostAddress.parse("127.0.0.1:10911")


def test_a_cancelled_waiter_does_not_stop_the_round(open_store: StoreFactory) -> None:
    store = open_store()
    assert store.checkpoint is not None
    service = GroupCommitService(store.commit_log, store.checkpoint)  # driven here, not as a thread
    ends = []
    for i in range(3):
        msg = MessageInner(topic="T", body=b"x%d" % i, born_host=HOST, store_host=HOST)
        result = store.put_message_nowait(msg).result
        assert result.ok and result.append is not None
        ends.append(result.append.wrote_offset + result.append.wrote_bytes)
    gave_up, first, last = service.submit(ends[0]), service.submit(ends[1]), service.submit(ends[2])
    assert gave_up.cancel()
    service.run_once()
    assert first.result(timeout=0) is True and last.result(timeout=0) is True
    assert store.commit_log.queue.flushed_where >= ends[2]
    late = service.submit(ends[2])
    late.cancel()
    service.on_shutdown()  # a cancelled waiter at shutdown is skipped too
