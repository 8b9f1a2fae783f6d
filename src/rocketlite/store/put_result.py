"""Results of store writes: `AppendResult` (where the commit log placed a record or batch),
`PutMessageResult` (the put's RocketMQ status), `PendingPut` (a put whose durability is awaited).

They live apart from the commit log so that the broker can read what a put did without importing
the store's internals (see `store/api.py`)."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass

from rocketlite.store.status import AppendMessageStatus, PutMessageStatus


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
