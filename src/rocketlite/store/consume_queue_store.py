"""ConsumeQueueStore: every consume queue of the store, `consumequeue/{topic}/{queueId}/` (RocketMQ's
`consumeQueueTable` in DefaultMessageStore). See `consume_queue` for the file format.

The table is guarded by a lock: the dispatch thread creates queues (`find_or_create`) while broker
threads look them up and the flush and clean services walk them. The queues themselves are not
locked here (see `ConsumeQueue`). Owns no threads.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from rocketlite.store.consume_queue import ConsumeQueue
from rocketlite.store.mapped_file_queue import Allocator, direct_allocator

log = logging.getLogger("rocketlite.store.consume_queue_store")


def _check_topic_dir_name(topic: str) -> None:
    """A topic becomes a directory name: refuse names that would escape `root_dir`."""
    if not topic or topic in {".", ".."} or "/" in topic or "\0" in topic:
        raise ValueError(f"topic {topic!r} cannot name a consume queue directory")


class ConsumeQueueStore:
    """topic -> queueId -> ConsumeQueue, plus the operations the store applies to all of them."""

    def __init__(self, root_dir: Path, file_size: int, allocator: Allocator = direct_allocator) -> None:
        self.root_dir = root_dir
        self.file_size = file_size
        self.allocator = allocator
        self._table: dict[str, dict[int, ConsumeQueue]] = {}
        self._lock = threading.Lock()

    def _new_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        return ConsumeQueue(topic, queue_id, self.root_dir, self.file_size, self.allocator)

    def load(self) -> None:
        """Open every `{topic}/{queueId}` directory (loadConsumeQueue); `recover_all` must follow.

        Directory names that are not a queue id (a non-negative int written canonically, so that
        the queue reopens the same directory) are skipped with a warning, as RocketMQ does.
        """
        if not self.root_dir.is_dir():
            return
        for topic_dir in sorted(self.root_dir.iterdir()):
            if not topic_dir.is_dir():
                log.warning("ignoring %s: not a topic directory", topic_dir)
                continue
            for queue_dir in sorted(topic_dir.iterdir()):
                name = queue_dir.name
                if name.endswith(".alloc"):
                    continue  # segments staged for the queue directory of that number
                if not queue_dir.is_dir() or not name.isdigit() or str(int(name)) != name:
                    log.warning("ignoring %s: not a consume queue directory", queue_dir)
                    continue
                cq = self._new_queue(topic_dir.name, int(name))
                cq.load()
                with self._lock:
                    self._table.setdefault(topic_dir.name, {})[cq.queue_id] = cq
        log.info("loaded %d consume queues", sum(1 for _ in self.queues()))

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue for (topic, queue_id), created empty (no file yet) if new (findConsumeQueue)."""
        with self._lock:
            queues = self._table.get(topic)
            cq = queues.get(queue_id) if queues is not None else None
            if cq is not None:
                return cq
            _check_topic_dir_name(topic)
            if queue_id < 0:
                raise ValueError(f"queue id must be >= 0, got {queue_id}")
            cq = self._new_queue(topic, queue_id)
            self._table.setdefault(topic, {})[queue_id] = cq
            return cq

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        with self._lock:
            queues = self._table.get(topic)
            return queues.get(queue_id) if queues is not None else None

    def of_topic(self, topic: str) -> dict[int, ConsumeQueue]:
        """The topic's queues by id, a snapshot (empty when it has none)."""
        with self._lock:
            return dict(self._table.get(topic, {}))

    def queues(self) -> Iterator[ConsumeQueue]:
        """Every queue, from a snapshot taken under the lock (safe while queues are created)."""
        with self._lock:
            snapshot = [cq for queues in self._table.values() for cq in queues.values()]
        return iter(snapshot)

    def topics(self) -> list[str]:
        with self._lock:
            return list(self._table)

    def recover_all(self) -> None:
        """Recover every queue (recoverConsumeQueue)."""
        for cq in self.queues():
            cq.recover()

    def max_physic_offset(self) -> int:
        """Highest commit-log end any queue points at; -1 if none holds a unit. Recovery re-dispatches
        the commit log from here and truncates the queues if the log ends before it."""
        return max((cq.max_physic_offset for cq in self.queues()), default=-1)

    def truncate_dirty(self, phy_offset: int) -> None:
        """Drop units pointing at or past `phy_offset` in every queue (truncateDirtyLogicFiles)."""
        for cq in self.queues():
            cq.truncate_dirty(phy_offset)

    def correct_min_offset(self, min_commit_log_offset: int) -> None:
        """Move every queue's min offset past records below `min_commit_log_offset`."""
        for cq in self.queues():
            cq.correct_min_offset(min_commit_log_offset)

    def flush_all(self, least_pages: int = 0) -> bool:
        """Flush every queue; True when none had anything to flush."""
        result = True
        for cq in self.queues():
            result = cq.flush(least_pages) and result
        return result

    def delete_topic(self, topic: str) -> bool:
        """Forget the topic and delete its files (deleteTopics); False if it had no queues."""
        with self._lock:
            queues = self._table.pop(topic, None)
        if queues is None:
            return False
        for cq in queues.values():
            cq.destroy()
        topic_dir = self.root_dir / topic
        if topic_dir.is_dir() and not any(topic_dir.iterdir()):
            topic_dir.rmdir()
        log.info("deleted the consume queues of topic %s", topic)
        return True

    def delete_queue(self, topic: str, queue_id: int) -> bool:
        """Forget one queue and delete its files; the topic too when it was its last queue."""
        with self._lock:
            queues = self._table.get(topic)
            cq = queues.pop(queue_id, None) if queues is not None else None
            if queues is not None and not queues:
                del self._table[topic]
        if cq is None:
            return False
        cq.destroy()
        topic_dir = self.root_dir / topic
        if topic_dir.is_dir() and not any(topic_dir.iterdir()):
            topic_dir.rmdir()
        log.info("deleted expired consume queue %s-%d", topic, queue_id)
        return True

    def expired_queues(self, min_commit_log_offset: int, keep: Callable[[str], bool]) -> list[ConsumeQueue]:
        """`cleanExpired`'s choice: the queues whose last record lies below the commit log's first
        offset (all their messages gone), except those of topics `keep` names. An empty queue
        (just created) is not expired."""
        expired = []
        for cq in list(self.queues()):
            if keep(cq.topic):
                continue
            last = cq.last_unit()
            if last is not None and last[0] < min_commit_log_offset:
                expired.append(cq)
        return expired

    def delete_expired(self, min_commit_log_offset: int) -> int:
        """Delete queue files that only point below `min_commit_log_offset`; returns files deleted."""
        return sum(cq.delete_expired(min_commit_log_offset) for cq in self.queues())

    def close(self) -> None:
        for cq in self.queues():
            cq.close()
