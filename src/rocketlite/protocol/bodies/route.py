"""JSON bodies of the NameServer protocol: routes, clusters, topic configs and a broker's
registration (heartbeats are in `heartbeat`, the small list and table bodies in `lists`).

Each body is a frozen dataclass on `json_body.JsonBody` (`to_json_obj` / `from_json_obj`, the
fastjson bean mapping, camelCase keys). `Map<Long,String>` keys (`brokerAddrs`) are written
unquoted unless `standard=True` (the 4.9.4+ NameServer rule: request `version >= 401` or
`acceptStandardJsonOnly=true`).

Reading is tolerant (see `json_body`): unknown keys are ignored, and QueueData's flag is read from
`topicSysFlag` (4.9.0+) or `topicSynFlag` (older, and the Go client). Both spellings are written.
Bodies keyed by `MessageQueue` objects are in `message_queue`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Self

from rocketlite.protocol import perm
from rocketlite.protocol.bodies.json_body import (
    BodyError,
    JsonBody,
    expect_obj,
    get_bool,
    get_int,
    get_list,
    get_opt_str,
    get_str,
    to_int,
)
from rocketlite.protocol.bodies.message_queue import MessageQueue
from rocketlite.protocol.wire import fastjson

DEFAULT_TOPIC_QUEUE_NUMS: Final = 16  # TopicConfig defaults (`defaultReadQueueNums`)
PERM_READ_WRITE: Final = 6  # PermName.PERM_READ | PERM_WRITE
MAX_INFLATED_REGISTER_BODY: Final = 256 * 1024 * 1024  # cap on a compressed REGISTER_BROKER body


# ------------------------------------------------------------------------------------------ routing


@dataclass(frozen=True, slots=True)
class DataVersion(JsonBody):
    """`{"counter":N,"timestamp":ms}`; the NameServer compares it to skip unchanged registrations."""

    timestamp: int = 0
    counter: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        return cls(timestamp=get_int(obj, "timestamp", 0), counter=get_int(obj, "counter", 0))

    def next_version(self, timestamp: int) -> DataVersion:
        return DataVersion(timestamp=timestamp, counter=self.counter + 1)


@dataclass(frozen=True, slots=True)
class QueueData(JsonBody):
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSynFlag": self.topic_sys_flag,  # <= 4.8.0 spelling, read by the Go client
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        flag = obj.get("topicSysFlag", obj.get("topicSynFlag"))
        return cls(
            broker_name=get_str(obj, "brokerName"),
            read_queue_nums=get_int(obj, "readQueueNums", 0),
            write_queue_nums=get_int(obj, "writeQueueNums", 0),
            perm=get_int(obj, "perm", 0),
            topic_sys_flag=0 if flag is None else to_int(flag, "topicSysFlag"),
        )


@dataclass(frozen=True, slots=True)
class BrokerData(JsonBody):
    """`brokerAddrs` maps brokerId (0 = master) to "ip:port"; written with unquoted keys."""

    cluster: str
    broker_name: str
    broker_addrs: Mapping[int, str] = field(default_factory=dict)

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(0)

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "brokerAddrs": dict(self.broker_addrs),
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        addrs = expect_obj(obj.get("brokerAddrs") or {}, "brokerAddrs")
        return cls(
            cluster=get_str(obj, "cluster", ""),
            broker_name=get_str(obj, "brokerName"),
            broker_addrs={to_int(k, "brokerAddrs key"): get_str(addrs, k) for k in addrs},
        )


@dataclass(frozen=True, slots=True)
class TopicRouteData(JsonBody):
    """GET_ROUTEINFO_BY_TOPIC answer; `filterServerTable` is written even when empty, as Java does."""

    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]
    filter_server_table: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    order_topic_conf: str | None = None

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "brokerDatas": [b.to_json_obj() for b in self.broker_datas],
            "filterServerTable": {k: list(v) for k, v in self.filter_server_table.items()},
            "orderTopicConf": self.order_topic_conf,
            "queueDatas": [q.to_json_obj() for q in self.queue_datas],
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        table = expect_obj(obj.get("filterServerTable") or {}, "filterServerTable")
        return cls(
            queue_datas=tuple(
                QueueData.from_json_obj(expect_obj(q, "queueData")) for q in get_list(obj, "queueDatas")
            ),
            broker_datas=tuple(
                BrokerData.from_json_obj(expect_obj(b, "brokerData")) for b in get_list(obj, "brokerDatas")
            ),
            filter_server_table={str(k): tuple(str(a) for a in get_list(table, k)) for k in table},
            order_topic_conf=get_opt_str(obj, "orderTopicConf"),
        )


@dataclass(frozen=True, slots=True)
class ClusterInfo(JsonBody):
    """GET_BROKER_CLUSTER_INFO answer; always the plain (unquoted-key) form in Java."""

    broker_addr_table: Mapping[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {k: v.to_json_obj() for k, v in self.broker_addr_table.items()},
            "clusterAddrTable": {k: sorted(v) for k, v in self.cluster_addr_table.items()},
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        brokers = expect_obj(obj.get("brokerAddrTable") or {}, "brokerAddrTable")
        clusters = expect_obj(obj.get("clusterAddrTable") or {}, "clusterAddrTable")
        return cls(
            broker_addr_table={
                str(k): BrokerData.from_json_obj(expect_obj(v, "brokerData")) for k, v in brokers.items()
            },
            cluster_addr_table={str(k): tuple(str(n) for n in get_list(clusters, k)) for k in clusters},
        )


# ------------------------------------------------------------------------------------- topic configs


@dataclass(frozen=True, slots=True)
class TopicConfig(JsonBody):
    """A broker's topic; defaults are Java's (16/16 queues, RW, SINGLE_TAG).

    `attributes` are RocketMQ 5's topic attributes, unsigned ({"message.type": "FIFO"}; see
    `protocol.topic_attributes`). A topic without any is written as 4.x writes it (no
    "attributes" key, 5 text fields); one with some as 5.x does (the key first, fastjson's
    alphabetical order, and the map as JSON in a sixth text field)."""

    topic_name: str
    read_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS
    perm: int = PERM_READ_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: Mapping[str, str] = field(default_factory=dict, hash=False)

    def to_json_obj(self) -> dict[str, Any]:
        head: dict[str, Any] = {"attributes": dict(self.attributes)} if self.attributes else {}
        return {
            **head,
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        attributes = obj.get("attributes")
        return cls(
            topic_name=get_str(obj, "topicName"),
            read_queue_nums=get_int(obj, "readQueueNums", DEFAULT_TOPIC_QUEUE_NUMS),
            write_queue_nums=get_int(obj, "writeQueueNums", DEFAULT_TOPIC_QUEUE_NUMS),
            perm=get_int(obj, "perm", PERM_READ_WRITE),
            topic_filter_type=get_str(obj, "topicFilterType", "SINGLE_TAG"),
            topic_sys_flag=get_int(obj, "topicSysFlag", 0),
            order=get_bool(obj, "order"),
            attributes=_str_map(attributes, "attributes") if attributes else {},
        )

    def encode_text(self) -> str:
        """`TopicConfig.encode()`: "name readQ writeQ perm FILTERTYPE[ {attributes}]" (compressed
        REGISTER_BROKER)."""
        queues = f"{self.read_queue_nums} {self.write_queue_nums}"
        text = f"{self.topic_name} {queues} {self.perm} {self.topic_filter_type}"
        return f"{text} {fastjson.dumps(dict(self.attributes))}" if self.attributes else text

    @classmethod
    def decode_text(cls, text: str) -> Self:
        """`TopicConfig.decode`: 5 fields, and 5.x's attributes as a sixth, ignored (as Java does)
        when it is not a JSON map (a space in a key or value splits it)."""
        parts = text.split(" ")
        if len(parts) < 5:
            raise BodyError(f"topic config text needs 5 fields: {text[:80]!r}")
        name, read, write, perm, filter_type = parts[:5]
        attributes: Mapping[str, str] = {}
        if len(parts) > 5:
            try:
                attributes = _str_map(fastjson.loads(parts[5]), "attributes")
            except (BodyError, fastjson.JsonDecodeError):
                attributes = {}
        return cls(
            name,
            to_int(read, "readQueueNums"),
            to_int(write, "writeQueueNums"),
            to_int(perm, "perm"),
            filter_type,
            attributes=attributes,
        )


def _str_map(value: Any, what: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in expect_obj(value, what).items()}


@dataclass(frozen=True, slots=True)
class TopicConfigSerializeWrapper(JsonBody):
    """GET_ALL_TOPIC_CONFIG body, the inner part of REGISTER_BROKER, and topics.json."""

    topic_config_table: Mapping[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_json_obj(),
            "topicConfigTable": {k: v.to_json_obj() for k, v in self.topic_config_table.items()},
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        table = expect_obj(obj.get("topicConfigTable") or {}, "topicConfigTable")
        return cls(
            topic_config_table={
                str(k): TopicConfig.from_json_obj(expect_obj(v, "topicConfig")) for k, v in table.items()
            },
            data_version=DataVersion.from_json_obj(expect_obj(obj.get("dataVersion") or {}, "dataVersion")),
        )


_INT = struct.Struct(">i")  # length prefixes inside the compressed REGISTER_BROKER body


class _Cursor:
    """Reads `int len, bytes` chunks; any overrun is a BodyError."""

    __slots__ = ("pos", "view")

    def __init__(self, data: bytes) -> None:
        self.view = memoryview(data)
        self.pos = 0

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.view)

    def read_int(self) -> int:
        if self.pos + _INT.size > len(self.view):
            raise BodyError("compressed register body is torn")
        (value,) = _INT.unpack_from(self.view, self.pos)
        self.pos += _INT.size
        return int(value)

    def chunk(self) -> bytes:
        length = self.read_int()
        if length < 0 or self.pos + length > len(self.view):
            raise BodyError("compressed register body is torn")
        self.pos += length
        return bytes(self.view[self.pos - length : self.pos])


def register_body_crc32(body: bytes | None) -> int:
    """`UtilAll.crc32(body)` for REGISTER_BROKER's `bodyCrc32`: zlib's CRC-32 masked to 31 bits;
    0 for no body (0 also means "do not check")."""
    return zlib.crc32(body) & 0x7FFF_FFFF if body else 0


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody(JsonBody):
    """REGISTER_BROKER body: JSON, or (header `compressed=true`) a zlib stream of length-prefixed parts.

    Compressed layout (`RegisterBrokerBody.encode(true)`), inside `Deflater(BEST_COMPRESSION)`:
    `int len, DataVersion JSON, int topicCount, {int len, TopicConfig.encode()}*, int len,
    filterServerList JSON`. It carries only name/queues/perm/filter type per topic.
    """

    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = field(
        default_factory=TopicConfigSerializeWrapper
    )
    filter_server_list: tuple[str, ...] = ()

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "filterServerList": list(self.filter_server_list),
            "topicConfigSerializeWrapper": self.topic_config_serialize_wrapper.to_json_obj(),
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        wrapper = expect_obj(obj.get("topicConfigSerializeWrapper") or {}, "topicConfigSerializeWrapper")
        return cls(
            topic_config_serialize_wrapper=TopicConfigSerializeWrapper.from_json_obj(wrapper),
            filter_server_list=tuple(str(s) for s in get_list(obj, "filterServerList")),
        )

    def encode(self, *, compressed: bool = False) -> bytes:
        if not compressed:
            return self.to_bytes()
        wrapper = self.topic_config_serialize_wrapper
        parts = [wrapper.data_version.to_bytes()]
        chunks: list[bytes] = [_INT.pack(len(parts[0])), parts[0], _INT.pack(len(wrapper.topic_config_table))]
        for config in wrapper.topic_config_table.values():
            text = config.encode_text().encode("utf-8")
            chunks += [_INT.pack(len(text)), text]
        servers = fastjson.dumps(list(self.filter_server_list)).encode("utf-8")
        chunks += [_INT.pack(len(servers)), servers]
        return zlib.compress(b"".join(chunks), 9)

    @classmethod
    def decode(cls, body: bytes, *, compressed: bool = False) -> Self:
        if not compressed:
            return cls.from_json(body)
        try:
            inflater = zlib.decompressobj()
            raw = inflater.decompress(body, MAX_INFLATED_REGISTER_BODY)
        except zlib.error as exc:
            raise BodyError(f"compressed register body does not inflate: {exc}") from exc
        if inflater.unconsumed_tail:
            raise BodyError("compressed register body inflates past the size limit")
        cursor = _Cursor(raw)
        version = DataVersion.from_json(cursor.chunk())
        count = cursor.read_int()
        if count < 0:
            raise BodyError(f"compressed register body has a topic count of {count}")
        configs = [TopicConfig.decode_text(cursor.chunk().decode("utf-8", "replace")) for _ in range(count)]
        servers = fastjson.loads(cursor.chunk()) if not cursor.at_end else []
        return cls(
            TopicConfigSerializeWrapper({c.topic_name: c for c in configs}, version),
            tuple(str(s) for s in servers) if isinstance(servers, list) else (),
        )


def subscribe_info_of(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """`topicRouteData2TopicSubscribeInfo`: readQueueNums queues of every readable queue data."""
    return sorted(
        MessageQueue(topic, qd.broker_name, i)
        for qd in route.queue_datas
        if perm.is_readable(qd.perm)
        for i in range(qd.read_queue_nums)
    )
