"""CPU per SQL92 filter evaluation: the fast closures against the reference tree walk.

A broker serving an SQL92 subscription evaluates the filter once per message it scans (each
message's properties decoded to a dict first, which is not measured here). This prints, for a few
typical expressions and messages, the µs per evaluation of `Sql92Filter.matches` (the closures
of `rocketlite.filter.compiled`) and of the reference (`Expr.evaluate`), each the minimum of
`--runs` timed loops measured as the thread's CPU time, so other processes do not count, and
the µs to compile an expression the cache has not seen.

    .venv/bin/python bench/sql92_bench.py [--number 100000] [--runs 5]
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketlite.filter import compile
from rocketlite.filter.parser import parse
from rocketlite.filter.sql92 import Sql92Filter

# A message as the broker sees it: the producer's properties plus the system ones.
SYSTEM = {"UNIQ_KEY": "7F0000010B2A18B4AAC2" + "0" * 12, "KEYS": "order-1", "WAIT": "true", "CLUSTER": "c1"}
CASES: list[tuple[str, dict[str, str]]] = [
    ("TAGS = 'TagA'", {"TAGS": "TagA", **SYSTEM}),
    ("a > 5 AND b = 'x' AND TAGS IN ('TagA', 'TagB')", {"a": "10", "b": "x", "TAGS": "TagA", **SYSTEM}),
    ("a > 5 AND b = 'x' AND TAGS IN ('TagA', 'TagB')", {"a": "1", "b": "x", "TAGS": "TagA", **SYSTEM}),
    ("price BETWEEN 10.5 AND 99.5 OR region IS NULL", {"price": "42.25", "region": "eu", **SYSTEM}),
    ("kind STARTSWITH 'order-' AND NOT (status IN ('cancelled', 'failed'))", {"kind": "order-7", **SYSTEM}),
]


def _per_call_us(fn: Callable[[], object], number: int, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.thread_time()
        for _ in range(number):
            fn()
        best = min(best, time.thread_time() - start)
    return best / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=100_000, help="evaluations per timed loop")
    parser.add_argument("--runs", type=int, default=5, help="timed loops; the fastest counts")
    args = parser.parse_args()
    print(f"{'expression':<72} {'match':>5} {'fast µs':>8} {'reference µs':>13}")
    for expression, props in CASES:
        f = compile(expression)
        fast = _per_call_us(functools.partial(f.matches, props), args.number, args.runs)
        ref = _per_call_us(functools.partial(f.tree.evaluate, props), args.number, args.runs)
        print(f"{expression:<72} {f.matches(props)!s:>5} {fast:>8.2f} {ref:>13.2f}")
    n = max(1, args.number // 100)
    texts = [f"{CASES[1][0]} AND n{i} = 1" for i in range(n)]  # distinct texts: no cache hits
    start = time.thread_time()
    for text in texts:
        Sql92Filter(text, parse(text))
    print(f"compile (parse + build, uncached): {(time.thread_time() - start) / n * 1e6:.1f} µs")


if __name__ == "__main__":
    main()
