"""The compiled raw gatherer (`wire/_native/_send_lane_raw.pxi`, `gather_raw_sends`) against its
reference (`send_lane.gather_raw_sends_over`: the frames decoded, then gathered).

The frames are the requests of `test_native_send_lane` (common sends mixed with every reason to
leave one to the handler, odd number spellings among them) written as a client writes them, in
JSON and ROCKETMQ headers, with a torn frame at the end; and hand-written JSON headers in shapes
the compiled reader leaves to the decoder (whitespace, a number written as text, an escaped key,
fields in any order, unknown keys). The compiled run is the reference's or a prefix of it, item
for item, and where it is shorter the frame it stopped at is one the reader leaves out.
"""

from __future__ import annotations

from random import Random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite.protocol.codes import RequestCode, SerializeType
from rocketlite.protocol.formats import speedups as formats
from rocketlite.protocol.message import HostAddress, send_properties
from rocketlite.protocol.wire import fastjson, speedups
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.frame import FRAME_PREFIX
from rocketlite.protocol.wire.send_lane import GatherRawSends, RawGathered, TopicFacts
from tests.protocol.test_native_send_lane import LEGAL, ODD_NUMBERS, TABLE, commands

pytestmark = pytest.mark.skipif(
    speedups.gather_raw_sends is speedups.REFERENCE.gather_raw_sends,
    reason="the compiled raw gatherer is not built",
)

MAX_FRAME = 16 * 1024 * 1024
COMMON = {
    "a": "pg",
    "c": "TBW102",
    "d": "4",
    "f": "0",
    "g": "1700000000000",
    "h": "0",
    "j": "0",
    "k": "false",
}
ODD_TEXT = (" true", "maybe", "00")


def gather(fn: GatherRawSends, src: bytes, pos: int, seed: int) -> tuple[RawGathered, list[int], Random]:
    rng = Random(seed)
    facts: dict[str, TopicFacts] = {}
    limits = ("DefaultCluster", 91, 2400, 32767)  # cluster, head, max size, max properties
    out, ends = fn(src, pos, MAX_FRAME, TABLE, LEGAL, facts, *limits, rng, send_properties)
    return out, ends, rng


def texts(ext: dict[str, str]) -> dict[str, str]:
    """The ext fields as a client writes them: text, UTF-8 (no lone surrogate)."""
    return {k: str(v).replace("\ud800", "?") for k, v in ext.items()}


def frame_of(cmd: RemotingCommand) -> bytes:
    cmd.ext_fields = texts(cmd.ext_fields)
    return speedups.encode_command(cmd)


def json_frame(header: str, body: bytes) -> bytes:
    raw = header.encode()
    return FRAME_PREFIX.pack(4 + len(raw) + len(body), len(raw)) + raw + body


ODD_JSON = (
    '{"code":310, "extFields":{EXT},"flag":0,"opaque":OP}',  # whitespace
    '{"code":"310","extFields":{EXT},"flag":0,"opaque":OP}',  # a number as text
    '{"extFields":{EXT},"opaque":OP,"code":310,"zz":[1]}',  # an array
    '{"code":310,"extFields":{EXT},"opaque":OP,"flag":0,"remark":7}',  # a numeric remark
)
PLAIN_JSON = (
    '{"opaque":OP,"extFields":{EXT},"code":310,"language":"GO","version":1,"x":true,"y":null}',
    '{"code":310,"extFields":{"n":"bn",EXT},"flag":0,"opaque":OP,"remark":null}',  # an unknown key
    '{"code":310,"extFields":{EXT,"b":"U"},"opaque":OP}',  # a key twice: the last one wins
)


def ext_json(ext: dict[str, str], escaped_key: bool) -> str:
    text = ",".join(f"{fastjson.quote(k)}:{fastjson.quote(v)}" for k, v in ext.items())
    return text.replace('"i":', '"\\u0069":') if escaped_key else text


@st.composite
def common(draw: st.DrawFn, op: int) -> RemotingCommand:
    """A send on the common path, in either serialization (so that runs get long)."""
    ext = dict(COMMON, b=draw(st.sampled_from(["T", "U", "M"])), e=draw(st.sampled_from(["0", "1", "-1"])))
    ext["i"] = f"UNIQ_KEY\x01K{op}\x02TAGS\x01{draw(st.sampled_from(['a', '日本']))}"
    serialize = draw(st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]))
    body = draw(st.sampled_from([b"", b"x" * 10, b"y" * 1000]))
    return RemotingCommand(
        int(RequestCode.SEND_MESSAGE_V2),
        opaque=op,
        ext_fields=ext,
        body=body or None,
        serialize_type=serialize,
    )


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[bool]]:
    """Frames and, per frame, whether it is in a shape the compiled reader may leave out."""
    frames, odd = [], []
    for op in range(1, draw(st.integers(1, 10)) + 1):
        cmd = draw(common(op)) if draw(st.booleans()) else draw(commands(op))
        shape = draw(st.sampled_from(["client"] * 6 + ["plain", "odd", "escaped"]))
        if shape == "client" or cmd.serialize_type is SerializeType.ROCKETMQ:
            frames.append(frame_of(cmd))
            odd.append(any(v in ODD_NUMBERS or v in ODD_TEXT for v in cmd.ext_fields.values()))
            continue
        ext = texts(cmd.ext_fields)
        template = draw(st.sampled_from(PLAIN_JSON if shape == "plain" else ODD_JSON))
        header = template.replace("EXT", ext_json(ext, shape == "escaped")).replace("OP", str(op))
        if cmd.code != RequestCode.SEND_MESSAGE_V2:
            header = header.replace('"code":310', f'"code":{cmd.code}')
        frames.append(json_frame(header.replace("{,", "{").replace(",}", "}"), cmd.body or b""))
        odd.append(shape != "plain" or any(v in ODD_NUMBERS or v in ODD_TEXT for v in ext.values()))
    src = b"".join(frames)
    cut = draw(st.integers(0, 40))  # a torn frame at the end: never taken
    return src + frames[-1][:cut], odd


@settings(max_examples=300, deadline=None)
@given(streams(), st.integers(0, 99))
def test_gather_raw_sends_takes_the_reference_s_run_or_a_prefix_of_it(
    stream: tuple[bytes, list[bool]], seed: int
) -> None:
    src, odd = stream
    (ref, ref_ends, ref_rng), (fast, ends, fast_rng) = (
        gather(speedups.REFERENCE.gather_raw_sends, src, 0, seed),
        gather(speedups.gather_raw_sends, src, 0, seed),
    )
    n = len(fast[0])
    assert n <= len(ref[0]) and len(ends) == n and len(ref_ends) == len(ref[0])
    assert tuple(part[:n] for part in fast[:4]) == tuple(part[:n] for part in ref[:4])
    assert ends == ref_ends[:n]
    if n == len(ref[0]):
        assert fast[4] == ref[4] and fast_rng.getstate() == ref_rng.getstate()
    else:  # a shorter run only at a frame in a shape the compiled reader leaves out
        assert odd[n]
    assert_records_from_spans(fast[0], src, ends)


HOSTS = (HostAddress(b"\x7f\x00\x00\x01", 40001), HostAddress(b"\x00" * 15 + b"\x01", 10911))


def assert_records_from_spans(entries: list[tuple[str, int, str, int, int, int, int, int]], src: bytes,
                              ends: list[int]) -> None:  # fmt: skip
    """`encode_group` over the spans of `src` writes what it writes over the bodies as bytes."""
    if formats.encode_group is None:
        return
    copied = [(e[0], src[e[1] : ends[k]], *e[2:]) for k, e in enumerate(entries)]
    for born, store in (HOSTS, HOSTS[::-1]):
        from_spans = formats.encode_group(entries, born, store, src, ends)
        assert from_spans == formats.encode_group(copied, born, store)


def test_client_frames_of_common_sends_are_taken_whole_from_any_position() -> None:
    """The differential above may pass with a reader that stops at once: here it must not, in both
    serializations, and starting mid-stream."""
    frames = []
    for i in range(12):
        ext = {
            "a": "pg", "b": "M" if i % 2 else "T", "c": "TBW102", "d": "4", "e": str(i % 4 - 1), "f": "0",
            "g": "1700000000000", "h": "0", "i": f"UNIQ_KEY\x01K{i}\x02WAIT\x01true", "j": "0", "k": "false",
            "m": "false",
        }  # fmt: skip
        serialize = SerializeType.ROCKETMQ if i % 3 == 0 else SerializeType.JSON
        frames.append(
            frame_of(RemotingCommand(int(RequestCode.SEND_MESSAGE_V2), opaque=i + 1, ext_fields=ext,
                                     body=b"b" * 100, serialize_type=serialize))
        )  # fmt: skip
    src = b"".join(frames)
    for pos in (0, len(frames[0]) + len(frames[1])):
        (ref, ref_ends, _), (fast, ends, _) = (
            gather(speedups.REFERENCE.gather_raw_sends, src, pos, 1),
            gather(speedups.gather_raw_sends, src, pos, 1),
        )
        assert fast == ref and ends == ref_ends and ends[-1] == len(src)
        assert_records_from_spans(fast[0], src, ends)
        assert [src[e[1] : ends[k]] for k, e in enumerate(fast[0])] == [b"b" * 100] * len(ends)
        assert len(fast[0]) == (12 if pos == 0 else 10)
        assert [a[1] for a in fast[3]][:3] == (
            [SerializeType.ROCKETMQ, SerializeType.JSON, SerializeType.JSON] if pos == 0
            else [SerializeType.JSON, SerializeType.ROCKETMQ, SerializeType.JSON]
        )  # fmt: skip


@pytest.mark.skipif(formats.encode_group is None, reason="encode_group is compiled only")
def test_encode_group_refuses_spans_outside_src_or_without_it() -> None:
    assert formats.encode_group is not None
    entry = ("T", 8, "UNIQ_KEY\x01K", 0, 0, 0, 1700000000000, 0)
    src = b"x" * 16
    with pytest.raises(ValueError):
        formats.encode_group([entry], *HOSTS, src, [17])  # past the end of src
    with pytest.raises(ValueError):
        formats.encode_group([entry], *HOSTS, src, [7])  # ends before it starts
    with pytest.raises(TypeError):
        formats.encode_group([entry], *HOSTS)  # a span without src
    with pytest.raises(TypeError):
        formats.encode_group([entry], *HOSTS, src, [])  # no end for it
    assert len(formats.encode_group([entry], *HOSTS, src, [16])) == len(
        formats.encode_group([("T", b"x" * 8, *entry[2:])], *HOSTS)
    )
