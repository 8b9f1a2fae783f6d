"""The `rocketmq-store` data source: a RocketMQ 4.x store directory read without any broker.

`spark.read.format("rocketmq-store").load(path)` where `path` is a store root (holding
`commitlog/`) or a commit-log directory itself. Rows have the `rocketmq` schema; `brokerName` comes
from the option of that name (empty by default).

Commit-log order (default): one partition per `maxBytesPerPartition` bytes of each segment
(64 MiB by default; a whole segment when it is smaller). A partition reads the records that
*start* in its byte range. Its first record is found by looking for the V1 magic code followed by
a PHYSICALOFFSET equal to the record's own position (a record names its commit-log offset), so
ranges need no index and split exactly at record boundaries. A scan ends at a segment's
end-of-file blank or at zeros (the end of written data). An inconsistent record (torn tail,
damaged bytes, CRC mismatch with `verifyCrc`) ends the data there when nothing valid follows it in
the partition's range; otherwise the reader logs the damaged byte range and resumes at the next
valid record (or fails, with `failOnCorruption=true`). System records are returned as stored:
SCHEDULE_TOPIC_XXXX (delayed), RMQ_SYS_TRANS_HALF_TOPIC (transaction halves), %RETRY%/%DLQ% topics;
filter with `topic`/`topicPattern` (cheap: done before rows are built).

Consume-queue order (`useConsumeQueue=true`): one partition per queue directory under
`consumequeue/`, rows in queue-offset order, following each unit to its record; units whose
record is gone (older segments deleted) are skipped, and the first unit that does not point at a
valid record ends the queue (units past a torn commit-log tail).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import mmap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from rocketlite.protocol.formats.consume_queue_unit import CQ_DTYPE, PADDING_SIZE
from rocketlite.protocol.formats.record import MESSAGE_MAGIC_CODE
from rocketlite.spark.options import StoreOptions
from rocketlite.spark.records import (
    Stop,
    decode_batch,
    scan_positions,
    validate_positions,
)
from rocketlite.spark.schema import COLUMNS, SPARK_DDL
from rocketlite.spark.worker import task_started

log = logging.getLogger("rocketlite.spark.store_source")

__all__ = ["CorruptStoreError", "RocketMQStoreDataSource", "SegmentRange", "commitlog_dir"]

DEFAULT_RANGE_BYTES: Final = 64 * 1024 * 1024
_PAGE: Final = 4096
_MAGIC: Final = MESSAGE_MAGIC_CODE.to_bytes(4, "big", signed=True)


class CorruptStoreError(RuntimeError):
    """Damaged commit-log bytes, with failOnCorruption=true."""


def commitlog_dir(path: Path) -> Path:
    """The commit-log directory of a store root, or `path` itself when it holds segments."""
    if (path / "commitlog").is_dir():
        return path / "commitlog"
    if path.is_dir() and any(p.name.isdigit() for p in path.iterdir()):
        return path
    raise ValueError(f"{path} is neither a RocketMQ store directory nor a commit-log directory")


def _segments(directory: Path) -> list[Path]:
    return sorted(
        (p for p in directory.iterdir() if p.is_file() and p.name.isdigit()), key=lambda p: int(p.name)
    )


@dataclass(frozen=True)
class SegmentRange(InputPartition):
    """Records starting in bytes [start, end) of one commit-log segment."""

    path: str
    base: int  # the segment's first commit-log offset (its name)
    start: int
    end: int


@dataclass(frozen=True)
class QueueFiles(InputPartition):
    """One consume queue: its files, and the commit-log segments they point into."""

    topic: str
    queue_id: int
    files: tuple[str, ...]
    segments: tuple[tuple[int, str], ...]  # (base offset, path), ascending


def plan_ranges(directory: Path, range_bytes: int | None) -> list[SegmentRange]:
    """Byte ranges of at most `range_bytes` over each segment's written data, of equal sizes.

    A segment is preallocated: its tail is zeros until records reach it. Cutting the whole file
    would give the last partitions nothing to read and the others unequal shares (three ranges
    of data and one of zeros run as two rounds on two cores, where the same bytes in four equal
    ranges take one and a half), so each segment's written part is cut into equal ranges and
    the last range runs to the end of the file. Where the written part ends is only a guess for
    balance (`_written_end`); every byte of the file is still in some range.
    """
    step = range_bytes or DEFAULT_RANGE_BYTES
    out: list[SegmentRange] = []
    for seg in _segments(directory):
        size = seg.stat().st_size
        used = _written_end(seg, size)
        count = max(1, -(-used // step))
        cuts = [used * i // count for i in range(count)] + [size]
        for start, end in itertools.pairwise(cuts):
            out.append(SegmentRange(str(seg), int(seg.name), start, max(end, start)))
    return out


def _written_end(path: Path, size: int) -> int:
    """The end of the last non-zero page of a segment, found by bisection (records are written
    from the start and the rest of a preallocated file is zeros; a page of zeros inside the data
    only makes the guess early, which costs balance, not rows)."""
    if size <= _PAGE:
        return size
    buf, mm = _open(str(path))
    try:
        lo, hi = 0, -(-size // _PAGE)  # page `lo` is taken as written, page `hi` as not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            page = buf[mid * _PAGE : (mid + 1) * _PAGE]
            if page.count(0) == len(page):
                hi = mid
            else:
                lo = mid
        return min(size, hi * _PAGE)
    finally:
        _close(mm)


def resync(buf: Any, base: int, start: int, limit: int) -> int | None:
    """The first position in [start, limit) where a valid record starts (see the module docstring)."""
    find = buf.find
    hit: int = find(_MAGIC, start + 4)
    while hit != -1 and hit - 4 < limit:
        pos = hit - 4
        if validate_positions(buf, np.array([pos], dtype=np.int64), base, False) is None:
            return pos
        hit = find(_MAGIC, hit + 1)
    return None


def _topic_filter(options: StoreOptions, batch: pa.RecordBatch) -> pa.RecordBatch:
    """The rows of the topics the options name.

    A log often holds one topic, or runs of one: the distinct topics of a batch are few, so the
    decision is made on them, and the batch is copied (`filter`) only when some rows go.
    """
    if not options.filters_topics or batch.num_rows == 0:
        return batch
    topics = batch.column("topic")
    distinct = pc.unique(topics).to_pylist()
    keep = [t for t in distinct if options.matches(t)]
    if len(keep) == len(distinct):
        return batch
    if not keep:
        return batch.slice(0, 0)
    return batch.filter(pc.is_in(topics, value_set=pa.array(keep, pa.string())))


def _open(path: str) -> tuple[Any, mmap.mmap | None]:
    with Path(path).open("rb") as f:
        size = Path(path).stat().st_size
        if size == 0:
            return b"", None
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return mm, mm


def _close(mm: mmap.mmap | None) -> None:
    if mm is not None:
        with contextlib.suppress(BufferError):  # an Arrow buffer still refers to it: GC closes it
            mm.close()


def read_segment_range(options: StoreOptions, part: SegmentRange) -> Iterator[pa.RecordBatch]:
    buf, mm = _open(part.path)
    try:
        size = len(buf)
        pos: int | None = part.start
        if part.start > 0:
            pos = resync(buf, part.base, part.start, min(part.end, size))
        while pos is not None and pos < part.end:
            scan = scan_positions(
                buf, pos, part.end, max_count=options.rows_per_batch, base_offset=part.base,
                verify_crc=options.verify_crc,
            )  # fmt: skip
            if len(scan.positions):
                batch = _topic_filter(options, decode_batch(buf, scan.positions, options.broker_name))
                if batch.num_rows:
                    yield batch
            pos = scan.next_pos
            if scan.stop is Stop.LIMIT:
                continue
            if scan.stop is not Stop.CORRUPT:
                break  # BLANK or END: no more records in this segment
            where = f"{Path(part.path).name} at byte {pos} (commit-log offset {part.base + pos})"
            if options.fail_on_corruption:
                raise CorruptStoreError(f"damaged record in {where}: {scan.reason}")
            resume = resync(buf, part.base, pos + 1, min(part.end, size))
            if resume is None:
                log.warning(
                    "%s: %s; nothing valid follows in this range: its data ends there", where, scan.reason
                )
                break
            log.warning(
                "%s: %s; skipped %d byte(s) to the next valid record", where, scan.reason, resume - pos
            )
            pos = resume
    finally:
        _close(mm)


def plan_queues(root: Path, directory: Path, options: StoreOptions) -> list[QueueFiles]:
    cq_root = root / "consumequeue"
    if not cq_root.is_dir():
        raise ValueError(f"useConsumeQueue=true but {cq_root} does not exist")
    segments = tuple((int(p.name), str(p)) for p in _segments(directory))
    out: list[QueueFiles] = []
    for topic_dir in sorted(p for p in cq_root.iterdir() if p.is_dir()):
        if not options.matches(topic_dir.name):
            continue
        for queue_dir in sorted(
            (p for p in topic_dir.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name)
        ):
            files = tuple(str(p) for p in _segments(queue_dir))
            if files:
                out.append(QueueFiles(topic_dir.name, int(queue_dir.name), files, segments))
    return out


def _queue_units(part: QueueFiles) -> npt.NDArray[Any]:
    """(phy, size) of the queue's real units, in queue order, up to the first empty unit."""
    chunks = []
    for name in part.files:
        raw = np.fromfile(name, dtype=np.uint8)
        in_file = raw[: len(raw) // CQ_DTYPE.itemsize * CQ_DTYPE.itemsize].view(CQ_DTYPE)
        empty = np.flatnonzero((in_file["phy"] == 0) & (in_file["size"] == 0))
        chunks.append(in_file[: int(empty[0])] if len(empty) else in_file)
        if len(empty):
            break
    units: npt.NDArray[Any] = np.concatenate(chunks) if chunks else np.zeros(0, dtype=CQ_DTYPE)
    real_units: npt.NDArray[Any] = units[
        (units["size"] != PADDING_SIZE) & (units["size"] > 0) & (units["phy"] >= 0)
    ]
    return real_units


def read_queue(options: StoreOptions, part: QueueFiles) -> Iterator[pa.RecordBatch]:
    units = _queue_units(part)
    if not len(units) or not part.segments:
        return
    phy = units["phy"].astype(np.int64)
    bases = np.array([b for b, _ in part.segments], dtype=np.int64)
    which = np.searchsorted(bases, phy, side="right") - 1
    phy, which = phy[which >= 0], which[which >= 0]  # units older than every segment left: gone
    for seg_index in np.unique(which).tolist():
        base, path = part.segments[seg_index]
        rel = phy[which == seg_index] - base
        buf, mm = _open(path)
        try:
            for lo in range(0, len(rel), options.rows_per_batch):
                chunk = rel[lo : lo + options.rows_per_batch]
                bad = validate_positions(buf, chunk, base, options.verify_crc)
                good = chunk if bad is None else chunk[: bad[0]]
                if len(good):
                    yield decode_batch(buf, good, options.broker_name)
                if bad is not None:
                    where = base + int(chunk[bad[0]])
                    log.warning(
                        "%s-%d: no valid record at commit-log offset %d (%s): the queue ends there",
                        part.topic, part.queue_id, where, bad[1],
                    )  # fmt: skip
                    return
        finally:
            _close(mm)


class StoreReader(DataSourceReader):
    def __init__(self, options: StoreOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        root = Path(self.options.path)
        directory = commitlog_dir(root)
        if self.options.use_consume_queue:
            return plan_queues(directory.parent, directory, self.options)
        return plan_ranges(directory, self.options.max_bytes_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        task_started()
        if isinstance(partition, QueueFiles):
            yield from read_queue(self.options, partition)
        elif isinstance(partition, SegmentRange):  # else Spark's stand-in for "no partitions"
            yield from read_segment_range(self.options, partition)


class RocketMQStoreDataSource(DataSource):
    """`spark.read.format("rocketmq-store").load(storeDir)`."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq-store"

    def schema(self) -> str:
        return SPARK_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        given = [f.name for f in schema.fields]
        if given != list(COLUMNS):
            raise ValueError(
                f"the rocketmq-store source has a fixed schema ({SPARK_DDL}); got columns {given}"
            )
        return StoreReader(StoreOptions.parse(self.options))
