"""The compiled modules share their primitives instead of copying them: every helper defined in a
shared include (`src/rocketlite/protocol/_native/*.pxi`: CRC-32, byte order and hex digits, text
and Java's `String.hashCode`, the properties array) is defined there only, and no compiled module
of any family spells a big-endian read or write or a Java hash step out by hand. The repository's
duplicate-code scan does not read Cython, so this is the check that keeps it that way."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "rocketlite"
SHARED = SRC / "protocol" / "_native"
DEFINITION = re.compile(r"^cdef\s+(?:inline\s+)?(?:[\w*\[\]]+\s+)+?\**(\w+)\s*\(", re.MULTILINE)
# a hand-made big-endian 32-bit read (`p[0] << 24 | ...`) or a Java hash step over UTF-16 units
BY_HAND = re.compile(r"\[0\]\s*<<\s*24|0xD800\s*\+")


def sources() -> list[Path]:
    return sorted(p for p in SRC.rglob("_native/*") if p.suffix in (".pyx", ".pxi"))


def test_shared_helpers_are_defined_once() -> None:
    shared = {name: pxi.name for pxi in SHARED.glob("*.pxi") for name in DEFINITION.findall(pxi.read_text())}
    assert {"_get32", "_put64", "_hex64", "_java_hash_utf8", "_utf8_or_null", "_props_parse"} <= set(shared)
    again = [
        f"{path.relative_to(SRC)}: {name} (shared in {shared[name]})"
        for path in sources()
        if path.parent != SHARED
        for name in DEFINITION.findall(path.read_text())
        if name in shared
    ]
    assert again == []


def test_no_family_spells_byte_order_or_java_hashes_out() -> None:
    found = [
        f"{path.relative_to(SRC)}:{n}"
        for path in sources()
        if path.parent != SHARED
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if BY_HAND.search(line)
    ]
    assert found == []
