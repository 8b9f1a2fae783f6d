"""A gRPC request's header list read (sans-IO): its `:path`, its metadata (`-bin` keys
base64-decoded), its `grpc-encoding`, and its `grpc-timeout` (1 to 8 digits and a unit, H M S m u
n) in seconds. `GrpcConnection` parses each distinct header list once per connection."""

from __future__ import annotations

import base64
import contextlib
import re
from typing import Final

TIMEOUT_UNITS: Final = {b"H": 3600.0, b"M": 60.0, b"S": 1.0, b"m": 1e-3, b"u": 1e-6, b"n": 1e-9}
TIMEOUT: Final = re.compile(rb"(\d{1,8})([HMSmun])")
NOT_METADATA: Final = frozenset(
    {b"content-type", b"te", b"grpc-timeout", b"grpc-encoding", b"grpc-accept-encoding"}
)
Parsed = tuple[bytes, tuple[tuple[str, str | bytes], ...], bytes | None]


def parse_headers(headers: tuple[tuple[bytes, bytes], ...]) -> Parsed:
    """A request's `:path`, its metadata (`-bin` keys base64-decoded), `grpc-timeout` apart, and
    its `grpc-encoding` (None: none given)."""
    path = b""
    encoding: bytes | None = None
    metadata: list[tuple[str, str | bytes]] = []
    for name, value in headers:
        if name[:1] == b":":
            if name == b":path":
                path = value
        elif name == b"grpc-encoding":
            encoding = value
        elif name not in NOT_METADATA:
            key = name.decode("latin-1")
            if key.endswith("-bin"):
                with contextlib.suppress(ValueError):
                    metadata.append((key, base64.b64decode(value + b"==")))
            else:
                metadata.append((key, value.decode("latin-1")))
    return path, tuple(metadata), encoding


def timeout_seconds(value: bytes) -> float | None:
    """A `grpc-timeout` header's value in seconds (None: it does not parse, and is ignored)."""
    match = TIMEOUT.fullmatch(value)
    return int(match[1]) * TIMEOUT_UNITS[match[2]] if match else None
