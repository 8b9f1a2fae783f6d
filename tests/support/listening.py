"""What a child server process says and does on the network: a log line awaited, the addresses of
its `rocketlite dev` start line, the kernel's table of listening sockets, a free-port config copy.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

ADDRESS_RE = re.compile(r"(\d+\.\d+\.\d+\.\d+):(\d+)")


def wait_log_line(popen: subprocess.Popen[bytes], log_path: Path, needle: str, timeout: float = 30.0) -> str:
    """The first line of `log_path` containing `needle`, once written; fails at once if the
    process exits first (with its log in the message)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace") if log_path.exists() else ""
        for line in text.splitlines():
            if needle in line:
                return line
        if popen.poll() is not None:
            raise AssertionError(f"exited with {popen.returncode} before logging {needle!r}:\n{text}")
        time.sleep(0.05)
    raise AssertionError(f"no {needle!r} in {log_path} after {timeout:.0f}s")


def addresses_in(line: str) -> list[tuple[str, int]]:
    """Every `a.b.c.d:port` in a log line, in order."""
    return [(host, int(port)) for host, port in ADDRESS_RE.findall(line)]


def _hex_ipv4(text: str) -> str:
    """/proc/net/tcp's little-endian hex IPv4 -> dotted text."""
    return socket.inet_ntoa(bytes.fromhex(text)[::-1])


def listening_sockets() -> list[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state on this machine (Linux /proc/net/tcp and
    tcp6; IPv6 addresses are reported as `v6:HEX`)."""
    found: list[tuple[str, int]] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 4 or fields[3] != "0A":  # 0A: TCP_LISTEN
                continue
            addr, port = fields[1].rsplit(":", 1)
            host = _hex_ipv4(addr) if len(addr) == 8 else f"v6:{addr}"
            found.append((host, int(port, 16)))
    return found


def non_loopback_address() -> str | None:
    """An IPv4 address of this machine that is not loopback (the one its default route would use),
    or None when it has none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: nothing is sent, the kernel only picks a route
        except OSError:
            return None
        addr = str(s.getsockname()[0])
    return None if addr.startswith("127.") or addr == "0.0.0.0" else addr


def with_values(text: str, values: Mapping[str, str]) -> str:
    """A properties text with the given keys' lines set to new values (appended when absent)."""
    out: list[str] = []
    seen: set[str] = set()
    for line in text.splitlines():
        key = line.split("=", 1)[0].strip()
        if "=" in line and not line.lstrip().startswith("#") and key in values:
            out.append(f"{key}={values[key]}")
            seen.add(key)
        else:
            out.append(line)
    out.extend(f"{k}={v}" for k, v in values.items() if k not in seen)
    return "\n".join(out) + "\n"


def store_bytes(root: Path) -> int:
    """Disk blocks really used under `root` (sparse holes not counted, reserved blocks counted)."""
    return sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())
