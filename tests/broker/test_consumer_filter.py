"""consumerFilter.json as RocketMQ 5.3.3 writes it (indented, tabs; taken from the differential
peer's store) is read by rocketlite: the entry compiled, dead as of the load, its bloom data
kept; a file of another bloom filter size is ignored whole, as RocketMQ ignores it."""

from __future__ import annotations

from pathlib import Path

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.consumer_filter import ConsumerFilterManager
from rocketlite.clock import SYSTEM_CLOCK

ROCKETMQ_FILE = """{
\t"filterDataByTopic":{
\t\t"DiffSql_34f9e9a8":{
\t\t\t"groupFilterData":{
\t\t\t\t"diff_cg_ca26b617":{
\t\t\t\t\t"bloomFilterData":{
\t\t\t\t\t\t"bitNum":112,
\t\t\t\t\t\t"bitPos":[22,96,85]
\t\t\t\t\t},
\t\t\t\t\t"bornTime":1795785300838,
\t\t\t\t\t"clientVersion":1,
\t\t\t\t\t"consumerGroup":"diff_cg_ca26b617",
\t\t\t\t\t"dead":false,
\t\t\t\t\t"deadTime":0,
\t\t\t\t\t"expression":"a > 3",
\t\t\t\t\t"expressionType":"SQL92",
\t\t\t\t\t"topic":"DiffSql_34f9e9a8"
\t\t\t\t}
\t\t\t},
\t\t\t"topic":"DiffSql_34f9e9a8"
\t\t}
\t}
}"""


def manager(tmp_path: Path, **kw: int) -> ConsumerFilterManager:
    return ConsumerFilterManager(tmp_path, BrokerConfig(**kw), SYSTEM_CLOCK)  # type: ignore[arg-type]


def test_rocketmqs_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "consumerFilter.json").write_text(ROCKETMQ_FILE)
    filters = manager(tmp_path)
    assert filters.load()
    data = filters.get("DiffSql_34f9e9a8", "diff_cg_ca26b617")
    assert data is not None and data.dead and data.client_version == 1
    assert data.bloom_filter_data == filters.bloom.generate("diff_cg_ca26b617#DiffSql_34f9e9a8")
    assert data.compiled.matches({"a": "4"}) and not data.compiled.matches({"a": "3"})


def test_a_file_of_another_bloom_filter_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "consumerFilter.json").write_text(ROCKETMQ_FILE)
    filters = manager(tmp_path, expect_consumer_num_use_filter=64)
    assert filters.load()
    assert filters.by_topic == {}
