"""`ConsumeQueue.put_packed` (what every dispatch round writes) leaves the same queue as
`put_units` with the same units, whichever path it takes: the straight append of new units after
the last ones, or the general one (duplicates skipped, gaps padded, file boundaries split)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite.protocol.formats.consume_queue_unit import UNIT_SIZE, Unit
from rocketlite.store.codec.speedups import pack_units
from rocketlite.store.consume_queue_store import ConsumeQueueStore

FILE_UNITS = 7  # small files: runs cross file boundaries

# (first logical offset shift, unit count, physical step back): a shift > 0 leaves a gap, a step
# back re-sends units already written (duplicates).
Run = tuple[int, int, int]


def apply(runs: list[Run], packed: bool, root: Path) -> tuple[tuple[int, int, int], list[Unit | None]]:
    store = ConsumeQueueStore(root, FILE_UNITS * UNIT_SIZE)
    cq = store.find_or_create("T", 0)
    logical, phy = 0, 0
    for shift, count, back in runs:
        first = max(0, logical + shift - back)
        start_phy = max(0, phy - back * 100)
        units = [(start_phy + i * 100, 100, i) for i in range(count)]
        if packed:
            assert cq.put_packed(pack_units(units), first)
        else:
            assert cq.put_units(units, first)
        logical, phy = max(logical, first + count), max(phy, start_phy + count * 100)
    seen = [cq.get_unit(i) for i in range(cq.min_offset, cq.max_offset)]
    state = (cq.min_offset, cq.max_offset, cq.max_physic_offset)
    store.close()
    return state, seen


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 12), st.integers(0, 2)), min_size=1, max_size=12))
def test_put_packed_matches_put_units(runs: list[Run]) -> None:
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        assert apply(runs, True, Path(a)) == apply(runs, False, Path(b))


def test_consecutive_runs_take_the_straight_append() -> None:
    with tempfile.TemporaryDirectory() as d:
        store = ConsumeQueueStore(Path(d), FILE_UNITS * UNIT_SIZE)
        cq = store.find_or_create("T", 0)
        for i in range(20):  # across two file boundaries
            assert cq.put_packed(pack_units([(i * 100, 100, i)]), i)
        assert cq.max_offset == 20 and cq.max_physic_offset == 2000
        got = [cq.get_unit(i) for i in (0, 6, 7, 19)]
        assert got == [(0, 100, 0), (600, 100, 6), (700, 100, 7), (1900, 100, 19)]
        store.close()
