"""A pull with a property filter (`get_message(record_filter=...)`): the records it takes, their
count limit, and the next offset must be RocketMQ's getMessage loop, kept below as the oracle:
units looked at one by one within the consume-queue file holding the offset, the tag code
first, then the record's bytes; a record either filter turns down counts as scanned, not taken."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite.protocol.formats.record import decode_record
from rocketlite.store.consume_queue import MAX_FILTER_BYTES
from rocketlite.store.queue_view import QueueView
from rocketlite.store.results import GetMessageStatus
from tests.support.store import StoreFactory, message

UNITS_PER_FILE = 100  # small_config's consume-queue files
TAGS = ("a", "b", "c")


def test_filtered_pulls_match_rocketmqs_loop(open_store: StoreFactory) -> None:
    store = open_store()
    n = 260  # three consume-queue files
    for i in range(n):
        put = store.put_message(message(tags=TAGS[i % 3], body=f"m{i}".encode(), n=str(i)))
        assert put.ok
    assert store.wait_dispatched()
    view = store.queue("T", 0)
    assert view is not None
    limit = store.config.max_transfer_count_on_message_in_memory

    def n_of(record: memoryview) -> int:
        return int(decode_record(record).get_property("n") or -1)

    @settings(max_examples=150)
    @given(
        offset=st.integers(0, n),
        max_count=st.integers(1, 40),
        modulus=st.integers(1, 7),
        tag=st.sampled_from([None, *TAGS]),
    )
    def check(offset: int, max_count: int, modulus: int, tag: str | None) -> None:
        tag_code = None if tag is None else store_tag_code(view, TAGS.index(tag))
        tag_filter = None if tag_code is None else tag_code.__eq__

        def record_filter(record: memoryview) -> bool:
            return n_of(record) % modulus == 0

        result = store.get_message("g", "T", 0, offset, max_count, tag_filter, record_filter=record_filter)
        try:
            # the oracle
            taken: list[int] = []
            end = min(n, (offset // UNITS_PER_FILE + 1) * UNITS_PER_FILE)
            end = min(end, offset + max(MAX_FILTER_BYTES, max_count * 20) // 20)
            scanned = offset
            for o in range(offset, end):
                if len(taken) >= min(max_count, limit):
                    break
                scanned = o + 1
                unit = view.unit(o)
                assert unit is not None
                if tag_filter is not None and not tag_filter(unit[2]):
                    continue
                record = view.read(o)
                assert record is not None
                if record_filter(record):
                    taken.append(o)
                record.release()
            if offset >= n:
                assert result.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
                return
            assert result.queue_offsets == taken
            assert result.status is (GetMessageStatus.FOUND if taken else GetMessageStatus.NO_MATCHED_MESSAGE)
            assert result.next_begin_offset == scanned
            assert [n_of(m) for m in result.messages] == taken  # the bytes are those records
        finally:
            result.release()

    check()


def store_tag_code(view: QueueView, index: int) -> int:
    """The tag code the queue holds for the tag of message `index` (messages cycle through TAGS)."""
    unit = view.unit(index)
    assert unit is not None
    return int(unit[2])
