"""What the store answers: the statuses of its calls, named as RocketMQ's (`PutMessageStatus`,
`GetMessageStatus`, `AppendMessageStatus`) so the broker maps them to response codes one to one;
the results of writes (`AppendResult`: where the commit log placed a record or batch;
`PutMessageResult`: the put's status; `PendingPut`: a put whose durability is awaited); and the
results of reads (`QueueRead`: what a consume queue's read found; `GetMessageResult`: a pull;
`QueryMessageResult`: a lookup by key).

They live apart from the structures that produce them so that the broker can read what a call did
without importing the store's internals (see `store/api.py`)."""

from __future__ import annotations

import enum
from array import array
from concurrent.futures import Future
from dataclasses import dataclass, field


class AppendMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    END_OF_FILE = "END_OF_FILE"
    MESSAGE_SIZE_EXCEEDED = "MESSAGE_SIZE_EXCEEDED"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class PutMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
    IN_SYNC_REPLICAS_NOT_ENOUGH = "IN_SYNC_REPLICAS_NOT_ENOUGH"  # refused before the append

    @property
    def ok(self) -> bool:
        """The message is stored (flush or replication timeouts still mean stored)."""
        return self in (
            PutMessageStatus.PUT_OK,
            PutMessageStatus.FLUSH_DISK_TIMEOUT,
            PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
            PutMessageStatus.SLAVE_NOT_AVAILABLE,
        )


class GetMessageStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class AppendResult:
    """Where a message (or batch) landed. For a batch, `msg_id` is the comma-joined id list."""

    status: AppendMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    msg_id: str = ""
    store_timestamp: int = 0
    logics_offset: int = 0
    msg_num: int = 1
    remark: str = ""

    @property
    def end_offset(self) -> int:
        return self.wrote_offset + self.wrote_bytes


@dataclass(slots=True)
class PutMessageResult:
    status: PutMessageStatus
    append: AppendResult | None = None
    remark: str = ""

    @property
    def ok(self) -> bool:
        return self.status.ok


@dataclass(slots=True)
class PendingPut:
    """A put whose bytes are written; `flush_future` (SYNC_FLUSH) resolves when they are durable."""

    result: PutMessageResult
    flush_future: Future[bool] | None = None


def _no_units() -> array[int]:
    return array("q")


@dataclass(slots=True)
class QueueRead:
    """What `ConsumeQueue.read` found, kept as `parts`: one zero-copy view of the commit log per
    run of records that lie back to back there (a queue written in batches gives a few runs for a
    pull of a thousand records), so a pull answer is its header and the parts, with no Python
    object per record. `part_ends[i]` is how many records the parts up to i hold.

    `picked` holds three values per record, in queue order: commit-log offset, size, and queue
    offset minus `base_offset`. The per-record views (`messages`, for POP, gRPC, the tests) and
    `queue_offsets` are built from it only when asked. Also: the total size, how many units were
    scanned (the next read starts after them), and whether a record was gone from the log before
    any was found (MESSAGE_WAS_REMOVING).
    """

    base_offset: int = 0
    parts: list[memoryview] = field(default_factory=list)
    part_ends: list[int] = field(default_factory=list)
    picked: array[int] = field(default_factory=_no_units)
    total_size: int = 0
    scanned: int = 0
    hit_removed: bool = False
    _views: list[memoryview] | None = None

    @property
    def count(self) -> int:
        return self.part_ends[-1] if self.part_ends else 0

    @property
    def messages(self) -> list[memoryview]:
        """One view per record (cut from the parts the first time it is asked for)."""
        if self._views is None:
            views: list[memoryview] = []
            sizes = self.picked[1::3]
            k = 0
            for part, end in zip(self.parts, self.part_ends, strict=True):
                pos = 0
                for size in sizes[k:end]:
                    views.append(part[pos : pos + size])
                    pos += size
                k = end
            self._views = views
        return self._views

    @property
    def queue_offsets(self) -> list[int]:
        base = self.base_offset
        return [base + i for i in self.picked[2::3]]

    def copied(self) -> tuple[bytes, list[int]]:
        """Every record of the read copied out back to back in one `bytes` (the runs joined), with
        their sizes in queue order: one object for the whole read, where a queue's records are
        interleaved with other queues' in the commit log and each run is one record."""
        return b"".join(self.parts), self.picked[1::3].tolist()

    def last_message(self) -> memoryview | None:
        """A view of the last record (the pull's slave suggestion reads its PHYSICALOFFSET),
        without cutting the others."""
        if not self.parts:
            return None
        part, size = self.parts[-1], self.picked[-2]
        return part[len(part) - size :]

    def release(self) -> None:
        if self._views is not None:
            for view in self._views:
                view.release()
            self._views = None
        for view in self.parts:
            view.release()
        self.parts.clear()
        self.part_ends.clear()


@dataclass(slots=True)
class GetMessageResult:
    """Records for one pull: zero-copy slices of the commit log, in queue order.

    `parts` is what a pull answer's body is made of (back-to-back records share one slice);
    `messages` and `queue_offsets` are per record, built on first use.
    """

    status: GetMessageStatus
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False
    found: QueueRead | None = None

    @property
    def message_count(self) -> int:
        return self.found.count if self.found is not None else 0

    @property
    def parts(self) -> list[memoryview]:
        return self.found.parts if self.found is not None else []

    @property
    def messages(self) -> list[memoryview]:
        return self.found.messages if self.found is not None else []

    @property
    def queue_offsets(self) -> list[int]:
        return self.found.queue_offsets if self.found is not None else []

    def copied(self) -> tuple[bytes, list[int]]:
        """See `QueueRead.copied`."""
        return self.found.copied() if self.found is not None else (b"", [])

    def last_message(self) -> memoryview | None:
        return self.found.last_message() if self.found is not None else None

    def body(self) -> bytes:
        """The records back to back, as a pull response body carries them."""
        return b"".join(self.parts)

    def release(self) -> None:
        if self.found is not None:
            self.found.release()


@dataclass(slots=True)
class QueryMessageResult:
    messages: list[memoryview] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0

    def body(self) -> bytes:
        return b"".join(self.messages)
