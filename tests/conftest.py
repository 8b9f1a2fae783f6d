"""Shared fixtures: real stores in temporary directories."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketlite.store.message_store import MessageStore
from tests.support.store import StoreFactory, small_config


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[StoreFactory]:
    """Open stores on tmp_path (or a given root); all are shut down at the end."""
    opened: list[MessageStore] = []

    def factory(root: Path | None = None, **overrides: Any) -> MessageStore:
        store = MessageStore(small_config(root or tmp_path / "store", **overrides))
        store.start()
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.shutdown()
