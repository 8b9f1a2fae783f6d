"""Offline, read-only tools over a store directory: `rocketlite store inspect|verify DIR`.

Nothing here writes: segments are opened read-only, so a store of a running broker, an archive or
a read-only copy (like the real RocketMQ commit log in the test data) can be examined. Segment
sizes are taken from the files themselves unless given. A path that is not a store root (missing,
or without `commitlog/`) is an error naming it, not an empty store.

A running broker holds a lock on the store's `lock` file (our brokers `flock` it and take a record
lock as Java's `FileChannel.tryLock` does: see `store_lock`), and keeps the `abort` file while it
runs. `lock_holder` finds the holder's pid in /proc/locks (all kinds show there), only reading;
where there is no /proc/locks it asks the kernel whether the file has a record lock, or takes a
shared flock and lets go at once. So inspect says "in use by a running broker (pid N)" instead of
reading the abort file as an unclean shutdown.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rocketlite.progress import ProgressCallback, no_progress
from rocketlite.protocol.errors import StoreError
from rocketlite.protocol.formats.consume_queue_unit import CQ_UNIT
from rocketlite.protocol.formats.index_layout import HEADER
from rocketlite.protocol.formats.record import DispatchRequest, ScanKind, ScanResult
from rocketlite.store.checkpoint import CHECKPOINT
from rocketlite.store.codec.speedups import scan_messages, scan_record
from rocketlite.store.mapped_file_queue import MappedFileQueue
from rocketlite.store.store_lock import locked_by_other


def _segment_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_file() and p.name.isdigit())


def _infer_size(files: list[Path], given: int | None) -> int:
    if given is not None:
        return given
    return files[0].stat().st_size if files else 0


@dataclass
class LogScan:
    """Everything a full scan of the commit log learns."""

    segment_size: int = 0
    segments: list[dict[str, Any]] = field(default_factory=list)
    records: int = 0
    blanks: int = 0
    min_offset: int = 0
    valid_end: int = 0
    problem: str = ""
    problem_offset: int = -1
    trailing_garbage: bool = False
    empty_tail_segments: int = 0  # all-zero segments after the end of data
    queues: dict[tuple[str, int], list[int]] = field(default_factory=dict)  # [min qoff, max qoff, count]
    first_store_ts: int = 0
    last_store_ts: int = 0
    records_at: dict[int, tuple[str, int, int, int]] = field(default_factory=dict)


# After the end of valid data only this much is read to tell a torn write (non-zero bytes) from a
# preallocated tail (zeros), as recovery does (`store/recovery.py` `_TORN_WINDOW`): a torn write
# is at most one record or batch in flight, and reading a 1 GiB segment's zeros took seconds.
TAIL_WINDOW = 8 * 1024 * 1024
# Records are scanned this many bytes at a time (one compiled call each), with progress between.
SCAN_CHUNK = 64 * 1024 * 1024


def _all_zero(view: memoryview) -> bool:
    return not np.frombuffer(view, dtype=np.uint8).any()


def scan_log(
    root: Path,
    segment_size: int | None,
    *,
    verify_crc: bool,
    keep_positions: bool,
    progress: ProgressCallback = no_progress,
) -> LogScan:
    """Scan every commit-log record from the first segment, checking magic, sizes and CRC.

    The scan stops at the end of valid data, as recovery does: after it, only `TAIL_WINDOW` bytes
    of the segment and of each later one are looked at (zeros: a preallocated tail; anything else:
    a torn write or data after the end). `progress` gets (bytes looked at, bytes of all segments).
    """
    directory = root / "commitlog"
    files = _segment_files(directory)
    out = LogScan(segment_size=_infer_size(files, segment_size))
    if not files:
        progress(0, 0)
        return out
    q = MappedFileQueue(directory, out.segment_size, readonly=True)
    q.load()
    try:
        total = sum(mf.file_size for mf in q)
        scanned = 0  # bytes of the segments before the current one that were looked at
        out.min_offset = q.min_offset
        expected = q.min_offset
        for mf in q:
            seg: dict[str, Any] = {"name": mf.path.name, "records": 0, "used": 0}
            out.segments.append(seg)
            if out.problem:
                continue
            if mf.file_from_offset != expected:
                if expected == -1:
                    head = mf.raw_view()[:TAIL_WINDOW]
                    scanned += len(head)
                    progress(scanned, total)
                    if _all_zero(head):
                        # Zeros after the end of data: pre-allocated (RocketMQ's allocator creates
                        # the next segment ahead of time); recovery deletes it.
                        out.empty_tail_segments += 1
                        continue
                    out.problem = f"segment {mf.path.name} holds data after the end of the log"
                    out.problem_offset = out.valid_end
                else:
                    out.problem = f"segment {mf.path.name} does not follow the previous one (gap)"
                    out.problem_offset = expected
                continue
            pos, res = _scan_segment(
                mf.raw_view(),
                mf.file_from_offset,
                seg,
                out,
                verify_crc,
                keep_positions,
                _offset_progress(progress, scanned, total),
            )
            if res is None:  # a record's PHYSICALOFFSET does not match its position
                continue
            if res.kind is ScanKind.BLANK:
                out.blanks += 1
                seg["used"] = pos
                expected = mf.file_from_offset + mf.file_size
                out.valid_end = expected
                scanned += mf.file_size
                progress(scanned, total)
                continue
            seg["used"] = pos
            out.valid_end = mf.file_from_offset + pos
            tail = mf.raw_view()[pos : pos + TAIL_WINDOW]
            scanned += pos + len(tail)
            progress(scanned, total)
            if res.kind is ScanKind.CORRUPT:
                out.problem = res.reason
                out.problem_offset = out.valid_end
            elif not _all_zero(tail):
                out.trailing_garbage = True
                out.problem = "non-zero bytes after the last valid record (torn write?)"
                out.problem_offset = out.valid_end
            expected = -1  # data ended inside this segment: no later segment may hold data
    finally:
        q.close()
    return out


def _offset_progress(progress: ProgressCallback, before: int, total: int) -> Callable[[int], None]:
    """A segment's position as the whole scan's progress."""
    return lambda at: progress(before + at, total)


def _scan_segment(
    view: memoryview,
    base: int,
    seg: dict[str, Any],
    out: LogScan,
    verify_crc: bool,
    keep_positions: bool,
    progress: Callable[[int], None],
) -> tuple[int, ScanResult | None]:
    """Count the segment's messages into `out` and `seg`, `SCAN_CHUNK` bytes per compiled call.

    Returns the position of the first record that is not a message and what `scan_record` says
    of it, or (position, None) after setting `out.problem` for a misplaced record.
    """
    pos = 0
    while True:
        reqs: list[DispatchRequest] = []
        end, stop = scan_messages(view, pos, pos + SCAN_CHUNK, reqs, verify_crc=verify_crc)
        placed = 0
        for req in reqs:
            if req.commit_log_offset != base + pos:
                break
            placed += 1
            pos += req.msg_size
        _count(out, reqs[:placed] if placed < len(reqs) else reqs, keep_positions)
        seg["records"] += placed
        if placed < len(reqs):
            out.problem = "record's PHYSICALOFFSET does not match its position"
            out.problem_offset = base + pos
            return pos, None
        pos = end
        progress(pos)
        if stop is not None:
            return pos, stop
        if pos >= len(view):  # a segment filled to the last byte: what is at its end says END
            return pos, scan_record(view, pos, verify_crc=verify_crc)


def _count(out: LogScan, reqs: list[DispatchRequest], keep_positions: bool) -> None:
    """Add `reqs` to the per-queue figures (one tight loop: this is most of a large scan's time)."""
    if not reqs:
        return
    out.records += len(reqs)
    if not out.first_store_ts:
        out.first_store_ts = reqs[0].store_timestamp
    out.last_store_ts = reqs[-1].store_timestamp
    queues = out.queues
    records_at = out.records_at
    for req in reqs:
        key = (req.topic, req.queue_id)
        qoff = req.consume_queue_offset
        stats = queues.get(key)
        if stats is None:
            queues[key] = [qoff, qoff, 1]
        else:
            if qoff < stats[0]:
                stats[0] = qoff
            elif qoff > stats[1]:
                stats[1] = qoff
            stats[2] += 1
        if keep_positions:
            records_at[req.commit_log_offset] = (req.topic, req.queue_id, qoff, req.msg_size)


def _consume_queues(root: Path) -> list[tuple[str, int, Path]]:
    base = root / "consumequeue"
    found: list[tuple[str, int, Path]] = []
    if not base.is_dir():
        return found
    for topic_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        for qdir in sorted(p for p in topic_dir.iterdir() if p.is_dir() and p.name.lstrip("-").isdigit()):
            found.append((topic_dir.name, int(qdir.name), qdir))
    return found


def _read_units(qdir: Path) -> tuple[int, list[tuple[int, int, int, int]]]:
    """(first logical offset of the first file, [(logical offset, phy, size, tags)]) of valid units.

    Each file is read only up to its first all-zero unit (the end of its data), not its whole
    preallocated size.
    """
    files = _segment_files(qdir)
    units: list[tuple[int, int, int, int]] = []
    first = int(files[0].name) // CQ_UNIT.size if files else 0
    for path in files:
        base = int(path.name) // CQ_UNIT.size
        with path.open("rb") as fh:
            i = 0
            ended = False
            while not ended:
                data = fh.read(_CQ_READ)
                for phy, size, tags in CQ_UNIT.iter_unpack(data[: len(data) // CQ_UNIT.size * CQ_UNIT.size]):
                    if phy == 0 and size == 0 and tags == 0:
                        ended = True
                        break
                    units.append((base + i, phy, size, tags))
                    i += 1
                ended = ended or len(data) < _CQ_READ
    return first, units


_CQ_READ = CQ_UNIT.size * 16384  # 320 KiB of consume-queue units per read

PROC_LOCKS = Path("/proc/locks")
UNKNOWN_PID = 0  # `lock_holder`: the lock is held, by a process /proc/locks does not name


def lock_holder(root: Path, proc_locks: Path = PROC_LOCKS) -> int | None:
    """The pid of the process holding the store's lock (a running broker), `UNKNOWN_PID` if it is
    held but the holder cannot be named, None if no process holds it."""
    path = root / "lock"
    try:
        st = path.stat()
    except OSError:
        return None
    try:
        table = proc_locks.read_text()
    except OSError:
        return UNKNOWN_PID if _lock_taken(path) else None
    exact = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    same_inode: list[int] = []
    for line in table.splitlines():
        fields = line.split()
        if len(fields) < 6 or fields[1] == "->":  # "->": a process waiting for the lock
            continue
        pid, file_id = fields[4], fields[5]
        if not pid.isdigit():
            continue
        if file_id == exact:
            return int(pid)
        if file_id.rsplit(":", 1)[-1] == str(st.st_ino):
            same_inode.append(int(pid))
    # Overlay file systems may show another device number: an inode match counts when the kernel
    # confirms that the file is locked.
    if same_inode and _lock_taken(path):
        return same_inode[0]
    return None


def _lock_taken(path: Path) -> bool:
    """Whether a broker holds `path`: a record lock on it (RocketMQ's, or ours, asked for without
    taking one), or an exclusive flock (a shared one is taken and released)."""
    if locked_by_other(path):
        return True
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing releases a lock we took
    return False


def check_store_root(root: Path) -> None:
    """Raise StoreError naming `root` unless it is a store root (a directory holding commitlog/)."""
    if not root.exists():
        raise StoreError(
            f"store {root} does not exist (give the store root: the directory holding commitlog/)"
        )
    if not (root / "commitlog").is_dir():
        raise StoreError(
            f"{root} is not a store: it has no commitlog directory (give the store root: the "
            "directory holding commitlog/)"
        )


def inspect_store(
    root: Path, *, commit_log_file_size: int | None = None, progress: ProgressCallback = no_progress
) -> dict[str, Any]:
    """A summary of a store directory (read-only); `progress` follows the commit-log scan.
    Raises StoreError when `root` is not a store root."""
    check_store_root(root)
    holder = lock_holder(root)
    scan = scan_log(root, commit_log_file_size, verify_crc=False, keep_positions=False, progress=progress)
    info: dict[str, Any] = {
        "root": str(root),
        "commitlog": {
            "segment_size": scan.segment_size,
            "segments": scan.segments,
            "records": scan.records,
            "blanks": scan.blanks,
            "min_offset": scan.min_offset,
            "end_of_valid_data": scan.valid_end,
            "first_store_timestamp": scan.first_store_ts,
            "last_store_timestamp": scan.last_store_ts,
            "problem": scan.problem or None,
        },
        "topics": {},
        "consumequeue": {},
        "index": [],
        "checkpoint": None,
        "abort_file": (root / "abort").exists(),
        "in_use_by_pid": holder,  # None: no broker holds the lock; 0: one does, pid unknown
    }
    topics: dict[str, Any] = info["topics"]
    for (topic, qid), (qmin, qmax, count) in sorted(scan.queues.items()):
        topics.setdefault(topic, {})[str(qid)] = {
            "min_offset": qmin,
            "max_offset": qmax + 1,
            "records": count,
        }
    cqs: dict[str, Any] = info["consumequeue"]
    for topic, qid, qdir in _consume_queues(root):
        _first, units = _read_units(qdir)
        real = [u for u in units if u[2] != 0x7FFFFFFF]
        cqs.setdefault(topic, {})[str(qid)] = {
            "min_offset": real[0][0] if real else 0,
            "max_offset": units[-1][0] + 1 if units else 0,
            "files": len(_segment_files(qdir)),
        }
    index_dir = root / "index"
    if index_dir.is_dir():
        for path in sorted(p for p in index_dir.iterdir() if p.is_file()):
            with path.open("rb") as fh:
                head = fh.read(HEADER.size)
            if len(head) == HEADER.size:
                bt, et, bp, ep, slots, count = HEADER.unpack(head)
                info["index"].append(
                    {"name": path.name, "begin_timestamp": bt, "end_timestamp": et, "begin_phy_offset": bp,
                     "end_phy_offset": ep, "hash_slots_used": slots, "index_count": count}
                )  # fmt: skip
    cp = root / "checkpoint"
    if cp.is_file():
        data = cp.read_bytes()[: CHECKPOINT.size]
        if len(data) == CHECKPOINT.size:
            p, lg, ix = CHECKPOINT.unpack(data)
            info["checkpoint"] = {"physicMsgTimestamp": p, "logicsMsgTimestamp": lg, "indexMsgTimestamp": ix}
    return info


def format_inspection(info: dict[str, Any]) -> str:
    """Human-readable text of `inspect_store`'s result."""
    cl = info["commitlog"]
    holder = info.get("in_use_by_pid")
    running = holder is not None
    lines = [
        f"store {info['root']}",
        *(
            [f"in use by a running broker ({_pid_text(holder)}): figures may change while it runs"]
            if running
            else []
        ),
        f"commit log: {len(cl['segments'])} segment(s) of {cl['segment_size']} bytes, "
        f"{cl['records']} records, {cl['blanks']} end-of-file blanks, "
        f"offsets {cl['min_offset']}..{cl['end_of_valid_data']}",
    ]
    for seg in cl["segments"]:
        lines.append(f"  {seg['name']}  records={seg['records']}  used={seg['used']}")
    if cl["problem"]:
        lines.append(f"  PROBLEM: {cl['problem']}")
    lines.append("topics (from the commit log): topic queue min..max records")
    for topic, queues in info["topics"].items():
        for qid, q in queues.items():
            lines.append(f"  {topic} {qid} {q['min_offset']}..{q['max_offset']} {q['records']}")
    lines.append("consume queues: topic queue min..max files")
    if not info["consumequeue"]:
        lines.append("  (none: a broker opening this store rebuilds them from the commit log)")
    for topic, queues in info["consumequeue"].items():
        for qid, q in queues.items():
            lines.append(f"  {topic} {qid} {q['min_offset']}..{q['max_offset']} {q['files']}")
    lines.append(f"index files: {len(info['index'])}")
    for ix in info["index"]:
        span = f"{ix['begin_phy_offset']}..{ix['end_phy_offset']}"
        lines.append(f"  {ix['name']} entries={ix['index_count'] - 1} phy {span}")
    cp = info["checkpoint"]
    lines.append(f"checkpoint: {cp if cp else 'absent'}")
    if not info["abort_file"]:
        abort = "absent"
    elif running:
        abort = f"present (in use by a running broker ({_pid_text(holder)}), which removes it when it stops)"
    else:
        abort = "present (last shutdown not clean)"
    lines.append(f"abort file: {abort}")
    return "\n".join(lines)


def _pid_text(pid: int | None) -> str:
    return "pid unknown" if not pid else f"pid {pid}"


@dataclass
class VerifyReport:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        out = [f"note: {n}" for n in self.notes]
        out += [f"BROKEN: {p}" for p in self.problems]
        out.append(
            "store verifies clean" if self.ok else f"store is broken ({len(self.problems)} problem(s))"
        )
        return out


def _unreadable_files(root: Path) -> list[str]:
    """`cannot read PATH: reason` for each store file that cannot be opened and read."""
    problems = []
    for path in sorted(root.rglob("*")):
        staged = path.name.endswith(".alloc") or path.parent.name.endswith(".alloc")
        if not path.is_file() or staged or path.name.endswith(".tmp") or path.name == "lock":
            continue
        try:
            with path.open("rb") as f:
                f.read(1)
        except OSError as exc:
            problems.append(f"cannot read {path}: {exc.strerror or exc}")
    return problems


def verify_store(
    root: Path,
    *,
    commit_log_file_size: int | None = None,
    max_reported: int = 20,
    progress: ProgressCallback = no_progress,
) -> VerifyReport:
    """Check the store as recovery would, without changing it.

    Problems: a corrupt record or garbage after the valid end of the commit log; consume-queue units
    pointing past the valid end or at a record of another topic, queue or queue offset; queue
    offsets with gaps. Consume queues that merely lag the log are notes (recovery rebuilds them).
    `progress` follows the commit-log scan, which stops at the end of valid data (`scan_log`).
    """
    report = VerifyReport()
    if not (root / "commitlog").is_dir():
        report.problems.append(f"{root} has no commitlog directory")
        return report
    unreadable = _unreadable_files(root)
    if unreadable:
        # A broker would refuse to start on these; report them rather than die on the first.
        report.problems.extend(unreadable)
        return report
    holder = lock_holder(root)
    if holder is not None:
        report.notes.append(
            f"in use by a running broker ({_pid_text(holder)}): what it writes during the check "
            "may show as queues behind the log"
        )
    scan = scan_log(root, commit_log_file_size, verify_crc=True, keep_positions=True, progress=progress)
    report.notes.append(
        f"commit log: {scan.records} records in {len(scan.segments)} segment(s), valid end {scan.valid_end}"
    )
    if scan.empty_tail_segments:
        report.notes.append(
            f"{scan.empty_tail_segments} empty segment(s) after the end of data (pre-allocated; "
            "a broker opening the store deletes them)"
        )
    if scan.problem:
        report.problems.append(f"commit log at offset {scan.problem_offset}: {scan.problem}")
    for (topic, qid), (qmin, qmax, count) in scan.queues.items():
        if qmax - qmin + 1 != count:
            report.problems.append(f"{topic}/{qid}: queue offsets {qmin}..{qmax} have gaps ({count} records)")
    for topic, qid, qdir in _consume_queues(root):
        _first, units = _read_units(qdir)
        bad = 0
        for logical, phy, size, _tags in units:
            if size == 0x7FFFFFFF:
                continue
            rec = scan.records_at.get(phy)
            if rec is None and phy >= scan.min_offset:
                bad += 1
                if bad <= max_reported:
                    report.problems.append(
                        f"consumequeue {topic}/{qid} offset {logical}: no record at commit-log offset {phy}"
                    )
            elif rec is not None and rec != (topic, qid, logical, size):
                bad += 1
                if bad <= max_reported:
                    report.problems.append(
                        f"consumequeue {topic}/{qid} offset {logical}: points at {rec[0]}/{rec[1]}#{rec[2]}"
                    )
        log_count = scan.queues.get((topic, qid), [0, -1, 0])
        behind = log_count[1] + 1 - (units[-1][0] + 1 if units else 0)
        if behind > 0:
            report.notes.append(
                f"consumequeue {topic}/{qid} is {behind} units behind the log (rebuilt on start)"
            )
    for (topic, qid), _stats in scan.queues.items():
        if not (root / "consumequeue" / topic / str(qid)).is_dir():
            report.notes.append(f"no consumequeue for {topic}/{qid} (rebuilt on start)")
    return report
