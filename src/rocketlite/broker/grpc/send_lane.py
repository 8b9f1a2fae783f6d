"""The group lane of 5.x SendMessage on the compiled HTTP/2 door: the common sends whose requests
ended in one read, placed in one append (`remoting/h2/group.py` offers them; `SendGroupLane` is
the 4.x counterpart).

For the leading calls it takes, it does what `ProducerService.send_message` ->
`SendMessageProcessor._put` does for one, once for all: their records encoded into one buffer
(`speedups.encode_group`), appended under one lock with one clock read and one dispatch wake-up
(`StoreAPI.put_group_nowait`), each answered with its `SendMessageResponse`, serialized by
`ok_answers` (`protocol/proto/send_fields.py`, compiled in `_native/_send_fields.pyx`: the bytes
`SerializeToString` gives the same message). The calls are taken by `speedups.send_run`, a
compiled loop over the run (fields read and checked, properties written, queues drawn, entries
made: no Python per call), on a narrower path than the lane's; a call it leaves goes through
`Run.take`, the per-call Python step it is pinned against, and the loop goes on after it. It
returns the answers of the calls it took; the connection hands the first call it did not take to
the guarded handler and offers the rest again, so the calls are stored in the order they
arrived, with the queue ids and offsets the per-message path gives them.

The common path, judged per call before anything is changed (a call that is not on it ends the run
and goes through the handler, which answers it as it does today):
- the lane as a whole: no plain ACL and no ACL 2.0 checks (the guard would authenticate each
  call), and what `SendMessageProcessor.accepts_group` answers, as the 4.x lanes ask it: the group
  codecs compiled, ASYNC_FLUSH and a writable store (`StoreAPI.takes_group`), no slave to wait on,
  the broker writable, a master, accepting sends, not rejecting them;
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

from rocketlite.broker.grpc.kit import born_host
from rocketlite.broker.grpc.send import digest_problem, properties_text
from rocketlite.broker.stats import NORMAL, message_type
from rocketlite.protocol import perm, reserved
from rocketlite.protocol.formats.record import END_FILE_MIN_BLANK_LENGTH, MAX_PROPERTIES_LENGTH, V4_BODY_POS
from rocketlite.protocol.formats.speedups import GroupEntry, encode_group, send_properties
from rocketlite.protocol.message import HostAddress, MessageSysFlag
from rocketlite.protocol.proto.send_fields import SendRun, fields_of
from rocketlite.protocol.proto.speedups import ok_answers, send_fields, send_run
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


_KEYS_KEPT: Final = 4096  # topics (peers) whose queue keys (born host) the lane keeps; beyond, it starts over

TopicFacts = tuple[int, int, tuple[str, ...]]  # write queues (>= 1), sys flag, consume-queue keys


class SendMessageLane:
    """`Method.group` of SendMessage: `producer`'s path, `guard`'s checks (the lane only runs when
    they have nothing to check per call)."""

    def __init__(self, producer: ProducerService, guard: GrpcGuard) -> None:
        self.producer = producer
        self.guard = guard
        self.taken = 0  # calls served by the lane (tests, diagnostics)
        self.compiled = 0  # of those, the ones `send_run` took (tests, diagnostics)
        self.queue_keys: dict[str, tuple[str, ...]] = {}  # topic -> f"{topic}-{queue id}" by id
        self.born: dict[str, HostAddress] = {}  # peer -> born host

    def _open(self) -> bool:
        """No per-call check of the guard's to run, and the processor `accepts_group`."""
        g = self.guard
        return g.validator is None and g.auth is None and self.producer.send.accepts_group()

    def __call__(self, calls: list[tuple[Any, Any]], start: int) -> list[bytes]:
        if not self._open():
            return []
        run = Run(self, calls[start][1])
        run.gather(calls, start, send_run)
        self.compiled += len(run.entries) - run.stepped
        return self._store(run)

    def _store(self, run: Run) -> list[bytes]:
        if not run.entries:
            return []
        p = self.producer.send
        assert encode_group is not None
        try:
            buf = encode_group(run.entries, run.born, p.store_host)
        except (TypeError, ValueError, OverflowError):  # not expected after the checks; nothing placed
            return []  # the handler serves them one by one
        _ids, qoffs = p.store.put_group_nowait(buf, run.sizes, run.keys, p.store_host)
        answers = ok_answers(run.ids, qoffs)
        self._record(run.entries, run.sizes, run.kinds)
        self.taken += len(answers)
        return answers

    def _record(self, entries: list[GroupEntry], sizes: list[int], kinds: dict[int, str]) -> None:
        """The stats of the stored calls, each a send of one message: the NORMAL ones by run of
        one topic (`record_single_puts`, the counters `record_put` per call would give)."""
        stats = self.producer.send.stats
        if not kinds and len({entry[0] for entry in entries}) == 1:  # (the common case: one topic)
            stats.record_single_puts(entries[0][0], sizes)
            return
        run: list[int] = []
        topic = ""
        for k, entry in enumerate(entries):
            kind = kinds.get(k, "")
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


class Run:
    """One offer of calls to the lane: its constants, the topics it checked, and what its taken
    calls give the append (`encode_group` entries, record sizes, consume-queue keys, message ids;
    `kinds`: the stats' message type of those not NORMAL, by index). `take` is the per-call
    Python step, the reference `send_run` is pinned against (`tests/broker/grpc/test_send_run.py`)."""

    def __init__(self, lane: SendMessageLane, first: Any) -> None:
        producer = lane.producer
        p = producer.send
        self.lane = lane
        self.peer_text = first.peer()
        born = lane.born.get(self.peer_text)
        if born is None:  # (`kit.peer(first).attrs["born_host"]`, kept by peer: one per connection)
            if len(lane.born) >= _KEYS_KEPT:
                lane.born.clear()
            born = lane.born[self.peer_text] = born_host(self.peer_text)
        self.born = born
        store_host = p.store_host
        self.head = (
            V4_BODY_POS + (12 if len(self.born.ip) == 16 else 0) + (12 if len(store_host.ip) == 16 else 0) + 3
        )
        config = p.store.config
        segment = config.maped_file_size_commit_log
        self.max_size = min(config.max_message_size, segment - END_FILE_MIN_BLANK_LENGTH)
        self.max_body = producer.max_body_size
        self.digest_name = producer.digest_name
        self.cluster = p.broker.broker_cluster_name
        self.rng = p.rng
        self.ready: dict[str, TopicFacts] = {}  # of the topics checked in this offer
        self.entries: list[GroupEntry] = []
        self.sizes: list[int] = []
        self.keys: list[str] = []
        self.ids: list[str] = []
        self.kinds: dict[int, str] = {}
        self.stepped = 0  # calls `take` took

    def topic_facts(self, topic: str) -> TopicFacts | None:
        """A topic the lane may write to: legal, not a retry topic, existing and writable."""
        facts = self.ready.get(topic)
        if facts is not None:
            return facts
        p = self.lane.producer.send
        if topic not in p.legal_topics or topic.startswith(_RETRY_PREFIX):
            return None
        tc = p.topics.select(topic)
        if tc is None or not tc.perm & _PERM_WRITE:
            return None
        queues = max(tc.write_queue_nums, 1)
        kept = self.lane.queue_keys
        keys = kept.get(topic)
        if keys is None or len(keys) != queues:
            if len(kept) >= _KEYS_KEPT:
                kept.clear()
            keys = kept[topic] = tuple(f"{topic}-{q}" for q in range(queues))
        multi = tc.topic_filter_type == "MULTI_TAG"
        facts = self.ready[topic] = (queues, _MULTI_TAGS_FLAG if multi else 0, keys)
        return facts

    def gather(self, calls: list[tuple[Any, Any]], start: int, runner: SendRun) -> None:
        """Take the leading calls of `calls[start:]` on the lane's path: `runner` (the compiled
        `send_run`) those it can, `take` the call it leaves, and on until one is not taken."""
        conn = next((c.conn for r, c in calls[start:] if type(r) is bytes), None)
        i, n = start, len(calls)
        while i < n:
            i = runner(
                calls, i, conn, self.ready, self.topic_facts, self.cluster, self.head, self.max_size,
                self.max_body, MAX_PROPERTIES_LENGTH, self.rng, self.entries, self.sizes, self.keys, self.ids,
            )  # fmt: skip
            if i == n or not self.take(*calls[i]):
                return
            i += 1

    def take(self, request: Any, context: Any) -> bool:
        """Take one call if it is on the lane's path (see the module docstring)."""
        if context.peer() != self.peer_text:
            return False
        # a GROUPED call's request is its bytes, read by the compiled reader; another's parsed
        fields = send_fields(request) if type(request) is bytes else fields_of(request)
        if fields is None:
            return False
        topic, body, message_id, tag, message_keys, digest_type, checksum, seconds, nanos, crc_ok = fields
        if len(body) > self.max_body:
            return False
        facts = self.topic_facts(topic)
        if facts is None:
            return False
        if not crc_ok and digest_problem(body, self.digest_name(digest_type), checksum) is not None:
            return False
        text = properties_text(message_id, tag, message_keys, topic)
        born_ms = seconds * 1000 + nanos // 1_000_000
        if not _LONG_MIN <= born_ms <= _LONG_MAX:
            return False
        properties, _code, _uniq, _keys, delay = send_properties(text, self.cluster)
        if delay is not None or _DELAY_NEEDLE in properties or _TIMER_NEEDLE in properties:
            return False
        try:
            props_len = len(properties) if properties.isascii() else len(properties.encode())
        except UnicodeEncodeError:
            return False
        size = self.head + len(body) + len(topic) + props_len  # a legal topic name is ASCII
        if props_len > MAX_PROPERTIES_LENGTH or size > self.max_size:
            return False
        # taken: from here on nothing refuses it
        qid = self.rng.randrange(facts[0])
        if "__S" in properties:
            self.kinds[len(self.entries)] = message_type(properties, False, None)
        self.entries.append((topic, body, properties, qid, 0, facts[1], born_ms, 0))
        self.sizes.append(size)
        self.keys.append(facts[2][qid] if qid < len(facts[2]) else f"{topic}-{qid}")
        self.ids.append(message_id)
        self.stepped += 1
        return True
