"""`StoreAPI`: everything the broker may ask of the store, declared in one place.

The broker holds the store through this surface. `MessageStore` implements it; the composition
root (`broker/controller.py`) is the one part of the broker that builds a `MessageStore`, starts
and stops it; everything else takes a `StoreAPI`. The commit log, the consume queues, the index,
the dispatcher and the service threads stay behind it: an import-linter contract keeps
`rocketlite.broker` off the store's internal modules (`pyproject.toml`), and the only paths up
from the store are the callbacks registered here (arrival listeners), the model of NATS
JetStream's `StreamStore` interface with its registered update handlers.

The surface, by purpose:

- writing: `put_message*`, `put_encoded_nowait` (each with `paced`, for appends whose dispatch
  round may be shared with the next loop iterations'), `wait_durable`,
  `transient_store_pool_deficient`;
- durability: `flush_to(end)` and the log's ends (`durable_end`, `committed_end`, `written_end`);
- reading: `get_message` (a pull, filtered by tag code and optionally by a `RecordFilter` on
  each record's bytes), `queue(topic, queue_id)` (a `QueueView`: bounds, units, the
  records they point at), the offset lookups, records by commit-log offset or by key;
- dispatch: `add_arrival_listener` / `remove_arrival_listener`, `dispatch_on(loop)`,
  `wait_dispatched`;
- replication (HA): the log's bytes from a physical offset (`read_log`, `read_log_from`),
  `append_replicated`, `prestage_first_segment`, the segment size;
- operation: `apply_live_settings(changes)` (UPDATE_BROKER_CONFIG), `delete_topics`,
  `consume_queue_topics`, `clean_expired_consume_queues`,
  `run_clean_pass`, `disk_used_ratio`, `disk_full`, `runtime_info`, `stats`, `config`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from rocketlite.protocol.formats.batch import EncodedBatch
from rocketlite.protocol.formats.record import MessageInner, StoredRecord
from rocketlite.protocol.message import HostAddress
from rocketlite.store.config import StoreConfig
from rocketlite.store.dispatch import ArrivalListener
from rocketlite.store.queue_read import RecordFilter
from rocketlite.store.queue_view import QueueView
from rocketlite.store.results import (
    AppendResult,
    GetMessageResult,
    PendingPut,
    PutMessageResult,
    QueryMessageResult,
)
from rocketlite.store.stats import StoreStats

__all__ = ["ArrivalListener", "MessageFilter", "RecordFilter", "StoreAPI"]

# Tags code -> whether a pull takes the record.
MessageFilter = Callable[[int], bool]


class StoreAPI(Protocol):
    """The store as the broker sees it (implemented by `MessageStore`)."""

    # -- state ------------------------------------------------------------------------------
    @property
    def config(self) -> StoreConfig:
        """The current settings (a new object after `apply_live_settings`: read it at use)."""

    @property
    def stats(self) -> StoreStats: ...

    @property
    def master(self) -> bool:
        """The store takes appends (a slave's log only grows by `append_replicated`)."""

    # -- writing ----------------------------------------------------------------------------
    def put_message(self, msg: MessageInner) -> PutMessageResult: ...

    def put_message_nowait(self, msg: MessageInner, *, paced: bool = False) -> PendingPut: ...

    def put_message_async(self, msg: MessageInner, *, paced: bool = False) -> AppendResult | PendingPut: ...

    def put_encoded_nowait(
        self, enc: EncodedBatch, topic: str, queue: int, host: HostAddress, *, paced: bool = False
    ) -> PendingPut: ...

    def put_encoded_batches_nowait(
        self, batches: list[tuple[EncodedBatch, str, int]], host: HostAddress
    ) -> list[AppendResult]:
        """Several batches (encoded, topic, queue id) appended in one go
        (`CommitLog.append_encoded_batches`), for ASYNC_FLUSH (`takes_group`): the results of the
        leading ones placed, fewer than asked where `put_encoded_nowait` would refuse one or a
        segment could not be created."""

    def takes_group(self) -> bool:
        """Whether `put_group_nowait` serves now: the group codecs are compiled, ASYNC_FLUSH,
        and the store takes puts."""

    def put_group_nowait(
        self, buf: bytearray, sizes: list[int], keys: list[str], host: HostAddress
    ) -> tuple[list[str], list[int]]:
        """Single messages of different queues, encoded back to back (`speedups.encode_group`),
        appended in one go (`CommitLog.append_group`): (msg ids, queue offsets) of those placed,
        fewer than asked only when a segment could not be created."""

    def wait_durable(self, pending: PendingPut) -> PutMessageResult: ...

    def transient_store_pool_deficient(self) -> bool: ...

    # -- durability -------------------------------------------------------------------------
    def flush_to(self, end: int) -> bool: ...

    @property
    def durable_end(self) -> int: ...

    @property
    def committed_end(self) -> int: ...

    @property
    def written_end(self) -> int: ...

    # -- reading ----------------------------------------------------------------------------
    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None = None,
        *,
        max_transfer_count: int | None = None,
        max_transfer_bytes: int | None = None,
        record_filter: RecordFilter | None = None,
    ) -> GetMessageResult:
        """A pull: records whose tag code passes `message_filter` and, with `record_filter`
        (a property filter, judged on each record's bytes after the tag code), that it takes."""

    def queue(self, topic: str, queue_id: int) -> QueueView | None: ...

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int: ...

    def get_max_offsets_in_queues(self, topic: str, queue_ids: list[int]) -> list[int]:
        """`get_max_offset_in_queue` of each of `queue_ids`, in one call."""
        ...

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int: ...

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, cq_offset: int) -> int: ...

    def get_message_store_timestamp(self, topic: str, queue_id: int, cq_offset: int) -> int: ...

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int: ...

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int: ...

    @property
    def min_phy_offset(self) -> int: ...

    @property
    def max_phy_offset(self) -> int: ...

    def select_one_message_by_offset(self, offset: int, size: int | None = None) -> memoryview | None: ...

    def look_message_by_offset(self, offset: int) -> StoredRecord | None: ...

    def query_message(
        self, topic: str, key: str, max_num: int, begin: int, end: int
    ) -> QueryMessageResult: ...

    # -- dispatch ---------------------------------------------------------------------------
    def add_arrival_listener(self, listener: ArrivalListener) -> None: ...

    def remove_arrival_listener(self, listener: ArrivalListener) -> None: ...

    def dispatch_on(self, loop: asyncio.AbstractEventLoop) -> None: ...

    def wait_dispatched(self, timeout: float = 10.0) -> bool: ...

    # -- replication (HA) -------------------------------------------------------------------
    @property
    def log_segment_size(self) -> int: ...

    @property
    def log_is_empty(self) -> bool: ...

    def read_log(self, offset: int, size: int) -> memoryview | None: ...

    def read_log_from(self, offset: int) -> memoryview | None: ...

    def append_replicated(
        self, offset: int, data: bytes | bytearray | memoryview, store_timestamp: int
    ) -> int: ...

    def prestage_first_segment(self) -> None: ...

    # -- operation --------------------------------------------------------------------------
    def apply_live_settings(self, changes: Mapping[str, Any]) -> StoreConfig: ...

    def delete_topics(self, topics: set[str]) -> None: ...

    def consume_queue_topics(self) -> list[str]:
        """Every topic with a consume queue (CLEAN_UNUSED_TOPIC)."""

    def clean_expired_consume_queues(self, keep: Callable[[str], bool]) -> int:
        """Delete the queues whose records are all gone, but those of topics `keep` names
        (CLEAN_EXPIRED_CONSUMEQUEUE); the number deleted."""

    def run_clean_pass(self, *, force: bool = False) -> int: ...

    def disk_used_ratio(self) -> float: ...

    @property
    def disk_full(self) -> bool: ...

    def runtime_info(self) -> dict[str, str]: ...
