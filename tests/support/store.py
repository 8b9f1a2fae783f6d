"""Real stores for tests: the shared test data, small segment sizes, the store factory type, a
message to put."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rocketlite.protocol.formats.record import MessageInner
from rocketlite.protocol.message import HostAddress, properties_to_string
from rocketlite.store.config import StoreConfig
from rocketlite.store.message_store import MessageStore


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
