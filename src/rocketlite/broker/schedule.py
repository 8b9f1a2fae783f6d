"""Placeholder: filled in by its own change (see the broker issue)."""

from __future__ import annotations

from rocketlite.broker.context import BrokerContext, BrokerService
from rocketlite.remoting.connection import RequestTable


def install(ctx: BrokerContext, table: RequestTable) -> list[BrokerService]:
    del ctx, table
    return []
