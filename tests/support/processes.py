"""`python -m rocketlite ...` child processes for tests: the command, the environment, a config
file, waiting for the listener and stopping.

Children run this interpreter with the repository's `src/` first on PYTHONPATH, so they import
the code under test even from a checkout that is not installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
ROCKETLITE = (sys.executable, "-m", "rocketlite")  # the CLI, as `rocketlite ...` would run it


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment with `src/` first on PYTHONPATH, unbuffered output, and `extra` on top."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def write_conf(path: Path, props: Mapping[str, str]) -> Path:
    """A Java-style properties file (`key=value` lines), as `rocketlite broker|namesrv -c` reads."""
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def spawn(args: list[str], log_path: Path, *, log_level: str = "INFO", env: Mapping[str, str] | None = None,
          prefix: Sequence[str] = ()) -> subprocess.Popen[bytes]:  # fmt: skip
    """`rocketlite --log-level LEVEL ARGS`, stdout and stderr appended to `log_path`; `prefix` runs
    it through another command (`ip netns exec NS`, which execs it: the pid is rocketlite's)."""
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [*prefix, *ROCKETLITE, "--log-level", log_level, *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=child_env(env),
        )


def wait_listening(popen: subprocess.Popen[bytes], port: int, what: str, timeout: float = 30.0,
                   host: str = "127.0.0.1") -> None:  # fmt: skip
    """Until something accepts on `host`:`port`; fails at once if the process exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            raise AssertionError(f"{what} exited with {popen.returncode}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), 0.5):
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} not listening on {port} after {timeout:.0f}s")


async def accepts(port: int) -> bool:
    """Whether 127.0.0.1:`port` accepts a connection now (for asyncio polling loops)."""
    try:
        _r, w = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    w.close()
    return True


def stop(popen: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
    """SIGTERM (a clean shutdown), then SIGKILL if it does not end within `timeout` seconds."""
    if popen.poll() is None:
        popen.send_signal(signal.SIGTERM)
        try:
            return popen.wait(timeout)
        except subprocess.TimeoutExpired:
            popen.kill()
    return popen.wait(10)


def kill9(popen: subprocess.Popen[bytes]) -> None:
    """SIGKILL: the process gets no chance to flush or clean up."""
    if popen.poll() is None:
        popen.send_signal(signal.SIGKILL)
    popen.wait(10)
