"""`columns.in_flight_runs`, the one-step path of an ack's columns: it takes a call exactly when
every entry is distinct and in flight at its popTime, and then gives each queue's offsets in
the call's order (`PopService.ack_columns` deletes those; any other call goes entry by entry)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite.broker.pop.columns import in_flight_runs
from rocketlite.broker.pop.log import InFlight, QueuePopState

G, T = "g", "t"


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(
        st.integers(0, 2), st.dictionaries(st.integers(0, 6), st.integers(1, 3), max_size=7), max_size=3
    ),
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 6), st.integers(1, 3)), max_size=12),
)
def test_runs_are_taken_exactly_when_every_entry_is_distinct_and_in_flight(
    tables: dict[int, dict[int, int]], entries: list[tuple[int, int, int]]
) -> None:
    queues = {
        (G, T, q): QueuePopState(0, {o: InFlight(t, t + 10, 0) for o, t in table.items()})
        for q, table in tables.items()
    }
    queue_ids = [q for q, _, _ in entries]
    offsets = [o for _, o, _ in entries]
    pop_times = [t for _, _, t in entries]
    runs = in_flight_runs(queues, G, T, queue_ids, offsets, pop_times)
    distinct = len({(q, o) for q, o, _ in entries}) == len(entries)
    in_flight = all(tables.get(q, {}).get(o) == t for q, o, t in entries)
    assert (runs is not None) == (bool(entries) and distinct and in_flight)
    if runs is not None:
        expected: dict[tuple[str, str, int], list[int]] = {}
        for q, o, _ in entries:
            expected.setdefault((G, T, q), []).append(o)
        assert {key: acked for key, (_, acked) in runs.items()} == expected
        assert all(table is queues[key].in_flight for key, (table, _) in runs.items())
