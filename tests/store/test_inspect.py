"""`store inspect|verify` stop at the end of valid data and say how far they got.

A store of a few records in a 64 MiB preallocated segment (plus a preallocated, all-zero next
segment, as RocketMQ's allocator leaves behind) is scanned up to the end of its records and a
bounded window after it, not through the zeros: the bytes the progress callback reports show it.
The CLI, with stderr to a pipe, logs its progress; damage inside the window is still found.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import subprocess
from pathlib import Path

import pytest

from rocketlite.protocol.formats.record import MessageInner
from rocketlite.protocol.message import HostAddress, properties_to_string
from rocketlite.store.inspect import TAIL_WINDOW, UNKNOWN_PID, inspect_store, lock_holder, verify_store
from rocketlite.store.message_store import MessageStore
from rocketlite.store.results import PutMessageStatus
from tests.support.processes import ROCKETLITE, child_env
from tests.support.store import StoreFactory, small_config

HOST = HostAddress.parse("127.0.0.1:10911")
SEGMENT = 64 * 1024 * 1024
RECORDS = 20


def write_store(root: Path, *, segment: int = SEGMENT, count: int = RECORDS) -> int:
    """`count` messages in segments of `segment` bytes, a clean shutdown; returns the log's end."""
    store = MessageStore(small_config(root, maped_file_size_commit_log=segment))
    store.start()
    end = 0
    try:
        for i in range(count):
            msg = MessageInner(
                topic="T",
                body=b"x" * 300,
                born_host=HOST,
                store_host=HOST,
                queue_id=i % 2,
                properties_string=properties_to_string({"KEYS": f"k{i}"}),
                born_timestamp=1,
            )
            res = store.put_message(msg)
            assert res.status is PutMessageStatus.PUT_OK and res.append is not None
            end = res.append.wrote_offset + res.append.wrote_bytes
        assert store.wait_dispatched()
    finally:
        store.shutdown()
    return end


def add_empty_next_segment(root: Path) -> Path:
    """A preallocated next segment: all zeros (sparse here, which reads the same)."""
    path = root / "commitlog" / f"{SEGMENT:020d}"
    with path.open("wb") as fh:
        fh.truncate(SEGMENT)
    return path


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, done: int, total: int) -> None:
        self.calls.append((done, total))


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("big") / "store"
    end = write_store(root)
    add_empty_next_segment(root)
    return root, end


def test_inspect_stops_at_the_end_of_data(big_store: tuple[Path, int]) -> None:
    root, end = big_store
    progress = Recorder()
    info = inspect_store(root, progress=progress)
    assert info["commitlog"]["records"] == RECORDS
    assert info["commitlog"]["end_of_valid_data"] == end
    assert info["commitlog"]["problem"] is None
    assert info["topics"]["T"]["0"] == {"min_offset": 0, "max_offset": RECORDS // 2, "records": RECORDS // 2}
    done = [d for d, _ in progress.calls]
    assert done == sorted(done) and progress.calls[-1][1] == 2 * SEGMENT
    # the records, one window after them, one window of the empty segment: not 128 MiB of zeros
    assert progress.calls[-1][0] == end + 2 * TAIL_WINDOW < SEGMENT // 2


def test_verify_stops_at_the_end_of_data(big_store: tuple[Path, int]) -> None:
    root, end = big_store
    progress = Recorder()
    report = verify_store(root, progress=progress)
    assert report.ok, report.lines()
    assert f"commit log: {RECORDS} records in 2 segment(s), valid end {end}" in report.notes
    assert any("1 empty segment(s) after the end of data" in n for n in report.notes)
    assert progress.calls[-1] == (end + 2 * TAIL_WINDOW, 2 * SEGMENT)


def test_garbage_right_after_the_data_is_still_found(tmp_path: Path) -> None:
    root = tmp_path / "store"
    end = write_store(root)
    with (root / "commitlog" / f"{0:020d}").open("r+b") as fh:
        fh.seek(end + 1000)
        fh.write(b"\x5a" * 16)
    progress = Recorder()
    report = verify_store(root, progress=progress)
    assert report.problems == [
        f"commit log at offset {end}: non-zero bytes after the last valid record (torn write?)"
    ]
    assert progress.calls[-1][0] == end + TAIL_WINDOW
    info = inspect_store(root)
    assert info["commitlog"]["problem"] == "non-zero bytes after the last valid record (torn write?)"


def test_a_segment_with_data_after_the_end_of_the_log_is_still_found(tmp_path: Path) -> None:
    root = tmp_path / "store"
    end = write_store(root)
    path = add_empty_next_segment(root)
    with path.open("r+b") as fh:
        fh.write(b"\x5a" * 64)
    report = verify_store(root)
    assert report.problems == [
        f"commit log at offset {end}: segment {path.name} holds data after the end of the log"
    ]


def test_records_over_several_segments_are_all_counted(tmp_path: Path) -> None:
    """Small segments: every record of every segment, each end-of-file blank, the whole log read."""
    root = tmp_path / "store"
    segment = 64 * 1024
    end = write_store(root, segment=segment, count=600)
    progress = Recorder()
    report = verify_store(root, progress=progress)
    assert report.ok, report.lines()
    segments = len([p for p in (root / "commitlog").iterdir() if p.name.isdigit()])
    assert segments > 3
    assert f"commit log: 600 records in {segments} segment(s), valid end {end}" in report.notes
    info = inspect_store(root)
    assert info["commitlog"]["blanks"] == segments - 1
    assert sum(s["records"] for s in info["commitlog"]["segments"]) == 600
    assert progress.calls[-1] == (segments * segment, segments * segment)  # the window reaches its end


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ROCKETLITE, *args], capture_output=True, text=True, env=child_env(), check=False, timeout=60
    )


@pytest.mark.parametrize("tool", ["inspect", "verify"])
def test_cli_logs_progress_when_stderr_is_not_a_terminal(big_store: tuple[Path, int], tool: str) -> None:
    root, _end = big_store
    done = run_cli("store", tool, str(root))
    assert done.returncode == 0, done.stdout + done.stderr
    pattern = (
        rf"INFO +rocketlite\.store\.tools: store {tool}: commit log: read to the end of data, "
        r"16\.\d MiB of 128\.0 MiB, [\d.]+ [MG]B/s in [\d.]+ s$"
    )
    assert any(re.search(pattern, line) for line in done.stderr.splitlines()), done.stderr
    assert "\x1b[" not in done.stderr  # no terminal codes into a pipe


def test_recovery_logs_where_its_scan_ended(
    open_store: StoreFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "store"
    end = write_store(root, segment=64 * 1024, count=300)
    (root / "abort").touch()
    caplog.set_level(logging.INFO, logger="rocketlite.store.recovery")
    open_store(root)
    lines = [r.getMessage() for r in caplog.records if r.name == "rocketlite.store.recovery"]
    pattern = (
        rf"recovering commit log \(abnormal, from segment \d{{20}}\): \d+ records, valid data ends at "
        rf"offset {end}, [\d.]+ KiB of [\d.]+ KiB, ([\d.]+ [MG]B/s|-) in [\d.]+ s"
    )
    assert any(re.fullmatch(pattern, line) for line in lines), lines


# -- what inspect says about the path and about a running broker --------------------------------------


def test_inspect_of_a_path_that_is_not_a_store_fails_naming_it(tmp_path: Path) -> None:
    """A mistyped path is an error naming it (exit 2), not an empty store with exit 0; so is a
    directory inside a store (commitlog/ itself) or any directory without commitlog/."""
    missing = tmp_path / "dat"
    done = run_cli("store", "inspect", str(missing))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.strip().splitlines()[-1] == (
        f"rocketlite: error: store {missing} does not exist (give the store root: the directory "
        "holding commitlog/)"
    )
    write_store(tmp_path / "store", segment=64 * 1024, count=3)
    inner = tmp_path / "store" / "commitlog"
    done = run_cli("store", "inspect", "--json", str(inner))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.strip().splitlines()[-1] == (
        f"rocketlite: error: {inner} is not a store: it has no commitlog directory (give the store "
        "root: the directory holding commitlog/)"
    )


def test_inspect_of_a_running_brokers_store_says_so(open_store: StoreFactory, tmp_path: Path) -> None:
    """While a store is open (its lock held by this process, as a broker holds it) the abort file
    is the running broker's, not an unclean shutdown; after a clean stop both lines go; an abort
    file with nobody holding the lock is an unclean shutdown."""
    root = tmp_path / "store"
    store = open_store(root)
    running = run_cli("store", "inspect", str(root))
    assert running.returncode == 0, running.stderr
    lines = running.stdout.splitlines()
    pid = os.getpid()
    assert lines[1] == f"in use by a running broker (pid {pid}): figures may change while it runs"
    assert lines[-1] == (
        f"abort file: present (in use by a running broker (pid {pid}), which removes it when it stops)"
    )
    assert "not clean" not in running.stdout
    as_json = json.loads(run_cli("store", "inspect", "--json", str(root)).stdout)
    assert (as_json["in_use_by_pid"], as_json["abort_file"]) == (pid, True)
    verified = run_cli("store", "verify", str(root))
    assert f"note: in use by a running broker (pid {pid})" in verified.stdout
    store.shutdown()
    stopped = run_cli("store", "inspect", str(root)).stdout.splitlines()
    assert not any("in use" in line for line in stopped) and stopped[-1] == "abort file: absent"
    (root / "abort").touch()  # what a broker killed with SIGKILL leaves
    crashed = run_cli("store", "inspect", str(root)).stdout.splitlines()
    assert not any("in use" in line for line in crashed)
    assert crashed[-1] == "abort file: present (last shutdown not clean)"


def test_lock_holder_sees_java_locks_and_works_without_proc_locks(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    """A Java broker's lock is a POSIX lock on the file's first byte (`FileChannel.tryLock(0, 1,
    false)`), which /proc/locks lists too; without /proc/locks the holder is found by asking for a
    shared lock, and cannot be named."""
    root = tmp_path / "java"
    write_store(root, segment=64 * 1024, count=1)
    fd = os.open(root / "lock", os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        assert lock_holder(root) == os.getpid()
    finally:
        os.close(fd)
    assert lock_holder(root) is None
    ours = tmp_path / "ours"
    store = open_store(ours)
    assert lock_holder(ours, proc_locks=tmp_path / "no-proc-locks") == UNKNOWN_PID
    store.shutdown()
    assert lock_holder(ours, proc_locks=tmp_path / "no-proc-locks") is None
    assert lock_holder(tmp_path / "nothing-here") is None
