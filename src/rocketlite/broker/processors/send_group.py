"""The coalescing lane of SEND_MESSAGE_V2: the single sends of one socket read, placed in one append.

A producer that keeps several sends in flight on one connection (a Java client's async sends,
RocketMQ's Netty client writing one frame per request) delivers several SEND_MESSAGE_V2 frames in
one read. `Connection.data_received` offers each run of them to `SendGroupLane`, which takes the
leading requests that are on the common path, and for those does what `SendMessageProcessor._put`
does for one message, once for all of them: their records encoded into one buffer
(`speedups.encode_group`), appended under one lock with one clock read and one dispatch wake-up
(`StoreAPI.put_group_nowait`, `CommitLog.append_group`: one stamping call per segment part), and
their answer frames written by `encode_send_oks` as one bytes (one `send_raw`), the same bytes the
per-message path answers. The per-request work before the append (each header read from its ext
fields, the checks, the properties rewrite, the record sizes and consume-queue keys) is one call
too, `protocol.wire.speedups.gather_sends`, handed the topic table, the names already found legal
and a per-topic cache of the facts the checks read (`send_lane`'s docstring says why it needs no
version counter). The stats are added per run of one topic (`record_single_puts`: the same counters
as one `record_put` per message). It returns how many it took; the connection hands the first
request it did not take to the ordinary handler and offers the rest again, so requests are served,
stored and answered in the order they arrived: the queue offsets are those the per-message path
assigns.

Before the read is decoded at all, `raw` is offered its bytes, always through `chain_raw`
(`RequestTable.raw`), the one place that picks a raw lane by a frame's code (`peek_code`): a frame
of another code (a batch, a pull) never reaches this lane's checks or its reader, which had cost a
128 B batch request about 5 us when every read was offered here (docs/benchmarks.md); only a frame
whose code is not read that way is offered to every lane, and this one's reader refuses it. The leading
frames on the common path are gathered from them in place (`gather_raw_sends`: no command and no
ext dict per request) and placed the same way, each body copied once, from the read's bytes into
its record (the entries hold where each body starts in the read; `encode_group(..., src, ends)`);
the connection decodes the frames from the first it did not take on, and serves them as above (the
lane again, per command). A read of common sends is then one compiled gather, one append, one
answer write.

The common path, judged per request before anything is changed (a request that is not on it ends
the run and goes through the handler, which gives the answer it gives today):
- the lane as a whole: no ACL or auth table, no request observer (the connection checks both: those
  tables have no lane), and what `SendMessageProcessor.accepts_group` answers, which every lane asks:
  the group codecs compiled (not under ROCKETLITE_NATIVE=0), ASYNC_FLUSH and a writable store
  (`StoreAPI.takes_group`), no slave to wait on, the broker writable, a master, accepting sends, not
  rejecting them (`reject_request`);
- per request: SEND_MESSAGE_V2 answered (not one-way), a header that decodes, not a batch, a topic
  already found legal and existing and writable, a valid queue id, no transaction type, not a retry
  topic (no DLQ decision), no DELAY, no TIMER_ and no `__S` property (no delay level, no timer hook;
  a NORMAL message for the stats, not FIFO), numbers within Java's ranges, and a record within
  maxMessageSize and the properties limit.
A queue id below 0 is drawn from the processor's generator when the request is taken, as `_put`
draws it. Records are placed where the per-message path places them, the group split where a
segment rolls; if a segment cannot be created the requests not placed go through the handler
(which answers the failure). `tests/broker/processors/test_send_group.py` pins the stored bytes
(commit log and consume queues), the answer frames and the stats against the per-message path.
"""

from __future__ import annotations

from rocketlite.broker.processors.send import SendMessageProcessor, born_host_of
from rocketlite.protocol.formats.record import END_FILE_MIN_BLANK_LENGTH, MAX_PROPERTIES_LENGTH, V4_BODY_POS
from rocketlite.protocol.formats.speedups import encode_group, send_properties
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.send_lane import Gathered, RawGathered, TopicFacts
from rocketlite.protocol.wire.speedups import encode_send_oks, gather_raw_sends, gather_sends
from rocketlite.remoting.connection import Connection


class SendGroupLane:
    """`Connection`'s group handler for SEND_MESSAGE_V2 (`RequestTable.groups`)."""

    def __init__(self, processor: SendMessageProcessor) -> None:
        self.processor = processor
        self.taken = 0  # requests served by the lane (tests, diagnostics)
        self.raw_taken = 0  # of those, served straight from the read's bytes (`raw`)
        self._facts: dict[str, TopicFacts] = {}  # `gather_sends`' per-topic cache

    def _limits(self, conn: Connection) -> tuple[int, int]:
        """The fixed part of a record for `conn`'s address families, and the largest record."""
        p = self.processor
        born = born_host_of(conn)
        head = V4_BODY_POS + (12 if len(born.ip) == 16 else 0) + (12 if len(p.store_host.ip) == 16 else 0) + 3
        config = p.store.config
        # over maxMessageSize, or more than a segment holds: the per-message path refuses it
        return head, min(
            config.max_message_size, config.maped_file_size_commit_log - END_FILE_MIN_BLANK_LENGTH
        )

    def __call__(self, conn: Connection, commands: list[RemotingCommand], start: int) -> int:
        """Serve the leading requests of `commands[start:]` that are on the common path; their
        answers go to `conn` in order, as one write. Returns how many were served (0: none)."""
        if not self.processor.accepts_group():  # (the connection checked the ACL and observer tables)
            return 0
        p = self.processor
        head, max_size = self._limits(conn)
        gathered = gather_sends(
            commands, start, p.topics.table, p.legal_topics, self._facts, p.broker.broker_cluster_name,
            head, max_size, MAX_PROPERTIES_LENGTH, p.rng, send_properties,
        )  # fmt: skip
        placed = self._place(conn, gathered)
        self.taken += placed
        return placed

    def raw(self, conn: Connection, src: bytes, pos: int) -> int:
        """A `RawGroupHandler` for `chain_raw` under SEND_MESSAGE_V2 (never `RequestTable.raw` on
        its own: the chain keeps frames of other codes away): serve the leading frames of
        `src[pos:]` that are on the common path straight from their bytes; returns the position
        after the last one served."""
        if not self.processor.accepts_group():
            return pos
        p = self.processor
        head, max_size = self._limits(conn)
        gathered, ends = gather_raw_sends(
            src, pos, conn.decoder.max_frame_length, p.topics.table, p.legal_topics, self._facts,
            p.broker.broker_cluster_name, head, max_size, MAX_PROPERTIES_LENGTH, p.rng, send_properties,
        )  # fmt: skip
        placed = self._place(conn, gathered, src, ends)
        self.taken += placed
        self.raw_taken += placed
        return ends[placed - 1] if placed else pos

    def _place(
        self,
        conn: Connection,
        gathered: Gathered | RawGathered,
        src: bytes | None = None,
        ends: list[int] | None = None,
    ) -> int:
        """Append the gathered requests as one group and answer those placed; how many were.
        With `src`, the entries' bodies are spans of it (`gather_raw_sends`), copied from there
        into the records once."""
        entries, sizes, keys, answers, runs = gathered
        if not entries:
            return 0
        p = self.processor
        store_host = p.store_host
        assert encode_group is not None
        try:
            buf = encode_group(entries, born_host_of(conn), store_host, src, ends)
        except (TypeError, ValueError, OverflowError):  # not expected after the checks; nothing placed
            return 0  # the handler serves them one by one
        ids, qoffs = p.store.put_group_nowait(buf, sizes, keys, store_host)
        placed = len(ids)
        record = p.stats.record_single_puts
        at = 0
        for topic, count in runs:  # the stats per topic, of those placed
            if at >= placed:
                break
            end = min(at + count, placed)
            record(topic, sizes[at:end])
            at = end
        broker = p.broker
        conn.send_raw(
            encode_send_oks(answers, ids, qoffs, broker.region_id, "true" if broker.trace_on else "false")
        )
        return placed
