"""The gaps the harness normalises in every scenario (differences.GAPS), each compared as it is here.

Each test runs its scenario with its gap not normalised (`strict`) and is expected to fail (xfail,
strict): when rocketlite closes the gap the test passes, pytest reports it, and the gap leaves the
list, the docs and the harness's normalisation.
"""

from __future__ import annotations

import pytest

from tests.peers.rocketmq.differential import Side
from tests.peers.rocketmq.runner import Pair
from tests.peers.rocketmq.steps import heartbeat, pull, send, setup_topic
from tests.peers.rocketmq.test_message_paths import commit_scenario
from tests.support.names import unique

pytestmark = pytest.mark.timeout(600)


@pytest.mark.xfail(strict=True, reason="differences.GAPS['send-context-properties']")
def test_send_context_properties(pair: Pair) -> None:
    topic, group = unique("DiffGapProps"), unique("diff_cg")

    async def scenario(s: Side) -> None:
        await setup_topic(s, topic, 1)
        await s.call("send", send(topic, b"x", tags="t", uniq="G1"))
        await s.wait_messages(topic, 0, 1)
        await s.call("pull", pull(group, topic, 0))

    pair.check("gap: MSG_REGION and TRACE_ON stored", scenario, strict=frozenset({"send-context-properties"}))


@pytest.mark.xfail(strict=True, reason="differences.GAPS['transaction-id-property']")
def test_transaction_id_property(pair: Pair) -> None:
    scenario = commit_scenario(unique("DiffGapTxId"), unique("diff_cg"), unique("diff_txpg"))
    pair.check(
        "gap: __transactionId__ of a committed transaction message",
        scenario,
        strict=frozenset({"transaction-id-property"}),
    )


@pytest.mark.xfail(strict=True, reason="differences.GAPS['heartbeat-v2']")
def test_heartbeat_answer(pair: Pair) -> None:
    topic, group = unique("DiffGapHb"), unique("diff_cg")

    async def scenario(s: Side) -> None:
        await setup_topic(s, topic, 1)
        await s.call("heartbeat", heartbeat(group, topic))

    pair.check("gap: heartbeat v2 fields", scenario, strict=frozenset({"heartbeat-v2"}))
