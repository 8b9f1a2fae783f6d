"""`MQVersion.getVersionDesc`: the name of a client's version ordinal ("V4_9_8" for 409), which
RocketMQ 5's connection gauges put, lower-cased, in their `version` label.

The `MQVersion.Version` enum (5.3.3) is 16 early 3.0.0 names, then a SNAPSHOT and a release name
for each x.y.z in 3.0.1-3.0.15, 3.1.0-3.2.9, 3.3.1-3.9.9 (z from 1), 4.0.0-5.9.9, then
HIGHER_VERSION; an ordinal past the end is the last name, as in Java."""

from __future__ import annotations

from typing import Final

_EARLY: Final = (
    "V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1", "V3_0_0_BETA1", "V3_0_0_BETA2", "V3_0_0_BETA3",
    "V3_0_0_BETA4", "V3_0_0_BETA5", "V3_0_0_BETA6_SNAPSHOT", "V3_0_0_BETA6", "V3_0_0_BETA7_SNAPSHOT",
    "V3_0_0_BETA7", "V3_0_0_BETA8_SNAPSHOT", "V3_0_0_BETA8", "V3_0_0_BETA9_SNAPSHOT", "V3_0_0_BETA9",
    "V3_0_0_FINAL",
)  # fmt: skip


def _names() -> tuple[str, ...]:
    releases: list[tuple[int, int, int]] = [(3, 0, z) for z in range(1, 16)]
    releases += [(3, y, z) for y in (1, 2) for z in range(10)]
    releases += [(3, y, z) for y in range(3, 10) for z in range(1, 10)]
    releases += [(x, y, z) for x in (4, 5) for y in range(10) for z in range(10)]
    names = list(_EARLY)
    for x, y, z in releases:
        names += [f"V{x}_{y}_{z}_SNAPSHOT", f"V{x}_{y}_{z}"]
    names.append("HIGHER_VERSION")
    return tuple(names)


VERSION_NAMES: Final = _names()


def version_desc(ordinal: int) -> str:
    """The enum name of `ordinal` (Java indexes the array, so a negative one fails there: here
    it is the first name)."""
    return VERSION_NAMES[min(max(ordinal, 0), len(VERSION_NAMES) - 1)]
