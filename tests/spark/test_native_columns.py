"""The compiled column decoder (`spark/codec/_native/_columns.pyx`) pinned to its reference.

`speedups.decode_record_columns` and `columns_ref.decode_record_columns` get the same records
and must give the same buffers (or both `None`, or the same exception), `first_crc_mismatch`
the same index, and `first_invalid_record` the same record and cause: random IPv4 records with
unicode, separator-laden and repeated properties, IPv6 hosts and compressed bodies (both
decline), properties and topics that are not UTF-8 (both decline), and damaged input: flipped
bytes, truncated buffers, positions that point nowhere. Then the Arrow batch built over the
compiled buffers must hold the rows of the per-record decoder (`decode_batch_py`).

With `ROCKETLITE_NATIVE=0` the reference is compared with itself; without the compiled module the
comparison is skipped.
"""

from __future__ import annotations

import zlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketlite import native
from rocketlite.protocol.formats.record import MessageInner, encode_record
from rocketlite.protocol.message import HostAddress, MessageSysFlag
from rocketlite.spark.codec import columns_ref

np = pytest.importorskip("numpy")

REFERENCE = columns_ref.decode_record_columns
REFERENCE_CRC = columns_ref.first_crc_mismatch
if native.REFERENCE_ONLY:
    NATIVE: Any = REFERENCE
    NATIVE_CRC: Any = REFERENCE_CRC
    NATIVE_STARTS: Any = columns_ref.record_starts
    NATIVE_INVALID: Any = columns_ref.first_invalid_record
else:
    _compiled = pytest.importorskip(
        "rocketlite.spark.codec._native._columns", reason="the compiled data plane is not built"
    )
    NATIVE, NATIVE_CRC = _compiled.decode_record_columns, _compiled.first_crc_mismatch
    NATIVE_STARTS = _compiled.record_starts
    NATIVE_INVALID = _compiled.first_invalid_record

V4 = HostAddress.parse("10.1.2.3:10911")
V6 = HostAddress.parse("[fe80::1]:10911")
TEXT = st.text(alphabet=st.sampled_from("aZ09 _-=ü✓\x01\x02"), max_size=12)
NAMES = st.sampled_from(["UNIQ_KEY", "KEYS", "TAGS", "WAIT", "LONGER_THAN_8_BYTES", "a", "ünï", ""])
BAD_UTF8 = [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\x80"]


@st.composite
def properties(draw: st.DrawFn) -> str:
    items = draw(st.lists(st.tuples(st.one_of(NAMES, TEXT), TEXT), max_size=8))
    text = "\x02".join(f"{k}\x01{v}" for k, v in items)
    return text + draw(st.sampled_from(["", "\x02", "\x02\x02", "\x01"]))


@st.composite
def record_specs(draw: st.DrawFn) -> dict[str, Any]:
    shape = draw(st.sampled_from(["v4"] * 8 + ["v6", "zip", "bad_props", "bad_topic"]))
    return {
        "shape": shape,
        "props": draw(properties()),
        "body": draw(st.binary(max_size=300)),
        "topic": draw(st.sampled_from(["T", "SparkBench", "tópico", "%RETRY%g"])),
        "queue": draw(st.integers(-(2**31), 2**31 - 1)),
        "offset": draw(st.integers(0, 2**62)),
        "born": draw(st.integers(0, 2**42)),  # up to the year 2109: Python datetimes end at 9999
        "reconsume": draw(st.integers(0, 16)),
        "bad": draw(st.sampled_from(BAD_UTF8)),
    }


def build(spec: dict[str, Any], at: int) -> bytes:
    shape = spec["shape"]
    flag, body = 0, spec["body"]
    born = store = V4
    if shape == "v6":
        flag, born, store = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG, V6, V6
    elif shape == "zip":
        flag, body = MessageSysFlag.COMPRESSED_FLAG, zlib.compress(body)
    props = spec["props"] + ("\x02X\x01" + "y" * len(spec["bad"]) if shape == "bad_props" else "")
    msg = MessageInner(
        spec["topic"], body, born, store, queue_id=spec["queue"], sys_flag=flag,
        born_timestamp=spec["born"], store_timestamp=spec["born"] + 7, reconsume_times=spec["reconsume"],
        properties_string=props,
        queue_offset=spec["offset"], commit_log_offset=at,
    )  # fmt: skip
    raw = bytearray(encode_record(msg))
    if shape == "bad_props":
        raw[len(raw) - len(spec["bad"]) :] = spec["bad"]
    elif shape == "bad_topic":
        at_topic = 88 + len(body) + 1
        raw[at_topic] = 0xFF
    return bytes(raw)


def log_of(specs: list[dict[str, Any]]) -> tuple[bytes, list[int]]:
    out = bytearray()
    starts = []
    for spec in specs:
        starts.append(len(out))
        out += build(spec, len(out))
    return bytes(out), starts


def outcome(fn: Any, buf: Any, positions: Any) -> tuple[Any, ...]:
    try:
        result = fn(buf, positions)
    except Exception as exc:
        return ("raised", type(exc), str(exc))
    if result is None:
        return ("none",)
    return ("ok", result.rows, [None if v is None else bytes(v) for v in result[1:]])


FLIPS = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4)
CUTS = st.integers(0, 10_000)
EXTRA_POSITIONS = st.lists(st.integers(-5, 3000), max_size=3)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.lists(record_specs(), min_size=1, max_size=12))
def test_compiled_columns_match_the_reference(specs: list[dict[str, Any]]) -> None:
    buf, starts = log_of(specs)
    positions = np.array(starts, dtype=np.int64)
    expected = outcome(REFERENCE, buf, positions)
    assert outcome(NATIVE, buf, positions) == expected
    if all(s["shape"] == "v4" for s in specs):
        assert expected[0] == "ok"


@SETTINGS
@given(
    st.lists(record_specs(), min_size=1, max_size=6),
    FLIPS,
    CUTS,
    EXTRA_POSITIONS,
)
def test_damaged_input_gets_the_same_answer(
    specs: list[dict[str, Any]], flips: list[tuple[int, int]], cut: int, extra: list[int]
) -> None:
    buf, starts = log_of(specs)
    damaged = damage(buf, flips, cut)
    positions = np.array(starts + extra, dtype=np.int64)
    assert outcome(NATIVE, bytes(damaged), positions) == outcome(REFERENCE, bytes(damaged), positions)
    assert crc_outcome(NATIVE_CRC, bytes(damaged), positions) == crc_outcome(
        REFERENCE_CRC, bytes(damaged), positions
    )


def damage(buf: bytes, flips: list[tuple[int, int]], cut: int) -> bytearray:
    """`buf` with bytes overwritten at `flips` (positions wrap) and up to 399 bytes cut off."""
    damaged = bytearray(buf)
    for where, value in flips:
        damaged[where % len(damaged)] = value
    return damaged[: max(len(damaged) - cut % 400, 0)]


def crc_outcome(fn: Any, *args: Any) -> tuple[Any, ...]:
    try:
        return ("ok", fn(*args))
    except Exception as exc:
        return ("raised", type(exc), str(exc))


@SETTINGS
@given(st.lists(record_specs(), min_size=1, max_size=8), st.lists(st.integers(0, 10_000), max_size=3))
def test_crc_check_finds_the_same_first_mismatch(specs: list[dict[str, Any]], flips: list[int]) -> None:
    buf, starts = log_of(specs)
    damaged = bytearray(buf)
    for where in flips:  # bodies, CRC fields or anything else: some records stay sound
        damaged[where % len(damaged)] ^= 0x5A
    positions = np.array(starts, dtype=np.int64)
    assert crc_outcome(NATIVE_CRC, buf, positions) == ("ok", len(starts))
    assert crc_outcome(NATIVE_CRC, bytes(damaged), positions) == crc_outcome(
        REFERENCE_CRC, bytes(damaged), positions
    )


def test_odd_arguments() -> None:
    buf, starts = log_of([{"shape": "v4", "props": "TAGS\x01a", "body": b"x", "topic": "T", "queue": 1,
                           "offset": 2, "born": 3, "reconsume": 0, "bad": b""}])  # fmt: skip
    for positions in (b"\x00" * 7, np.array([], dtype=np.int64), np.array(starts, dtype=np.int64).tobytes()):
        assert outcome(NATIVE, buf, positions) == outcome(REFERENCE, buf, positions)
        assert crc_outcome(NATIVE_CRC, buf, positions) == crc_outcome(REFERENCE_CRC, buf, positions)
    with pytest.raises(TypeError):
        NATIVE(buf, [0])


@SETTINGS
@given(st.lists(record_specs(), min_size=1, max_size=10))
def test_arrow_batches_over_the_columns_hold_the_reference_rows(specs: list[dict[str, Any]]) -> None:
    pytest.importorskip("pyarrow")
    from rocketlite.spark.records import decode_batch, decode_batch_py  # noqa: PLC0415

    buf, starts = log_of(specs)
    positions = np.array(starts, dtype=np.int64)
    assert decode_batch(buf, positions, "b").to_pylist() == decode_batch_py(buf, positions, "b").to_pylist()


@SETTINGS
@given(
    st.lists(record_specs(), min_size=0, max_size=8),
    st.sampled_from(
        [b"", bytes(20), b"\x00\x00\x00\x40\xcb\xd4\x31\x94" + bytes(56), b"\x12" * 9, b"\x00\x00"]
    ),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3),
    st.integers(0, 3000),
    st.integers(0, 5000),
    st.integers(0, 12),
)
def test_record_starts_hop_the_same_way(
    specs: list[dict[str, Any]], tail: bytes, flips: list[tuple[int, int]], start: int, limit: int, count: int
) -> None:
    buf, _ = log_of(specs)
    data = bytearray(buf + tail)
    for where, value in flips:
        if data:
            data[where % len(data)] = value
    expected = crc_outcome(columns_ref.record_starts, bytes(data), start % (len(data) + 1), limit, count)
    got = crc_outcome(NATIVE_STARTS, bytes(data), start % (len(data) + 1), limit, count)
    if got[0] == "ok":
        got = ("ok", got[1]._replace(positions=bytes(got[1].positions)))
        expected = ("ok", expected[1]._replace(positions=bytes(expected[1].positions)))
    assert got == expected


@SETTINGS
@given(
    st.lists(record_specs(), min_size=1, max_size=8),
    FLIPS,
    CUTS,
    EXTRA_POSITIONS,
    st.sampled_from([0, 1, -1, 1 << 40]),
    st.booleans(),
)
def test_structure_check_names_the_same_record_and_cause(
    specs: list[dict[str, Any]],
    flips: list[tuple[int, int]],
    cut: int,
    extra: list[int],
    shift: int,
    check_base: bool,
) -> None:
    """Flipped bytes land in lengths, magic codes, PHYSICALOFFSETs and SYSFLAGs; cuts tear the
    last record; extra positions point into records or past the data."""
    buf, starts = log_of(specs)
    damaged = damage(buf, flips, cut)
    positions = np.array(starts + extra, dtype=np.int64).tobytes()
    expected = crc_outcome(columns_ref.first_invalid_record, bytes(damaged), positions, shift, check_base)
    assert crc_outcome(NATIVE_INVALID, bytes(damaged), positions, shift, check_base) == expected
    if (
        not flips
        and not cut
        and not extra
        and check_base
        and shift == 0
        and all(s["shape"] != "v6" for s in specs)
    ):
        assert expected == ("ok", (len(starts), columns_ref.Invalid.NONE))


@SETTINGS
@given(
    st.lists(record_specs(), min_size=1, max_size=8),
    FLIPS,
    CUTS,
    st.booleans(),
)
def test_scan_checks_compiled_and_numpy_agree(
    specs: list[dict[str, Any]], flips: list[tuple[int, int]], cut: int, verify_crc: bool
) -> None:
    """`spark/scan.validate_positions` (the compiled structure and CRC checks, when built) names the
    same record and reason as its numpy path, CRC mismatches included."""
    from rocketlite.spark.scan import _validate_numpy, validate_positions  # noqa: PLC0415

    buf, starts = log_of(specs)
    damaged = damage(buf, flips, cut)
    positions = np.array(starts, dtype=np.int64)
    expected = crc_outcome(_validate_numpy, bytes(damaged), positions, 0, verify_crc)
    assert crc_outcome(validate_positions, bytes(damaged), positions, 0, verify_crc) == expected
