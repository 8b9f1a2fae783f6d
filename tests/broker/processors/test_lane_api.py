"""What the 4.x lanes ask the processors (`SendMessageProcessor.legal_topics`,
`PullMessageProcessor.parsed_subscription`), over a real broker and socket: a lane may serve a
request from a read's bytes only after the processor has judged it, so these must hold exactly
what the processor judged, and nothing it refused."""

from __future__ import annotations

from pathlib import Path

from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.requests.pull import build_pull
from tests.support.aio import run
from tests.support.broker_harness import broker_under_test


def test_legal_topics_holds_the_names_the_send_processor_accepted(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            parts = b.controller.parts
            assert parts is not None
            assert "LegalT" not in parts.send.legal_topics
            assert (await b.send("LegalT")).code == ResponseCode.SUCCESS
            for bad in ("bad/name", "SCHEDULE_TOPIC_XXXX"):  # the name rule; a reserved topic
                assert (await b.send(bad)).code != ResponseCode.SUCCESS
            assert "LegalT" in parts.send.legal_topics
            assert not {"bad/name", "SCHEDULE_TOPIC_XXXX"} & parts.send.legal_topics

    run(scenario())


def test_parsed_subscription_is_what_a_pull_carried_once_parsed(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            parts = b.controller.parts
            assert parts is not None
            assert (await b.send("SubT", tags="a")).code == ResponseCode.SUCCESS
            pull = parts.pull
            assert pull.parsed_subscription("cg", "SubT", "a || b", "TAG", 3) is None
            found = await b.client.invoke(
                b.addr, build_pull(group="cg", topic="SubT", queue_id=0, offset=0, max_nums=4,
                                   expression="a || b", sub_version=3), 5.0,
            )  # fmt: skip
            assert found.code == ResponseCode.SUCCESS
            parsed = pull.parsed_subscription("cg", "SubT", "a || b", "TAG", 3)
            assert parsed is not None
            sub, record_filter = parsed
            assert (sub.topic, sub.sub_string, sub.tags_set, sub.sub_version) == (
                "SubT",
                "a || b",
                ("a", "b"),
                3,
            )
            assert record_filter is None  # a tag subscription: the lane filters by tag codes
            assert pull.parsed_subscription("cg", "SubT", "a || b", "TAG", 4) is None  # another version
            refused = await b.client.invoke(  # SQL92 off by default: refused, nothing kept
                b.addr, build_pull(group="cg", topic="SubT", queue_id=0, offset=0, max_nums=4,
                                   expression="a > 1", expression_type="SQL92"), 5.0,
            )  # fmt: skip
            assert refused.code != ResponseCode.SUCCESS
            assert pull.parsed_subscription("cg", "SubT", "a > 1", "SQL92", 0) is None

    run(scenario())
