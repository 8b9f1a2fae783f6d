"""What a `rocketlite admin` verb is (`Verb`: name, help, flags, operation, drawing) and the
argument pieces the verb modules share (`address`, mqadmin's `-b | -c` pair)."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from rocketlite.admin.client import AdminClient
from rocketlite.admin.output import Output

Run = Callable[[AdminClient, argparse.Namespace], Awaitable[dict[str, Any]]]
Render = Callable[[Output, dict[str, Any], argparse.Namespace], None]


def address(text: str) -> str:
    """host:port (the broker address of `-b` in updateTopic and friends)."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected host:port, got {text!r}")
    return text.strip()


@dataclass(frozen=True)
class Verb:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Run
    render: Render


def broker_or_cluster(p: argparse.ArgumentParser, what: str) -> None:
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("-b", "--brokerAddr", dest="broker_addr", type=address, help=f"{what} on this broker")
    target.add_argument("-c", "--clusterName", dest="cluster", help=f"{what} on every master of this cluster")
