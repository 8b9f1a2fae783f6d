"""Long fuzz run of the wire decoders (>= 1M inputs) and the idle-connection hold.

    python -m bench.fuzz --runs 1000000                 # atheris (libFuzzer, coverage-guided)
    python -m bench.fuzz --engine random --runs 1000000 # no atheris: seeded random mutation
    python -m bench.fuzz --idle 1000                    # hold 1,000 idle connections under load

One input exercises every decoder: the first byte picks the target and the split points, the rest
is the data. Targets and the only exceptions allowed to escape them (anything else is a bug and
stops the run with the input that triggered it, saved as ``crash-*``):

- `FrameDecoder.feed` (limit 4 KiB and 16 MiB), input split into up to 4 chunks: `ProtocolError`;
  the buffer never exceeds what was fed nor the limit.
- `decode_json_header`, `decode_rocketmq_header`, `decode_batch`: `ProtocolError`.
- `decode_records`: nothing.
- `CustomHeader.from_ext` for every header class, ext map parsed from the input: `HeaderFieldError`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.broker_harness import broker_under_test
from tests.reliability.test_fuzz import HEADER_CLASSES, SAMPLES, hold_idle_connections, mutate

from rocketlite.errors import ProtocolError
from rocketlite.protocol.batch import decode_batch
from rocketlite.protocol.command import decode_json_header, decode_rocketmq_header
from rocketlite.protocol.frame import FrameDecoder
from rocketlite.protocol.headers import HeaderFieldError
from rocketlite.store.message_record import decode_records

COUNT = [0]


def _frames(data: bytes, selector: int) -> None:
    limit = 4096 if selector & 1 else 16 * 1024 * 1024
    decoder = FrameDecoder(limit)
    n = len(data)
    cuts = sorted({(selector * 7919 * (i + 1)) % (n + 1) for i in range((selector >> 1) & 3)})
    bounds = [0, *cuts, n]
    fed = 0
    for a, b in itertools.pairwise(bounds):
        fed += b - a
        try:
            decoder.feed(data[a:b])
        except ProtocolError:
            return
        assert decoder.buffered <= fed and decoder.buffered < limit


def _ext(data: bytes, selector: int) -> None:
    cls = HEADER_CLASSES[selector % len(HEADER_CLASSES)]
    text = data.decode("utf-8", "replace")
    wires = [spec.wire for spec in cls.field_specs()]
    ext: dict[str, str] = {}
    for i, item in enumerate(text.split("\x02")):
        key, _, value = item.partition("\x01")
        if wires and key[:1] in set("0123456789"):
            key = wires[int(key[0]) % len(wires)]
        elif wires and i % 2 == 0:
            key = wires[i % len(wires)]
        ext[key] = value
    with contextlib.suppress(HeaderFieldError):
        cls.from_ext(ext).to_ext()


def _protocol_only(fn: Callable[[bytes], object]) -> Callable[[bytes, int], None]:
    def target(data: bytes, _selector: int) -> None:
        with contextlib.suppress(ProtocolError):
            fn(data)

    return target


def assert_list(value: object) -> None:
    assert isinstance(value, list)


TARGETS: list[Callable[[bytes, int], None]] = [
    _frames,
    _protocol_only(decode_json_header),
    _protocol_only(decode_rocketmq_header),
    _protocol_only(decode_batch),
    lambda data, _s: assert_list(decode_records(data)),
    _ext,
]


def one_input(raw: bytes) -> None:
    COUNT[0] += 1
    if not raw:
        return
    selector = raw[0]
    TARGETS[selector % len(TARGETS)](raw[1:], selector // len(TARGETS))


def run_atheris(runs: int) -> int:
    import atheris  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: PLC0415  optional

    corpus = Path(tempfile.mkdtemp(prefix="fuzz-corpus-"))
    for i, frame in enumerate(SAMPLES):
        for t in range(len(TARGETS)):
            body = frame if t == 0 else frame[8:]
            (corpus / f"seed-{i}-{t}").write_bytes(bytes([t]) + body)
    atheris.instrument_all()  # coverage feedback from every loaded module (rocketlite's decoders)
    started = time.monotonic()
    atheris.Setup(
        [sys.argv[0], f"-runs={runs}", "-max_len=4096", "-print_final_stats=1", str(corpus)], one_input
    )
    with contextlib.suppress(SystemExit):
        atheris.Fuzz()
    print(f"atheris: inputs={COUNT[0]} in {time.monotonic() - started:.0f}s")
    return 0


def run_random(runs: int, seed: int) -> int:
    rng = random.Random(seed)
    started = time.monotonic()
    for i in range(runs):
        if i % 3 == 0:
            raw = rng.randbytes(rng.randint(0, 300))
        else:
            frame = rng.choice(SAMPLES)
            t = rng.randrange(256)
            raw = bytes([t]) + mutate(rng, frame if t % len(TARGETS) == 0 else frame[8:])
        try:
            one_input(raw)
        except Exception:
            Path(f"crash-{i}").write_bytes(raw)
            print(f"input {i} raised; saved as crash-{i}: {raw!r}", file=sys.stderr)
            raise
    print(f"random: inputs={COUNT[0]} in {time.monotonic() - started:.0f}s")
    return 0


async def run_idle(count: int, seconds: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with broker_under_test(Path(tmp)) as b:
            baseline, with_idle, held = await hold_idle_connections(b, count, seconds)
    print(f"idle connections requested={count} held={held}; producer throughput "
          f"without={baseline:.0f} msg/s with={with_idle:.0f} msg/s "
          f"({with_idle / baseline:.0%})")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--engine", choices=("atheris", "random"), default="atheris")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--idle", type=int, help="instead of fuzzing: hold this many idle connections")
    parser.add_argument("--seconds", type=float, default=3.0, help="throughput window for --idle")
    args = parser.parse_args()
    if args.idle:
        asyncio.run(run_idle(args.idle, args.seconds))
        return 0
    if args.engine == "atheris":
        try:
            return run_atheris(args.runs)
        except ImportError:
            print("atheris not installed; falling back to --engine random", file=sys.stderr)
    return run_random(args.runs, args.seed)


if __name__ == "__main__":
    sys.exit(main())
