"""The per-request half of the SEND_MESSAGE_V2 coalescing lane, as one call per read: its reference.

`broker/processors/send_group.py` (`SendGroupLane`) places the single sends of one socket read in
one append. What it needs per request, from the decoded commands of the read, is gathered here in
one call, `gather_sends`: the requests that are on the lane's common path, from `start` up to the
first that is not (the handler serves that one, and gives the answer it gives today), each judged
and turned into what the group append and the answers need:

* `entries`: (topic, body, properties to store, queue id, flag, SYSFLAG, born timestamp,
  reconsume times), the form `formats.speedups.encode_group` encodes;
* `sizes`: each record's size; `keys`: each consume queue's key, `f"{topic}-{queue id}"`;
* `answers`: (opaque, serialize type, queue id, UNIQ_KEY), what `encode_send_oks` answers with;
* `runs`: (topic, count) of consecutive requests to one topic, for the stats (`record_single_puts`).

A request is on the common path when it is a SEND_MESSAGE_V2 that is answered (not one-way), its
letter-keyed header decodes (`decode_send_header_v2`) and is not a batch; its topic is in `legal`
(the names the send processor already found legal) and in `table` (the broker's topic configs),
writable and not a retry topic (no DLQ decision); its queue id is valid, it is not a
transaction, it has no DELAY, no TIMER_ and no `__S` property (no delay level, no timer hook, a
NORMAL message for the stats: a FIFO sharding key goes through the handler), its numbers are
within Java's ranges, its properties within `max_props` UTF-8 bytes and its record within
`max_size` (`head` is the record's fixed part for the connection's address families). A queue id
below 0 is drawn from `rng` as the processor draws it; a MULTI_TAG topic sets MULTI_TAGS_FLAG.

`facts` is the caller's cache of per-topic facts, for the compiled twin (`_native/_send_lane.pyx`):
(the `TopicConfig` they were read from, writable and not retry, write queues, read queues,
MULTI_TAG, the consume-queue keys). A `TopicConfig` is frozen, so an entry holds exactly while
`table` maps its topic to that same object: no version counter to keep, a changed topic is a new
object. The reference reads `table` directly.

`gather_raw_sends`: the same, read straight from the bytes of one socket read: the leading
complete frames of `src[pos:]` are gathered as `gather_sends` gathers their commands, and with the
result come where each taken frame ends (`ends`), so the connection decodes only the rest. An
entry's body is where it starts in `src` (it ends at its frame's end): `encode_group(entries, ...,
src, ends)` copies it from the read into its record, once. The
reference decodes the frames (`decode_frames`) and gathers them; its compiled twin reads each frame
in place (`_native/_send_lane_raw.pxi`) and makes no command and no ext dict per request. A frame
that is incomplete or has a bad prefix ends the run (the connection's decoder then keeps it or
refuses it as today).

`encode_send_oks`: the SUCCESS answers of the first `len(ids)` requests gathered (those placed),
joined into one bytes (one write): `encode_send_ok` of each, in order.

The compiled twins give the same results for every input, or stop the run earlier (a header
spelled in a way the compiled reader does not take, such as `"+5"` or a number with 10 digits:
the handler then serves it with the reference decoder), which changes nothing of what is stored
or answered (`tests/protocol/test_native_send_lane.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from random import Random
from typing import Final, Protocol

from rocketlite.protocol import reserved
from rocketlite.protocol.codes import CommandFlag, RequestCode, SerializeType
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.message import MessageSysFlag, SendProperties
from rocketlite.protocol.perm import PERM_WRITE
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.frame_codec import (
    FRAME_PREFIX,
    HEADER_LENGTH_MASK,
    HEADER_WORD,
    LENGTH,
    DecodeFrames,
)
from rocketlite.protocol.wire.headers import SendMessageRequestHeader
from rocketlite.protocol.wire.send_response import EncodeSendOk

__all__ = [
    "Answer",
    "EncodeSendOks",
    "Entry",
    "GatherRawSends",
    "GatherSends",
    "Gathered",
    "RawEntry",
    "RawGathered",
    "TopicFacts",
    "TopicView",
    "encode_send_oks_over",
    "gather_raw_sends_over",
    "gather_sends_over",
]

# (topic, body, properties, queue id, flag, SYSFLAG, born timestamp, reconsume times)
Entry = tuple[str, bytes, str, int, int, int, int, int]
# the same from a read's bytes: the body is where it starts in the read (it ends with its frame)
RawEntry = tuple[str, int, str, int, int, int, int, int]
Answer = tuple[int, SerializeType, int, str | None]  # opaque, serialize type, queue id, UNIQ_KEY
# entries, sizes, keys, answers, runs of (topic, count)
Gathered = tuple[list[Entry], list[int], list[str], list[Answer], list[tuple[str, int]]]
RawGathered = tuple[list[RawEntry], list[int], list[str], list[Answer], list[tuple[str, int]]]
# the TopicConfig read, writable (and not retry), write queues, read queues, MULTI_TAG, and the
# consume-queue keys by queue id (None for a topic with very many queues)
TopicFacts = tuple["TopicView", bool, int, int, bool, tuple[str, ...] | None]


class TopicView(Protocol):
    """What the lane reads of a topic's config (`bodies.route.TopicConfig`, a layer above)."""

    @property
    def perm(self) -> int: ...
    @property
    def write_queue_nums(self) -> int: ...
    @property
    def read_queue_nums(self) -> int: ...
    @property
    def topic_filter_type(self) -> str: ...


# (commands, start, table, legal, facts, cluster, head, max_size, max_props, rng, send_properties)
GatherSends = Callable[
    [
        list[RemotingCommand], int, Mapping[str, TopicView], set[str], dict[str, TopicFacts], str, int, int,
        int, Random, Callable[[str, str], SendProperties],
    ],
    Gathered,
]  # fmt: skip
# (src, pos, max frame length, table, legal, facts, cluster, head, max_size, max_props, rng,
# send_properties) -> (gathered, where each taken frame ends)
GatherRawSends = Callable[
    [
        bytes, int, int, Mapping[str, TopicView], set[str], dict[str, TopicFacts], str, int, int, int, Random,
        Callable[[str, str], SendProperties],
    ],
    tuple[RawGathered, list[int]],
]  # fmt: skip
EncodeSendOks = Callable[[list[Answer], list[str], list[int], str, str], bytes]

_V2: Final = int(RequestCode.SEND_MESSAGE_V2)
_NOT_ANSWERED: Final = int(CommandFlag.RESPONSE) | int(CommandFlag.ONEWAY)
_TRANSACTION_MASK: Final = int(MessageSysFlag.TRANSACTION_MASK)
_MULTI_TAGS_FLAG: Final = int(MessageSysFlag.MULTI_TAGS_FLAG)
_RETRY_PREFIX: Final = reserved.RETRY_GROUP_TOPIC_PREFIX
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
# Properties that need per-message Python: the store's delay needle, every timer property, and
# `__S` (a sharding key or a start-deliver time: not a NORMAL message in the stats).
_NEEDLES: Final = ("DELAY\x01", "TIMER_", "__S")


def gather_sends_over(
    decode_send_header_v2: Callable[[dict[str, str] | None], SendMessageRequestHeader],
) -> GatherSends:
    """`gather_sends` with headers read by `decode_send_header_v2`."""

    def gather_sends(
        commands: list[RemotingCommand],
        start: int,
        table: Mapping[str, TopicView],
        legal: set[str],
        facts: dict[str, TopicFacts],
        cluster: str,
        head: int,
        max_size: int,
        max_props: int,
        rng: Random,
        send_properties: Callable[[str, str], SendProperties],
    ) -> Gathered:
        del facts  # the compiled twin's cache; the reference reads `table`
        entries: list[Entry] = []
        sizes: list[int] = []
        keys: list[str] = []
        answers: list[Answer] = []
        runs: list[tuple[str, int]] = []
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
            tc = table.get(topic)
            qid = h.queue_id
            if tc is None:
                break
            wq, rq = tc.write_queue_nums, tc.read_queue_nums
            if not tc.perm & PERM_WRITE or (qid >= wq and qid >= rq):
                break
            if not (
                _INT_MIN <= h.flag <= _INT_MAX and _INT_MIN <= sys_flag <= _INT_MAX
                and _INT_MIN <= reconsume <= _INT_MAX and _LONG_MIN <= h.born_timestamp <= _LONG_MAX
            ):  # fmt: skip
                break
            raw = h.properties or ""
            if _NEEDLES[0] in raw or _NEEDLES[1] in raw:
                break
            properties, _code, uniq_key, _keys, delay = send_properties(raw, cluster)
            if delay is not None or any(needle in properties for needle in _NEEDLES):
                break
            try:
                props_len = len(properties.encode())
            except UnicodeEncodeError:
                break
            body = req.body or b""
            if type(body) is not bytes:
                break
            size = head + len(body) + len(topic) + props_len  # a legal topic name is ASCII
            if props_len > max_props or size > max_size:
                break
            # taken: from here on nothing refuses it
            if qid < 0:
                qid = rng.randrange(max(wq, 1))
            if tc.topic_filter_type == "MULTI_TAG":
                sys_flag |= _MULTI_TAGS_FLAG
            entries.append((topic, body, properties, qid, h.flag, sys_flag, h.born_timestamp, reconsume))
            sizes.append(size)
            keys.append(f"{topic}-{qid}")
            answers.append((req.opaque, req.serialize_type, qid, uniq_key))
            if runs and runs[-1][0] == topic:
                runs[-1] = (topic, runs[-1][1] + 1)
            else:
                runs.append((topic, 1))
        return entries, sizes, keys, answers, runs

    return gather_sends


def gather_raw_sends_over(decode_frames: DecodeFrames, gather_sends: GatherSends) -> GatherRawSends:
    """`gather_raw_sends`: the complete frames of `src[pos:]` up to the first that is not a
    SEND_MESSAGE_V2, decoded by `decode_frames`, gathered by `gather_sends`."""

    def gather_raw_sends(
        src: bytes,
        pos: int,
        max_frame_length: int,
        table: Mapping[str, TopicView],
        legal: set[str],
        facts: dict[str, TopicFacts],
        cluster: str,
        head: int,
        max_size: int,
        max_props: int,
        rng: Random,
        send_properties: Callable[[str, str], SendProperties],
    ) -> tuple[RawGathered, list[int]]:
        ends: list[int] = []
        commands: list[RemotingCommand] = []
        at, size = pos, len(src)
        while size - at >= FRAME_PREFIX.size:
            length, word = FRAME_PREFIX.unpack_from(src, at)
            if not HEADER_WORD.size <= length <= max_frame_length - LENGTH.size:
                break
            end = at + LENGTH.size + length
            if word & HEADER_LENGTH_MASK > length - HEADER_WORD.size or end > size:
                break
            try:
                decoded, _ = decode_frames(src[at:end], max_frame_length)
            except ProtocolError:  # the connection's decoder refuses it
                break
            if decoded[0].code != _V2:
                break
            commands.append(decoded[0])
            ends.append(end)
            at = end
        entries, sizes, keys, answers, runs = gather_sends(
            commands, 0, table, legal, facts, cluster, head, max_size, max_props, rng, send_properties
        )
        # each body as where it starts in `src`: the body is the tail of its frame
        spans: list[RawEntry] = [
            (e[0], ends[k] - len(e[1]), e[2], e[3], e[4], e[5], e[6], e[7]) for k, e in enumerate(entries)
        ]
        return (spans, sizes, keys, answers, runs), ends[: len(entries)]

    return gather_raw_sends


def encode_send_oks_over(encode_send_ok: EncodeSendOk) -> EncodeSendOks:
    """`encode_send_oks` over a single answer's encoder."""

    def encode_send_oks(
        answers: list[Answer], ids: list[str], queue_offsets: list[int], region: str, trace_on: str
    ) -> bytes:
        return b"".join(
            encode_send_ok(opaque, serialize_type, ids[k], qid, queue_offsets[k], region, trace_on, uniq_key)
            for k, (opaque, serialize_type, qid, uniq_key) in enumerate(answers[: len(ids)])
        )

    return encode_send_oks
