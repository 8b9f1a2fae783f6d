"""Real stores for tests: the shared test data, small segment sizes, the store factory type, a
message to put, messages put as one batch through the store's batch entry point, and the
records a key finds; random messages for the record codecs."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from rocketlite.protocol.formats import speedups
from rocketlite.protocol.formats.batch import (
    BATCH_DELAYED_ENTRY,
    BatchEntry,
    BatchTarget,
    EncodedBatch,
    encode_batch,
    send_batch_messages,
)
from rocketlite.protocol.formats.record import MessageInner, decode_record, enters_consume_queue
from rocketlite.protocol.message import HostAddress, properties_to_string
from rocketlite.store.config import StoreConfig
from rocketlite.store.message_store import MessageStore
from rocketlite.store.results import AppendResult, PutMessageResult


def _find_shared() -> Path:
    """`shared/` sits beside the checkout (in CI and in the workplace); ROCKETLITE_SHARED overrides."""
    env = os.environ.get("ROCKETLITE_SHARED")
    if env:
        return Path(env)
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared"
        if (candidate / "testdata").is_dir():
            return candidate
    return Path(__file__).resolve().parents[3] / "shared"


SHARED = _find_shared()
REAL_STORE = SHARED / "testdata" / "rocketmq-4.x-store"

StoreFactory = Callable[..., MessageStore]

HOST = HostAddress.parse("127.0.0.1:10911")


def message(
    topic: str = "T",
    queue_id: int = 0,
    body: bytes = b"body",
    tags: str | None = None,
    keys: str | None = None,
    **props: str,
) -> MessageInner:
    """A message to put, with TAGS, KEYS and any other properties given."""
    p: dict[str, str] = {}
    if tags:
        p["TAGS"] = tags
    if keys:
        p["KEYS"] = keys
    p.update(props)
    return MessageInner(
        topic=topic, body=body, born_host=HOST, store_host=HOST, queue_id=queue_id,
        properties_string=properties_to_string(p), born_timestamp=1,
    )  # fmt: skip


def small_config(root: Path, **overrides: Any) -> StoreConfig:
    """Tiny segments so rolls happen within a test."""
    base: dict[str, Any] = {
        "store_path_root_dir": root,
        "maped_file_size_commit_log": 64 * 1024,
        "maped_file_size_consume_queue": 100 * 20,
        "max_hash_slot_num": 1000,
        "max_index_num": 4000,
        "flush_interval_commit_log": 50,
        "flush_interval_consume_queue": 50,
    }
    base.update(overrides)
    return StoreConfig(**base)


# -- a batch, as the broker stores a SEND_BATCH_MESSAGE ---------------------------------------------
CLUSTER = "DefaultCluster"  # the cluster name the batch path adds to each record as CLUSTER


def batch_request(msgs: Sequence[MessageInner], max_message_size: int = 4 << 20) -> tuple[bytes, BatchTarget]:
    """`msgs` as a producer sends them in one SEND_BATCH_MESSAGE: the body (each message's flag,
    body and properties) and what the header and the broker give them all (the first message's
    topic, queue, hosts, sys flag, born time and reconsume times)."""
    first = msgs[0]
    body = encode_batch([BatchEntry(m.flag, m.body, m.properties_string) for m in msgs])
    target = BatchTarget(
        header_properties="", cluster=CLUSTER, topic=first.topic, born_host=first.born_host,
        store_host=first.store_host, queue_id=first.queue_id, sys_flag=first.sys_flag,
        born_timestamp=first.born_timestamp, reconsume_times=first.reconsume_times,
        max_message_size=max_message_size,
    )  # fmt: skip
    return body, target


def encoded_batch(msgs: Sequence[MessageInner], max_message_size: int = 4 << 20) -> EncodedBatch:
    """The records of `msgs` as one batch, made by the production entry point
    (`encode_batch_records`, as the send processor makes them from a request body)."""
    encoded = speedups.encode_batch_records(*batch_request(msgs, max_message_size))
    assert encoded.outcome != BATCH_DELAYED_ENTRY, "a batch cannot carry DELAY"
    return encoded


def put_batch(store: MessageStore, msgs: Sequence[MessageInner]) -> PutMessageResult:
    """`msgs` (one topic-queue) appended as one batch through `MessageStore.put_encoded_nowait`,
    waiting for the flush as a SYNC_FLUSH put does."""
    first = msgs[0]
    encoded = encoded_batch(msgs, store.commit_log.max_message_size)
    return store.wait_durable(
        store.put_encoded_nowait(encoded, first.topic, first.queue_id, first.store_host)
    )


def stored_batch(msgs: Sequence[MessageInner], appended: AppendResult) -> list[MessageInner]:
    """The messages of a stored batch as the log holds them: as the batch defines them
    (`send_batch_messages`: CLUSTER added to each one's properties) with the queue offset,
    commit-log offset and store time the append gave each (its msg ids end in the offsets)."""
    stored, delayed = send_batch_messages(*batch_request(msgs))
    assert not delayed
    step = 1 if enters_consume_queue(stored[0].sys_flag) else 0
    return [
        dataclasses.replace(
            m,
            queue_offset=appended.logics_offset + i * step,
            commit_log_offset=int(msg_id[-16:], 16),
            store_timestamp=appended.store_timestamp,
        )
        for i, (m, msg_id) in enumerate(zip(stored, appended.msg_id.split(","), strict=True))
    ]


def key_hits(store: MessageStore, topic: str, key: str) -> list[int]:
    """Commit-log offsets of the records of `topic` stored under KEYS `key` (the index answers
    hash matches; filtered as a client filters them)."""
    found = store.query_message(topic, key, 32, 0, 2**62)
    hits = []
    for view in found.messages:
        rec = decode_record(view)
        if rec.keys == key:
            hits.append(rec.physical_offset)
        view.release()
    return hits


V4 = HostAddress(b"\x7f\x00\x00\x01", 10911)
V6 = HostAddress(bytes(range(16)), 10911)


def inner_messages(sys_flags: Sequence[int] = (0,)) -> st.SearchStrategy[MessageInner]:
    """Random messages for the record codecs' differential tests: IPv4 and IPv6 hosts, bodies up
    to 2 KiB, a few topics and properties, a sys flag from `sys_flags`."""
    hosts = st.sampled_from([V4, V6, HostAddress(b"\x0a\x00\x00\x02", 4321)])
    return st.builds(
        MessageInner,
        topic=st.sampled_from(["T", "TopicTest", "%RETRY%g"]),
        body=st.binary(max_size=2048),
        born_host=hosts,
        store_host=hosts,
        queue_id=st.integers(0, 7),
        sys_flag=st.sampled_from(list(sys_flags)),
        born_timestamp=st.integers(0, 2**41),
        properties_string=st.sampled_from(["", "TAGS\x01a\x02", "UNIQ_KEY\x01ABC\x02KEYS\x01k1 k2\x02"]),
    )
