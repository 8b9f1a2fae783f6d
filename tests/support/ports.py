"""Free TCP ports on 127.0.0.1 for brokers and name servers started by tests and benchmarks.

A broker listens on more than its port: the VIP channel at port - 2 and HA at port + 1 (unless
configured), so `broker_port` also checks those neighbours. There is a race between probing and
the server binding; tests and benchmarks accept it (the window is tiny on loopback).
"""

from __future__ import annotations

import socket
from collections.abc import Collection, Sequence

VIP_OFFSET = -2  # the broker's VIP channel listens on listenPort - 2
HA_OFFSET = 1  # ... and the HA service on listenPort + 1 unless haListenPort says otherwise


def bindable(port: int) -> bool:
    """Whether 127.0.0.1:`port` is free to listen on right now."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(avoid: Collection[int] = (), *, neighbours: Sequence[int] = ()) -> int:
    """A port the kernel hands out, not in `avoid`, with `port + d` free too for each d in `neighbours`."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if not 1030 < port < 65000 or port in avoid or any(port + d in avoid for d in neighbours):
            continue
        if all(bindable(port + d) for d in neighbours):
            return port
    raise RuntimeError("no free port (block) found on 127.0.0.1")


def broker_port(avoid: Collection[int] = ()) -> int:
    """A broker listenPort P whose VIP (P-2) and HA (P+1) ports are free as well."""
    return free_port(avoid, neighbours=(VIP_OFFSET, HA_OFFSET))
