"""The Spark family's chooser: the compiled column codecs or their references, and the tier the
readers run on.

Each codec here has a reference written for clarity and a compiled twin in `_native/` that gives
the same results, pinned together by `tests/spark/test_native_columns.py` and
`tests/spark/test_native_digests.py`:

* `decode_record_columns`, `first_crc_mismatch`, `first_invalid_record`, `record_starts`
  (records as Arrow column buffers, many records' body CRCs and structure checked at once, the
  hop from record to record of a raw scan): `columns_ref`; compiled in `_native/_columns.pyx`;
* `blake2b_digests` (many BLAKE2b digests in one call, the sink's message ids): `digests_ref`;
  compiled in `_native/_digests.pyx`.

The columnar references go record by record in Python. Without the compiled twin the readers do
not run them: they take their own vectorised numpy and Arrow paths (`spark/records.py`
`_decode_columns`, `spark/scan.py` `_validate_numpy`), an order of magnitude faster than the
per-record code on a machine without a C compiler, and checked against the per-record decoder
by `tests/spark/test_records.py`. `TIER` says which of the three the readers take, so they ask
here instead of choosing again:

* `Tier.COMPILED`: the compiled column codecs;
* `Tier.NUMPY`: the compiled module is not built; the numpy paths;
* `Tier.REFERENCE`: `ROCKETLITE_NATIVE=0`; the per-record decoder (`records.decode_batch_py`), the
  structural checks on their numpy path.

`rocketlite.native` holds the one setting (`ROCKETLITE_NATIVE`) every family's chooser reads.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from rocketlite import native
from rocketlite.spark.codec import columns_ref, digests_ref

__all__ = [
    "CHOSEN",
    "NATIVE_MODULES",
    "REFERENCE",
    "TIER",
    "Codecs",
    "Tier",
    "blake2b_digests",
    "decode_record_columns",
    "first_crc_mismatch",
    "first_invalid_record",
    "record_starts",
]

_Bytes = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True, kw_only=True)
class Codecs:
    """One implementation of every codec of the Spark family (built by keyword)."""

    name: str
    decode_record_columns: Callable[[_Bytes, _Bytes], columns_ref.RecordColumns | None]
    first_crc_mismatch: Callable[[_Bytes, _Bytes], int]
    first_invalid_record: Callable[[_Bytes, _Bytes, int, bool], tuple[int, int]]
    record_starts: Callable[[_Bytes, int, int, int], columns_ref.RecordStarts]
    blake2b_digests: Callable[[_Bytes, Iterable[int]], bytes]


REFERENCE: Final = Codecs(
    name="reference",
    decode_record_columns=columns_ref.decode_record_columns,
    first_crc_mismatch=columns_ref.first_crc_mismatch,
    first_invalid_record=columns_ref.first_invalid_record,
    record_starts=columns_ref.record_starts,
    blake2b_digests=digests_ref.blake2b_digests,
)

# The compiled modules, each providing some of the `Codecs` fields under the same names.
NATIVE_MODULES: Final = (
    "rocketlite.spark.codec._native._columns",
    "rocketlite.spark.codec._native._digests",
)

CHOSEN: Final = native.load(REFERENCE, NATIVE_MODULES)


class Tier(enum.Enum):
    """What the columnar readers run on (see the module docstring)."""

    COMPILED = "compiled"
    NUMPY = "numpy"
    REFERENCE = "reference"


TIER: Final = (
    Tier.REFERENCE
    if native.REFERENCE_ONLY
    else Tier.COMPILED
    if CHOSEN.decode_record_columns is not REFERENCE.decode_record_columns
    else Tier.NUMPY
)

decode_record_columns: Final = CHOSEN.decode_record_columns
first_crc_mismatch: Final = CHOSEN.first_crc_mismatch
first_invalid_record: Final = CHOSEN.first_invalid_record
record_starts: Final = CHOSEN.record_starts
blake2b_digests: Final = CHOSEN.blake2b_digests
