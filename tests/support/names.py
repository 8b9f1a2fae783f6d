"""Names no other test uses, so tests sharing a broker never see each other's topics or groups."""

from __future__ import annotations

import uuid


def unique(prefix: str) -> str:
    """`prefix` plus a random suffix: unique across tests, modules and repeated runs on one store."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"
