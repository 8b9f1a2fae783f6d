"""Network namespaces for partition tests: one per process, joined by veth pairs to a bridge.

    test process ── vethNNh ─┐
    <name>  ns: eth0 ── vK ──┤ br0 (in the hub ns)
    <name2> ns: eth0 ── vL ──┘

`Net` makes a hub namespace holding the bridge, one namespace per node (each with `lo` and
`eth0`, on a /24 of 10.0.0.0/8 of its own), and a veth from the namespace this process runs in to
the bridge, so the test reaches every node by its address. Each node's processes start with
`ip netns exec` (`Net.exec_args`) and use fixed ports: nothing they bind is shared with any other
test. Faults, all undone by `heal_all`:

* `isolate(node)`: its veth on the bridge goes down: nothing in or out, silently.
* `cut(node, others)`: blackhole routes in the node's namespace for the others' addresses:
  its packets to them are dropped (one node cut from some, reachable by the rest).
* `slow(node, kbit)`: a token-bucket filter (tbf) on the bridge's side of its veth: at most `kbit`
  toward it, the rest queued for up to `latency_ms`. (tc's netem is not in every kernel; tbf is
  in the ones this suite runs on.)

Namespaces are named `rl<pid>-<node>`; `Net` removes those of processes that no longer run
before it makes its own, so an interrupted run leaves nothing behind for long. It needs root and
`ip netns`: `netns_unavailable()` says why not, for the caller to skip (or fail, under CI).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

_PREFIX = "rl"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


def netns_unavailable() -> str | None:
    """Why network namespaces cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "iproute2 (ip, tc) is not installed"
    probe = f"{_PREFIX}{os.getpid()}-probe"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _remove_stale() -> None:
    """Namespaces (and host-side veths) of earlier runs whose process has ended."""
    listing = _ip("netns", "list", check=False).stdout
    for line in listing.splitlines():
        m = re.match(rf"({_PREFIX}(\d+)-\S+)", line)
        if m and not _alive(int(m.group(2))):
            _ip("netns", "del", m.group(1), check=False)
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        m = re.match(rf"\d+: ({_PREFIX}(\d+)h)[@:]", line)
        if m and not _alive(int(m.group(2))):
            _ip("link", "del", m.group(1), check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    ns: str
    ip: str
    bridge_port: str  # its veth's name on the bridge (in the hub namespace)


class Net:
    """A bridge and namespaces for one test run; `close()` removes them all."""

    def __init__(self) -> None:
        _remove_stale()
        pid = os.getpid()
        self.tag = f"{_PREFIX}{pid}"
        self.subnet = f"10.{100 + pid % 100}.{pid // 100 % 250}"
        self.hub = f"{self.tag}-hub"
        self.nodes: dict[str, Node] = {}
        self._blackholes: set[tuple[str, str]] = set()
        self._slowed: set[str] = set()
        self._host_veth = f"{self.tag}h"
        try:
            _ip("netns", "add", self.hub)
            self._in(self.hub, "link", "add", "br0", "type", "bridge")
            self._in(self.hub, "link", "set", "br0", "up")
            # This process's own way in: a veth from its namespace to the bridge, address .254.
            _ip("link", "add", self._host_veth, "type", "veth", "peer", "name", "self", "netns", self.hub)
            self._in(self.hub, "link", "set", "self", "master", "br0", "up")
            _ip("addr", "add", f"{self.subnet}.254/24", "dev", self._host_veth)
            _ip("link", "set", self._host_veth, "up")
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _in(ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return _ip("-n", ns, *args, check=check)

    def node(self, name: str) -> Node:
        """A namespace for `name`, on the bridge, with the next address."""
        if name in self.nodes:
            return self.nodes[name]
        index = len(self.nodes) + 1
        node = Node(name, f"{self.tag}-{name}", f"{self.subnet}.{index}", f"v{index}")
        _ip("netns", "add", node.ns)
        port = node.bridge_port
        self._in(self.hub, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", node.ns)
        self._in(self.hub, "link", "set", node.bridge_port, "master", "br0", "up")
        self._in(node.ns, "link", "set", "lo", "up")
        self._in(node.ns, "addr", "add", f"{node.ip}/24", "dev", "eth0")
        self._in(node.ns, "link", "set", "eth0", "up")
        self.nodes[name] = node
        return node

    def exec_args(self, name: str) -> list[str]:
        """The argv prefix that runs a command inside `name`'s namespace."""
        return ["ip", "netns", "exec", self.nodes[name].ns]

    # -- faults -----------------------------------------------------------------------------
    def isolate(self, name: str) -> None:
        self._in(self.hub, "link", "set", self.nodes[name].bridge_port, "down")

    def rejoin(self, name: str) -> None:
        self._in(self.hub, "link", "set", self.nodes[name].bridge_port, "up")

    def cut(self, name: str, others: Iterable[str]) -> None:
        """Drop every packet `name` sends to `others` (blackhole routes in its namespace)."""
        for other in others:
            if (name, other) not in self._blackholes:
                self._in(self.nodes[name].ns, "route", "add", "blackhole", f"{self.nodes[other].ip}/32")
                self._blackholes.add((name, other))

    def uncut(self, name: str, others: Iterable[str]) -> None:
        for other in others:
            if (name, other) in self._blackholes:
                self._in(self.nodes[name].ns, "route", "del", "blackhole", f"{self.nodes[other].ip}/32")
                self._blackholes.discard((name, other))

    def partition(self, side: Iterable[str]) -> None:
        """Split the nodes in two: `side` and the rest (this process stays on both sides)."""
        left = set(side)
        right = set(self.nodes) - left
        for name in left:
            self.cut(name, right)
        for name in right:
            self.cut(name, left)

    def slow(self, name: str, kbit: int, latency_ms: int = 20_000) -> None:
        """At most `kbit` kbit/s toward `name`; what exceeds it waits (up to `latency_ms`)."""
        port = self.nodes[name].bridge_port
        subprocess.run(
            ["tc", "-n", self.hub, "qdisc", "replace", "dev", port, "root", "tbf", "rate", f"{kbit}kbit",
             "burst", "4kb", "latency", f"{latency_ms}ms"],
            check=True, capture_output=True,
        )  # fmt: skip
        self._slowed.add(name)

    def unslow(self, name: str) -> None:
        if name in self._slowed:
            port = self.nodes[name].bridge_port
            subprocess.run(["tc", "-n", self.hub, "qdisc", "del", "dev", port, "root"], check=False)
            self._slowed.discard(name)

    def heal_all(self) -> None:
        for name, other in sorted(self._blackholes):
            self.uncut(name, [other])
        for name in sorted(self._slowed):
            self.unslow(name)
        for name in self.nodes:
            self.rejoin(name)

    def close(self) -> None:
        for node in self.nodes.values():
            _ip("netns", "del", node.ns, check=False)
        with contextlib.suppress(Exception):
            _ip("link", "del", self._host_veth, check=False)
        _ip("netns", "del", self.hub, check=False)
        self.nodes.clear()
