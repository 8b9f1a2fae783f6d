"""`Pair.check`: run a scenario on RocketMQ, then on rocketlite, and fail on what differs."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rocketlite.embedded import EmbeddedCluster
from rocketlite.remoting.client import RemotingClient
from tests.peers.rocketmq.differences import ACCEPTED, GAPS
from tests.peers.rocketmq.differential import (
    ROCKETLITE,
    ROCKETMQ,
    Report,
    Scenario,
    Side,
    differences,
    known_seen,
)
from tests.support.foreign_clients.rocketmq_peer import VERSION, PeerCluster

SCENARIO_TIMEOUT = 240.0


@dataclass
class Pair:
    rocketmq: PeerCluster
    rocketlite: EmbeddedCluster
    report_path: Path

    async def _run(
        self,
        name: str,
        namesrv: str,
        broker: str,
        store_root: Path,
        scenario: Scenario,
        strict: frozenset[str],
    ) -> Side:
        client = RemotingClient()
        side = Side(name, namesrv, broker, "broker-a", store_root, client, strict)
        try:
            await asyncio.wait_for(scenario(side), SCENARIO_TIMEOUT)
        except (AssertionError, TimeoutError, KeyError, ValueError, IndexError) as exc:
            # The scenario stopped on this side (an answer it could not go on from): recorded as
            # a step of its own, so the report shows where, and the other side still runs.
            side.note("<the scenario stopped>", f"{type(exc).__name__}: {exc}")
        finally:
            await client.close()
        return side

    def run(self, title: str, scenario: Scenario, *, strict: frozenset[str] = frozenset()) -> Report:
        """Both sides' observations (RocketMQ first), also appended to the report file."""

        async def both() -> tuple[Side, Side]:
            mq, lite = self.rocketmq, self.rocketlite
            a = await self._run(ROCKETMQ, mq.namesrv_addr, mq.broker_addr, mq.store_root, scenario, strict)
            b = await self._run(
                ROCKETLITE, lite.namesrv_addr, lite.broker_addr, lite.store_dir, scenario, strict
            )
            return a, b

        a, b = asyncio.run(both())
        report = Report(title, a.observations, b.observations)
        report.write(self.report_path)
        return report

    def check(
        self,
        title: str,
        scenario: Scenario,
        known: Mapping[str, str] | None = None,
        *,
        strict: frozenset[str] = frozenset(),
    ) -> Report:
        """Run `scenario` on both sides; fail unless every step agrees, except the labels in
        `known` (label -> a key of differences.ACCEPTED or GAPS), which must really differ. With
        `strict`, the gaps normalised everywhere are compared as they are."""
        unknown_keys = {key for key in (known or {}).values() if key not in ACCEPTED and key not in GAPS}
        assert not unknown_keys, f"not in tests/peers/rocketmq/differences.py: {sorted(unknown_keys)}"
        report = self.run(title, scenario, strict=strict)
        diffs = differences(report, known)
        assert not diffs, f"{title}: rocketlite differs from RocketMQ {VERSION}:\n" + "\n".join(diffs)
        gone = set(known or {}) - set(known_seen(report, known or {}))
        assert not gone, f"{title}: known differences no longer seen (remove them): {sorted(gone)}"
        return report
