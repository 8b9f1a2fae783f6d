"""A small typed client for etcd's v3 API through its JSON gRPC gateway (etcd 3.4: `/v3/...`).

Why the gateway and the standard library: etcd serves every v3 RPC as `POST /v3/<service>/<rpc>`
with the protobuf messages as JSON (bytes fields base64, 64-bit integers as strings) on its
client port, so no generated stubs and no third-party client are needed. The maintained PyPI
clients either speak gRPC with stubs of their own (which pin old protobuf releases next to ours)
or are thin wrappers over `requests`; `http.client` carries these few calls as well, in a
blocking call the controller runs in a worker thread.

Calls used (etcd's `rpc.proto` names): `kv/range`, `kv/put`, `kv/deleterange`, `kv/txn`
(compare mod_revision / version / value, then puts), `lease/grant`, `lease/keepalive` (one
request, one answer), `lease/revoke`. Each call tries the endpoints in turn, starting with the
last one that answered; `EtcdUnavailableError` when none does.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any, Literal

from rocketlite.protocol.errors import RocketliteError

log = logging.getLogger("rocketlite.controller.etcd")

_TIMEOUT_S = 3.0


class EtcdError(RocketliteError):
    """etcd answered with an error (the gateway's `{"error": ..., "code": ...}`)."""


class EtcdUnavailableError(EtcdError):
    """No etcd endpoint answered."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def prefix_end(prefix: bytes) -> bytes:
    """etcd's range_end for "every key starting with `prefix`": the prefix with its last byte + 1."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: bytes
    value: bytes
    mod_revision: int
    version: int
    lease: int

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> KeyValue:
        return cls(
            key=_unb64(obj.get("key")),
            value=_unb64(obj.get("value")),
            mod_revision=int(obj.get("mod_revision", 0)),
            version=int(obj.get("version", 0)),
            lease=int(obj.get("lease", 0)),
        )


@dataclass(frozen=True, slots=True)
class Compare:
    """One txn condition: `target` of `key` compared (`result`) with `value`."""

    key: bytes
    target: Literal["VERSION", "MOD", "VALUE", "CREATE"]
    value: int | bytes
    result: Literal["EQUAL", "GREATER", "LESS", "NOT_EQUAL"] = "EQUAL"

    def to_json(self) -> dict[str, Any]:
        field = {"VERSION": "version", "MOD": "mod_revision", "VALUE": "value", "CREATE": "create_revision"}
        value = _b64(self.value) if isinstance(self.value, bytes) else str(self.value)
        return {
            "key": _b64(self.key),
            "target": self.target,
            "result": self.result,
            field[self.target]: value,
        }


@dataclass(frozen=True, slots=True)
class Put:
    key: bytes
    value: bytes
    lease: int = 0

    def to_json(self) -> dict[str, Any]:
        req: dict[str, Any] = {"key": _b64(self.key), "value": _b64(self.value)}
        if self.lease:
            req["lease"] = str(self.lease)
        return {"request_put": req}


@dataclass(frozen=True, slots=True)
class Delete:
    key: bytes

    def to_json(self) -> dict[str, Any]:
        return {"request_delete_range": {"key": _b64(self.key)}}


class EtcdClient:
    """Blocking, thread-safe (one connection per call); `endpoints` are `host:port` client URLs."""

    def __init__(self, endpoints: list[str], *, timeout: float = _TIMEOUT_S) -> None:
        if not endpoints:
            raise ValueError("etcd: no endpoints")
        self.endpoints = [e.removeprefix("http://").rstrip("/") for e in endpoints]
        self.timeout = timeout
        self._preferred = 0
        self._lock = threading.Lock()

    def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST `body` to `/v3/<path>` on the first endpoint that answers."""
        payload = json.dumps(body).encode()
        with self._lock:
            start = self._preferred
        n = len(self.endpoints)
        failures: list[str] = []
        for i in range(n):
            index = (start + i) % n
            host, _, port = self.endpoints[index].rpartition(":")
            conn = http.client.HTTPConnection(host, int(port), timeout=self.timeout)
            try:
                conn.request("POST", f"/v3/{path}", payload, {"Content-Type": "application/json"})
                response = conn.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException) as exc:
                failures.append(f"{self.endpoints[index]}: {exc}")
                continue
            finally:
                conn.close()
            answer = json.loads(data or b"{}")
            if response.status >= 500 and i + 1 < n:
                failures.append(f"{self.endpoints[index]}: HTTP {response.status} {answer}")
                continue  # e.g. a member without a leader: try another
            with self._lock:
                self._preferred = index
            if "error" in answer and not (answer.get("result")):
                raise EtcdError(f"etcd {path}: {answer.get('error') or answer.get('message')}")
            if response.status != 200:
                raise EtcdError(f"etcd {path}: HTTP {response.status} {answer}")
            result = answer.get("result", answer)
            return result if isinstance(result, dict) else {}
        raise EtcdUnavailableError(f"etcd {path}: no endpoint answered ({'; '.join(failures)})")

    # -- kv ---------------------------------------------------------------------------------
    def get(self, key: bytes) -> KeyValue | None:
        kvs = self.call("kv/range", {"key": _b64(key)}).get("kvs") or []
        return KeyValue.from_json(kvs[0]) if kvs else None

    def get_prefix(self, prefix: bytes) -> list[KeyValue]:
        answer = self.call("kv/range", {"key": _b64(prefix), "range_end": _b64(prefix_end(prefix))})
        return [KeyValue.from_json(kv) for kv in answer.get("kvs") or []]

    def put(self, key: bytes, value: bytes, lease: int = 0) -> None:
        self.call("kv/put", Put(key, value, lease).to_json()["request_put"])

    def delete(self, key: bytes) -> None:
        self.call("kv/deleterange", {"key": _b64(key)})

    def txn(self, compare: list[Compare], success: list[Put | Delete]) -> bool:
        """All of `compare` hold -> apply `success` atomically and return True; else nothing, False."""
        answer = self.call(
            "kv/txn",
            {"compare": [c.to_json() for c in compare], "success": [op.to_json() for op in success]},
        )
        return bool(answer.get("succeeded", False))

    # -- leases -----------------------------------------------------------------------------
    def grant(self, ttl_s: int) -> int:
        return int(self.call("lease/grant", {"TTL": str(ttl_s)})["ID"])

    def keepalive(self, lease: int) -> int:
        """Refresh `lease`; its new TTL in seconds, 0 when it has expired (or never existed)."""
        return int(self.call("lease/keepalive", {"ID": str(lease)}).get("TTL", 0))

    def revoke(self, lease: int) -> None:
        try:
            self.call("kv/lease/revoke", {"ID": str(lease)})
        except EtcdError as exc:
            log.debug("etcd: revoking lease %x: %s", lease, exc)

    def status(self) -> dict[str, Any]:
        """The answering member's `maintenance/status` (its id, the leader's id, raft term)."""
        return self.call("maintenance/status", {})
