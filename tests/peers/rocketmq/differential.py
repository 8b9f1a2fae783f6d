"""The differential harness: one scenario, run against RocketMQ 5.3.3 and against rocketlite.

A scenario is an async function of a `Side`: it sends raw remoting requests (built with the
sans-IO builders of `rocketlite.protocol.requests`, or by hand for malformed input) through
`side.call(label, request)`, and takes client actions between them (wait for a route, wait for
a message to arrive, pick an offset out of an earlier answer). Each call is recorded as an
`Observation`: response code, header fields, body, remark and version, normalised (`observe`).
`run_differential` runs the scenario on the RocketMQ side, then on the rocketlite side (the same
topic and group names), and `compare` fails on the first observation that differs, showing both.

What is compared, after normalisation:
- the response code of every request;
- every header field, by name: missing and extra fields count, except those in ACCEPTED;
- message bodies as the records they hold (topic, queue, queue offset, flag, sys flag, born
  timestamp, reconsume times, body, properties as a map), in order; JSON bodies as data;
- the remark where RocketMQ puts a status name there (pull answers); other remarks are free text
  for people, kept side by side in the report (`Report`) but not compared.

What legitimately differs is normalised, each with its reason, in ACCEPTED below (the same list is
docs/internals/differential.md): timestamps the broker takes from its clock, addresses and ports, message
ids (which hold the broker's address and commit-log offset), the broker's version number.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from rocketlite.protocol.codes import PullSysFlag, RequestCode, ResponseCode
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.formats.record import StoredRecord, decode_records
from rocketlite.protocol.message import parse_msg_id, string_to_properties
from rocketlite.protocol.requests.offsets import build_get_max_offset
from rocketlite.protocol.requests.pull import build_pull
from rocketlite.protocol.requests.route import build_get_route
from rocketlite.protocol.wire.command import RemotingCommand, make_request, make_response
from rocketlite.protocol.wire.frame import decode_frame
from rocketlite.protocol.wire.pop import PopRequestCode
from rocketlite.remoting.client import RemotingClient

# Pseudo response codes for what a server did instead of answering.
NO_ANSWER: Final = -1
CLOSED: Final = -2
UNDECODABLE: Final = -3
RAW_FRAME: Final = -100  # the request code recorded for `Side.raw`
NOTE: Final = -101  # ... and for `Side.note`

ROCKETMQ: Final = "rocketmq"
ROCKETLITE: Final = "rocketlite"


# Properties RocketMQ 5 adds to every message it stores from a send (differences.GAPS
# "send-context-properties").
SEND_CONTEXT_PROPERTIES: Final = {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
TRANSACTION_ID: Final = "__transactionId__"  # "transaction-id-property"
HEARTBEAT_V2_FIELDS: Final = frozenset({"IS_SUPPORT_HEART_BEAT_V2", "IS_SUB_CHANGE"})  # "heartbeat-v2"
SEND_CODES: Final = frozenset(
    {RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE}
)
SEND_CONTEXT_FIELDS: Final = frozenset(SEND_CONTEXT_PROPERTIES)  # "refused-send-fields"
# An uncaught exception in RocketMQ: SYSTEM_ERROR whose remark is "java.lang.X: ..." ("java-exception").
JAVA_EXCEPTION: Final = re.compile(r"^(java|javax|org|com)\.[\w.$]+(Exception|Error)\b")

# Header fields whose values are normalised (see ACCEPTED), by name.
TIMESTAMP_FIELDS: Final = frozenset({"popTime", "indexLastUpdateTimestamp", "timestamp"})
MSG_ID_FIELDS: Final = frozenset({"msgId", "offsetMsgId"})
# Fields RocketMQ 5 adds to pull answers ("pull-fields").
PULL_SYS_FLAGS: Final = frozenset({"topicSysFlag", "groupSysFlag", "forbiddenType"})
# Remarks that are a status name, compared as data (GetMessageStatus names of pull answers).
STATUS_REMARK_CODES: Final = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.PULL_NOT_FOUND,
        ResponseCode.PULL_RETRY_IMMEDIATELY,
        ResponseCode.PULL_OFFSET_MOVED,
    }
)
RECORD_BODIES: Final = frozenset(
    {
        RequestCode.PULL_MESSAGE,
        PopRequestCode.LITE_PULL_MESSAGE,
        RequestCode.QUERY_MESSAGE,
        RequestCode.VIEW_MESSAGE_BY_ID,
        PopRequestCode.POP_MESSAGE,
    }
)
PULL_LIKE: Final = frozenset({RequestCode.PULL_MESSAGE, PopRequestCode.LITE_PULL_MESSAGE})


@dataclass
class Observation:
    """One request's answer, normalised for comparison (`key`) and as it was (for the report)."""

    label: str
    request_code: int
    code: int
    fields: dict[str, Any]
    body: Any
    remark: str | None
    raw_remark: str | None
    version: int

    def key(self) -> tuple[Any, ...]:
        return (self.label, self.code, self.fields, self.body, self.remark)

    def show(self) -> str:
        return (
            f"code={self.code} remark={self.raw_remark!r}\n      fields={self.fields}\n      body={self.body}"
        )


@dataclass
class Side:
    """One broker + name server under test, as a scenario sees it."""

    name: str
    namesrv: str
    broker: str
    broker_name: str
    store_root: Path
    client: RemotingClient
    strict: frozenset[str] = frozenset()  # keys of normalised GAPS compared as they are
    observations: list[Observation] = field(default_factory=list)

    @property
    def is_rocketmq(self) -> bool:
        return self.name == ROCKETMQ

    async def call(
        self,
        label: str,
        request: RemotingCommand,
        *,
        to: str = "broker",
        timeout: float = 20.0,
        record: bool = True,
    ) -> RemotingCommand:
        """Send `request` to the broker (or `to="namesrv"`) and record what came back; no answer
        within `timeout` is recorded (and returned) as code NO_ANSWER."""
        addr = self.namesrv if to == "namesrv" else self.broker
        try:
            response = await self.client.invoke(addr, request, timeout)
        except TimeoutError:
            response = make_response(request, NO_ANSWER, f"no answer within {timeout:.0f}s")
        if record:
            self.observations.append(observe(self, label, request, response))
        return response

    async def raw(self, label: str, data: bytes, *, to: str = "broker", timeout: float = 10.0) -> None:
        """Write `data` on a new connection and record what the server does: the frame it answers
        with, CLOSED when it closes the connection, or NO_ANSWER when it does neither."""
        host, port = (self.namesrv if to == "namesrv" else self.broker).rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        request = make_request(RAW_FRAME)
        try:
            writer.write(data)
            await writer.drain()
            try:
                head = await asyncio.wait_for(reader.readexactly(4), timeout)
                frame = await asyncio.wait_for(reader.readexactly(int.from_bytes(head, "big")), timeout)
                try:
                    response = decode_frame(frame)
                except ProtocolError as exc:
                    response = make_response(request, UNDECODABLE, f"{exc}: {frame[:64]!r}")
            except (asyncio.IncompleteReadError, ConnectionResetError):
                response = make_response(request, CLOSED, "the server closed the connection")
            except TimeoutError:
                response = make_response(request, NO_ANSWER, f"no answer within {timeout:.0f}s")
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        self.observations.append(observe(self, label, request, response))

    async def oneway(self, request: RemotingCommand) -> None:
        conn = await self.client.connection(self.broker)
        conn.oneway(request)

    def note(self, label: str, value: Any) -> None:
        """Record something a scenario derived from answers (say, one offset relative to another,
        where the absolute value depends on the broker's history) as an observation of its own."""
        self.observations.append(
            Observation(label, NOTE, ResponseCode.SUCCESS, {"value": value}, None, None, None, 0)
        )

    # -- client actions (not recorded) -------------------------------------------------------
    async def wait_route(self, topic: str, timeout: float = 60.0) -> None:
        """Until the name server routes `topic` (RocketMQ's broker registers a new topic in the
        background; rocketlite's at once): a poll, as a client's route refresh is."""
        deadline = time.monotonic() + timeout
        while True:
            r = await self.client.invoke(self.namesrv, build_get_route(topic), 10)
            if r.code == ResponseCode.SUCCESS:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: no route for {topic} after {timeout:.0f}s")
            await _sleep(0.2)

    async def wait_messages(
        self, topic: str, queue_id: int, count: int, *, group: str = "diff_waiter", timeout: float = 60.0
    ) -> None:
        """Until queue (`topic`, `queue_id`) holds `count` messages: a long-polling pull from
        offset count-1 is answered when that message arrives (the broker's own wake-up)."""
        deadline = time.monotonic() + timeout
        while True:
            r = await self.client.invoke(self.broker, build_get_max_offset(topic, queue_id), 10)
            if r.code == ResponseCode.SUCCESS and int(r.ext_fields["offset"]) >= count:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{self.name}: {topic}/{queue_id} has not {count} messages")
            hold = int(min(left, 15.0) * 1000)
            pull = build_pull(
                group=group,
                topic=topic,
                queue_id=queue_id,
                offset=max(count - 1, 0),
                max_nums=1,
                sys_flag=PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION,
                suspend_timeout_ms=hold,
            )
            await self.client.invoke(self.broker, pull, hold / 1000 + 10)

    def expect(self, response: RemotingCommand, code: int = ResponseCode.SUCCESS) -> RemotingCommand:
        assert response.code == code, (self.name, response.code, response.remark)
        return response


async def _sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


# -- normalisation -----------------------------------------------------------------------------
def _msg_id(side: Side, value: str) -> str:
    """'<id>' after checking the id names this side's broker (a batch: comma-joined ids)."""
    out = []
    for one in value.split(","):
        try:
            mid = parse_msg_id(one)
        except ValueError:
            return f"<not an id: {value}>"
        port = mid.address.port
        if f"127.0.0.1:{port}" != side.broker:
            return f"<id of another broker: {value}>"
        out.append("<id>")
    return ",".join(out)


def normalise_fields(side: Side, request_code: int, code: int, ext: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in ext.items():
        if name in SEND_CONTEXT_FIELDS and request_code in SEND_CODES and code != ResponseCode.SUCCESS:
            continue
        if (
            name in HEARTBEAT_V2_FIELDS
            and request_code == RequestCode.HEART_BEAT
            and "heartbeat-v2" not in side.strict
        ):
            continue
        if name in MSG_ID_FIELDS:
            out[name] = _msg_id(side, value)
        elif name in TIMESTAMP_FIELDS and request_code != RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
            out[name] = "<ts>" if value.lstrip("-").isdigit() else value
        elif name == "indexLastUpdatePhyoffset":
            out[name] = "<offset>" if int(value) > 0 else value
        elif name in PULL_SYS_FLAGS and request_code in PULL_LIKE:
            continue
        elif name == "reviveQid":
            out[name] = "<qid>" if value.isdigit() else value
        else:
            out[name] = value
    return out


def record_view(side: Side, rec: StoredRecord) -> dict[str, Any]:
    """A stored message as a client sees it, without what belongs to the storing broker."""
    props = string_to_properties(rec.properties_string)
    if "send-context-properties" not in side.strict:
        for name, value in SEND_CONTEXT_PROPERTIES.items():
            if props.get(name) == value:
                del props[name]
    if "transaction-id-property" not in side.strict:
        props.pop(TRANSACTION_ID, None)
    origin = props.get("ORIGIN_MESSAGE_ID")
    if origin is not None and (origin == props.get("UNIQ_KEY") or _msg_id(side, origin) == "<id>"):
        props["ORIGIN_MESSAGE_ID"] = "<origin>"  # "origin-message-id"
    for name in ("POP_CK", "1ST_POP_TIME"):  # receipts and first-pop times: the broker's clock
        if name in props:
            props[name] = "<pop>"
    store_host = f"127.0.0.1:{rec.store_host.port}"
    return {
        "topic": rec.topic,
        "queueId": rec.queue_id,
        "queueOffset": rec.queue_offset,
        "flag": rec.flag,
        "sysFlag": rec.sys_flag,
        "bornTimestamp": rec.born_timestamp,
        "reconsumeTimes": rec.reconsume_times,
        "preparedTransactionOffset": "<offset>" if rec.prepared_transaction_offset else 0,
        "body": rec.body,
        "properties": props,
        "storeHost": "<broker>" if store_host == side.broker else store_host,
    }


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return body


def normalise_route(side: Side, route: Any) -> Any:
    """Addresses replaced; RocketMQ 5's enableActingMaster=false and rocketlite's second spelling
    topicSynFlag (equal to topicSysFlag) dropped (differences.ACCEPTED["route-fields"])."""
    if not isinstance(route, dict):
        return route
    out = dict(route)
    brokers = []
    for raw in route.get("brokerDatas", []):
        addrs = {k: ("<broker>" if v == side.broker else v) for k, v in raw["brokerAddrs"].items()}
        bd = {**raw, "brokerAddrs": addrs}
        if bd.get("enableActingMaster") is False:
            del bd["enableActingMaster"]
        brokers.append(bd)
    out["brokerDatas"] = brokers
    queues = []
    for qd in route.get("queueDatas", []):
        same_flag = "topicSynFlag" in qd and qd["topicSynFlag"] == qd.get("topicSysFlag")
        queues.append({k: v for k, v in qd.items() if k != "topicSynFlag"} if same_flag else qd)
    out["queueDatas"] = queues
    return out


def normalise_body(side: Side, request_code: int, code: int, body: bytes | None) -> Any:
    if not body:
        return None
    if request_code in RECORD_BODIES and code == ResponseCode.SUCCESS:
        return [record_view(side, r) for r in decode_records(body)]
    if request_code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
        return normalise_route(side, _json(body))
    return _json(body)


def observe(side: Side, label: str, request: RemotingCommand, response: RemotingCommand) -> Observation:
    status_remark = response.code in STATUS_REMARK_CODES and request.code in PULL_LIKE
    return Observation(
        label=label,
        request_code=request.code,
        code=response.code,
        fields=normalise_fields(side, request.code, response.code, response.ext_fields or {}),
        body=normalise_body(side, request.code, response.code, response.body),
        remark=response.remark if status_remark else None,
        raw_remark=response.remark,
        version=response.version,
    )


# -- running and comparing ---------------------------------------------------------------------
Scenario = Callable[[Side], Awaitable[None]]
# Steps that are known to differ: label -> a key of differences.ACCEPTED or differences.GAPS.
Known = Mapping[str, str]


def same(a: Observation, b: Observation) -> bool:
    """Whether RocketMQ's observation `a` and rocketlite's `b` agree, after normalisation: equal,
    or RocketMQ failed with an uncaught exception that rocketlite refuses ("java-exception")."""
    if a.key() == b.key():
        return True
    crashed = a.code == ResponseCode.SYSTEM_ERROR and JAVA_EXCEPTION.match(a.raw_remark or "") is not None
    return crashed and b.code > 0 and b.label == a.label


@dataclass
class Report:
    """Both sides' observations of one scenario, for the failure message and the report file."""

    scenario: str
    rocketmq: list[Observation]
    rocketlite: list[Observation]

    def lines(self) -> Iterable[str]:
        yield f"## {self.scenario}"
        for a, b in zip(self.rocketmq, self.rocketlite, strict=False):
            yield f"{'  ' if same(a, b) else '!!'} {a.label}"
            yield f"   rocketmq:   {a.show()}"
            if a.key() != b.key() or a.raw_remark != b.raw_remark:
                yield f"   rocketlite: {b.show()}"

    def write(self, path: Path) -> None:
        with path.open("a") as out:
            out.write("\n".join(self.lines()) + "\n\n")


def describe(a: Observation, b: Observation) -> str:
    parts = []
    if a.code != b.code:
        parts.append(f"code {a.code} vs {b.code}")
    if a.remark != b.remark:
        parts.append(f"remark {a.remark!r} vs {b.remark!r}")
    if a.fields != b.fields:
        keys = sorted(set(a.fields) | set(b.fields))
        parts.append(
            "fields "
            + ", ".join(
                f"{k}: {a.fields.get(k, '<absent>')!r} vs {b.fields.get(k, '<absent>')!r}"
                for k in keys
                if a.fields.get(k, "<absent>") != b.fields.get(k, "<absent>")
            )
        )
    if a.body != b.body:
        parts.append(f"body\n      rocketmq:   {a.body}\n      rocketlite: {b.body}")
    return f"{a.label}: " + "; ".join(parts) + f"\n      remarks: {a.raw_remark!r} vs {b.raw_remark!r}"


def differences(report: Report, known: Known | None = None) -> list[str]:
    """Each step that differs (labels in `known` excepted), described."""
    known = known or {}
    a_labels = [o.label for o in report.rocketmq]
    b_labels = [o.label for o in report.rocketlite]
    if a_labels != b_labels:
        pairs = zip(report.rocketmq, report.rocketlite, strict=False)
        first = next(((a, b) for a, b in pairs if a.label != b.label), None)
        where = describe(*first) if first else "one side has more steps"
        return [
            f"the scenario took different steps: rocketmq {a_labels}\n vs rocketlite {b_labels}\n {where}"
        ]
    return [
        describe(a, b)
        for a, b in zip(report.rocketmq, report.rocketlite, strict=True)
        if not same(a, b) and a.label not in known
    ]


def known_seen(report: Report, known: Known) -> list[str]:
    """The labels of `known` whose steps really differ (a known difference that went away must
    leave the list, so the test says so)."""
    theirs = {o.label: o for o in report.rocketlite}
    return [
        a.label
        for a in report.rocketmq
        if a.label in known and a.label in theirs and not same(a, theirs[a.label])
    ]
