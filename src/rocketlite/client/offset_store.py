"""Consumer offsets: kept on the broker in clustering mode, in a local file in broadcasting mode.

Clustering (`RemoteBrokerOffsetStore`): every member of a group shares the broker's offsets, so
a queue moving to another member continues where the last one stopped. Offsets live in memory
and go to the broker every 5 s (one-way UPDATE_CONSUMER_OFFSET, as Java) and on close or when a
queue is given up (a request with a response, so nothing is lost before UNREGISTER_CLIENT).

Broadcasting (`LocalFileOffsetStore`): each client consumes everything, so offsets are its own;
they are written to `{dir}/{clientId}/{group}/offsets.json` in Java's `OffsetSerializeWrapper`
format (`{"offsetTable":{{"brokerName":..,"queueId":..,"topic":..}:offset}}`, fastjson object
keys), atomically (temp file + rename) with the previous version kept as `offsets.json.bak`.

The stored value is the **next** offset to consume; -1 means "none stored".
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from rocketlite.client.api import BrokerApi, read_offset_from_broker
from rocketlite.client.errors import ClientError
from rocketlite.client.message import MessageQueue
from rocketlite.protocol.bodies.json_body import expect_obj, to_int
from rocketlite.protocol.wire import fastjson

log = logging.getLogger("rocketlite.client.offset_store")


class ReadOffsetType(enum.Enum):
    MEMORY = "MEMORY"
    STORE = "STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


class OffsetStore(Protocol):
    async def load(self) -> None: ...

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = False) -> None: ...

    async def read(self, mq: MessageQueue, how: ReadOffsetType) -> int: ...

    async def persist(self, mqs: Iterable[MessageQueue], *, oneway: bool = True) -> None: ...

    def remove(self, mq: MessageQueue) -> None: ...

    def offsets(self) -> dict[MessageQueue, int]: ...


class _MemoryTable:
    def __init__(self) -> None:
        self.table: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = False) -> None:
        old = self.table.get(mq)
        if old is None or not increase_only or offset > old:
            self.table[mq] = offset

    def remove(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)

    def offsets(self) -> dict[MessageQueue, int]:
        return dict(self.table)


class RemoteBrokerOffsetStore(_MemoryTable):
    """Clustering-mode offsets on the broker (`RemoteBrokerOffsetStore`)."""

    def __init__(self, api: BrokerApi, group: str) -> None:
        super().__init__()
        self.api = api
        self.group = group

    async def load(self) -> None:
        return None

    async def read(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        """-1 when nothing is known; broker errors other than "not found" propagate."""
        if how is not ReadOffsetType.STORE:
            offset = self.table.get(mq)
            if offset is not None or how is ReadOffsetType.MEMORY:
                return -1 if offset is None else offset
        offset = await read_offset_from_broker(self.api, self.group, mq)
        if offset >= 0:
            self.update(mq, offset)
        return offset

    async def persist(self, mqs: Iterable[MessageQueue], *, oneway: bool = True) -> None:
        wanted = set(mqs)

        async def one(mq: MessageQueue, offset: int) -> None:
            try:
                await self.api.update_consumer_offset(self.group, mq, offset, oneway=oneway)
            except ClientError as exc:
                log.warning("committing offset %d of %s for %s failed: %s", offset, mq, self.group, exc)

        await asyncio.gather(*(one(mq, off) for mq, off in self.table.items() if mq in wanted and off >= 0))


class LocalFileOffsetStore(_MemoryTable):
    """Broadcasting-mode offsets in a JSON file owned by this client (`LocalFileOffsetStore`)."""

    def __init__(self, base_dir: Path, client_id: str, group: str) -> None:
        super().__init__()
        safe_id = client_id.replace(":", "_").replace("/", "_")
        self.path = Path(base_dir) / safe_id / group / "offsets.json"
        self.group = group

    def _read_file(self, path: Path) -> dict[MessageQueue, int] | None:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        obj = expect_obj(fastjson.loads(text), "OffsetSerializeWrapper")
        table = expect_obj(obj.get("offsetTable") or {}, "offsetTable")
        return {
            MessageQueue.from_json_obj(expect_obj(k, "MessageQueue")): to_int(v, "offset")
            for k, v in table.items()
        }

    async def load(self) -> None:
        for path in (self.path, self.path.with_name(self.path.name + ".bak")):
            try:
                table = await asyncio.to_thread(self._read_file, path)
            except (OSError, ValueError, ClientError) as exc:
                log.warning("offset file %s unreadable: %s", path, exc)
                continue
            if table is not None:
                self.table.update(table)
                log.info("loaded %d offsets of %s from %s", len(table), self.group, path)
                return

    async def read(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        if how is not ReadOffsetType.STORE:
            offset = self.table.get(mq)
            if offset is not None or how is ReadOffsetType.MEMORY:
                return -1 if offset is None else offset
        try:
            table = await asyncio.to_thread(self._read_file, self.path) or {}
        except (OSError, ValueError, ClientError):
            table = {}
        offset = table.get(mq, -1)
        if offset >= 0:
            self.update(mq, offset)
        return offset

    def _write(self, table: dict[Any, int]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = fastjson.dumps({"offsetTable": table})
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if self.path.exists():
            with contextlib.suppress(OSError):
                self.path.replace(self.path.with_name(self.path.name + ".bak"))
        tmp.replace(self.path)

    async def persist(self, mqs: Iterable[MessageQueue], *, oneway: bool = True) -> None:
        del oneway
        wanted = set(mqs)
        table = {mq: off for mq, off in self.table.items() if mq in wanted and off >= 0}
        if table:
            await asyncio.to_thread(self._write, table)


class UnstartedOffsetStore:
    """A consumer's offset store before start(): it knows no offsets and keeps none, so what
    asks before start (a rebalance view, an admin relay) gets "nothing committed" instead of an
    AttributeError; start() replaces it with the remote or local store of the message model."""

    async def load(self) -> None:
        return None

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = False) -> None:
        del mq, offset, increase_only

    async def read(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        del mq, how
        return -1

    async def persist(self, mqs: object, *, oneway: bool = True) -> None:
        del mqs, oneway

    def remove(self, mq: MessageQueue) -> None:
        del mq

    def offsets(self) -> dict[MessageQueue, int]:
        return {}
