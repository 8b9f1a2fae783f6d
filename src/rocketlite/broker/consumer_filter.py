"""`ConsumerFilterManager`: the consumers' SQL92 filters, persisted as `config/consumerFilter.json`.

RocketMQ's broker keeps one `ConsumerFilterData` per (topic, group) whose subscription is not a
tag expression: registered from the group's heartbeats (the consumer manager's REGISTER event),
marked dead when the group's last client leaves (UNREGISTER) and removed once dead for
`filterDataCleanTimeSpan` (24 h). A pull that carries no subscription of its own is filtered by
this data: none is FILTER_DATA_NOT_EXIST, an older `clientVersion` than the pull's subVersion is
FILTER_DATA_NOT_LATEST. A heartbeat whose expression does not compile registers nothing (and
drops the group's older expression for the topic), so the pulls that follow get
FILTER_DATA_NOT_EXIST, RocketMQ's way of telling the consumer its expression is wrong. A newer
clientVersion with the same expression only raises the version; an older one is ignored.

The file, as RocketMQ writes it (fastjson, keys sorted; `dead` is the `isDead()` getter; RocketMQ
indents it, rocketlite writes it on one line as it writes its other config files)::

    {"filterDataByTopic": {TOPIC: {"groupFilterData": {GROUP: {
        "bloomFilterData": {"bitNum": 112, "bitPos": [22, 96, 85]},
        "bornTime": ms, "clientVersion": subVersion, "consumerGroup": GROUP, "dead": bool,
        "deadTime": ms (0: alive), "expression": "a > 3", "expressionType": "SQL92",
        "topic": TOPIC}}, "topic": TOPIC}}}

On load every expression is compiled again and every entry counts as dead (since 30 s ago), as
in RocketMQ: the heartbeats of the consumers still running bring them back to life. A file whose
bloom filter data does not fit this broker's filter (`filter.bloom`) is ignored whole, as
RocketMQ ignores it. Written when it changed, by the broker's persist round and at shutdown.

`record_matcher` turns a compiled filter into the store's `RecordFilter`: each record's properties
(`record_properties`, decoded as `string2messageProperties` decodes them) are judged by the
expression; pulls, POP and the gRPC receive all use it (`subscription_filters` builds both filters
of a POP or gRPC subscription). With `filterSupportRetry`, a pull of a
retry topic filters each message by the group's filter data for the topic it came from (its
RETRY_TOPIC property; `retry_matcher`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.state_files import JsonConfigFile
from rocketlite.clock import Clock
from rocketlite.filter import SQL92, Sql92Filter, compile
from rocketlite.filter.bloom import BloomFilter, BloomFilterData
from rocketlite.protocol.bodies.heartbeat import SubscriptionData
from rocketlite.protocol.bodies.json_body import get_int, get_str
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.formats.record import RecordFormatError, record_properties
from rocketlite.protocol.message import MessageConst, string_to_properties
from rocketlite.protocol.reserved import RETRY_GROUP_TOPIC_PREFIX
from rocketlite.protocol.subscription import build_subscription_data, is_tag_type, tag_codes
from rocketlite.protocol.wire import fastjson
from rocketlite.store.api import MessageFilter, RecordFilter

log = logging.getLogger("rocketlite.broker.consumer_filter")

DEAD_ON_LOAD_MS: Final = 30_000  # entries loaded from the file died this long ago


class UnknownExpressionTypeError(RocketliteError):
    """A subscription's expressionType that is neither TAG nor SQL92 (RocketMQ's FilterFactory
    has no filter for it)."""

    code = ResponseCode.SUBSCRIPTION_PARSE_FAILED


def compile_expression(expression_type: str, expression: str) -> Sql92Filter:
    """`FilterFactory.get(type).compile(expression)`: `FilterSyntaxError` for a malformed
    expression, `UnknownExpressionTypeError` for a type without a filter (both carry
    SUBSCRIPTION_PARSE_FAILED and name the cause)."""
    if expression_type != SQL92:
        raise UnknownExpressionTypeError(
            f"unknown expression type {expression_type!r}: the broker filters by TAG or SQL92"
        )
    return compile(expression)


def record_matcher(flt: Sql92Filter) -> RecordFilter:
    """The store's per-record test for `flt`: the record's properties satisfy the expression.
    A record whose properties cannot be found (a corrupt record) does not match."""
    matches = flt.matches

    def match(record: memoryview) -> bool:
        try:
            text = record_properties(record)
        except (RecordFormatError, IndexError):
            return False
        return matches(string_to_properties(text))

    return match


@dataclass(slots=True, eq=False)
class ConsumerFilterData:
    """One (topic, group)'s filter: the expression, compiled, and its bookkeeping."""

    consumer_group: str
    topic: str
    expression: str
    expression_type: str
    born_time: int
    client_version: int
    compiled: Sql92Filter
    dead_time: int = 0
    bloom_filter_data: BloomFilterData | None = None
    matcher: RecordFilter = field(init=False)

    def __post_init__(self) -> None:
        self.matcher = record_matcher(self.compiled)

    @property
    def dead(self) -> bool:
        return self.dead_time >= self.born_time

    def to_json_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        if self.bloom_filter_data is not None:
            obj["bloomFilterData"] = self.bloom_filter_data.to_json_obj()
        obj.update(
            bornTime=self.born_time,
            clientVersion=self.client_version,
            consumerGroup=self.consumer_group,
            dead=self.dead,
            deadTime=self.dead_time,
            expression=self.expression,
            expressionType=self.expression_type,
            topic=self.topic,
        )
        return obj


class _OtherBloomFilterError(Exception):
    """consumerFilter.json was written with another bloom filter size."""


def build_filter_data(
    topic: str, group: str, expression: str, expression_type: str, client_version: int, now_ms: int
) -> ConsumerFilterData:
    """`ConsumerFilterManager.build`, raising where RocketMQ logs and returns null."""
    compiled = compile_expression(expression_type, expression)
    return ConsumerFilterData(group, topic, expression, expression_type, now_ms, client_version, compiled)


class ConsumerFilterManager(JsonConfigFile):
    """The (topic, group) -> `ConsumerFilterData` table; mutated on the event loop, encoded by
    the persist round in a worker thread (both under `lock`)."""

    file_name = "consumerFilter.json"

    def __init__(self, config_dir: Path, broker: BrokerConfig, clock: Clock) -> None:
        super().__init__(config_dir)
        self.broker = broker
        self.clock = clock
        self.bloom = BloomFilter(broker.max_error_rate_of_bloom_filter, broker.expect_consumer_num_use_filter)
        self.by_topic: dict[str, dict[str, ConsumerFilterData]] = {}
        self.changed = False

    # -- queries ----------------------------------------------------------------------------
    def get(self, topic: str, group: str) -> ConsumerFilterData | None:
        groups = self.by_topic.get(topic)
        return groups.get(group) if groups else None

    def by_group(self, group: str) -> list[ConsumerFilterData]:
        return [d for groups in self.by_topic.values() if (d := groups.get(group)) is not None]

    # -- the consumer manager's events ------------------------------------------------------
    def register_group(self, group: str, subs: Iterable[SubscriptionData]) -> None:
        """REGISTER (every heartbeat): each non-tag subscription registered; the group's filters
        of topics it no longer subscribes to are marked dead."""
        subs = list(subs)
        topics = {s.topic for s in subs}
        with self.lock:
            for sub in subs:
                self.register(sub.topic, group, sub.sub_string, sub.expression_type, sub.sub_version)
            now = self.clock.now_ms()
            for data in self.by_group(group):
                if data.topic not in topics and not data.dead:
                    data.dead_time = now
                    self.changed = True
                    log.info("consumer filter of %s on %s is dead: topic left", group, data.topic)

    def register(
        self, topic: str, group: str, expression: str, expression_type: str | None, client_version: int
    ) -> bool:
        """`FilterDataMapByTopic.register`: True if the table now holds this subscription."""
        if is_tag_type(expression_type) or not expression:
            return False
        assert expression_type is not None
        with self.lock:
            groups = self.by_topic.setdefault(topic, {})
            old = groups.get(group)
            if old is not None and client_version <= old.client_version:
                if (old.expression_type, old.expression) != (expression_type, expression):
                    log.info(
                        "consumer filter of %s on %s: version %d <= %d, %r ignored",
                        group, topic, client_version, old.client_version, expression,
                    )  # fmt: skip
                if client_version == old.client_version and old.dead:
                    self._re_alive(old)
                    return True
                return False
            bloom = self.bloom.generate(f"{group}#{topic}")
            if (
                old is not None
                and (old.expression_type, old.expression) == (expression_type, expression)
                and old.bloom_filter_data == bloom
            ):
                old.client_version = client_version
                if old.dead:
                    self._re_alive(old)
                self.changed = True
                return True
            now = self.clock.now_ms()
            try:
                data = build_filter_data(topic, group, expression, expression_type, client_version, now)
            except RocketliteError as exc:
                log.error("consumer filter of %s on %s does not compile: %s", group, topic, exc)
                if old is not None:  # the new expression is wrong: let the client's pulls say so
                    del groups[group]
                    self.changed = True
                elif not groups:
                    del self.by_topic[topic]
                return False
            data.bloom_filter_data = bloom
            groups[group] = data
            self.changed = True
            log.info("consumer filter of %s on %s: %s %r", group, topic, expression_type, expression)
            return True

    def unregister(self, group: str) -> None:
        """UNREGISTER (the group's last client left): its filters are dead from now."""
        with self.lock:
            now = self.clock.now_ms()
            for data in self.by_group(group):
                if not data.dead:
                    data.dead_time = now
                    self.changed = True

    def _re_alive(self, data: ConsumerFilterData) -> None:
        data.dead_time = 0
        self.changed = True

    # -- the file ---------------------------------------------------------------------------
    def clean(self) -> None:
        """Drop filters dead for longer than `filterDataCleanTimeSpan`, and emptied topics."""
        now, span = self.clock.now_ms(), self.broker.filter_data_clean_time_span
        for topic in list(self.by_topic):
            groups = self.by_topic[topic]
            for group in [g for g, d in groups.items() if d.dead and now - d.dead_time >= span]:
                log.info("consumer filter of %s on %s removed: dead too long", group, topic)
                del groups[group]
            if not groups:
                del self.by_topic[topic]

    def encode(self) -> str:
        self.clean()
        return fastjson.dumps(
            {
                "filterDataByTopic": {
                    topic: {
                        "groupFilterData": {g: d.to_json_obj() for g, d in groups.items()},
                        "topic": topic,
                    }
                    for topic, groups in self.by_topic.items()
                }
            }
        )

    def decode(self, text: str) -> None:
        data = fastjson.loads(text)
        raw_topics = data.get("filterDataByTopic") if isinstance(data, dict) else None
        if not isinstance(raw_topics, dict):
            return
        now = self.clock.now_ms()
        loaded: dict[str, dict[str, ConsumerFilterData]] = {}
        for topic, raw in raw_topics.items():
            raw_groups = raw.get("groupFilterData") if isinstance(raw, dict) else None
            if not isinstance(raw_groups, dict):
                continue
            groups = loaded.setdefault(str(topic), {})
            for group, obj in raw_groups.items():
                if not isinstance(obj, dict):
                    continue
                try:
                    entry = self._decode_entry(str(topic), str(group), obj, now)
                except _OtherBloomFilterError:
                    return  # the whole file is ignored, as in RocketMQ
                if entry is not None:
                    groups[str(group)] = entry
        self.by_topic = {t: g for t, g in loaded.items() if g}

    def _decode_entry(
        self, topic: str, group: str, obj: dict[str, Any], now: int
    ) -> ConsumerFilterData | None:
        """The entry, or None when it cannot be used (its expression does not compile); raises
        `_OtherBloomFilterError` when its bloom data belongs to a filter of another size."""
        raw_bloom = obj.get("bloomFilterData")
        bloom: BloomFilterData | None = None
        if isinstance(raw_bloom, dict) and isinstance(raw_bloom.get("bitPos"), list):
            bloom = BloomFilterData(
                tuple(int(p) for p in raw_bloom["bitPos"]), get_int(raw_bloom, "bitNum", 0)
            )
        if not self.bloom.is_valid(bloom):
            log.info("%s: bloom filter data of another size; the file is ignored", self.file_name)
            raise _OtherBloomFilterError
        born = get_int(obj, "bornTime", 0)
        try:
            entry = build_filter_data(
                topic, get_str(obj, "consumerGroup", group), get_str(obj, "expression", ""),
                get_str(obj, "expressionType", ""), get_int(obj, "clientVersion", 0), born,
            )  # fmt: skip
        except RocketliteError as exc:
            log.error("%s: the filter of %s on %s is skipped: %s", self.file_name, group, topic, exc)
            return None
        entry.bloom_filter_data = bloom
        entry.dead_time = get_int(obj, "deadTime", 0)
        if entry.dead_time == 0:  # every consumer counts as gone until it beats again
            entry.dead_time = max(now - DEAD_ON_LOAD_MS, born)
        return entry

    def persist_if_changed(self) -> bool:
        """Write the file if the table changed (or the last write failed)."""
        if not (self.changed or self.dirty):
            return True
        self.changed = False
        return self.persist()


def subscription_filters(
    topic: str, expression: str | None, expression_type: str | None
) -> tuple[MessageFilter | None, RecordFilter | None]:
    """The tag filter and the property filter of a POP or gRPC receive's subscription (no
    expression: every message, whatever the type, as RocketMQ's POP reads it). A malformed one
    raises `RocketliteError` with SUBSCRIPTION_PARSE_FAILED, naming the error. These serve SQL92
    whatever `enablePropertyFilter` says, as RocketMQ's POP (and so its proxy) does."""
    if not expression:
        return None, None
    try:
        sub = build_subscription_data(topic, expression, expression_type)
        if is_tag_type(sub.expression_type):
            codes = tag_codes(sub)
            return (codes.__contains__ if codes is not None else None), None
        return None, record_matcher(compile_expression(sub.expression_type, sub.sub_string))
    except (ValueError, RocketliteError) as exc:
        raise RocketliteError(
            f"parse the consumer's subscription failed: {exc}", code=ResponseCode.SUBSCRIPTION_PARSE_FAILED
        ) from exc


def retry_matcher(filters: ConsumerFilterManager, group: str) -> RecordFilter:
    """`ExpressionForRetryMessageFilter`: a message of a retry topic is judged by the group's
    filter for the topic it came from (RETRY_TOPIC); without one it matches."""

    def match(record: memoryview) -> bool:
        try:
            props = string_to_properties(record_properties(record))
        except (RecordFormatError, IndexError):
            return False
        real = props.get(MessageConst.RETRY_TOPIC)
        data = filters.get(real, group) if real is not None else None
        return data is None or data.compiled.matches(props)

    return match


def retry_group(topic: str) -> str | None:
    """The group of a retry topic (`KeyBuilder.parseGroup`: V1 `%RETRY%group`, V2
    `%RETRY%group+topic`), or None for another topic."""
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return None
    return topic[len(RETRY_GROUP_TOPIC_PREFIX) :].split("+", 1)[0]
