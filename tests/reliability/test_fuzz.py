"""Hostile input: fuzz the decoders (bounded, hypothesis) and a live broker over raw sockets.

Decoder properties (each a bounded hypothesis run, about 10 s for the module):

- `FrameDecoder.feed` over arbitrary bytes, split at arbitrary points: only `ProtocolError` may
  escape; feeding the same bytes whole or in pieces yields the same commands (or both fail); the
  buffer never holds more than was fed, and never reaches `max_frame_length`; a frame whose length
  field exceeds the limit is refused as soon as those four bytes arrive (nothing is allocated for
  it: `buffered` stays at the four bytes).
- `decode_json_header`, `decode_rocketmq_header`, `decode_batch`: `ProtocolError` only.
- `decode_records`: never raises (it stops at the first bad record, like the Java client).
- The compiled decoders against the references (each family chooser's `CHOSEN` and `REFERENCE`)
  on the same damaged input: frames, batch bodies, commit-log scans and recovery checks give the
  same answer or the same `ProtocolError`, and never anything else.
- `CustomHeader.from_ext` of every header class, over random ext maps built from the class's own
  wire names and random keys/values: `HeaderFieldError` (a `ProtocolError`) only.

Live broker (`tests.support.broker_harness.broker_under_test`, same event loop, raw sockets): random
bytes and mutated valid frames never kill it and never break other connections; a slowloris
partial frame does not block anyone else; N idle connections (``ROCKETLITE_IDLE_CONNS``, default
200 here to keep the suite fast; `bench/fuzz.py --idle 1000` holds 1,000) are held while a
producer keeps sending, and the throughput with them is compared with the throughput without.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import random
import struct
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.formats import speedups as formats_speedups
from rocketlite.protocol.formats.batch import BatchEntry, BatchTarget, decode_batch, encode_batch
from rocketlite.protocol.formats.record import DispatchRequest, MessageInner, encode_record
from rocketlite.protocol.message import HostAddress
from rocketlite.protocol.wire import speedups as wire_speedups
from rocketlite.protocol.wire.command import RemotingCommand, decode_rocketmq_header
from rocketlite.protocol.wire.custom_header import CustomHeader, HeaderFieldError
from rocketlite.protocol.wire.frame import FrameDecoder
from rocketlite.protocol.wire.headers import SendMessageRequestHeader
from rocketlite.protocol.wire.speedups import decode_json_header
from rocketlite.store.codec import speedups as store_speedups
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test
from tests.support.fuzzing import HEADER_CLASSES, SAMPLES, hold_idle_connections, mutate

FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
SMALL_LIMIT = 4096
IDLE_CONNS = int(os.environ.get("ROCKETLITE_IDLE_CONNS", "200"))


def command_key(cmd: RemotingCommand) -> tuple[Any, ...]:
    return (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark,
            sorted(cmd.ext_fields.items()), cmd.body)  # fmt: skip


def feed_all(decoder: FrameDecoder, chunks: list[bytes]) -> list[RemotingCommand] | None:
    """Feed the chunks; the commands, or None once a ProtocolError was raised. Checks the buffer bound."""
    out: list[RemotingCommand] = []
    fed = 0
    for chunk in chunks:
        fed += len(chunk)
        try:
            out += decoder.feed(chunk)
        except ProtocolError:
            return None
        assert decoder.buffered <= fed
        assert decoder.buffered < decoder.max_frame_length
    return out


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


# -- frame decoder ----------------------------------------------------------------------------
@FUZZ
@given(st.binary(max_size=2048), st.lists(st.integers(min_value=0), max_size=12))
def test_frame_decoder_random_bytes_any_split(data: bytes, cuts: list[int]) -> None:
    for limit in (SMALL_LIMIT, 16 * 1024 * 1024):
        whole = feed_all(FrameDecoder(limit), [data])
        pieces = feed_all(FrameDecoder(limit), split(data, cuts))
        if whole is None or pieces is None:
            # The whole feed stops at the first bad frame; a split feed may have returned the good
            # frames before it. Either way, both must agree that the stream is bad.
            assert whole is None and pieces is None
        else:
            assert [command_key(c) for c in whole] == [command_key(c) for c in pieces]


@FUZZ
@given(st.integers(min_value=0, max_value=len(SAMPLES) - 1), st.randoms(use_true_random=False),
       st.lists(st.integers(min_value=0), max_size=8))  # fmt: skip
def test_frame_decoder_mutated_valid_frames(index: int, rng: random.Random, cuts: list[int]) -> None:
    data = mutate(rng, SAMPLES[index] + SAMPLES[(index + 1) % len(SAMPLES)])
    whole = feed_all(FrameDecoder(SMALL_LIMIT), [data])
    pieces = feed_all(FrameDecoder(SMALL_LIMIT), split(data, cuts))
    assert (whole is None) == (pieces is None)


@FUZZ
@given(st.integers(min_value=SMALL_LIMIT - 3, max_value=0x7FFF_FFFF), st.binary(max_size=64))
def test_huge_length_refused_before_allocation(length: int, tail: bytes) -> None:
    decoder = FrameDecoder(SMALL_LIMIT)
    prefix = struct.pack(">i", length)
    for byte in prefix[:3]:
        assert decoder.feed(bytes([byte])) == []
    try:
        decoder.feed(prefix[3:] + tail)
    except ProtocolError:
        pass
    else:
        raise AssertionError(f"length {length} over the {SMALL_LIMIT}-byte limit was accepted")
    # Nothing is allocated for the claimed length: at most the bytes of this one feed are held
    # (the decoder appends a feed before checking the prefix it completes), and the stream is dead.
    assert decoder.buffered <= len(prefix) + len(tail)
    try:
        decoder.feed(b"more")
    except ProtocolError:
        pass
    else:
        raise AssertionError("a failed stream accepted more input")


def test_default_limit_refuses_16_mib_plus_one_at_once() -> None:
    decoder = FrameDecoder()
    try:
        decoder.feed(struct.pack(">i", 16 * 1024 * 1024 - 3))  # 16 MiB + 1 on the wire
    except ProtocolError:
        assert decoder.buffered <= 4
    else:
        raise AssertionError("16 MiB + 1 frame accepted")
    ok = FrameDecoder()
    assert ok.feed(struct.pack(">iI", 16 * 1024 * 1024 - 4, 0)) == []  # exactly 16 MiB: waits for data
    assert ok.buffered == 8


# -- header and body decoders -----------------------------------------------------------------
def _json_containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    _json_containers,
    max_leaves=12,
)
HEADER_KEYS = st.sampled_from(["code", "language", "version", "opaque", "flag", "remark", "extFields",
                               "serializeTypeCurrentRPC"])  # fmt: skip


@FUZZ
@given(st.one_of(
    st.binary(max_size=512),
    st.dictionaries(HEADER_KEYS, JSON_VALUES, max_size=7).map(lambda d: json.dumps(d).encode()),
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
))  # fmt: skip
def test_decode_json_header_only_protocol_error(data: bytes) -> None:
    try:
        cmd = decode_json_header(data)
    except ProtocolError:
        return
    assert isinstance(cmd.code, int) and isinstance(cmd.ext_fields, dict)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in cmd.ext_fields.items())


@FUZZ
@given(st.one_of(st.binary(max_size=512),
                 st.builds(lambda i, r: mutate(r, SAMPLES[i][8:]), st.integers(0, len(SAMPLES) - 1),
                           st.randoms(use_true_random=False))))  # fmt: skip
def test_decode_rocketmq_header_only_protocol_error(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_rocketmq_header(data)


def _valid_batch() -> bytes:
    return encode_batch([BatchEntry(0, b"x" * 10, "KEYS\x01a"), BatchEntry(3, b"", "TAGS\x01b\x02KEYS\x01c")])


@FUZZ
@given(st.one_of(st.binary(max_size=512),
                 st.randoms(use_true_random=False).map(lambda r: mutate(r, _valid_batch()))))  # fmt: skip
def test_decode_batch_only_protocol_error(data: bytes) -> None:
    try:
        entries = decode_batch(data)
    except ProtocolError:
        return
    assert sum(22 + len(e.body) + len(e.properties.encode()) for e in entries) == len(data)


def _valid_records() -> bytes:
    host = HostAddress(bytes([127, 0, 0, 1]), 10911)
    msgs = [MessageInner(topic="T", body=b"hello" * i, born_host=host, store_host=host, queue_id=1,
                         properties_string=f"KEYS\x01k{i}") for i in range(3)]  # fmt: skip
    return b"".join(encode_record(m) for m in msgs)


@FUZZ
@given(st.one_of(st.binary(max_size=1024),
                 st.randoms(use_true_random=False).map(lambda r: mutate(r, _valid_records()))))  # fmt: skip
def test_decode_records_never_raises(data: bytes) -> None:
    for codecs in FORMATS:
        records = codecs.decode_records(data)
        assert sum(r.total_size for r in records) <= len(data)


# -- the compiled decoders: every input the chosen (compiled) and the reference set both take ----
WIRE = (wire_speedups.CHOSEN, wire_speedups.REFERENCE)
FORMATS = (formats_speedups.CHOSEN, formats_speedups.REFERENCE)
STORE = (store_speedups.CHOSEN, store_speedups.REFERENCE)
HOST = HostAddress(bytes([127, 0, 0, 1]), 10911)


def _outcome(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """What a decoder did: its result, or the type and message of the error it raised."""
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as exc:
        return ("raised", type(exc), str(exc))


@FUZZ
@given(st.one_of(st.binary(max_size=512),
                 st.randoms(use_true_random=False).map(lambda r: mutate(r, _valid_batch()))))  # fmt: skip
def test_encode_batch_records_same_refusals_in_both(data: bytes) -> None:
    args = (data, BatchTarget("WAIT\x01true", "C", "T", HOST, HOST, 0, 0, 1, 0, 4 << 20))
    keys = []
    for codecs in FORMATS:
        outcome = _outcome(codecs.encode_batch_records, *args)
        assert outcome[0] == "ok" or issubclass(outcome[1], ProtocolError), outcome
        keys.append(outcome)
    assert keys[0] == keys[-1]


@FUZZ
@given(st.one_of(st.binary(max_size=1024),
                 st.randoms(use_true_random=False).map(lambda r: mutate(r, _valid_records()))),
       st.booleans())  # fmt: skip
def test_scans_agree_and_never_raise_on_damaged_logs(data: bytes, verify_crc: bool) -> None:
    buf = memoryview(data + bytes(64))
    seen = []
    for codecs in STORE:
        out: list[DispatchRequest] = []
        end, stop = codecs.scan_messages(buf, 0, len(buf), out, verify_crc=verify_crc)
        checked = codecs.check_records(buf, 0, 0, verify_crc=verify_crc)
        seen.append((end, stop and stop.kind, len(out), checked[0], checked[1], checked[2].kind))
    assert seen[0] == seen[-1]


@FUZZ
@given(st.one_of(st.binary(max_size=512),
                 st.randoms(use_true_random=False).map(lambda r: mutate(r, _valid_batch())).map(
                     lambda b: struct.pack(">I", len(b) + 4) + b)))  # fmt: skip
def test_decode_frames_same_answers_in_both(data: bytes) -> None:
    outcomes = [_outcome(c.decode_frames, data, SMALL_LIMIT) for c in WIRE]
    for outcome in outcomes:
        assert outcome[0] == "ok" or issubclass(outcome[1], ProtocolError), outcome
    keys = [o if o[0] == "raised" else ("ok", [command_key(c) for c in o[1][0]], o[1][1]) for o in outcomes]
    assert keys[0] == keys[-1]


EXT_TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "0", "-1", "1", "true", "false", "null", "9223372036854775808", "2147483648",
                     "-9223372036854775809", " 1", "1.5", "0x10", "1e3", "NaN", "٣", "1_000"]),
)  # fmt: skip


@st.composite
def header_and_ext(draw: st.DrawFn) -> tuple[type[CustomHeader], dict[str, str]]:
    cls = draw(st.sampled_from(HEADER_CLASSES))
    wires = [spec.wire for spec in cls.field_specs()]
    keys = st.sampled_from(wires) | st.text(max_size=8) if wires else st.text(max_size=8)
    return cls, draw(st.dictionaries(keys, EXT_TEXT, max_size=len(wires) + 3))


@FUZZ
@given(header_and_ext())
def test_header_from_ext_only_header_field_errors(case: tuple[type[CustomHeader], dict[str, str]]) -> None:
    cls, ext = case
    try:
        header = cls.from_ext(ext)
    except HeaderFieldError:
        return
    header.to_ext()  # whatever was accepted can be encoded back


@FUZZ
@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n"])
                       | st.text(max_size=4), EXT_TEXT, max_size=16),
       st.sampled_from([RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2,
                        RequestCode.SEND_BATCH_MESSAGE]))  # fmt: skip
def test_send_header_v2_from_ext(ext: dict[str, str], code: int) -> None:
    with contextlib.suppress(HeaderFieldError):
        SendMessageRequestHeader.from_ext(ext, code)


# -- live broker ------------------------------------------------------------------------------
class _Collect(logging.Handler):
    """Records with tracebacks from rocketlite loggers: an exception that reached a handler's edge."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)


async def _healthy(b: BrokerUnderTest) -> None:
    r = await b.call(RequestCode.GET_MAX_OFFSET, {"topic": "FuzzTopic", "queueId": "0"}, timeout=5.0)
    assert r.code == ResponseCode.SUCCESS, r.remark


async def _blast(port: int, payload: bytes, read_for: float = 0.05) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(payload)
        await writer.drain()
        try:
            async with asyncio.timeout(read_for):
                while await reader.read(65536):
                    pass
        except TimeoutError:
            pass
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()


def test_live_broker_survives_random_and_mutated_frames(tmp_path: Path) -> None:
    rng = random.Random(7)
    collect = _Collect()
    logging.getLogger("rocketlite").addHandler(collect)

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            assert (await b.send("FuzzTopic", b"seed")).code == ResponseCode.SUCCESS
            port = b.controller.port
            # A long-lived bystander connection that must keep working throughout.
            bystander = b
            for i in range(300):
                if i % 3 == 0:
                    payload = rng.randbytes(rng.randint(1, 300))
                else:
                    payload = mutate(rng, b"".join(rng.sample(SAMPLES, 2)))
                await _blast(port, payload, read_for=0.01)
                if i % 25 == 0:
                    await _healthy(bystander)
            await _healthy(bystander)
            assert (await b.send("FuzzTopic", b"after")).code == ResponseCode.SUCCESS

    try:
        run(scenario())
    finally:
        logging.getLogger("rocketlite").removeHandler(collect)
    leaked = [f"{r.name}: {r.getMessage()} {r.exc_info[1]!r}" for r in collect.records if r.exc_info]
    assert not leaked, leaked[:5]


def test_slowloris_partial_frame_does_not_block_others(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            frame = SAMPLES[0]
            slow: list[asyncio.StreamWriter] = []
            for cut in (1, 3, 4, 7, 8, 20, len(frame) - 1):
                _r, w = await asyncio.open_connection("127.0.0.1", b.controller.port)
                w.write(frame[:cut])
                await w.drain()
                slow.append(w)
            # One byte at a time on one connection while others send and query.
            r1, w1 = await asyncio.open_connection("127.0.0.1", b.controller.port)
            started = time.monotonic()
            for i, byte in enumerate(frame):
                w1.write(bytes([byte]))
                await w1.drain()
                if i % 16 == 0:
                    assert (await b.send("FuzzTopic", b"x")).code == ResponseCode.SUCCESS
            assert time.monotonic() - started < 10
            # The dribbled frame is complete now and gets its answer.
            async with asyncio.timeout(5):
                (length,) = struct.unpack(">i", await r1.readexactly(4))
                await r1.readexactly(length)
            await _healthy(b)
            for w in [*slow, w1]:
                w.close()

    run(scenario())


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    """Whether the broker closed this connection within `seconds`. A close while bytes the peer sent
    are still unread in the broker's socket arrives as a reset rather than an end of stream: both
    mean closed."""
    try:
        async with asyncio.timeout(seconds):
            return await reader.read() == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_partial_frames_time_out_but_quiet_and_busy_connections_stay(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path, server_partial_frame_timeout_millis=400) as b:
            port = b.controller.port
            frame = SAMPLES[0]
            # A peer that started a frame and went silent, and one that dribbles a byte every
            # 100 ms (never idle, never done): both are cut off.
            r_silent, w_silent = await asyncio.open_connection("127.0.0.1", port)
            r_drip, w_drip = await asyncio.open_connection("127.0.0.1", port)
            # A quiet peer with no partial frame stays, as does one that keeps completing frames.
            r_quiet, w_quiet = await asyncio.open_connection("127.0.0.1", port)
            r_busy, w_busy = await asyncio.open_connection("127.0.0.1", port)
            try:
                w_silent.write(frame[:6])
                started = time.monotonic()
                async with asyncio.timeout(10):
                    assert await r_silent.read() == b""  # closed by the broker
                    for byte in frame:
                        w_drip.write(bytes([byte]))
                        w_busy.write(frame)
                        (length,) = struct.unpack(">i", await r_busy.readexactly(4))
                        await r_busy.readexactly(length)
                        if r_drip.at_eof() or await closed_within(r_drip, 0.1):  # the dripper's pace
                            break
                    else:
                        raise AssertionError("the dribbling connection was never closed")
                assert time.monotonic() - started >= 0.4
                w_quiet.write(frame)  # still served after all that
                async with asyncio.timeout(5):
                    (length,) = struct.unpack(">i", await r_quiet.readexactly(4))
                    await r_quiet.readexactly(length)
            finally:
                for w in (w_silent, w_drip, w_quiet, w_busy):
                    w.close()

    run(scenario())


def test_idle_connections_do_not_starve_a_producer(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            baseline, with_idle, held = await hold_idle_connections(b, IDLE_CONNS, 1.0)
            print(f"\nidle={IDLE_CONNS} held={held} baseline={baseline:.0f}/s with_idle={with_idle:.0f}/s")
            assert held == IDLE_CONNS
            assert with_idle > baseline * 0.5, (baseline, with_idle)

    run(scenario())
