"""What a pop hands out: its messages as runs (`PoppedRun`: one per store read's run of
back-to-back records, or one per redelivery), with one object per run, not per message. The
per-message view (`Popped`) is made from the runs only for a reader that asks for it (the 4.x
POP processor, tests); the 5.x receive writes its answers from the runs."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Popped:
    """One message handed out and where it is: its record is `data[pos:pos + size]` (all of
    `data` when `size` is -1). The new messages of a batch share the `bytes` of their store read
    (one copy per run of records); a redelivery has its own (RECONSUMETIMES patched)."""

    queue_id: int
    queue_offset: int
    data: bytes
    attempts: int
    pos: int = 0
    size: int = -1

    @property
    def record(self) -> bytes:
        """The record's bytes (a copy when `data` holds more than the record)."""
        if self.size < 0 or (self.pos == 0 and self.size == len(self.data)):
            return self.data
        return self.data[self.pos : self.pos + self.size]


@dataclass(slots=True)
class PoppedRun:
    """Messages of one queue handed out together, in ascending offset order: record k is
    `data[sum(sizes[:k]) : sum(sizes[:k + 1])]` at queue offset `offsets[k]`. A redelivery is a
    run of one whose size is -1 (all of `data`: its own copy, RECONSUMETIMES patched)."""

    queue_id: int
    offsets: list[int]
    data: bytes
    sizes: list[int]
    attempts: int  # deliveries before this one, the same for the whole run


@dataclass(slots=True)
class PopBatch:
    pop_time: int
    invisible_time: int
    runs: list[PoppedRun]
    start_offsets: dict[int, int]  # queue id -> first offset handed out
    rest_num: int  # messages left in the queues after the cursor
    count: int = 0  # messages in `runs`
    _messages: list[Popped] | None = field(default=None, repr=False, compare=False)

    @property
    def messages(self) -> list[Popped]:
        """One `Popped` per message, in the runs' order (made on first use)."""
        if self._messages is None:
            out: list[Popped] = []
            for run in self.runs:
                pos = 0
                q, data, attempts = run.queue_id, run.data, run.attempts
                for offset, size in zip(run.offsets, run.sizes, strict=True):
                    out.append(Popped(q, offset, data, attempts, pos, size))
                    pos += size
            self._messages = out
        return self._messages
