"""The coalescing lane of SEND_MESSAGE_V2: the single sends of one socket read, placed in one append.

A producer that keeps several sends in flight on one connection (a Java client's async sends,
RocketMQ's Netty client writing one frame per request) delivers several SEND_MESSAGE_V2 frames in
one read. `Connection.data_received` offers each run of them to `SendGroupLane`, which takes the
leading requests that are on the common path, and for those does what `SendMessageProcessor._put`
does for one message, once for all of them: their records encoded into one buffer
(`speedups.encode_group`), appended under one lock with one clock read and one dispatch wake-up
(`StoreAPI.put_group_nowait`, `CommitLog.append_group`: one stamping call per segment part), and
their answer frames written by the compiled `speedups.encode_send_ok`, the same bytes the
per-message path answers. It returns how many it took; the connection hands the first request it
did not take to the ordinary handler and offers the rest again, so requests are served, stored and
answered in the order they arrived: the queue offsets are those the per-message path assigns.

The common path, judged per request before anything is changed (a request that is not on it ends
the run and goes through the handler, which gives the answer it gives today):
- the lane as a whole: no ACL or auth table, no request observer (the connection checks both:
  those tables have no lane), the group codecs compiled (not under ROCKETLITE_NATIVE=0),
  ASYNC_FLUSH and a writable store (`StoreAPI.takes_group`), no slave to wait on, the broker
  writable, a master, accepting sends, not rejecting them (`reject_request`);
- per request: SEND_MESSAGE_V2 answered (not one-way), a header that decodes, not a batch, a topic
  already found legal and existing and writable, a valid queue id, no transaction type, not a
  retry topic (no DLQ decision), no DELAY and no TIMER_ property (no delay level, no timer hook),
  numbers within Java's ranges, and a record within maxMessageSize and the properties limit.
A queue id below 0 is drawn from the processor's generator when the request is taken, as `_put`
draws it. Records are placed where the per-message path places them, the group split where a
segment rolls; if a segment cannot be created the requests not placed go through the handler
(which answers the failure). `tests/broker/test_send_group.py` pins the stored bytes (commit log
and consume queues) and the answer frames against the per-message path.
"""

from __future__ import annotations

from typing import Final

from rocketlite.broker.config import BrokerRole
from rocketlite.broker.processors.send import SendMessageProcessor, born_host_of
from rocketlite.broker.stats import message_type
from rocketlite.protocol import perm, reserved
from rocketlite.protocol.codes import CommandFlag, RequestCode
from rocketlite.protocol.formats.record import END_FILE_MIN_BLANK_LENGTH, MAX_PROPERTIES_LENGTH, V4_BODY_POS
from rocketlite.protocol.formats.speedups import GroupEntry, encode_group, send_properties
from rocketlite.protocol.message import MessageSysFlag
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.speedups import decode_send_header_v2, encode_send_ok
from rocketlite.remoting.connection import Connection

_V2: Final = int(RequestCode.SEND_MESSAGE_V2)
_NOT_ANSWERED: Final = int(CommandFlag.RESPONSE) | int(CommandFlag.ONEWAY)
_TRANSACTION_MASK: Final = int(MessageSysFlag.TRANSACTION_MASK)
_MULTI_TAGS_FLAG: Final = int(MessageSysFlag.MULTI_TAGS_FLAG)
_PERM_WRITE: Final = perm.PERM_WRITE
_RETRY_PREFIX: Final = reserved.RETRY_GROUP_TOPIC_PREFIX
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
# Properties that need per-message Python: the store's delay needle, every timer property.
_DELAY_NEEDLE: Final = "DELAY\x01"
_TIMER_NEEDLE: Final = "TIMER_"


class SendGroupLane:
    """`Connection`'s group handler for SEND_MESSAGE_V2 (`RequestTable.groups`)."""

    def __init__(self, processor: SendMessageProcessor) -> None:
        self.processor = processor
        self.taken = 0  # requests served by the lane (tests, diagnostics)

    def _open(self) -> bool:
        p = self.processor
        b = p.broker
        return (
            encode_group is not None and p.replica is None and b.broker_role is not BrokerRole.SLAVE
            and bool(b.broker_permission & _PERM_WRITE) and p.store.takes_group()
            and not (p.start_accept_send_ms and p.clock.now_ms() < p.start_accept_send_ms)
            and not p.reject_request()
        )  # fmt: skip

    def __call__(self, conn: Connection, commands: list[RemotingCommand], start: int) -> int:
        """Serve the leading requests of `commands[start:]` that are on the common path; their
        answers go to `conn` in order. Returns how many were served (0: none)."""
        if not self._open():
            return 0
        p = self.processor
        store_host = p.store_host
        born = born_host_of(conn)
        head = V4_BODY_POS + (12 if len(born.ip) == 16 else 0) + (12 if len(store_host.ip) == 16 else 0) + 3
        config = p.store.config
        # over maxMessageSize, or more than a segment holds: the per-message path refuses it
        max_size = min(config.max_message_size, config.maped_file_size_commit_log - END_FILE_MIN_BLANK_LENGTH)
        cluster = p.broker.broker_cluster_name
        legal = p._legal_topics
        select = p.topics.select
        rng = p.rng
        entries: list[GroupEntry] = []
        sizes: list[int] = []
        keys: list[str] = []
        answers: list[tuple[int, RemotingCommand, str | None, str]] = []  # queue id, request, UNIQ_KEY, kind
        for i in range(start, len(commands)):
            req = commands[i]
            if req.code != _V2 or req.flag & _NOT_ANSWERED:
                break
            try:
                h = decode_send_header_v2(req.ext_fields)
            except Exception:  # the handler answers the bad header
                break
            topic = h.topic
            sys_flag = h.sys_flag
            reconsume = h.reconsume_times or 0
            if (
                h.batch
                or topic not in legal
                or topic.startswith(_RETRY_PREFIX)
                or sys_flag & _TRANSACTION_MASK
            ):
                break
            tc = select(topic)
            qid = h.queue_id
            if (
                tc is None
                or not tc.perm & _PERM_WRITE
                or (qid >= tc.write_queue_nums and qid >= tc.read_queue_nums)
            ):
                break
            if not (
                _INT_MIN <= h.flag <= _INT_MAX and _INT_MIN <= sys_flag <= _INT_MAX
                and _INT_MIN <= reconsume <= _INT_MAX and _LONG_MIN <= h.born_timestamp <= _LONG_MAX
            ):  # fmt: skip
                break
            raw = h.properties or ""
            if _DELAY_NEEDLE in raw or _TIMER_NEEDLE in raw:
                break
            properties, _code, uniq_key, _keys, delay = send_properties(raw, cluster)
            if delay is not None or _DELAY_NEEDLE in properties or _TIMER_NEEDLE in properties:
                break
            try:
                props_len = len(properties) if properties.isascii() else len(properties.encode())
            except UnicodeEncodeError:
                break
            body = req.body or b""
            size = head + len(body) + len(topic) + props_len  # a legal topic name is ASCII
            if props_len > MAX_PROPERTIES_LENGTH or size > max_size or type(body) is not bytes:
                break
            # taken: from here on nothing refuses it
            if qid < 0:
                qid = rng.randrange(max(tc.write_queue_nums, 1))
            if tc.topic_filter_type == "MULTI_TAG":
                sys_flag |= _MULTI_TAGS_FLAG
            entries.append((topic, body, properties, qid, h.flag, sys_flag, h.born_timestamp, reconsume))
            sizes.append(size)
            keys.append(f"{topic}-{qid}")
            answers.append((qid, req, uniq_key, message_type(properties, False, None)))
        if not entries:
            return 0
        assert encode_group is not None
        try:
            buf = encode_group(entries, born, store_host)
        except (TypeError, ValueError, OverflowError):  # not expected after the checks; nothing placed
            return 0  # the handler serves them one by one
        ids, qoffs = p.store.put_group_nowait(buf, sizes, keys, store_host)
        broker = p.broker
        region = broker.region_id
        trace_on = "true" if broker.trace_on else "false"
        record_put = p.stats.record_put
        send = conn.send_raw
        for k, msg_id in enumerate(ids):
            qid, req, uniq_key, kind = answers[k]
            record_put(entries[k][0], 1, sizes[k], kind)
            send(
                encode_send_ok(
                    req.opaque, req.serialize_type, msg_id, qid, qoffs[k], region, trace_on, uniq_key
                )
            )
        self.taken += len(ids)
        return len(ids)
