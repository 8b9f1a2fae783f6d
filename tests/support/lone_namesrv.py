"""A name server with no broker registered: `rocketlite namesrv` as a child process.

What a user sees when the broker is down but the name server is up (sends, clusterList) is
tested against this: a real process on a free port of 127.0.0.1, stopped by its pid.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.ports import free_port
from tests.support.processes import spawn, stop, wait_listening


@contextmanager
def lone_namesrv(log_dir: Path) -> Iterator[str]:
    """Start a name server alone; yields its `127.0.0.1:port`."""
    port = free_port()
    popen = spawn(["namesrv", "-p", str(port)], log_dir / "namesrv.log", log_level="WARNING")
    try:
        wait_listening(popen, port, "namesrv")
        yield f"127.0.0.1:{port}"
    finally:
        stop(popen)
