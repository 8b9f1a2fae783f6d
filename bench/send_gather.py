"""CPU per message of the raw send lane's compiled calls alone: the gather and the group's records.

`bench/send_path.py` measures the whole single send in one process; on a shared machine its loop
CPU moves by about ±0.3 µs from run to run, more than a change to one step of it. This script
times just the two compiled calls a read of single sends costs before the append: the gather
(`wire.speedups.gather_raw_sends`: the frames read in place, checked, the properties rewritten)
and the records (`formats.speedups.encode_group`), over one read of 32 SEND_MESSAGE_V2 frames as
a Java client writes them (JSON header, UNIQ_KEY, WAIT and TAGS properties), one topic of 16
queues. Printed in ns per message, the minimum of `--runs` runs of the thread's CPU time.

    .venv/bin/python bench/send_gather.py [--size 1024] [--runs 7] [--reads 2000]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from random import Random

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketlite.protocol.bodies.route import TopicConfig
from rocketlite.protocol.codes import RequestCode, SerializeType
from rocketlite.protocol.formats import speedups as formats
from rocketlite.protocol.message import HostAddress
from rocketlite.protocol.wire import speedups
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.send_lane import TopicFacts

TOPIC = "SendPathTopic"
PROPS = "UNIQ_KEY\x017F0000010000{:020X}\x02WAIT\x01true\x02TAGS\x01TagA"
FRAMES = 32


def read_of_sends(size: int) -> bytes:
    frames = []
    for i in range(FRAMES):
        ext = {
            "a": "BenchProducerGroup", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(i % 16), "f": "0",
            "g": "1700000000000", "h": "0", "i": PROPS.format(i),
            "j": "0", "k": "false", "m": "false",
        }  # fmt: skip
        code, body, json = int(RequestCode.SEND_MESSAGE_V2), b"b" * size, SerializeType.JSON
        cmd = RemotingCommand(code, opaque=i + 1, ext_fields=ext, body=body, serialize_type=json)
        frames.append(speedups.encode_command(cmd))
    return b"".join(frames)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=1024, help="body bytes")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--reads", type=int, default=2000, help="reads of 32 frames per run")
    args = parser.parse_args()
    encode_group = formats.encode_group
    if encode_group is None or speedups.gather_raw_sends is speedups.REFERENCE.gather_raw_sends:
        sys.exit("the compiled lane is not built (or ROCKETLITE_NATIVE=0)")
    src = read_of_sends(args.size)
    table = {TOPIC: TopicConfig(TOPIC, 16, 16)}
    legal = {TOPIC}
    born, store = HostAddress(b"\x7f\x00\x00\x01", 50000), HostAddress(b"\x7f\x00\x00\x01", 10911)
    facts: dict[str, TopicFacts] = {}
    rng = Random(1)

    def gather() -> None:
        speedups.gather_raw_sends(src, 0, 16 << 20, table, legal, facts, "DefaultCluster", 91, 4 << 20, 32767,
                                  rng, formats.send_properties)  # fmt: skip

    def gather_and_records() -> None:
        (entries, *_), ends = speedups.gather_raw_sends(
            src, 0, 16 << 20, table, legal, facts, "DefaultCluster", 91, 4 << 20, 32767, rng,
            formats.send_properties,
        )  # fmt: skip
        assert len(entries) == FRAMES
        first_body: object = entries[0][1]
        if isinstance(first_body, int):  # bodies as spans of the read
            encode_group(entries, born, store, src, ends)
        else:  # a build before that (bytes bodies), for comparison
            encode_group(entries, born, store)

    figures: list[str] = []
    for name, step in (("gather", gather), ("gather + records", gather_and_records)):
        figures.append(f"{name} {best_ns(step, args.runs, args.reads):.0f}")
    print(f"{args.size} B bodies, ns per message (min of {args.runs} runs): " + ", ".join(figures))


def best_ns(step: Callable[[], None], runs: int, reads: int) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.thread_time_ns()
        for _ in range(reads):
            step()
        best = min(best, (time.thread_time_ns() - start) / reads / FRAMES)
    return best


if __name__ == "__main__":
    main()
