"""`KVConfigManager`: the name server's namespace -> key -> value store (`KVConfigManager.java`).

Admin tools write it with PUT/DELETE_KV_CONFIG and read it with GET_KV_CONFIG and
GET_KVLIST_BY_NAMESPACE. The name server itself reads one namespace: `ORDER_TOPIC_CONFIG`
(topic -> `"brokerA:4;brokerB:4"`), which becomes a route's `orderTopicConf` when
`orderMessageEnable` is on and is sent back to brokers in the REGISTER_BROKER answer.

The file at `kvConfigPath` is RocketMQ's, so a Java name server's file loads here and vice versa::

    {"configTable":{"ORDER_TOPIC_CONFIG":{"TopicA":"broker-a:4"}}}

Every change is persisted at once with `write_atomically` (temp file, fsync, previous copy kept as
`.bak`, rename). Loading falls back to the `.bak` copy. A file that exists but neither it nor its
`.bak` parses is a `ConfigError` at start: starting empty would overwrite it on the next put.
A failed persist is logged and the change kept in memory, as Java does; the next persist retries.
The file is small, so writing it on the event loop is acceptable.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from rocketlite.atomic_file import write_atomically
from rocketlite.protocol.bodies.json_body import expect_obj, get_str
from rocketlite.protocol.bodies.lists import KVTable
from rocketlite.protocol.errors import ConfigError, ProtocolError
from rocketlite.protocol.wire import fastjson

log = logging.getLogger("rocketlite.namesrv.kv")

NAMESPACE_ORDER_TOPIC_CONFIG: Final = "ORDER_TOPIC_CONFIG"  # `NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG`


def decode_config_table(text: str | bytes) -> dict[str, dict[str, str]]:
    """Parse `{"configTable":{ns:{k:v}}}`; values that are not strings are read as their text."""
    obj = expect_obj(fastjson.loads(text), "kvConfig")
    table = expect_obj(obj.get("configTable") or {}, "configTable")
    result: dict[str, dict[str, str]] = {}
    for namespace, entries in table.items():
        if entries is None:
            continue
        kv = expect_obj(entries, f"configTable[{namespace!r}]")
        result[str(namespace)] = {str(k): get_str(kv, k) for k in kv if kv[k] is not None}
    return result


def encode_config_table(table: Mapping[str, Mapping[str, str]]) -> str:
    """fastjson's output for `KVConfigSerializeWrapper`: keys sorted, compact."""
    return fastjson.dumps({"configTable": {ns: dict(kv) for ns, kv in table.items()}})


class KVConfigManager:
    """In-memory table persisted to `path` on every change; call `load` once before use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._table: dict[str, dict[str, str]] = {}

    # -- file -------------------------------------------------------------------------------
    def load(self) -> None:
        """Read the file (or its `.bak`). Missing files mean an empty table."""
        candidates = (self.path, self.path.with_name(self.path.name + ".bak"))
        failures: list[str] = []
        for candidate in candidates:
            if not candidate.exists():
                continue
            try:
                text = candidate.read_text(encoding="utf-8")
                table = decode_config_table(text) if text.strip() else {}
            except (OSError, UnicodeDecodeError, ProtocolError) as exc:
                log.error("cannot load %s: %s", candidate, exc)
                failures.append(f"{candidate}: {exc}")
                continue
            if candidate != self.path:
                log.warning("%s unreadable or missing; loaded %s", self.path, candidate.name)
            self._table = table
            log.info("loaded %d kv config namespaces from %s", len(table), candidate)
            return
        if failures:
            raise ConfigError("kvConfigPath: cannot load " + "; ".join(failures))
        self._table = {}

    def persist(self) -> None:
        """Write the whole table; errors are logged (the in-memory change stands)."""
        try:
            write_atomically(self.path, encode_config_table(self._table))
        except OSError as exc:
            log.error("cannot persist kv config to %s: %s", self.path, exc)

    # -- table ------------------------------------------------------------------------------
    def put(self, namespace: str, key: str, value: str) -> None:
        prev = self._table.setdefault(namespace, {}).get(key)
        self._table[namespace][key] = value
        if prev is None:
            log.info("put kv config: create %s %s=%s", namespace, key, value)
        else:
            log.info("put kv config: update %s %s=%s (was %s)", namespace, key, value, prev)
        self.persist()

    def get(self, namespace: str, key: str) -> str | None:
        kv = self._table.get(namespace)
        return None if kv is None else kv.get(key)

    def delete(self, namespace: str, key: str) -> None:
        """Remove one key; the namespace stays, even when empty (Java keeps the empty map)."""
        kv = self._table.get(namespace)
        if kv is None or key not in kv:
            return
        value = kv.pop(key)
        log.info("delete kv config: %s %s=%s", namespace, key, value)
        self.persist()

    def namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of one namespace, or None when it was never created."""
        kv = self._table.get(namespace)
        return None if kv is None else dict(kv)

    def namespace_body(self, namespace: str) -> bytes | None:
        """`KVTable` JSON of one namespace (GET_KVLIST_BY_NAMESPACE, REGISTER_BROKER), None if absent."""
        kv = self._table.get(namespace)
        return None if kv is None else KVTable(dict(kv)).to_bytes()

    def namespaces(self) -> list[str]:
        return sorted(self._table)

    def snapshot(self) -> dict[str, dict[str, str]]:
        """A deep copy of the whole table (tests, diagnostics)."""
        return {ns: dict(kv) for ns, kv in self._table.items()}
