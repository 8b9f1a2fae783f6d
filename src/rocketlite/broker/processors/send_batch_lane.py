"""The batch lane: the SEND_BATCH_MESSAGE (320) requests of one socket read, placed in one append.

A producer that keeps batches in flight on one connection delivers several SEND_BATCH_MESSAGE
frames in one read. `Connection.data_received` offers each run of them (`RequestTable.groups`)
to `SendBatchLane`, which takes the leading requests on the common path and for those does what
`SendMessageProcessor._put` and `_put_batch` do for one, once for all of them: each body encoded
straight into its records (`speedups.encode_batch_records`, as `_put_batch`), all of them appended
under one lock with one clock read, the batches of a segment written with one `pwritev`, and one
dispatch wake-up (`StoreAPI.put_encoded_batches_nowait`, `CommitLog.append_encoded_batches`), and
their answers written by `encode_send_oks` as one bytes (one `send_raw`): the same bytes the
per-request path answers (msgId the comma-joined ids, queueOffset the first record's). No
`PutOutcome`, `PendingPut` or answer command per request. The stats are added per batch, as
`_result` adds them. It returns how many it took; the connection hands the first request it did
not take to the ordinary handler, and offers the rest again, so requests are served, stored and
answered in the order they arrived.

The common path, judged per request before anything is changed (a request not on it ends the run
and goes through the handler, which gives the answer it gives today):
- the lane as a whole: no ACL or observer table (the connection checks both, as for
  `SendGroupLane`), and `SendMessageProcessor.accepts_group`: the group codecs compiled,
  ASYNC_FLUSH and a writable store, no slave to wait on, a writable master accepting sends, not
  rejecting them;
- per request: SEND_BATCH_MESSAGE answered (not one-way), a header that decodes, a topic already
  found legal and existing and writable (nothing created), a queue id from 0 to the topic's
  queues (a negative one is drawn by the handler: the lane draws nothing, so the generator's
  sequence is the handler's), not a retry topic, and a body `encode_batch_records` takes whole
  (not empty, no delayed entry, no DELAY in the stored properties, within maxMessageSize and
  a segment).
`tests/broker/processors/test_send_batch_lane.py` pins the stored bytes (commit log and consume
queues), the answer frames and the stats against the per-request path.
"""

from __future__ import annotations

from rocketlite.broker.processors.send import SendMessageProcessor, born_host_of
from rocketlite.protocol import perm, reserved
from rocketlite.protocol.codes import CommandFlag, RequestCode, SerializeType
from rocketlite.protocol.formats.batch import BATCH_OK, BatchTarget, EncodedBatch
from rocketlite.protocol.formats.record import END_FILE_MIN_BLANK_LENGTH
from rocketlite.protocol.formats.speedups import encode_batch_records
from rocketlite.protocol.message import MessageSysFlag
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.speedups import decode_send_header_v2, encode_send_oks, read_raw_batch
from rocketlite.remoting.connection import Connection

_BATCH = int(RequestCode.SEND_BATCH_MESSAGE)
_ONEWAY = int(CommandFlag.ONEWAY)
_PERM_WRITE = perm.PERM_WRITE
_RETRY = reserved.RETRY_GROUP_TOPIC_PREFIX
_NOT_TRANSACTION = ~int(MessageSysFlag.TRANSACTION_MASK)


class SendBatchLane:
    """`Connection`'s group handler for SEND_BATCH_MESSAGE (`RequestTable.groups`)."""

    def __init__(self, processor: SendMessageProcessor) -> None:
        self.processor = processor
        self.taken = 0  # requests served by the lane (tests, diagnostics)
        self.raw_taken = 0  # of those, served straight from the read's bytes (`raw`)

    def __call__(self, conn: Connection, commands: list[RemotingCommand], start: int) -> int:
        """Serve the leading requests of `commands[start:]` that are on the common path; their
        answers go to `conn` in order, as one write. Returns how many were served (0: none)."""
        if not self.processor.accepts_group():
            return 0
        run = _Run(self.processor, conn)
        for i in range(start, len(commands)):
            cmd = commands[i]
            if cmd.code != _BATCH or cmd.flag & _ONEWAY:
                break
            try:
                h = decode_send_header_v2(cmd.ext_fields)  # as `handle_wire` (320 is a V2 code)
            except Exception:  # the handler decodes it again and answers the error
                break
            if not run.take(
                cmd.opaque, cmd.serialize_type, h.topic, h.queue_id, h.sys_flag, h.born_timestamp,
                h.properties or "", h.reconsume_times, cmd.body or b"",
            ):  # fmt: skip
                break
        placed = run.place(conn)
        self.taken += placed
        return placed

    def raw(self, conn: Connection, src: bytes, pos: int) -> int:
        """`RequestTable.raw`: serve the leading SEND_BATCH_MESSAGE frames of `src[pos:]` that are
        on the common path straight from their bytes (`read_raw_batch`: no command, no ext dict,
        each body encoded from its span of the read); returns the position after the last one
        served."""
        if not self.processor.accepts_group():
            return pos
        start = pos
        run = _Run(self.processor, conn)
        ends: list[int] = []
        max_frame = conn.decoder.max_frame_length
        with memoryview(src) as view:
            while (ask := read_raw_batch(src, pos, max_frame)) is not None:
                end, opaque, serialize_type, body_start, topic, queue_id, sys_flag, born, props, reconsume = (
                    ask
                )
                with view[body_start:end] as body:
                    if not run.take(
                        opaque, serialize_type, topic, queue_id, sys_flag, born, props, reconsume, body
                    ):
                        break
                ends.append(end)
                pos = end
        placed = run.place(conn)
        self.taken += placed
        self.raw_taken += placed
        return ends[placed - 1] if placed else start


class _Run:
    """The batches of one read taken so far, and what judging the next needs."""

    __slots__ = ("answers", "batches", "born", "cluster", "legal", "max_size", "p", "room", "table")

    def __init__(self, p: SendMessageProcessor, conn: Connection) -> None:
        self.p = p
        config = p.store.config
        self.max_size = config.max_message_size
        self.room = config.maped_file_size_commit_log - END_FILE_MIN_BLANK_LENGTH
        self.table = p.topics.table
        self.legal = p.legal_topics
        self.cluster = p.broker.broker_cluster_name
        self.born = born_host_of(conn)
        self.batches: list[tuple[EncodedBatch, str, int]] = []
        self.answers: list[tuple[int, SerializeType, int, str | None]] = []

    def take(
        self, opaque: int, serialize_type: SerializeType, topic: str, queue_id: int, sys_flag: int, born: int,
        properties: str, reconsume: int | None, body: bytes | memoryview,
    ) -> bool:  # fmt: skip
        """Judge one request and encode its records (`_put_batch`'s); False leaves it (and the
        rest) to the handler."""
        tc = self.table.get(topic) if topic in self.legal else None
        if (
            tc is None or not tc.perm & _PERM_WRITE or topic.startswith(_RETRY) or queue_id < 0
            or (queue_id >= tc.write_queue_nums and queue_id >= tc.read_queue_nums)
        ):  # fmt: skip
            return False
        target = BatchTarget(
            properties, self.cluster, topic, self.born, self.p.store_host, queue_id,
            sys_flag & _NOT_TRANSACTION, born, reconsume or 0, self.max_size,
        )  # fmt: skip
        try:
            encoded = encode_batch_records(body, target)
        except Exception:  # a torn body: the handler answers it
            return False
        if encoded.outcome != BATCH_OK or not encoded.messages or len(encoded.records) > self.room:
            return False
        self.batches.append((encoded, topic, queue_id))
        self.answers.append((opaque, serialize_type, queue_id, None))
        return True

    def place(self, conn: Connection) -> int:
        """Append the batches taken as one and answer those placed; how many were."""
        batches = self.batches
        if not batches:
            return 0
        p = self.p
        placed = p.store.put_encoded_batches_nowait(batches, p.store_host)
        if not placed:
            return 0
        record = p.stats.record_put
        ids: list[str] = []
        qoffs: list[int] = []
        for res, (_enc, topic, _queue) in zip(placed, batches, strict=False):  # as `_result`
            record(topic, res.msg_num, res.wrote_bytes)
            ids.append(res.msg_id)
            qoffs.append(res.logics_offset)
        broker = p.broker
        conn.send_raw(
            encode_send_oks(
                self.answers, ids, qoffs, broker.region_id, "true" if broker.trace_on else "false"
            )
        )
        return len(placed)
