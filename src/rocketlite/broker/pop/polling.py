"""`PopPolling`: the POPs held for want of messages (4.x POP_MESSAGE and 5.x ReceiveMessage
alike), RocketMQ's `PopLongPollingService` on the event loop.

A pop that finds nothing waits in the line of its (topic, consumer group), first come first
woken. An arrival on a queue (the store's arrival listener, right after the dispatch round that
made the message readable) wakes ONE waiter of each group on the topic: the first in line whose
queues include that queue. So does RocketMQ's `notifyMessageArriving`, which takes the first
request of each group's polling key and runs it again. Waking every held pop instead made each of
them look at all its queues once per message; one found it, the others found nothing.

An arrival for a group that already has a waiter woken and not yet looking, on a queue it pops,
wakes no other: that waiter's look takes the new messages too (its wake now names both queues).
At 1,000 msgs/s a dispatch round's arrival often came while the waiter woken by the previous one
waited for its loop turn; a second waiter was woken, the first took both messages, and the
second looked at every queue for nothing (4 of 10 wakes, each a look at 16 queues). Any other
wake (`wake_one`, a redelivery timer) that finds no waiter in line goes to a woken one the same
way.

A woken waiter leaves the line and looks again (`PopMessageProcessor.pop`) at the queues its wake
names (`Waiter.woken_for`), not at all of them: it looked at all of them when it joined the line,
and every arrival since on one of its queues woke a waiter in line or was added to a woken one's
wake (the one it woke looks at that queue). At the end of its poll time it looks at all of them.

- it finds messages: it answers; when messages are left past its group's cursors on the queues
  it looked at (its batch was full, or a read stopped short at a consume-queue file's end) it
  wakes the next waiter of its group (`wake_one`), so a burst is spread over as many waiters as
  it needs;
- it finds nothing (another pop took them): it joins the line again at its end and waits for the
  rest of its poll time, as RocketMQ parks the re-run request again with its first deadline; it
  does not answer empty before then;
- it goes away before it looked (its call was cancelled, its connection closed): its wake goes to
  the next waiter (`pass_on`), so an arrival is never lost with it.

An ack that leaves a queue with nothing in flight and messages waiting wakes one waiter of the
group on that queue (`PopMessageProcessor._acked`): an ordered (FIFO) pop held while the queue had
a batch in flight takes them then, as RocketMQ notifies the long polling when an ordered queue's
lock is freed.

Redelivery: the earliest deadline of the messages in flight on a waiter's queues is when a held
pop must look again. One timer per (topic, group, queue set) (`wake_at`, armed by the processor
on the event loop it passes) wakes ONE waiter of that set then, the first in line whose queues
cover the set: every held pop of a group setting its own timer to the same deadline woke them
all at once to race for the same messages (a herd, all but one finding nothing). Each waiter
otherwise waits on its event until its own poll time is over. The class owns no thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

TimerKey = tuple[str, str, frozenset[int]]  # topic, group, queue ids
Lines = dict[str, dict[str, dict["Waiter", None]]]  # by topic, then group: waiters in order


@dataclass(eq=False, slots=True)
class Waiter:
    """One held pop: the queues it pops, the event that wakes it, and the queues its wake names
    (None while it waits, or when it looks at all of them: its first look, its poll time over)."""

    topic: str
    group: str
    queue_ids: frozenset[int]
    event: asyncio.Event = field(default_factory=asyncio.Event)
    woken_for: frozenset[int] | None = None


class PopPolling:
    """The lines of held pops, by topic then consumer group (each in arrival order), and the
    waiters woken that have not looked yet."""

    def __init__(self) -> None:
        self._lines: Lines = {}
        self._woken: Lines = {}  # woken, not looked yet (`join` and `pass_on` take them out)
        self._timers: dict[TimerKey, asyncio.TimerHandle] = {}
        self.wakeups = 0  # waiters woken, for whatever reason (tests, diagnostics)
        self.joined = 0  # wakes added to a waiter woken already (tests, diagnostics)
        # (topic, group)s whose last look left messages it did not take nor hand on (`looked`)
        self._left: set[tuple[str, str]] = set()

    def has_topic(self, topic: str) -> bool:
        return topic in self._lines or topic in self._woken

    def waiting(self, topic: str, group: str) -> int:
        """How many pops of `group` wait on `topic`."""
        return len(self._lines.get(topic, {}).get(group, ()))

    def accounted(self, waiter: Waiter) -> bool:
        """Whether every message past the group's cursors on `waiter`'s queues is on its way to a
        waiter already: one of the same group and queues is in line (since the line was last
        empty, a look at every queue was made, and each arrival after it woke a waiter or was
        added to a woken one's wake), and no look left messages behind since. Then `waiter` joins
        the line without a look of its own, which would find nothing."""
        if (waiter.topic, waiter.group) in self._left:
            return False
        return any(
            w.queue_ids == waiter.queue_ids for w in self._lines.get(waiter.topic, {}).get(waiter.group, ())
        )

    def looked(self, waiter: Waiter, every_queue: bool, left_behind: bool) -> None:
        """After a look of `waiter` (at `every_queue` of it, or at those its wake named): it found
        nothing but messages are past the cursors (`left_behind`: a read that only moved a cursor,
        an ordered queue in flight), which no wake will announce: the next pop must look."""
        key = (waiter.topic, waiter.group)
        if left_behind:
            self._left.add(key)
        elif every_queue:
            self._left.discard(key)

    def join(self, waiter: Waiter) -> None:
        """Put `waiter` at the end of its line (where it is already, if it is in it): it looks
        next, so a wake it had is used."""
        _remove(self._woken, waiter)
        waiter.event.clear()
        waiter.woken_for = None
        self._lines.setdefault(waiter.topic, {}).setdefault(waiter.group, {}).setdefault(waiter, None)

    def leave(self, waiter: Waiter) -> None:
        _remove(self._lines, waiter)

    def wake_one(self, topic: str, group: str, queue_ids: Iterable[int]) -> bool:
        """Wake the first waiter of `group` on `topic` that pops one of `queue_ids` (or add them
        to the wake of one woken already, when none waits); False when none does."""
        wanted = frozenset(queue_ids)
        for waiter in self._lines.get(topic, {}).get(group, ()):
            if not waiter.queue_ids.isdisjoint(wanted):
                self._wake(waiter, wanted)
                return True
        return self._add_to_woken(topic, group, wanted, lambda w: not w.queue_ids.isdisjoint(wanted))

    def _wake(self, waiter: Waiter, woken_for: frozenset[int]) -> None:
        self.leave(waiter)
        waiter.woken_for = woken_for
        waiter.event.set()
        self._woken.setdefault(waiter.topic, {}).setdefault(waiter.group, {})[waiter] = None
        self.wakeups += 1

    def _add_to_woken(
        self, topic: str, group: str, queue_ids: frozenset[int], takes: Callable[[Waiter], bool]
    ) -> bool:
        """Add `queue_ids` to the wake of the first waiter of `group` woken and not looking yet
        that `takes` them; False when there is none."""
        for waiter in self._woken.get(topic, {}).get(group, ()):
            if takes(waiter):
                woken_for = waiter.woken_for
                waiter.woken_for = queue_ids if woken_for is None else woken_for | queue_ids
                self.joined += 1
                return True
        return False

    def wake_at(
        self, loop: asyncio.AbstractEventLoop, topic: str, group: str, queue_ids: frozenset[int], when: float
    ) -> None:
        """At loop time `when` (or sooner, if the set's timer is due sooner already), wake one
        waiter of `group` whose queues cover `queue_ids`: a message in flight there is due."""
        key = (topic, group, queue_ids)
        timer = self._timers.get(key)
        if timer is not None:
            if timer.when() <= when:
                return
            timer.cancel()
        self._timers[key] = loop.call_at(when, self._due, key)

    def _due(self, key: TimerKey) -> None:
        del self._timers[key]
        topic, group, queue_ids = key
        for waiter in self._lines.get(topic, {}).get(group, ()):
            if queue_ids <= waiter.queue_ids:
                self._wake(waiter, queue_ids)
                return
        self._add_to_woken(topic, group, queue_ids, lambda w: queue_ids <= w.queue_ids)

    def timers(self) -> int:
        """Redelivery timers armed (tests, diagnostics)."""
        return len(self._timers)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def arrived(self, topic: str, queue_id: int) -> None:
        """New messages on `topic`'s queue `queue_id`: one waiter of each group looks at it (one
        woken already and not looking yet, if there is one that pops the queue)."""
        which = frozenset((queue_id,))
        groups = {**self._woken.get(topic, {}), **self._lines.get(topic, {})}
        for group in groups:
            if not self._add_to_woken(topic, group, which, lambda w: queue_id in w.queue_ids):
                self.wake_one(topic, group, which)

    def pass_on(self, waiter: Waiter) -> None:
        """`waiter` goes away: out of its line, and if it was woken and never looked, its wake
        goes to the next waiter of its group."""
        self.leave(waiter)
        _remove(self._woken, waiter)
        woken_for = waiter.woken_for
        if waiter.event.is_set() and woken_for is not None:
            waiter.woken_for = None
            self.wake_one(waiter.topic, waiter.group, woken_for)


def _remove(lines: Lines, waiter: Waiter) -> None:
    groups = lines.get(waiter.topic)
    if groups is None:
        return
    line = groups.get(waiter.group)
    if line is None:
        return
    line.pop(waiter, None)
    if not line:
        del groups[waiter.group]
        if not groups:
            del lines[waiter.topic]
