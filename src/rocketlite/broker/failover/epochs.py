"""The broker's epoch file on disk: `storePathEpochFile` (default storePathRootDir/epochFileCheckpoint)
and its `.bak` copy, RocketMQ's layout (`protocol.formats.epoch_file`), written atomically."""

from __future__ import annotations

import logging
from pathlib import Path

from rocketlite.atomic_file import write_atomically
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.formats.epoch_file import FILE_NAME, EpochEntry, decode, encode

log = logging.getLogger("rocketlite.broker.failover")


def epoch_file_path(configured: str | None, store_root: Path) -> Path:
    return Path(configured).expanduser() if configured else store_root / FILE_NAME


class EpochFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.backup = path.with_name(path.name + ".bak")
        self.entries: list[EpochEntry] = self._load()

    def _load(self) -> list[EpochEntry]:
        for candidate in (self.path, self.backup):
            if not candidate.exists():
                continue
            try:
                entries = decode(candidate.read_text("utf-8"))
            except (OSError, ProtocolError) as exc:
                log.error("epoch file %s unreadable: %s", candidate, exc)
                continue
            if entries:
                return entries
        return []

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def save(self, entries: list[EpochEntry]) -> None:
        self.entries = list(entries)
        text = encode(self.entries)
        write_atomically(self.path, text)  # the previous version stays as the .bak
