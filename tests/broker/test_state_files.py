"""Config files under {store}/config: RocketMQ's JSON shapes, atomic replacement, .bak fallback."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketlite.atomic_file import write_atomically
from rocketlite.broker.state_files import (
    ConsumerOffsetTable,
    DelayOffsetTable,
    consumer_filter_file,
    subscription_group_file,
    topics_file,
)


def test_consumer_offsets_format_and_round_trip(tmp_path: Path) -> None:
    table = ConsumerOffsetTable(tmp_path)
    table.commit("g", "TopicTest", 0, 12)
    table.commit("g", "TopicTest", 1, 7)
    table.persist()
    assert (tmp_path / "consumerOffset.json").read_text() == '{"offsetTable":{"TopicTest@g":{0:12,1:7}}}'
    again = ConsumerOffsetTable(tmp_path)
    assert again.load()
    assert again.query("g", "TopicTest", 1) == 7 and again.query("g", "TopicTest", 5) == -1
    assert again.groups_of_topic("TopicTest") == {"g"}
    again.remove_group("g")
    assert again.query_all("g", "TopicTest") == {}


def test_commit_all_is_commit_per_queue(tmp_path: Path) -> None:
    """A pop's commit of every queue it looked at, in one call: the same table as one commit each,
    the queues it does not name left as they were."""
    one, many = ConsumerOffsetTable(tmp_path / "one"), ConsumerOffsetTable(tmp_path / "many")
    for table in (one, many):
        table.commit("g", "T", 3, 30)
    for queue_id, offset in ((0, 5), (1, 0), (2, 9)):
        one.commit("g", "T", queue_id, offset)
    many.commit_all("g", "T", {0: 5, 1: 0, 2: 9})
    assert one.query_all("g", "T") == many.query_all("g", "T") == {0: 5, 1: 0, 2: 9, 3: 30}


def test_reads_files_written_by_rocketmq(tmp_path: Path) -> None:
    (tmp_path / "delayOffset.json").write_text('{"offsetTable":{1:0,2:5}}')
    delay = DelayOffsetTable(tmp_path)
    assert delay.load() and delay.offset_table == {1: 0, 2: 5}
    (tmp_path / "consumerOffset.json").write_text(
        '{\n\t"offsetTable":{\n\t\t"%RETRY%cg@cg":{0:0},\n\t\t"abc@cg":{0:47}\n\t}\n}'
    )
    offsets = ConsumerOffsetTable(tmp_path)
    assert offsets.load() and offsets.query("cg", "abc", 0) == 47


def test_persist_keeps_backup_and_falls_back(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    table = ConsumerOffsetTable(tmp_path)
    table.commit("g", "t", 0, 1)
    table.persist()
    table.commit("g", "t", 0, 2)
    table.persist()
    assert (tmp_path / "consumerOffset.json.bak").exists()
    assert not (tmp_path / "consumerOffset.json.tmp").exists()
    (tmp_path / "consumerOffset.json").write_text('{"offsetTable":{"t@g":{0:')  # a torn file
    again = ConsumerOffsetTable(tmp_path)
    assert again.load() and again.query("g", "t", 0) == 1
    assert "cannot parse" in caplog.text


def test_documents(tmp_path: Path) -> None:
    topics = topics_file(tmp_path)
    topics.document["topicConfigTable"]["T"] = {"topicName": "T", "readQueueNums": 4, "writeQueueNums": 4}
    topics.persist()
    loaded = topics_file(tmp_path)
    assert loaded.load() and loaded.document["topicConfigTable"]["T"]["readQueueNums"] == 4
    for factory in (subscription_group_file, consumer_filter_file):
        doc = factory(tmp_path)
        doc.persist()
        assert factory(tmp_path).load()


def test_write_atomically_replaces(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "x.json"
    write_atomically(target, "{}")
    write_atomically(target, '{"a":1}')
    assert target.read_text() == '{"a":1}' and (tmp_path / "sub" / "x.json.bak").read_text() == "{}"
