"""A batch appended from its request body (`speedups.encode_batch_records`, then
`MessageStore.put_encoded_nowait`) lands exactly as the message path lands it
(`send_batch_messages`, then `MessageStore.put_messages_nowait`): the same status and remark for
every refusal (a stored DELAY property, a record over a limit, a store that is shut down, a batch
larger than a segment), and for a stored batch the same commit-log bytes, msg ids, queue offsets
and consume-queue units, across segment rolls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketlite.clock import ManualClock
from rocketlite.protocol.formats import speedups
from rocketlite.protocol.formats.batch import BatchEntry, BatchTarget, encode_batch, send_batch_messages
from rocketlite.protocol.message import HostAddress
from rocketlite.store.message_store import MessageStore, PendingPut
from tests.support.store import small_config

BORN = HostAddress(b"\x7f\x00\x00\x01", 4000)
STORE = HostAddress(b"\x0a\x00\x00\x02", 10911)


def target(header_props: str, topic: str, queue_id: int, max_message_size: int) -> BatchTarget:
    return BatchTarget(header_props, "C", topic, BORN, STORE, queue_id, 0, 5, 0, max_message_size)


def put_old(store: MessageStore, body: bytes, header_props: str, topic: str, queue_id: int) -> PendingPut:
    msgs, delayed = send_batch_messages(body, target(header_props, topic, queue_id, 1 << 22))
    assert msgs and not delayed
    return store.put_messages_nowait(msgs)


def put_new(store: MessageStore, body: bytes, header_props: str, topic: str, queue_id: int) -> PendingPut:
    encoded = speedups.encode_batch_records(
        body, target(header_props, topic, queue_id, store.commit_log.max_message_size)
    )
    assert encoded.messages
    return store.put_encoded_nowait(encoded, topic, queue_id, STORE)


def summary(pending: PendingPut) -> tuple[Any, ...]:
    res = pending.result
    a = res.append
    where = (
        None if a is None else (a.status, a.wrote_offset, a.wrote_bytes, a.msg_id, a.logics_offset, a.msg_num)
    )
    return (res.status, res.remark, where)


def log_bytes(store: MessageStore) -> bytes:
    store.reput.wait_caught_up(store.commit_log.max_offset)
    return b"".join(bytes(mf.read_from(0) or b"") for mf in store.commit_log.queue.files)


def units(store: MessageStore, topic: str, queue_id: int) -> bytes:
    cq = store.cq_store.find_or_create(topic, queue_id)
    return b"".join(bytes(mf.read_from(0) or b"") for mf in cq._mfq.files)


entries = st.lists(
    st.builds(
        BatchEntry,
        st.integers(-5, 5),
        st.binary(max_size=3000),
        st.sampled_from(["", "TAGS\x01a", "KEYS\x01k1 k2\x02UNIQ_KEY\x01U", "WAIT\x01true\x02X\x01y"]),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(entries, st.integers(0, 2)), min_size=1, max_size=6))
def test_encoded_batches_land_as_messages_do(tmp_path_factory: Any, batches: list[Any]) -> None:
    root = tmp_path_factory.mktemp("b")
    old = MessageStore(small_config(root / "old", max_message_size=4096), clock=ManualClock(7))
    new = MessageStore(small_config(root / "new", max_message_size=4096), clock=ManualClock(7))
    old.start()
    new.start()
    try:
        for batch, queue_id in batches:
            body = encode_batch(batch)
            assert summary(put_new(new, body, "TAGS\x01h", "T", queue_id)) == summary(
                put_old(old, body, "TAGS\x01h", "T", queue_id)
            )
        assert log_bytes(new) == log_bytes(old)
        for q in range(3):
            assert units(new, "T", q) == units(old, "T", q)
    finally:
        old.shutdown()
        new.shutdown()


def test_refusals_match(tmp_path: Path) -> None:
    old = MessageStore(small_config(tmp_path / "old"))
    new = MessageStore(small_config(tmp_path / "new"))
    old.start()
    new.start()
    try:
        body = encode_batch([BatchEntry(0, b"a", "TAGS\x01x"), BatchEntry(0, b"b", "")])
        cases = [
            (body, "DELAY\x013", "T"),  # the header's DELAY is stored: "delayed batches are not supported"
            (body, "MYDELAY\x01x", "T"),  # the store's substring test
            (body, "K\x01" + "v" * 32760, "T"),  # properties over 32767 bytes
            (encode_batch([BatchEntry(0, bytes(40_000), "")] * 2), "", "T"),  # larger than a segment
            (body, "", "x" * 128),  # topic too long
        ]
        for case in cases:
            assert summary(put_new(new, *case, 0)) == summary(put_old(old, *case, 0)), case
        big = encode_batch([BatchEntry(0, bytes(5000), "")])
        small_old = MessageStore(small_config(tmp_path / "o2", max_message_size=1000))
        small_new = MessageStore(small_config(tmp_path / "n2", max_message_size=1000))
        small_old.start()
        small_new.start()
        try:
            want = summary(put_old(small_old, big, "", "T", 0))
            assert summary(put_new(small_new, big, "", "T", 0)) == want and "1000" in want[1]
            small_old.shutdown()
            small_new.shutdown()
            assert summary(put_new(small_new, body, "", "T", 0)) == summary(
                put_old(small_old, body, "", "T", 0)
            )
        finally:
            small_old.shutdown()
            small_new.shutdown()
    finally:
        old.shutdown()
        new.shutdown()
