"""The broker's state files under `{storePathRootDir}/config/`, never half-written.

RocketMQ keeps broker state that is not in the commit log in small fastjson files:

* `consumerOffset.json`   `{"offsetTable":{"topic@group":{0:12,1:7}}}` (integer keys unquoted)
* `delayOffset.json`      `{"offsetTable":{1:0,2:5}}` (delay level -> SCHEDULE_TOPIC queue offset)
* `topics.json`           `{"dataVersion":{...},"topicConfigTable":{name:{TopicConfig}}}`
* `subscriptionGroup.json` `{"dataVersion":{...},"subscriptionGroupTable":{name:{...}}}`
* `consumerFilter.json`   `{"filterDataByTopic":{...}}`

`persist` writes `NAME.tmp`, fsyncs it, keeps the previous file as `NAME.bak` and renames the new
one into place, so a crash leaves either the old or the new content. `load` falls back to the
`.bak` copy when the file is missing or unparsable, and says so in the log.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from rocketlite.atomic_file import write_atomically
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.wire import fastjson

log = logging.getLogger("rocketlite.broker.state_files")


class JsonConfigFile(ABC):
    """One config file: subclasses say how their state encodes and decodes."""

    file_name = ""

    def __init__(self, config_dir: Path) -> None:
        self.path = config_dir / self.file_name
        self.lock = threading.RLock()
        # Serialises whole persists (two threads writing one NAME.tmp would break the rename),
        # without holding `lock`, which guards the in-memory state, during the fsync.
        self._persist_lock = threading.Lock()
        self.dirty = False  # the last persist failed: the file is older than the state

    @abstractmethod
    def encode(self) -> str: ...

    @abstractmethod
    def decode(self, text: str) -> None: ...

    def load(self) -> bool:
        """Read the file (or its `.bak`); True if either existed and parsed."""
        for candidate in (self.path, self.path.with_name(self.path.name + ".bak")):
            if not candidate.exists():
                continue
            try:
                text = candidate.read_text(encoding="utf-8")
                if text.strip():
                    with self.lock:
                        self.decode(text)
                if candidate != self.path:
                    log.warning("%s unreadable or missing; loaded %s", self.path.name, candidate.name)
                return True
            except (ValueError, TypeError, KeyError, AttributeError, ProtocolError) as exc:
                log.error("cannot parse %s: %s", candidate, exc)
        return False

    def persist(self) -> bool:
        """Write the file. On an OS error (disk full, permissions) log it, keep the state in
        memory marked `dirty` for `persist_if_dirty` to retry, and return False: as with
        RocketMQ's ConfigManager, a failed config write never fails the request that changed
        the state, and the file on disk stays the previous complete version."""
        with self._persist_lock:
            with self.lock:
                text = self.encode()
            try:
                write_atomically(self.path, text)
            except OSError as exc:
                self.dirty = True
                log.error("cannot write %s (%s); the state stays in memory, written later", self.path, exc)
                return False
            self.dirty = False
            return True

    def persist_if_dirty(self) -> bool:
        """Retry a persist that failed; True when the file is up to date."""
        return self.persist() if self.dirty else True


def _int_map(value: Any) -> dict[int, int]:
    if not isinstance(value, dict):
        return {}
    return {int(k): int(v) for k, v in value.items()}


class ConsumerOffsetTable(JsonConfigFile):
    """Committed consumer offsets, keyed `topic@group` then queue id.

    `reset_table` holds the offsets an admin reset (INVOKE_BROKER_TO_RESET_OFFSET, served on the
    broker as RocketMQ 5's `useServerSideResetOffset`) until the group's next pull of each queue
    takes them (`take_reset`: the pull answers PULL_OFFSET_MOVED to the reset offset); meanwhile
    `query` answers the reset offset and the group's offset updates are ignored (`has_reset`).
    The reset table is not persisted, as RocketMQ's is not; the reset offset is also committed.
    """

    file_name = "consumerOffset.json"

    def __init__(self, config_dir: Path) -> None:
        super().__init__(config_dir)
        self.offset_table: dict[str, dict[int, int]] = {}
        self.reset_table: dict[str, dict[int, int]] = {}

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        with self.lock:
            self.offset_table.setdefault(f"{topic}@{group}", {})[queue_id] = offset

    def commit_all(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        """`commit` of several queues of one group and topic (queue id -> offset): one lock and one
        key for a pop that looked at every queue of its topic."""
        with self.lock:
            self.offset_table.setdefault(f"{topic}@{group}", {}).update(offsets)

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset (a pending reset's, if any), or -1 when the group has none."""
        key = f"{topic}@{group}"
        with self.lock:
            reset = self.reset_table.get(key)
            if reset is not None and queue_id in reset:
                return reset[queue_id]
            return self.offset_table.get(key, {}).get(queue_id, -1)

    def assign_reset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """`assignResetOffset`: the queue restarts at `offset` at the group's next pull."""
        key = f"{topic}@{group}"
        with self.lock:
            self.reset_table.setdefault(key, {})[queue_id] = offset
            self.offset_table.setdefault(key, {})[queue_id] = offset

    def has_reset(self, group: str, topic: str, queue_id: int) -> bool:
        with self.lock:
            return queue_id in self.reset_table.get(f"{topic}@{group}", {})

    def take_reset(self, group: str, topic: str, queue_id: int) -> int | None:
        """`queryThenEraseResetOffset`: the pending reset offset of the queue, now taken."""
        key = f"{topic}@{group}"
        with self.lock:
            reset = self.reset_table.get(key)
            if not reset or queue_id not in reset:
                return None
            offset = reset.pop(queue_id)
            if not reset:
                del self.reset_table[key]
            return offset

    def query_all(self, group: str, topic: str) -> dict[int, int]:
        with self.lock:
            return dict(self.offset_table.get(f"{topic}@{group}", {}))

    def groups_of_topic(self, topic: str) -> set[str]:
        with self.lock:
            return {k.split("@", 1)[1] for k in self.offset_table if k.split("@", 1)[0] == topic}

    def remove_group(self, group: str) -> None:
        with self.lock:
            for table in (self.offset_table, self.reset_table):
                for key in [k for k in table if k.endswith(f"@{group}")]:
                    del table[key]

    def remove_topic(self, topic: str) -> None:
        with self.lock:
            for table in (self.offset_table, self.reset_table):
                for key in [k for k in table if k.startswith(f"{topic}@")]:
                    del table[key]

    def encode(self) -> str:
        return fastjson.dumps({"offsetTable": self.offset_table})

    def decode(self, text: str) -> None:
        data = fastjson.loads(text)
        table = data.get("offsetTable", {}) if isinstance(data, dict) else {}
        self.offset_table = {str(k): _int_map(v) for k, v in table.items()}


class DelayOffsetTable(JsonConfigFile):
    """How far the schedule service has delivered each delay level's queue."""

    file_name = "delayOffset.json"

    def __init__(self, config_dir: Path) -> None:
        super().__init__(config_dir)
        self.offset_table: dict[int, int] = {}

    def encode(self) -> str:
        return fastjson.dumps({"offsetTable": self.offset_table})

    def decode(self, text: str) -> None:
        data = fastjson.loads(text)
        self.offset_table = _int_map(data.get("offsetTable", {}) if isinstance(data, dict) else {})


class JsonDocumentFile(JsonConfigFile):
    """A config file kept as a JSON document (topics, subscription groups, filters).

    The broker owns the typed view of these; the store only guarantees safe persistence.
    """

    def __init__(self, config_dir: Path, file_name: str, default: dict[str, Any]) -> None:
        self.file_name = file_name
        super().__init__(config_dir)
        self.document: dict[str, Any] = default

    def encode(self) -> str:
        return fastjson.dumps(self.document)

    def decode(self, text: str) -> None:
        data = fastjson.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"{self.file_name}: expected a JSON object")
        self.document = data


def topics_file(config_dir: Path) -> JsonDocumentFile:
    return JsonDocumentFile(
        config_dir, "topics.json", {"dataVersion": {"counter": 0, "timestamp": 0}, "topicConfigTable": {}}
    )


def subscription_group_file(config_dir: Path) -> JsonDocumentFile:
    return JsonDocumentFile(
        config_dir,
        "subscriptionGroup.json",
        {"dataVersion": {"counter": 0, "timestamp": 0}, "subscriptionGroupTable": {}},
    )


def consumer_filter_file(config_dir: Path) -> JsonDocumentFile:
    return JsonDocumentFile(config_dir, "consumerFilter.json", {"filterDataByTopic": {}})
