"""`DispatchRequest`: what the reput service extracts from one commit-log record for the consume
queue and the index (RocketMQ's `DispatchRequest`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class DispatchRequest:
    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: str  # the KEYS property ("" if none), space-separated
    uniq_key: str | None  # the UNIQ_KEY property
    sys_flag: int
    prepared_transaction_offset: int
