"""A batch appended from its request body (`speedups.encode_batch_records`, then
`MessageStore.put_encoded_nowait`: the broker's batch path) lands as the batch defines its
messages (`send_batch_messages`): each stored record is the record of its message at the queue
offset, commit-log offset and store time the put answered, with consecutive queue offsets and
msg ids that name those offsets, across segment rolls; the compiled encoder and the reference land
the same commit-log bytes and consume-queue units; and every refusal (a stored DELAY property, a
record over a limit, a store that is shut down, a batch larger than a segment, a batch over
maxMessageSize) has its status and remark.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketlite.clock import ManualClock
from rocketlite.protocol.formats import speedups
from rocketlite.protocol.formats.batch import BatchEntry, BatchTarget, encode_batch, send_batch_messages
from rocketlite.protocol.formats.record import encode_record
from rocketlite.protocol.message import HostAddress, make_msg_id
from rocketlite.store.message_store import MessageStore
from rocketlite.store.results import AppendMessageStatus, PendingPut, PutMessageStatus
from tests.support.store import small_config

BORN = HostAddress(b"\x7f\x00\x00\x01", 4000)
STORE = HostAddress(b"\x0a\x00\x00\x02", 10911)


def target(header_props: str, topic: str, queue_id: int, max_message_size: int) -> BatchTarget:
    return BatchTarget(header_props, "C", topic, BORN, STORE, queue_id, 0, 5, 0, max_message_size)


def put(
    store: MessageStore, body: bytes, header_props: str, topic: str, queue_id: int, *, reference: bool = False
) -> PendingPut:
    """The send processor's batch path: the body encoded (by the chosen codec, or the reference),
    then put."""
    codecs = speedups.REFERENCE if reference else speedups.CHOSEN
    encoded = codecs.encode_batch_records(
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
def test_encoded_batches_land_as_their_messages(tmp_path_factory: Any, batches: list[Any]) -> None:
    root = tmp_path_factory.mktemp("b")
    ref = MessageStore(small_config(root / "ref", max_message_size=4096), clock=ManualClock(7))
    new = MessageStore(small_config(root / "new", max_message_size=4096), clock=ManualClock(7))
    ref.start()
    new.start()
    try:
        next_offset = dict.fromkeys(range(3), 0)
        for batch, queue_id in batches:
            body = encode_batch(batch)
            got = put(new, body, "TAGS\x01h", "T", queue_id)
            assert summary(got) == summary(put(ref, body, "TAGS\x01h", "T", queue_id, reference=True))
            res = got.result
            if res.status is not PutMessageStatus.PUT_OK:
                assert res.append is None or res.append.status is AppendMessageStatus.MESSAGE_SIZE_EXCEEDED
                continue
            appended = res.append
            assert appended is not None and appended.logics_offset == next_offset[queue_id]
            msgs, delayed = send_batch_messages(body, target("TAGS\x01h", "T", queue_id, 4096))
            assert not delayed and appended.msg_num == len(msgs)
            ids = appended.msg_id.split(",")
            phys = appended.wrote_offset
            for i, (m, msg_id) in enumerate(zip(msgs, ids, strict=True)):
                assert msg_id == make_msg_id(STORE, phys)
                placed = dataclasses.replace(
                    m, queue_offset=appended.logics_offset + i, commit_log_offset=phys,
                    store_timestamp=appended.store_timestamp,
                )  # fmt: skip
                record = new.commit_log.read_record(phys)
                assert record is not None
                assert bytes(record) == encode_record(placed)
                record.release()
                phys += len(encode_record(placed))
            assert phys == appended.end_offset
            next_offset[queue_id] += len(msgs)
        assert log_bytes(new) == log_bytes(ref)
        for q in range(3):
            assert units(new, "T", q) == units(ref, "T", q)
            assert len(units(new, "T", q)) == 20 * next_offset[q]
    finally:
        ref.shutdown()
        new.shutdown()


def test_refusals(tmp_path: Path) -> None:
    store = MessageStore(small_config(tmp_path / "s"))
    store.start()
    try:
        body = encode_batch([BatchEntry(0, b"a", "TAGS\x01x"), BatchEntry(0, b"b", "")])
        illegal = PutMessageStatus.MESSAGE_ILLEGAL
        too_large = (AppendMessageStatus.MESSAGE_SIZE_EXCEEDED, 0, 0, "", 0, 1)
        cases = [
            # the header's DELAY is stored: "delayed batches are not supported"
            ((body, "DELAY\x013", "T"), (illegal, "delayed batches are not supported", None)),
            # the store's substring test
            ((body, "MYDELAY\x01x", "T"), (illegal, "delayed batches are not supported", None)),
            # properties over 32767 bytes
            (
                (body, "K\x01" + "v" * 32760, "T"),
                (illegal, "properties length 32779 exceeds 32767 bytes", too_large),
            ),
            # larger than a segment
            (
                (encode_batch([BatchEntry(0, bytes(40_000), "")] * 2), "", "T"),
                (illegal, "batch of 80202 bytes does not fit in a 65536-byte segment", too_large),
            ),
            # topic too long
            ((body, "", "x" * 128), (illegal, "topic longer than 127 bytes", None)),
        ]
        for case, want in cases:
            for reference in (False, True):
                assert summary(put(store, *case, 0, reference=reference)) == want, case
        assert store.commit_log.max_offset == 0
    finally:
        store.shutdown()
    big = encode_batch([BatchEntry(0, bytes(5000), "")])
    small = MessageStore(small_config(tmp_path / "small", max_message_size=1000))
    small.start()
    try:
        for reference in (False, True):
            assert summary(put(small, big, "", "T", 0, reference=reference)) == (
                PutMessageStatus.MESSAGE_ILLEGAL, "message size 5101 exceeds maxMessageSize 1000", too_large
            )  # fmt: skip
    finally:
        small.shutdown()
    for reference in (False, True):
        assert summary(put(small, body, "", "T", 0, reference=reference)) == (
            PutMessageStatus.SERVICE_NOT_AVAILABLE, "store is shut down", None
        )  # fmt: skip


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.lists(st.tuples(entries, st.integers(0, 2)), min_size=1, max_size=8), min_size=1, max_size=4)
)
def test_several_batches_in_one_append_land_as_one_by_one(tmp_path_factory: Any, rounds: list[Any]) -> None:
    """`put_encoded_batches_nowait` (the batch lane's: several batches under one lock, those of a
    segment in one `pwritev`) stores what `put_encoded_nowait` of each in turn stores, across
    segment rolls, and gives the same results; it stops at a batch over the limit, which the
    caller leaves to the per-request path (here: put one by one, as the handler would)."""
    root = tmp_path_factory.mktemp("g")
    ref = MessageStore(small_config(root / "ref", max_message_size=9000), clock=ManualClock(7))
    new = MessageStore(small_config(root / "new", max_message_size=9000), clock=ManualClock(7))
    ref.start()
    new.start()
    chosen = speedups.CHOSEN.encode_batch_records
    try:
        for batches in rounds:
            encoded = [
                (chosen(encode_batch(batch), target("", "T", q, 9000)), "T", q) for batch, q in batches
            ]
            expected = [summary(ref.put_encoded_nowait(enc, t, q, STORE)) for enc, t, q in encoded]
            placed = new.put_encoded_batches_nowait(encoded, STORE)
            got = [(PutMessageStatus.PUT_OK, "", (a.status, a.wrote_offset, a.wrote_bytes, a.msg_id,
                                                  a.logics_offset, a.msg_num)) for a in placed]  # fmt: skip
            assert got == expected[: len(placed)]
            for enc, t, q in encoded[len(placed) :]:  # what the lane leaves to the handler
                new.put_encoded_nowait(enc, t, q, STORE)
        assert log_bytes(new) == log_bytes(ref)
        for q in range(3):
            assert units(new, "T", q) == units(ref, "T", q)
    finally:
        ref.shutdown()
        new.shutdown()
