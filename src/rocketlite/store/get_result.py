"""Results of store reads: `GetMessageResult` (pull), `QueryMessageResult` (by key)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rocketlite.store.status import GetMessageStatus


@dataclass(slots=True)
class GetMessageResult:
    """Records for one pull: zero-copy slices of the commit log, in queue order."""

    status: GetMessageStatus
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    messages: list[memoryview] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        return len(self.messages)

    def body(self) -> bytes:
        """The records back to back, as a pull response body carries them."""
        return b"".join(self.messages)

    def release(self) -> None:
        for view in self.messages:
            view.release()
        self.messages.clear()


@dataclass(slots=True)
class QueryMessageResult:
    messages: list[memoryview] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0

    def body(self) -> bytes:
        return b"".join(self.messages)
