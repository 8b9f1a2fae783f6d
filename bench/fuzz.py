"""Long fuzz run of the wire decoders (>= 1M inputs) and the idle-connection hold.

    python -m bench.fuzz --runs 1000000                 # atheris (libFuzzer, coverage-guided)
    python -m bench.fuzz --engine random --runs 1000000 # no atheris: seeded random mutation
    python -m bench.fuzz --idle 1000                    # hold 1,000 idle connections under load

atheris is optional (``pip install -e '.[fuzz]'``); without it ``--engine atheris`` falls back to
random. Only the decoder modules (`DECODER_MODULES`: ``rocketlite.protocol.*`` and
``rocketlite.protocol.formats.record``, ~700 functions) are instrumented for coverage feedback; the
stdlib and the rest of rocketlite run uninstrumented. (``atheris.instrument_all()`` patches every
loaded function, ~11,000 with the stdlib, spends ~40 s doing it, and its cov/ft figures then count
json/re/enum edges as well as ours.) libFuzzer starts from `SAMPLES` (valid frames, one seed per
target) written into ``--corpus`` and grows it there; crashes go to ``--crash-dir``. Both default
to fresh temp directories, so a run never writes into the work tree.

One input exercises every decoder: the first byte picks the target and the split points, the rest
is the data. Targets and the only exceptions allowed to escape them (anything else is a bug and
stops the run with the input that triggered it, saved as ``crash-*`` in ``--crash-dir``):

- `FrameDecoder.feed` (limit 4 KiB and 16 MiB), input split into up to 4 chunks: `ProtocolError`;
  the buffer never exceeds what was fed nor the limit.
- `decode_json_header`, `decode_rocketmq_header`, `decode_batch`: `ProtocolError`.
- `decode_records`: nothing.
- `CustomHeader.from_ext` for every header class, ext map parsed from the input: `HeaderFieldError`.
- The compiled twins as `speedups` chose them: `decode_records`, the batch encoder, the dispatch
  and recovery scans, and the Spark reader's raw-store scan (`record_starts`,
  `first_invalid_record`, `first_crc_mismatch` on the sound prefix): nothing, or the errors above.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import random
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.broker_harness import broker_under_test
from tests.support.fuzzing import HEADER_CLASSES, SAMPLES, hold_idle_connections, mutate

from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.formats import speedups as formats_speedups
from rocketlite.protocol.formats.batch import BatchTarget, decode_batch
from rocketlite.protocol.formats.record import DispatchRequest, decode_records
from rocketlite.protocol.message import HostAddress
from rocketlite.protocol.wire.command import decode_rocketmq_header
from rocketlite.protocol.wire.custom_header import HeaderFieldError
from rocketlite.protocol.wire.frame import FrameDecoder
from rocketlite.protocol.wire.speedups import decode_json_header
from rocketlite.spark.codec import speedups as spark_speedups
from rocketlite.store.codec import speedups as store_speedups

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


_HOST = HostAddress(bytes([127, 0, 0, 1]), 10911)


def _native_batch(data: bytes, _selector: int) -> None:
    """The compiled batch encoder (a SEND_BATCH_MESSAGE body straight to records, with the send
    path's property work): `ProtocolError` only."""
    with contextlib.suppress(ProtocolError):
        formats_speedups.encode_batch_records(
            data, BatchTarget("", "C", "T", _HOST, _HOST, 0, 0, 1, 0, 4 << 20)
        )


def _native_scan(data: bytes, selector: int) -> None:
    """The compiled commit-log scans (dispatch and recovery): they never raise."""
    buf = memoryview(data)
    out: list[DispatchRequest] = []
    store_speedups.scan_messages(buf, 0, len(buf), out, verify_crc=bool(selector & 1))
    store_speedups.check_records(buf, 0, 0, verify_crc=bool(selector & 1))


def _native_store_scan(data: bytes, selector: int) -> None:
    """The compiled raw-store scan of the Spark reader: the hop from record to record, each
    record's structure, then the body CRCs of the sound prefix: none of them raise."""
    starts = spark_speedups.record_starts(data, 0, len(data), 1 << 20)
    index, _code = spark_speedups.first_invalid_record(data, starts.positions, 0, bool(selector & 1))
    spark_speedups.first_crc_mismatch(data, memoryview(starts.positions)[: 8 * index])


TARGETS: list[Callable[[bytes, int], None]] = [
    _frames,
    _protocol_only(decode_json_header),
    _protocol_only(decode_rocketmq_header),
    _protocol_only(decode_batch),
    lambda data, _s: assert_list(decode_records(data)),
    _ext,
    # The compiled twins (speedups' choice; atheris does not instrument C, so these gain coverage
    # only through the Python paths they fall back to, but every input still runs through them).
    lambda data, _s: assert_list(formats_speedups.decode_records(data)),
    _native_batch,
    _native_scan,
    _native_store_scan,
]


def one_input(raw: bytes) -> None:
    COUNT[0] += 1
    if not raw:
        return
    selector = raw[0]
    TARGETS[selector % len(TARGETS)](raw[1:], selector // len(TARGETS))


DECODER_MODULES = ("rocketlite.protocol", "rocketlite.protocol.formats.record")


def _is_decoder_module(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in DECODER_MODULES)


def instrument_decoders(atheris: Any) -> int:
    """Add atheris coverage instrumentation to every function defined in `DECODER_MODULES`.

    The modules are already imported (by this module and the shared test helpers), so
    `atheris.instrument_imports` would not see them; instead each already-created function of theirs
    (module functions, methods, dataclass-generated methods, lambdas; nested code objects are patched
    along with their parent) gets `atheris.instrument_func`. Returns how many were instrumented.
    """
    funcs = [
        obj
        for obj in gc.get_objects()
        if isinstance(obj, types.FunctionType) and _is_decoder_module(getattr(obj, "__module__", None) or "")
    ]
    for func in funcs:
        atheris.instrument_func(func)
    return len(funcs)


def write_seed_corpus(corpus: Path) -> int:
    """One seed per (sample frame, target): the target byte, then the frame (whole for the frame
    decoder, without the 8-byte length prefixes for the others)."""
    corpus.mkdir(parents=True, exist_ok=True)
    n = 0
    for i, frame in enumerate(SAMPLES):
        for t in range(len(TARGETS)):
            body = frame if t == 0 else frame[8:]
            (corpus / f"seed-{i}-{t}").write_bytes(bytes([t]) + body)
            n += 1
    return n


def run_atheris(runs: int, corpus: Path, crash_dir: Path, extra: list[str]) -> int:
    import atheris  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: PLC0415  optional

    seeds = write_seed_corpus(corpus)
    crash_dir.mkdir(parents=True, exist_ok=True)
    instrumented = instrument_decoders(atheris)
    print(f"atheris: instrumented {instrumented} functions in {', '.join(DECODER_MODULES)}; "
          f"corpus {corpus} ({seeds} seeds); crashes -> {crash_dir}", file=sys.stderr)  # fmt: skip
    argv = [
        sys.argv[0],
        f"-runs={runs}",
        "-max_len=4096",
        "-print_final_stats=1",
        f"-artifact_prefix={crash_dir}/",
        *extra,
        str(corpus),
    ]
    atheris.Setup(argv, one_input)
    # Does not return: libFuzzer exits the process after -runs (status 0, its "Done N runs in S
    # second(s)" and stat:: lines are the summary) or on an escaping exception (non-zero, the
    # traceback on stderr and the input saved as crash-<sha1> in crash_dir).
    atheris.Fuzz()
    return 0


def run_random(runs: int, seed: int, crash_dir: Path | None) -> int:
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
            crash_dir = crash_dir or Path(tempfile.mkdtemp(prefix="fuzz-crashes-"))
            crash_dir.mkdir(parents=True, exist_ok=True)
            saved = crash_dir / f"crash-{i}"
            saved.write_bytes(raw)
            print(f"input {i} raised; saved as {saved}: {raw.hex()}", file=sys.stderr)
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
    parser.add_argument("--corpus", type=Path, help="atheris corpus directory (default: a new temp dir)")
    parser.add_argument("--crash-dir", type=Path, help="where crash-* inputs go (default: a new temp dir)")
    parser.add_argument(
        "libfuzzer_args", nargs="*", metavar="-flag=value",
        help="extra libFuzzer flags for atheris, after --, e.g. -- -max_total_time=3600",
    )  # fmt: skip
    args = parser.parse_args()
    if args.idle:
        asyncio.run(run_idle(args.idle, args.seconds))
        return 0
    if args.engine == "atheris":
        try:
            import atheris  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: F401, PLC0415
        except ImportError:
            print("atheris not installed; falling back to --engine random", file=sys.stderr)
        else:
            corpus = args.corpus or Path(tempfile.mkdtemp(prefix="fuzz-corpus-"))
            crash_dir = args.crash_dir or Path(tempfile.mkdtemp(prefix="fuzz-crashes-"))
            return run_atheris(args.runs, corpus, crash_dir, args.libfuzzer_args)
    return run_random(args.runs, args.seed, args.crash_dir)


if __name__ == "__main__":
    sys.exit(main())
