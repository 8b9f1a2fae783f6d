"""Queue allocation strategies, shared by a consumer's own rebalance and the broker's
QUERY_ASSIGNMENT (400): both must give the same answer for the same sorted queues and client ids.

Named as RocketMQ names them (`AllocateMessageQueueStrategy.getName()`): "AVG"
(`AllocateMessageQueueAveragely`) and "AVG_BY_CIRCLE" (`AllocateMessageQueueAveragelyByCircle`).
The broker looks a strategy up by the name a client sends; an unknown name gets no assignment.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, TypeVar

Q = TypeVar("Q")

AVG: Final = "AVG"
AVG_BY_CIRCLE: Final = "AVG_BY_CIRCLE"


def allocate_averagely(group: str, current_cid: str, mq_all: Sequence[Q], cid_all: Sequence[str]) -> list[Q]:
    """`AllocateMessageQueueAveragely`: contiguous blocks; the first `len(mq) % len(cid)` get one more."""
    del group
    if current_cid not in cid_all or not mq_all:
        return []
    index = list(cid_all).index(current_cid)
    n_mq, n_cid = len(mq_all), len(cid_all)
    mod = n_mq % n_cid
    if n_mq <= n_cid:
        average = 1
    elif mod > 0 and index < mod:
        average = n_mq // n_cid + 1
    else:
        average = n_mq // n_cid
    start = index * average if mod > 0 and index < mod else index * average + mod
    size = min(average, n_mq - start)
    return [mq_all[(start + i) % n_mq] for i in range(max(0, size))]


def allocate_averagely_by_circle(
    group: str, current_cid: str, mq_all: Sequence[Q], cid_all: Sequence[str]
) -> list[Q]:
    """`AllocateMessageQueueAveragelyByCircle`: queue i goes to client i % n."""
    del group
    if current_cid not in cid_all:
        return []
    index = list(cid_all).index(current_cid)
    return [mq for i, mq in enumerate(mq_all) if i % len(cid_all) == index]


def strategy_named(name: str) -> Callable[[str, str, Sequence[Q], Sequence[str]], list[Q]] | None:
    """The strategy RocketMQ registers under `name` (the broker's `name2LoadStrategy`), or None."""
    if name == AVG:
        return allocate_averagely
    if name == AVG_BY_CIRCLE:
        return allocate_averagely_by_circle
    return None
