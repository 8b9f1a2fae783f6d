"""Put latency sampling (`writer` docstring): an ASYNC_FLUSH single put reads the clock one
time in `PUT_TIMING_EVERY`, the puts in between take the last sample's bucket; the counts stay
exact and a slow sample is counted (and warned about) once, not for every put after it."""

from __future__ import annotations

import time

import pytest

from rocketlite.protocol.formats.record import MessageInner
from rocketlite.protocol.message import HostAddress, properties_to_string
from rocketlite.store.writer import PUT_TIMING_EVERY
from tests.support.store import StoreFactory

HOST = HostAddress.parse("127.0.0.1:10911")


def mk() -> MessageInner:
    return MessageInner(
        topic="T", body=b"x" * 100, born_host=HOST, store_host=HOST, queue_id=0,
        properties_string=properties_to_string({"TAGS": "a"}), born_timestamp=1,
    )  # fmt: skip


def test_buckets_count_every_put(open_store: StoreFactory) -> None:
    store = open_store()
    n = 3 * PUT_TIMING_EVERY + 5
    for _ in range(n):
        assert store.put_message_nowait(mk()).result.ok
    stats = store.stats
    assert stats.put_count == n == sum(stats.put_latency_buckets.values())
    assert 0 < stats.put_max_ms < 1000


def test_a_slow_sample_is_counted_once(open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store()
    clock, real = iter([1.0, 1.7]), time.perf_counter  # the first (timed) put takes 700 ms
    monkeypatch.setattr(time, "perf_counter", lambda: next(clock, None) or real())
    for _ in range(PUT_TIMING_EVERY):  # one timed, the rest untimed
        assert store.put_message_nowait(mk()).result.ok
    stats = store.stats
    assert stats.put_slow_count == 1 and stats.put_ge_500ms == 1
    assert stats.put_lt_500ms == PUT_TIMING_EVERY - 1
    assert stats.put_max_ms == pytest.approx(700)
