"""The compiled HTTP/2 core (`remoting/h2/_native/_h2.pyx`, libnghttp2's server session) fed bytes
directly, no socket: a gRPC request's events, the answer's framing, and the fuzz target of its
input path (random bytes and random frames never crash it; a protocol error queues GOAWAY and the
session wants to close).

The requests are built here from the frame layout of RFC 9113 and HPACK's plainest form (literal
fields, no Huffman: RFC 7541 6.2.2), so nothing but the session under test speaks HTTP/2.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

try:
    from rocketlite.remoting.h2._native import _h2
except ImportError as exc:  # the extension needs libnghttp2's headers at build time
    if os.environ.get("CI", "").lower() == "true":
        raise
    pytest.skip(f"the compiled HTTP/2 core is not built: {exc}", allow_module_level=True)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream_id) + payload


def literal(name: bytes, value: bytes) -> bytes:
    """One header field, literal without indexing, new name, no Huffman (lengths < 127)."""
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def request_headers(path: bytes = b"/pkg.Svc/Call", *extra: tuple[bytes, bytes]) -> bytes:
    fields = [
        (b":method", b"POST"), (b":scheme", b"http"), (b":path", path), (b":authority", b"broker"),
        (b"content-type", b"application/grpc"), (b"te", b"trailers"), *extra,
    ]  # fmt: skip
    return b"".join(literal(n, v) for n, v in fields)


def grpc_message(payload: bytes, compressed: int = 0) -> bytes:
    return bytes([compressed]) + struct.pack(">I", len(payload)) + payload


def frames(out: bytes) -> list[tuple[int, int, int, bytes]]:
    """(type, flags, stream id, payload) of every frame the session wrote."""
    found = []
    while len(out) >= 9:
        length = int.from_bytes(out[:3], "big")
        kind, flags = out[3], out[4]
        stream_id = int.from_bytes(out[5:9], "big") & 0x7FFFFFFF
        found.append((kind, flags, stream_id, out[9 : 9 + length]))
        out = out[9 + length :]
    assert out == b"", "a partial frame at the end"
    return found


def opened() -> _h2.H2Session:
    session = _h2.H2Session(max_message=1024)
    assert frames(session.send())[0][0] == SETTINGS  # the server's SETTINGS first
    assert session.receive(PREFACE + frame(SETTINGS, 0, 0)) == []
    return session


def test_a_unary_call_is_headers_one_message_and_end_and_its_answer_ends_with_trailers() -> None:
    session = opened()
    message = grpc_message(b"hello, broker")
    events = session.receive(
        frame(HEADERS, END_HEADERS, 1, request_headers(b"/pkg.Svc/Call", (b"x-mq-client-id", b"c1")))
        + frame(DATA, 0, 1, message[:3])  # a message split across DATA frames
        + frame(DATA, END_STREAM, 1, message[3:])
    )
    kinds = [(kind, stream_id) for kind, stream_id, _ in events]
    assert kinds == [(_h2.HEADERS, 1), (_h2.MESSAGE, 1), (_h2.END, 1)]
    assert (b":path", b"/pkg.Svc/Call") in events[0][2]
    assert (b"x-mq-client-id", b"c1") in events[0][2]
    assert events[1][2] == b"hello, broker"
    assert session.send_message(1, b"answer")
    assert session.finish(1, 0)
    written = frames(session.send())
    data = [f for f in written if f[0] == DATA and f[2] == 1]
    assert b"".join(f[3] for f in data) == grpc_message(b"answer")
    assert not any(f[1] & END_STREAM for f in data)  # the trailers end the stream, not DATA
    headers = [f for f in written if f[0] == HEADERS and f[2] == 1]
    assert len(headers) == 2 and headers[-1][1] & END_STREAM  # response headers, then trailers
    assert [e[:2] for e in session.take_events()] == [(_h2.CLOSED, 1)]
    assert session.stream_count == 0


def test_a_field_equal_to_the_last_requests_at_its_place_is_its_tuple_and_others_are_their_own() -> None:
    session = opened()
    first = session.receive(frame(HEADERS, END_HEADERS, 1, request_headers(b"/p/A", (b"x-id", b"c1"))))
    second = session.receive(frame(HEADERS, END_HEADERS, 3, request_headers(b"/p/B", (b"x-id", b"c1"))))
    third = session.receive(frame(HEADERS, END_HEADERS, 5, request_headers(b"/p/B", (b"x-id", b"c2"))))
    a, b, c = first[0][2], second[0][2], third[0][2]
    assert a[:2] == b[:2] and a[0] is b[0] and a[1] is b[1]  # :method, :scheme: none made again
    assert a[2] == (b":path", b"/p/A") and b[2] == (b":path", b"/p/B") and c[2] is b[2]
    assert b[-1] is a[-1] and c[-1] == (b"x-id", b"c2")  # a changed value is a field of its own
    assert len(a) == len(b) == len(c) == 7


def test_an_error_before_any_message_is_one_trailers_only_headers_frame() -> None:
    session = opened()
    session.receive(frame(HEADERS, END_HEADERS | END_STREAM, 1, request_headers()))
    assert session.finish(1, 12, "not served: 100% sure")
    written = [f for f in frames(session.send()) if f[2] == 1]
    assert [(kind, flags & END_STREAM) for kind, flags, _, _ in written] == [(HEADERS, END_STREAM)]
    assert not session.send_message(1, b"too late")  # finished: nothing more on the stream


def test_a_stream_answers_as_it_goes_and_deferred_data_resumes() -> None:
    session = opened()
    session.receive(frame(HEADERS, END_HEADERS, 1, request_headers()))
    session.send_message(1, b"first")
    first = b"".join(f[3] for f in frames(session.send()) if f[0] == DATA)
    assert first == grpc_message(b"first")
    assert frames(session.send()) == []  # nothing queued: the data provider deferred
    session.send_message(1, b"second")
    second = b"".join(f[3] for f in frames(session.send()) if f[0] == DATA)
    assert second == grpc_message(b"second")


def test_a_batch_of_answers_is_the_same_bytes_as_one_send_each() -> None:
    """`send_messages` (a ReceiveMessage's batch in one call) writes what `send_message` of each
    writes, in order, on a stream not yet started and on one already answering."""
    written = []
    for batched in (False, True):
        session = opened()
        session.receive(frame(HEADERS, END_HEADERS, 1, request_headers()))
        batches = [[b"status"], [b"one", b"", b"three" * 100], []]
        for batch in batches:
            if batched:
                assert session.send_messages(1, batch)
            else:
                assert all(session.send_message(1, payload) for payload in batch)
        assert session.finish(1, 0)
        written.append(session.send())
        assert not session.send_messages(1, [b"too late"])  # finished: nothing more on the stream
    assert written[0] == written[1]
    data = b"".join(f[3] for f in frames(written[1]) if f[0] == DATA)
    assert data == b"".join(grpc_message(p) for p in (b"status", b"one", b"", b"three" * 100))


def test_compressed_messages_are_told_apart_and_bad_ones_refused_on_their_stream_only() -> None:
    session = opened()
    events = session.receive(
        frame(HEADERS, END_HEADERS, 1, request_headers())
        + frame(DATA, 0, 1, grpc_message(b"x", compressed=2))
        + frame(HEADERS, END_HEADERS, 3, request_headers())
        + frame(DATA, 0, 3, struct.pack(">BI", 0, 4096))
        + frame(HEADERS, END_HEADERS, 5, request_headers())
        + frame(DATA, END_STREAM, 5, grpc_message(b"fine"))
        + frame(HEADERS, END_HEADERS, 7, request_headers())
        + frame(DATA, 0, 7, grpc_message(b"zipped", compressed=1))
    )
    bad = {stream_id: why for kind, stream_id, why in events if kind == _h2.BAD}
    assert "compressed flag 2" in bad[1] and "exceeds the limit of 1024" in bad[3]
    assert (_h2.MESSAGE, 5, b"fine") in events
    assert (_h2.COMPRESSED, 7, b"zipped") in events  # inflated by the server, by its grpc-encoding


def test_a_reset_stream_closes_with_cancel() -> None:
    session = opened()
    session.receive(frame(HEADERS, END_HEADERS, 1, request_headers()))
    events = session.receive(frame(RST_STREAM, 0, 1, struct.pack(">I", _h2.CANCEL)))
    assert events == [(_h2.CLOSED, 1, _h2.CANCEL)]
    assert not session.send_message(1, b"gone")


def test_garbage_instead_of_the_preface_is_goaway() -> None:
    session = _h2.H2Session()
    session.send()
    with pytest.raises(_h2.H2Error):
        session.receive(b"GET / HTTP/1.1\r\nHost: broker\r\n\r\n")
    assert [f[0] for f in frames(session.send())] == [GOAWAY]
    assert not session.open


def _fed(session: _h2.H2Session, data: bytes) -> None:
    """Feed `data`; an H2Error must leave GOAWAY to send and the session wanting to close."""
    try:
        session.receive(data)
    except _h2.H2Error:
        assert GOAWAY in [f[0] for f in frames(session.send())]
        assert not session.open
        return
    session.send()  # whatever it answers (SETTINGS ACK, PING ACK, RST_STREAM...) is well framed


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.binary(max_size=512))
def test_fuzz_random_bytes_after_the_preface(data: bytes) -> None:
    session = opened()
    _fed(session, data)


@FUZZ
@given(
    st.lists(
        st.tuples(
            st.integers(0, 12),  # frame types, and some past the defined ones
            st.integers(0, 255),
            st.sampled_from([0, 1, 2, 3, 5, 0x7FFFFFFF]),
            st.one_of(
                st.binary(max_size=64),
                st.just(request_headers()),
                st.just(grpc_message(b"m")),
                st.just(struct.pack(">I", 8)),
            ),
        ),
        max_size=12,
    ),
    st.integers(1, 50),
    st.booleans(),
)
def test_fuzz_random_frames_in_random_chunks(
    parts: list[tuple[int, int, int, bytes]], chunk: int, group: bool
) -> None:
    """`group`: the requests' path is grouped (`set_grouped`), GROUPED calls answered with
    `answer_ok`."""
    session = opened()
    if group:
        session.set_grouped({b"/pkg.Svc/Call"})
    data = b"".join(frame(kind, flags, stream_id, payload) for kind, flags, stream_id, payload in parts)
    for at in range(0, len(data), chunk):
        if not session.open:
            break
        try:
            events = session.receive(data[at : at + chunk])
        except _h2.H2Error:
            assert GOAWAY in [f[0] for f in frames(session.send())]
            assert not session.open
            break
        ids = [stream_id for kind, stream_id, _ in events if kind == _h2.GROUPED]
        session.answer_ok(ids, [b"answer"] * len(ids))
        for stream_id in range(1, 6, 2):  # answer whatever was opened, as the server would
            session.send_message(stream_id, b"answer")
            session.finish(stream_id, 0)
        session.send()
        session.take_events()


# -- grouped paths: a plain unary call as one GROUPED event -------------------------------------

GROUPED_PATH = b"/pkg.Svc/Call"


def grouped() -> _h2.H2Session:
    session = opened()
    session.set_grouped({GROUPED_PATH})
    return session


def test_a_plain_call_of_a_grouped_path_is_one_grouped_event_answered_without_a_closed_event() -> None:
    session = grouped()
    headers = request_headers(GROUPED_PATH, (b"grpc-timeout", b"3S"), (b"x-mq-client-id", b"c1"))
    events = session.receive(
        frame(HEADERS, END_HEADERS, 1, headers) + frame(DATA, END_STREAM, 1, grpc_message(b"req"))
    )
    assert [e[:2] for e in events] == [(_h2.GROUPED, 1)]
    path, message, fields = events[0][2]
    assert (path, message) == (GROUPED_PATH, b"req")
    assert (b"x-mq-client-id", b"c1") in fields and (b"grpc-timeout", b"3S") in fields
    session.answer_ok([1], [b"answer"])
    written = [f for f in frames(session.send()) if f[2] == 1]
    assert b"".join(f[3] for f in written if f[0] == DATA) == grpc_message(b"answer")
    assert [(f[0], f[1] & END_STREAM) for f in written] == [(HEADERS, 0), (DATA, 0), (HEADERS, END_STREAM)]
    assert session.take_events() == [] and session.stream_count == 0


def test_answer_ok_writes_the_frames_send_message_and_finish_write() -> None:
    outs = []
    for fast in (True, False):
        session = grouped() if fast else opened()
        session.receive(
            frame(HEADERS, END_HEADERS, 1, request_headers()) + frame(DATA, END_STREAM, 1, grpc_message(b"q"))
        )
        if fast:
            session.answer_ok([1], [b"x" * 300])
        else:
            session.send_message(1, b"x" * 300)
            session.finish(1, 0)
        outs.append(session.send())
    assert outs[0] == outs[1]


@pytest.mark.parametrize(
    ("why", "extra", "payload"),
    [
        ("a path not grouped", [(b":path", b"/pkg.Svc/Other")], [grpc_message(b"q")]),
        ("a deadline already past", [(b"grpc-timeout", b"0m")], [grpc_message(b"q")]),
        ("a deadline that does not parse", [(b"grpc-timeout", b"5x")], [grpc_message(b"q")]),
        ("another content-type", [(b"content-type", b"application/json")], [grpc_message(b"q")]),
        ("a compressed message", [(b"grpc-encoding", b"gzip")], [grpc_message(b"q", compressed=1)]),
        ("two messages", [], [grpc_message(b"q"), grpc_message(b"r")]),
        ("no message", [], []),
    ],
)
def test_an_unusual_call_goes_the_ordinary_way(
    why: str, extra: list[tuple[bytes, bytes]], payload: list[bytes]
) -> None:
    session = grouped()
    fields = dict([(b":path", GROUPED_PATH), (b"content-type", b"application/grpc"), *extra])
    headers = request_headers(
        fields.pop(b":path"), *[(n, v) for n, v in fields.items() if n != b"content-type"]
    )
    headers = headers.replace(b"application/grpc", fields[b"content-type"])
    events = session.receive(
        frame(HEADERS, END_HEADERS, 1, headers) + frame(DATA, END_STREAM, 1, b"".join(payload))
    )
    kinds = [e[0] for e in events]
    assert _h2.GROUPED not in kinds, why
    assert kinds[0] == _h2.HEADERS and kinds[-1] == _h2.END, why


def test_a_call_whose_end_comes_in_a_later_read_is_released_at_the_end_of_the_first() -> None:
    session = grouped()
    first = session.receive(
        frame(HEADERS, END_HEADERS, 1, request_headers()) + frame(DATA, 0, 1, grpc_message(b"q"))
    )
    assert [(e[0], e[1]) for e in first] == [(_h2.HEADERS, 1), (_h2.MESSAGE, 1)]
    assert session.receive(frame(DATA, END_STREAM, 1, b"")) == [(_h2.END, 1, None)]


def test_a_held_call_reset_before_its_end_is_dropped_unseen() -> None:
    session = grouped()
    events = session.receive(
        frame(HEADERS, END_HEADERS, 1, request_headers())
        + frame(DATA, 0, 1, grpc_message(b"q"))
        + frame(RST_STREAM, 0, 1, struct.pack(">I", _h2.CANCEL))
    )
    assert events == [] and session.stream_count == 0


def _by_stream(events: list[tuple[int, int, Any]]) -> dict[int, list[tuple[int, object]]]:
    """Each stream's events, a GROUPED one spelled out as the HEADERS, MESSAGE and END it stands for."""
    out: dict[int, list[tuple[int, object]]] = {}
    for kind, stream_id, value in events:
        seq = out.setdefault(stream_id, [])
        if kind == _h2.GROUPED:
            _path, message, headers = value
            seq += [(_h2.HEADERS, headers), (_h2.MESSAGE, message), (_h2.END, None)]
        else:
            seq.append((kind, value))
    return out


REQUEST_PARTS = st.lists(
    st.tuples(
        st.sampled_from([1, 3, 5]),
        st.sampled_from(["headers", "timeout0", "json", "message", "zipped", "end", "message_end", "reset"]),
    ),
    max_size=14,
)


@FUZZ
@given(REQUEST_PARTS, st.integers(1, 80))
def test_grouped_events_are_the_ordinary_events_of_the_same_bytes(
    parts: list[tuple[int, str]], chunk: int
) -> None:
    """The same bytes, in the same chunks, to a session with the path grouped and one without:
    each stream's events are the same once a GROUPED event is spelled out, but for a held call
    reset before its END, which the grouped session drops unseen."""
    pieces = {
        "headers": lambda sid: frame(HEADERS, END_HEADERS, sid, request_headers()),
        "timeout0": lambda sid: frame(
            HEADERS, END_HEADERS, sid, request_headers(GROUPED_PATH, (b"grpc-timeout", b"0S"))
        ),
        "json": lambda sid: frame(HEADERS, END_HEADERS, sid, request_headers().replace(b"/grpc", b"/json")),
        "message": lambda sid: frame(DATA, 0, sid, grpc_message(b"m%d" % sid)),
        "zipped": lambda sid: frame(DATA, 0, sid, grpc_message(b"z", compressed=1)),
        "end": lambda sid: frame(DATA, END_STREAM, sid, b""),
        "message_end": lambda sid: frame(DATA, END_STREAM, sid, grpc_message(b"e%d" % sid)),
        "reset": lambda sid: frame(RST_STREAM, 0, sid, struct.pack(">I", _h2.CANCEL)),
    }
    data = b"".join(pieces[what](sid) for sid, what in parts)
    seen = []
    for session in (opened(), grouped()):
        events = []
        for at in range(0, len(data), chunk):
            try:
                events += session.receive(data[at : at + chunk])
            except _h2.H2Error:
                break
        seen.append(_by_stream(events))
    plain, fast = seen
    for sid in plain.keys() | fast.keys():
        if sid not in fast:  # held, then reset before its END
            assert plain[sid][-1][0] == _h2.CLOSED and all(kind != _h2.END for kind, _ in plain[sid])
        else:
            assert fast[sid] == plain[sid]
