"""`BloomFilter`: the bit positions RocketMQ's broker gives a consumer's SQL92 filter data.

RocketMQ keeps, for each (group, topic) with a property filter, a `BloomFilterData`: the bit
positions of the string `group#topic` in a bloom filter of `m` bits (`bitNum`), persisted in
`consumerFilter.json`. A RocketMQ broker that loads the file checks that every entry's
`bitNum` and number of positions fit its own filter and ignores the whole file otherwise, so
rocketlite writes the same numbers. (rocketlite has no bit-map pre-check in its consume queues:
the positions are written, not used.)

The sizes, from the broker's `maxErrorRateOfBloomFilter` f (percent) and
`expectConsumerNumUseFilter` n: k = ceil(log(f/100) / log(0.5)) hash functions and
m = ceil(n * log2(100/f) * log2(e)) bits, rounded up to a multiple of 8 (f=20, n=32: k=3, m=112).
The positions use MurmurHash3 x64 128 (seed 0) of the UTF-8 text: its first 8 bytes as a
little-endian long give two 32-bit halves h1 (low) and h2 (high); position i (1..k) is
h1 + i*h2 in 32-bit arithmetic, bit-flipped when negative, modulo m (Kirsch and Mitzenmacher).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Final

_M64: Final = (1 << 64) - 1
_C1: Final = 0x87C37B91114253D5
_C2: Final = 0x4CF5AD432745937F
_BLOCK: Final = struct.Struct("<QQ")


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M64
    return k ^ (k >> 33)


def murmur3_x64_128(data: bytes, seed: int = 0) -> tuple[int, int]:
    """MurmurHash3's x64 128-bit hash of `data`: (h1, h2), each an unsigned 64-bit int."""
    h1 = h2 = seed & _M64
    blocks = len(data) // 16
    for i in range(blocks):
        k1, k2 = _BLOCK.unpack_from(data, i * 16)
        h1 ^= (_rotl((k1 * _C1) & _M64, 31) * _C2) & _M64
        h1 = (((_rotl(h1, 27) + h2) & _M64) * 5 + 0x52DCE729) & _M64
        h2 ^= (_rotl((k2 * _C2) & _M64, 33) * _C1) & _M64
        h2 = (((_rotl(h2, 31) + h1) & _M64) * 5 + 0x38495AB5) & _M64
    tail = data[blocks * 16 :]
    if len(tail) > 8:
        k2 = int.from_bytes(tail[8:], "little")
        h2 ^= (_rotl((k2 * _C2) & _M64, 33) * _C1) & _M64
    if tail:
        k1 = int.from_bytes(tail[:8], "little")
        h1 ^= (_rotl((k1 * _C1) & _M64, 31) * _C2) & _M64
    h1 ^= len(data)
    h2 ^= len(data)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    return h1, h2


def _int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


@dataclass(frozen=True, slots=True)
class BloomFilterData:
    """`BloomFilterData`: a string's bit positions and the filter's size in bits."""

    bit_pos: tuple[int, ...]
    bit_num: int

    def to_json_obj(self) -> dict[str, object]:
        return {"bitNum": self.bit_num, "bitPos": list(self.bit_pos)}


class BloomFilter:
    """The filter's sizes (`k` hash functions, `m` bits) and the positions of a string."""

    __slots__ = ("k", "m")

    def __init__(self, error_rate_percent: int = 20, expected: int = 32) -> None:
        if not 1 <= error_rate_percent < 100:
            raise ValueError("maxErrorRateOfBloomFilter must be 1..99")
        if expected < 1:
            raise ValueError("expectConsumerNumUseFilter must be above 0")
        rate = error_rate_percent / 100
        self.k = math.ceil(math.log(rate) / math.log(0.5))
        m = math.ceil(expected * math.log(1 / rate, 2) * math.log(math.e, 2))
        self.m = 8 * math.ceil(m / 8)

    def generate(self, text: str) -> BloomFilterData:
        h1, _ = murmur3_x64_128(text.encode("utf-8"))
        low, high = _int32(h1), _int32(h1 >> 32)
        positions = []
        for i in range(1, self.k + 1):
            combined = _int32(low + i * high)
            if combined < 0:
                combined = ~combined
            positions.append(combined % self.m)
        return BloomFilterData(tuple(positions), self.m)

    def is_valid(self, data: BloomFilterData | None) -> bool:
        """Whether `data` belongs to a filter of this size (RocketMQ's `isValid`)."""
        return data is not None and data.bit_num == self.m and len(data.bit_pos) == self.k
