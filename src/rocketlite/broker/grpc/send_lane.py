"""The group lane of 5.x SendMessage on the compiled HTTP/2 door: the common sends whose requests
ended in one read, placed in one append (`remoting/h2/group.py` offers them; `SendGroupLane` is
the 4.x counterpart).

For the leading calls it takes, it does what `ProducerService.send_message` ->
`SendMessageProcessor._put` does for one, once for all: their records encoded into one buffer
(`speedups.encode_group`), appended under one lock with one clock read and one dispatch wake-up
(`StoreAPI.put_group_nowait`), each answered with its `SendMessageResponse`, serialized by
`ok_answer` (`protocol/proto/send_fields.py`, compiled in `_native/_send_fields.pyx`: the bytes
`SerializeToString` gives the same message). It returns the answers of the
calls it took; the connection hands the first call it did not take to the guarded handler and
offers the rest again, so the calls are stored in the order they arrived, with the queue ids and
offsets the per-message path gives them.

The common path, judged per call before anything is changed (a call that is not on it ends the run
and goes through the handler, which answers it as it does today):
- the lane as a whole: no plain ACL and no ACL 2.0 checks (the guard would authenticate each
  call), the group codecs compiled, ASYNC_FLUSH and a writable store (`StoreAPI.takes_group`), no
  slave to wait on, the broker writable, a master, accepting sends, not rejecting them;
- per call: the connection's peer (one born host for the group), one message, of type NORMAL, no
  user properties, no message group, no delivery time, a message id, a body within the limit and
  matching its digest, a topic without a resource namespace, already found legal, existing and
  writable, not a retry topic, no DELAY or TIMER_ text in its properties, a born time within
  Java's long, and a record within maxMessageSize and the properties limit.

`tests/broker/grpc/test_send_lane.py` pins the stored bytes (commit log and consume queues) and the
answers against the per-message path, replaying a real client's bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from rocketlite.broker.config import BrokerRole
from rocketlite.broker.grpc.send import digest_problem, properties_text
from rocketlite.broker.stats import NORMAL, message_type
from rocketlite.protocol import perm, reserved
from rocketlite.protocol.formats.record import END_FILE_MIN_BLANK_LENGTH, MAX_PROPERTIES_LENGTH, V4_BODY_POS
from rocketlite.protocol.formats.speedups import GroupEntry, encode_group, send_properties
from rocketlite.protocol.message import MessageSysFlag
from rocketlite.protocol.proto.send_fields import fields_of
from rocketlite.protocol.proto.speedups import ok_answer, send_fields
from rocketlite.protocol.proto.v2 import definition_pb2 as pb

if TYPE_CHECKING:
    from rocketlite.broker.grpc.auth import GrpcGuard
    from rocketlite.broker.grpc.send import ProducerService

_CRC32: Final = int(pb.DigestType.CRC32)
_PERM_WRITE: Final = perm.PERM_WRITE
_RETRY_PREFIX: Final = reserved.RETRY_GROUP_TOPIC_PREFIX
_MULTI_TAGS_FLAG: Final = int(MessageSysFlag.MULTI_TAGS_FLAG)
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_DELAY_NEEDLE: Final = "DELAY\x01"
_TIMER_NEEDLE: Final = "TIMER_"


class SendMessageLane:
    """`Method.group` of SendMessage: `producer`'s path, `guard`'s checks (the lane only runs when
    they have nothing to check per call)."""

    def __init__(self, producer: ProducerService, guard: GrpcGuard) -> None:
        self.producer = producer
        self.guard = guard
        self.taken = 0  # calls served by the lane (tests, diagnostics)

    def _open(self) -> bool:
        p = self.producer.send
        b = p.broker
        g = self.guard
        return (
            encode_group is not None and g.validator is None and g.auth is None and p.replica is None
            and b.broker_role is not BrokerRole.SLAVE and bool(b.broker_permission & _PERM_WRITE)
            and p.store.takes_group()
            and not (p.start_accept_send_ms and p.clock.now_ms() < p.start_accept_send_ms)
            and not p.reject_request()
        )  # fmt: skip

    def __call__(self, calls: list[tuple[Any, Any]], start: int) -> list[bytes]:
        if not self._open():
            return []
        producer = self.producer
        p = producer.send
        peer_text = calls[start][1].peer()
        born = producer.kit.peer(calls[start][1]).attrs["born_host"]
        store_host = p.store_host
        head = V4_BODY_POS + (12 if len(born.ip) == 16 else 0) + (12 if len(store_host.ip) == 16 else 0) + 3
        config = p.store.config
        max_size = min(config.max_message_size, config.maped_file_size_commit_log - END_FILE_MIN_BLANK_LENGTH)
        max_body = producer.max_body_size
        digest_name = producer.digest_name
        cluster = p.broker.broker_cluster_name
        legal = p.legal_topics
        select = p.topics.select
        rng = p.rng
        ready: dict[str, tuple[int, int]] = {}  # topic -> (write queues, sys flag) of those checked
        entries: list[GroupEntry] = []
        sizes: list[int] = []
        keys: list[str] = []
        taken: list[str] = []  # message ids
        kinds: list[str] = []  # the stats' message type, when not NORMAL ("": NORMAL)
        for i in range(start, len(calls)):
            request, context = calls[i]
            if context.peer() != peer_text:
                break
            # a GROUPED call's request is its bytes, read by the compiled reader; another's parsed
            fields = send_fields(request) if type(request) is bytes else fields_of(request)
            if fields is None:
                break
            topic, body, message_id, tag, message_keys, digest_type, checksum, seconds, nanos, crc_ok = fields
            if len(body) > max_body:
                break
            topic_state = ready.get(topic)
            if topic_state is None:
                if topic not in legal or topic.startswith(_RETRY_PREFIX):
                    break
                tc = select(topic)
                if tc is None or not tc.perm & _PERM_WRITE:
                    break
                multi = tc.topic_filter_type == "MULTI_TAG"
                topic_state = ready[topic] = (max(tc.write_queue_nums, 1), _MULTI_TAGS_FLAG if multi else 0)
            if not crc_ok and digest_problem(body, digest_name(digest_type), checksum) is not None:
                break
            text = properties_text(message_id, tag, message_keys, topic)
            born_ms = seconds * 1000 + nanos // 1_000_000
            if not _LONG_MIN <= born_ms <= _LONG_MAX:
                break
            properties, _code, _uniq, _keys, delay = send_properties(text, cluster)
            if delay is not None or _DELAY_NEEDLE in properties or _TIMER_NEEDLE in properties:
                break
            try:
                props_len = len(properties) if properties.isascii() else len(properties.encode())
            except UnicodeEncodeError:
                break
            size = head + len(body) + len(topic) + props_len  # a legal topic name is ASCII
            if props_len > MAX_PROPERTIES_LENGTH or size > max_size:
                break
            # taken: from here on nothing refuses it
            qid = rng.randrange(topic_state[0])
            entries.append((topic, body, properties, qid, 0, topic_state[1], born_ms, 0))
            sizes.append(size)
            keys.append(f"{topic}-{qid}")
            taken.append(message_id)
            kinds.append(message_type(properties, False, None) if "__S" in properties else "")
        if not entries:
            return []
        assert encode_group is not None
        try:
            buf = encode_group(entries, born, store_host)
        except (TypeError, ValueError, OverflowError):  # not expected after the checks; nothing placed
            return []  # the handler serves them one by one
        _ids, qoffs = p.store.put_group_nowait(buf, sizes, keys, store_host)
        answers = [ok_answer(taken[k], queue_offset) for k, queue_offset in enumerate(qoffs)]
        self._record(entries, sizes, kinds)
        self.taken += len(answers)
        return answers

    def _record(self, entries: list[GroupEntry], sizes: list[int], kinds: list[str]) -> None:
        """The stats of the stored calls, each a send of one message: the NORMAL ones by run of
        one topic (`record_single_puts`, the counters `record_put` per call would give)."""
        stats = self.producer.send.stats
        run: list[int] = []
        topic = ""
        for k, entry in enumerate(entries):
            kind = kinds[k]
            if kind and kind != NORMAL:
                stats.record_put(entry[0], 1, sizes[k], kind)
                continue
            if entry[0] != topic and run:
                stats.record_single_puts(topic, run)
                run = []
            topic = entry[0]
            run.append(sizes[k])
        if run:
            stats.record_single_puts(topic, run)
