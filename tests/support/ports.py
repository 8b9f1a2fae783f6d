"""Free TCP ports on 127.0.0.1 for brokers and name servers started by tests and benchmarks.

A broker listens on more than its port: the VIP channel at port - 2 and HA at port + 1 (unless
configured), so `broker_port` also checks those neighbours. There is a race between probing and
the server binding; tests and benchmarks accept it (the window is tiny on loopback).

Ports are drawn below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`), never from
it. A test that restarts a broker on the ports it had (the crash tests) would otherwise meet the
kernel handing one of them to an outgoing connection in between, as a source port: that socket has
no SO_REUSEADDR, so the restarted broker's bind fails with "Address already in use".
"""

from __future__ import annotations

import random
import socket
from collections.abc import Collection, Sequence
from pathlib import Path

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


LOWEST = 12000  # above the fixed ports of a dev cluster (9876, 10909-10912) and their neighbours
_draw = random.Random()  # its own generator: a test framework reseeding `random` does not repeat ours


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux's default is 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(avoid: Collection[int] = (), *, neighbours: Sequence[int] = ()) -> int:
    """A free port below the ephemeral range, not in `avoid`, with `port + d` free too for each d
    in `neighbours`."""
    high = ephemeral_low() - max((*neighbours, 0)) - 1
    low = LOWEST - min((*neighbours, 0))
    for _ in range(500):
        port = _draw.randrange(low, high)
        if port in avoid or any(port + d in avoid for d in neighbours):
            continue
        if bindable(port) and all(bindable(port + d) for d in neighbours):
            return port
    raise RuntimeError(f"no free port (block) found on 127.0.0.1 in {low}..{high}")


def broker_port(avoid: Collection[int] = ()) -> int:
    """A broker listenPort P whose VIP (P-2) and HA (P+1) ports are free as well."""
    return free_port(avoid, neighbours=(VIP_OFFSET, HA_OFFSET))
