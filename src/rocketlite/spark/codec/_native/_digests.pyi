from collections.abc import Iterable

def blake2b_digests(
    data: bytes | bytearray | memoryview, offsets: Iterable[int], digest_size: int = 16
) -> bytes: ...
