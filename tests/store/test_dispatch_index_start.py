"""The dispatcher's index start (`Dispatcher._index_start`): the index's end is asked for until it
is seen behind the records to dispatch, then not again while the dispatcher alone moves
`reput_from_offset`; when someone else moves it back (recovery re-dispatching), the index is
asked again, so records already indexed are not indexed twice."""

from __future__ import annotations

from rocketlite.protocol.formats.record import MessageInner
from rocketlite.protocol.message import HostAddress, properties_to_string
from tests.support.store import StoreFactory

HOST = HostAddress.parse("127.0.0.1:10911")


def mk(key: str) -> MessageInner:
    return MessageInner(
        topic="T", body=b"body", born_host=HOST, store_host=HOST, queue_id=0,
        properties_string=properties_to_string({"TAGS": "a", "KEYS": key}), born_timestamp=1,
    )  # fmt: skip


def test_redispatch_from_an_earlier_offset_does_not_index_twice(open_store: StoreFactory) -> None:
    store = open_store()
    for _ in range(3):
        assert store.put_message(mk("k1")).ok
    assert store.wait_dispatched()
    for _ in range(2):  # rounds after the index was seen behind: still indexed once each
        assert store.put_message(mk("k1")).ok
        assert store.wait_dispatched()
    index = store.index
    assert index is not None
    found = index.query_offset("T", "k1", 64, 0, 2**62).phy_offsets
    assert len(found) == len(set(found)) == 5
    dispatcher = store.dispatcher
    with store.reput._round:  # the thread held off; a re-dispatch from 0, as recovery does
        dispatcher.reput_from_offset = 0
        dispatcher.dispatch_available()
    again = index.query_offset("T", "k1", 64, 0, 2**62).phy_offsets
    # Only the record at the index's end is indexed again (RocketMQ's rule), not all of them.
    assert sorted(again) == sorted([*found, max(found)])
    assert store.put_message(mk("k1")).ok and store.wait_dispatched()
    assert len(index.query_offset("T", "k1", 64, 0, 2**62).phy_offsets) == 7
