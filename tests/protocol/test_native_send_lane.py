"""The compiled lane gatherer and answer joiner (`wire/_native/_send_lane.pyx`, `_wire.pyx`
`encode_send_oks`) against their references (`wire/send_lane.py`).

`gather_sends` may stop a run earlier than the reference (a header spelled in a way it does not
read: the handler then serves that request), never later, and what it gathers before it stops is
the reference's, item for item; for the spellings every client writes it gathers the same run.
The headers drawn here mix those spellings with the odd ones (leading zeros, "+5", ten digits,
" true", empty optional numbers, missing fields, values of other types) and the requests with
ones off the common path (other codes, one-way, batches, transactions, unknown, illegal,
read-only and retry topics, bad queue ids, DELAY / TIMER_ / __S properties, big records).
"""

from __future__ import annotations

from random import Random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite.protocol.bodies.route import TopicConfig
from rocketlite.protocol.codes import RequestCode, SerializeType
from rocketlite.protocol.formats import speedups as formats
from rocketlite.protocol.message import properties_to_string, send_properties
from rocketlite.protocol.perm import PERM_READ, PERM_WRITE
from rocketlite.protocol.wire import speedups
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.send_lane import Answer, Gathered, GatherSends, TopicFacts

pytestmark = pytest.mark.skipif(
    speedups.gather_sends is speedups.REFERENCE.gather_sends, reason="the compiled lane gatherer is not built"
)

TABLE = {
    "T": TopicConfig("T", 4, 4),
    "U": TopicConfig("U", 2, 8),
    "M": TopicConfig("M", 4, 4, topic_filter_type="MULTI_TAG"),
    "RO": TopicConfig("RO", 4, 4, PERM_READ),
    "%RETRY%g": TopicConfig("%RETRY%g", 1, 1, PERM_READ | PERM_WRITE),
    "Illegal": TopicConfig("Illegal", 4, 4),
}
LEGAL = {"T", "U", "M", "RO", "%RETRY%g", "Missing"}
TOPICS = (*["T"] * 6, "U", "M", "RO", "%RETRY%g", "Illegal", "Missing")
NUMBERS = ("0", "1", "3", "-1", "7", "12", "123456789")
ODD_NUMBERS = ("", "007", "+5", "1234567890", " 1", "x", "-2", "٣", 5)
PROPS: tuple[dict[str, str], ...] = (
    {},
    {"TAGS": "a"},
    {"WAIT": "true", "KEYS": "k"},
    {"TAGS": "日本"},
    {"DELAY": "2"},
    {"TIMER_DELAY_SEC": "3"},
    {"__SHARDINGKEY": "s"},
    {"UNIQ_KEY": "u\ud800"},
    {"KEYS": "k" * 600, "TAGS": "t"},  # longer than the compiled rewrite's buffer on the stack
    {f"P{n}": "v" for n in range(70)},  # more than its array holds: `send_properties` is called
    {"WAIT": "__S", "X__S": ""},  # "__S" in the text only, not in what is stored
    {"TAGS": "a__S"},
    {"TAGS": "xTIMER_"},
)


@st.composite
def commands(draw: st.DrawFn, opaque: int) -> RemotingCommand:
    odd = draw(st.integers(0, 9)) == 0

    def number(canonical: tuple[str, ...]) -> object:
        return draw(st.sampled_from(ODD_NUMBERS if odd and draw(st.booleans()) else canonical))

    props = dict(draw(st.sampled_from(PROPS)))
    props.setdefault("UNIQ_KEY", f"K{opaque}")
    ext: dict[str, object] = {
        "a": "pg",
        "b": draw(st.sampled_from(TOPICS)),
        "c": "TBW102",
        "d": number(("4", "8")),
        "e": number(("0", "1", "2", "3", "5", "-1")),
        "f": number(("0", "0", "0", "2", "4", "8")),
        "g": number(("1700000000000", "0", "123456789012345678")),
        "h": number(NUMBERS),
        "i": properties_to_string(props),
    }
    for key, choices in (("j", ("", "0", "2")), ("l", ("", "16")), ("k", ("false", "true", "1", "0", "")),
                         ("m", ("false", "", "0", "true"))):  # fmt: skip
        if draw(st.booleans()):
            ext[key] = draw(st.sampled_from((*choices, " true", "maybe", "00") if odd else choices))
    if odd and draw(st.booleans()):
        del ext[draw(st.sampled_from(sorted(ext)))]
    code = draw(
        st.sampled_from([int(RequestCode.SEND_MESSAGE_V2)] * 8 + [int(RequestCode.SEND_MESSAGE), 320])
    )
    flag = draw(st.sampled_from([0, 0, 0, 2]))
    body = draw(st.sampled_from([b"", b"x" * 10, b"y" * 1000, b"z" * 3000]))
    serialize = draw(st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]))
    return RemotingCommand(
        code,
        opaque=opaque,
        flag=flag,
        ext_fields=ext,  # type: ignore[arg-type]  # values of other types on purpose
        body=body or None,
        serialize_type=serialize,
    )


def gather(fn: GatherSends, cmds: list[RemotingCommand], start: int, seed: int) -> tuple[Gathered, Random]:
    rng = Random(seed)
    facts: dict[str, TopicFacts] = {}
    out = fn(cmds, start, TABLE, LEGAL, facts, "DefaultCluster", 91, 2400, 32767, rng, send_properties)
    return out, rng


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 10**6), min_size=1, max_size=12).flatmap(
    lambda ops: st.tuples(*(commands(op) for op in ops))
), st.integers(0, 3), st.integers(0, 99))  # fmt: skip
def test_gather_sends_takes_the_reference_s_run_or_a_prefix_of_it(
    cmds: tuple[RemotingCommand, ...], start: int, seed: int
) -> None:
    listed = list(cmds)
    (ref, ref_rng), (fast, fast_rng) = (
        gather(speedups.REFERENCE.gather_sends, listed, start, seed),
        gather(speedups.gather_sends, listed, start, seed),
    )
    entries, sizes, keys, answers, runs = ref
    f_entries, f_sizes, f_keys, f_answers, f_runs = fast
    n = len(f_entries)
    assert n <= len(entries)
    assert (f_entries, f_sizes, f_keys, f_answers) == (entries[:n], sizes[:n], keys[:n], answers[:n])
    assert sum(c for _, c in f_runs) == n and [t for t, c in f_runs for _ in range(c)] == [
        e[0] for e in f_entries
    ]
    if n == len(entries):
        assert f_runs == runs and fast_rng.getstate() == ref_rng.getstate()
    else:  # a shorter run only where the reference read a spelling the compiled reader leaves out
        assert any(
            v in ODD_NUMBERS or v in (" true", "maybe", "00") for v in listed[start + n].ext_fields.values()
        )


def test_the_spellings_clients_write_give_the_whole_run() -> None:
    """The differential above may pass with a gatherer that stops at once: here it must not."""
    cmds = [
        RemotingCommand(
            int(RequestCode.SEND_MESSAGE_V2),
            opaque=i + 1,
            body=b"b" * 100,
            ext_fields={
                "a": "pg",
                "b": "M" if i % 2 else "T",
                "c": "TBW102",
                "d": "4",
                "e": str(i % 4 - 1),
                "f": "0",
                "g": "1700000000000",
                "h": "0",
                "i": f"UNIQ_KEY\x01K{i}\x02WAIT\x01true",
                "j": "0",
                "k": "false",
                "m": "false",
            },
        )
        for i in range(10)
    ]
    (ref, _), (fast, _) = (
        gather(speedups.REFERENCE.gather_sends, cmds, 0, 1),
        gather(speedups.gather_sends, cmds, 0, 1),
    )
    assert fast == ref and len(fast[0]) == 10
    assert fast[0][1][5] == 2  # MULTI_TAGS_FLAG on the MULTI_TAG topic


@given(
    st.lists(
        st.tuples(
            st.integers(-(2**31), 2**31 - 1), st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]),
            st.integers(-1, 2**20), st.one_of(st.none(), st.text(max_size=8)), st.text(max_size=8),
            st.integers(0, 2**62),
        ),
        max_size=8,
    ),
    st.integers(0, 3), st.text(max_size=6), st.sampled_from(["true", "false"]),
)  # fmt: skip
def test_encode_send_oks_is_the_reference_s_bytes(
    rows: list[tuple[int, SerializeType, int, str | None, str, int]], drop: int, region: str, trace_on: str
) -> None:
    answers: list[Answer] = [(op, ser, qid, uniq) for op, ser, qid, uniq, _, _ in rows]
    placed = max(0, len(rows) - drop)  # fewer placed than gathered: only theirs are answered
    ids = [row[4] for row in rows][:placed]
    offsets = [row[5] for row in rows][:placed]
    expected = speedups.REFERENCE.encode_send_oks(answers, ids, offsets, region, trace_on)
    assert speedups.encode_send_oks(answers, ids, offsets, region, trace_on) == expected
    assert expected == b"".join(
        speedups.encode_send_ok(a[0], a[1], ids[k], a[2], offsets[k], region, trace_on, a[3])
        for k, a in enumerate(answers[:placed])
    )


def test_the_topic_cache_follows_a_changed_topic_config() -> None:
    """One `facts` cache across reads: a topic replaced in the table (fewer queues, read-only, many
    queues, none) is read again, and the keys follow (formatted past the cached key range)."""
    cmds = [
        RemotingCommand(
            int(RequestCode.SEND_MESSAGE_V2),
            opaque=q + 1,
            body=b"b",
            ext_fields={
                "a": "pg",
                "b": "T",
                "c": "TBW102",
                "d": "4",
                "e": str(q),
                "f": "0",
                "g": "1",
                "h": "0",
            },
        )
        for q in (0, 3, 300, 1)
    ]
    facts: dict[str, TopicFacts] = {}
    table = dict(TABLE)
    for config in (TopicConfig("T", 4, 4), TopicConfig("T", 2, 2), TopicConfig("T", 4, 4, PERM_READ),
                   TopicConfig("T", 400, 400), TopicConfig("T", 0, 0), TopicConfig("T", 4, 4)):  # fmt: skip
        table["T"] = config
        args = (table, LEGAL)
        ref = speedups.REFERENCE.gather_sends(
            cmds, 0, *args, {}, "C", 91, 2400, 32767, Random(1), formats.send_properties
        )
        fast = speedups.gather_sends(
            cmds, 0, *args, facts, "C", 91, 2400, 32767, Random(1), formats.send_properties
        )
        assert fast == ref, config
        assert len(ref[0]) == {4: 2, 2: 1, 400: 4, 0: 0}[config.write_queue_nums] * bool(
            config.perm & PERM_WRITE
        )


@pytest.mark.parametrize("cluster", ["DefaultCluster", "C__S", "xTIMER_y", "日本"])
def test_a_cluster_name_that_holds_a_needle_leaves_every_send_to_the_handler(cluster: str) -> None:
    """The compiled rewrite checks what it stores only when the text or the cluster's entry holds
    a needle: a cluster named with one must still end the run at once, as in the reference."""
    cmds = [
        RemotingCommand(int(RequestCode.SEND_MESSAGE_V2), opaque=1, body=b"b", ext_fields={
            "a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0",
            "i": "UNIQ_KEY\x01K\x02WAIT\x01true",
        })
    ]  # fmt: skip
    facts: dict[str, TopicFacts] = {}
    args = (TABLE, LEGAL, facts, cluster, 91, 2400, 32767)
    ref = speedups.REFERENCE.gather_sends(cmds, 0, *args, Random(1), send_properties)
    fast = speedups.gather_sends(cmds, 0, *args, Random(1), send_properties)
    assert fast == ref
    assert len(ref[0]) == (1 if cluster in ("DefaultCluster", "日本") else 0)
    if ref[0]:
        assert ref[0][0][2] == f"UNIQ_KEY\x01K\x02CLUSTER\x01{cluster}"
