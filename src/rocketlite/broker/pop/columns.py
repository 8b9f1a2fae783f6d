"""An ack's entries as columns (queue ids, offsets, popTimes: `protocol.proto.acks.handle_columns`
reads them from an AckMessage's handles), taken by queue in one step each when they are the
common case: every entry distinct and in flight at its popTime. `PopService.ack_columns` then
removes each queue's offsets with one mapped delete; anything else goes entry by entry there, so
that each refusal names its cause.

Before that, `split_acks` refuses the entries whose handles another broker (or a topic of
another type) issued, for every ack path alike (4.x ACK_MESSAGE, 5.x AckMessage, `PopService.ack`).
"""

from __future__ import annotations

from rocketlite.broker.pop.log import InFlight, QueueKey, QueuePopState
from rocketlite.protocol.proto.acks import HandleColumns
from rocketlite.protocol.wire.pop import NORMAL_TOPIC, StaleReceiptHandleError

__all__ = ["HandleAck", "Runs", "foreign_refusal", "in_flight_runs", "split_acks"]

HandleAck = tuple[int, int, int, str, str]
"""One entry of an ack as its handle reads: (queueId, offset, popTime, topic type, broker name)."""

Runs = dict[QueueKey, tuple[dict[int, InFlight], list[int]]]
"""By queue, its in-flight table and the offsets acked in it."""


def in_flight_runs(
    queues: dict[QueueKey, QueuePopState],
    group: str,
    topic: str,
    queue_ids: list[int],
    offsets: list[int],
    pop_times: list[int],
) -> Runs | None:
    """The entries by queue if every one is distinct and in flight at its popTime, else None.
    One queue's entries (a receive's batch is mostly one queue's run) take no Python step each:
    the look-ups are mapped and compared as lists."""
    n = len(offsets)
    if not n or len(set(zip(queue_ids, offsets, strict=True))) != n:
        return None
    columns: dict[int, tuple[list[int], list[int]]]
    if queue_ids.count(queue_ids[0]) == n:
        columns = {queue_ids[0]: (offsets, pop_times)}
    else:
        columns = {}
        for queue_id, offset, pop_time in zip(queue_ids, offsets, pop_times, strict=True):
            column = columns.get(queue_id) or columns.setdefault(queue_id, ([], []))
            column[0].append(offset)
            column[1].append(pop_time)
    runs: Runs = {}
    for queue_id, (acked, times) in columns.items():
        key = (group, topic, queue_id)
        state = queues.get(key)
        if state is None:
            return None
        try:
            if [f.pop_time for f in map(state.in_flight.__getitem__, acked)] != times:
                return None
        except KeyError:  # one is not in flight
            return None
        runs[key] = (state.in_flight, acked)
    return runs


def foreign_refusal(topic_type: str, broker_name: str, mine: str) -> StaleReceiptHandleError | None:
    """Why a handle of `broker_name` for a topic of `topic_type` is not this broker's (`mine`)
    normal one to ack, or None when it is."""
    if topic_type == NORMAL_TOPIC and broker_name == mine:
        return None
    return StaleReceiptHandleError(
        f"receipt handle of broker {broker_name!r} (topic type {topic_type}) "
        f"was not issued by this broker ({mine!r})"
    )


def split_acks(
    acks: list[HandleAck], mine: str
) -> tuple[list[StaleReceiptHandleError | None], HandleColumns]:
    """An ack's entries by whose handles they are: one not of broker `mine` for a normal topic
    refused, naming why (in the list, by place); the others as the columns `ack_columns` takes
    (entry `at[k]` of `acks` is column place k)."""
    refusals: list[StaleReceiptHandleError | None] = [None] * len(acks)
    ours = HandleColumns([], [], [], [])
    for i, (queue_id, offset, pop_time, topic_type, broker_name) in enumerate(acks):
        refusal = foreign_refusal(topic_type, broker_name, mine)
        if refusal is not None:
            refusals[i] = refusal
            continue
        ours.at.append(i)
        ours.queue_ids.append(queue_id)
        ours.offsets.append(offset)
        ours.pop_times.append(pop_time)
    return refusals, ours
