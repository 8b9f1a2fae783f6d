"""Crash harness over a real broker process: SIGKILL under load, restart on the same store, verify.

Each cycle starts ``python -m rocketlite broker -c broker.conf`` (SYNC_FLUSH, 64 KiB commit-log
segments so rolls happen often, a free listenPort) on one store directory, drives it with several
producer connections sending raw SEND_MESSAGE_V2 requests (one unique KEYS value per message,
never retried), and SIGKILLs the process from inside the ack path as soon as a random number of
acknowledgements (seeded) has arrived: no sleeps, so the kill lands wherever the broker happens to
be (in a put, a flush, a segment roll, a consume-queue or index write). Requests in flight then
fail and count as unacknowledged; they may or may not have been stored.

After the last cycle the broker is restarted once more and every message acknowledged in any
cycle must be consumable by queue (PULL_MESSAGE from offset 0, at the acked queue offset, same
key) and by key (QUERY_MESSAGE); no key appears twice in the queues; queue offsets are contiguous
from 0. `bench/crash_cycles.py` runs the same loop for N cycles and for ASYNC_FLUSH.

ASYNC_FLUSH modes (`CrashState`): a SIGKILL must lose nothing there either (the page cache outlives
the process). `power_loss` emulates a machine crash: right before each kill the commit log's
flushed offset is read from GET /metrics (it only grows, so the value is a lower bound of the
flushed offset at the kill), and after the kill the commit log is cut there (`cut_commit_log`:
the rest of that segment zeroed, later segments deleted), which is what the disk holds if nothing
written after the last fdatasync reached it. `transient` (transientStorePoolEnable) keeps appends
in a write buffer until committed: there a plain kill may lose what was not committed, and the
committed offset is read before the kill instead. In both modes the next start settles the cycle
(`settle`): an acked message may be lost only if it lies at or above the offset read, it must not
be found elsewhere, and the queues stay contiguous without duplicates. Losses allowed that way
are moved out of `acks`, so the final `verify` still demands every other ack.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from tests.support.crash.broker import CYCLES, CrashState, crash_cycles, verify


@pytest.mark.slow
def test_sync_flush_broker_loses_no_ack_across_sigkills(tmp_path: Path) -> None:
    state = CrashState(tmp_path)
    asyncio.run(crash_cycles(state, CYCLES, random.Random(20261122), 300))
    lost = asyncio.run(verify(state))
    print(f"\ncycles={state.cycles} sent={state.sent} acked={len(state.acks)} lost={lost}")
    assert state.cycles >= 10 and len(state.acks) > 0
    assert lost == 0


@pytest.mark.slow
def test_async_flush_sigkill_loses_no_ack(tmp_path: Path) -> None:
    """The page cache outlives the process: a kill loses nothing under ASYNC_FLUSH either."""
    state = CrashState(tmp_path, flush="ASYNC_FLUSH")
    asyncio.run(crash_cycles(state, 5, random.Random(20261123), 300))
    lost = asyncio.run(verify(state))
    assert state.cycles == 5 and len(state.acks) > 0
    assert lost == 0 and not state.lost and not state.violations


@pytest.mark.slow
def test_async_flush_sigkill_loses_no_batched_ack(tmp_path: Path) -> None:
    """Every other request a batch of 3 (served by the batch lane: one append per read): a kill
    loses none of their acks, and each batch's messages lie where its answer said."""
    state = CrashState(tmp_path, flush="ASYNC_FLUSH", batches=True)
    asyncio.run(crash_cycles(state, 5, random.Random(20261128), 300))
    lost = asyncio.run(verify(state))
    assert state.cycles == 5 and len(state.acks) > 0
    assert lost == 0 and not state.lost and not state.violations


@pytest.mark.slow
def test_async_flush_power_loss_loses_only_unflushed_acks(tmp_path: Path) -> None:
    """A commit log cut at the flushed offset read before each kill: the broker recovers (queues
    contiguous, no duplicates, every other ack there by queue and by key) and no ack below that
    offset is lost. Flushing every 20 ms puts that offset inside the cycles' writes."""
    state = CrashState(tmp_path, flush="ASYNC_FLUSH", power_loss=True, flush_interval_ms=20, batches=True)
    asyncio.run(crash_cycles(state, 5, random.Random(20261126), 1500))
    lost = asyncio.run(verify(state))
    print(f"\nacked per cycle: {[len(k.acks) for k in state.kills]}, "
          f"lost: {[len(k.lost) for k in state.kills]}, "
          f"at or above the flushed offset read: {[len(k.at_risk) for k in state.kills]}")  # fmt: skip
    assert state.violations == []
    assert lost == 0
    assert all(k.settled and k.durable >= 0 and len(k.lost) <= len(k.at_risk) for k in state.kills)
    # Not vacuous: the cuts took acked messages (recovery from a cut log was exercised) and cycles
    # had acks below the offset read, which had to survive the cut.
    assert state.lost and sum(k.cut_bytes for k in state.kills) > 0
    assert any(len(k.acks) > len(k.at_risk) > 0 for k in state.kills)
