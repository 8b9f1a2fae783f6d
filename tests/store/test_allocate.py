"""The commit log's segment allocation service: what it stages and when a put waits for it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from rocketlite.config import build_config
from rocketlite.store.allocate import AllocateMappedFileService, warm_pages
from rocketlite.store.config import StoreConfig
from rocketlite.store.mapped_file import segment_name, staging_path
from rocketlite.store.message_store import MessageStore
from rocketlite.store.results import PutMessageStatus
from tests.support.store import StoreFactory, message

SIZE = 1 << 20


def _blocks_reserved(path: Path) -> bool:
    return path.stat().st_blocks * 512 >= SIZE


def test_next_segment_is_staged_full_size_and_reads_zeros(tmp_path: Path) -> None:
    svc = AllocateMappedFileService()
    first = svc.allocate(tmp_path / segment_name(0), SIZE, False)
    nxt = tmp_path / segment_name(SIZE)
    assert not nxt.exists()
    svc.run_once()
    tmp = staging_path(nxt)
    assert tmp.stat().st_size == SIZE and tmp.read_bytes() == bytes(SIZE)
    second = svc.allocate(nxt, SIZE, False)  # renamed into place
    assert not tmp.exists() and nxt.stat().st_size == SIZE
    if not _blocks_reserved(nxt):  # pragma: no cover - file systems without fallocate
        pytest.skip("posix_fallocate not supported here")
    assert second.append(b"abc") == 0 and second.flush() == 3
    first.close()
    second.close()
    assert nxt.read_bytes()[:4] == b"abc\0"


def test_a_put_waits_only_for_the_segment_it_needs(tmp_path: Path) -> None:
    """While the service stages segment 1, allocating another segment does not wait for it;
    allocating segment 1 waits and then takes what was staged."""
    svc = AllocateMappedFileService()
    release = threading.Event()
    stage = svc._stage

    def slow_stage(tmp: Path, size: int) -> None:
        stage(tmp, size)
        if tmp == staging_path(tmp_path / segment_name(SIZE)):
            release.wait(10)

    svc._stage = slow_stage
    svc.allocate(tmp_path / segment_name(0), SIZE, False).close()
    worker = threading.Thread(target=svc.run_once)
    worker.start()
    try:
        deadline = time.monotonic() + 5
        while not staging_path(tmp_path / segment_name(SIZE)).exists() and time.monotonic() < deadline:
            time.sleep(0.001)
        t0 = time.monotonic()
        svc.allocate(tmp_path / segment_name(5 * SIZE), SIZE, False).close()
        assert time.monotonic() - t0 < 2  # not held up by the staging of segment 1
        got: list[float] = []

        def put_into_segment_1() -> None:
            t = time.monotonic()
            svc.allocate(tmp_path / segment_name(SIZE), SIZE, False).close()
            got.append(time.monotonic() - t)

        waiter = threading.Thread(target=put_into_segment_1)
        waiter.start()
        time.sleep(0.2)
        assert not got  # waits for the staging of the very segment it needs
        release.set()
        waiter.join(10)
        assert got and not staging_path(tmp_path / segment_name(SIZE)).exists()
    finally:
        release.set()
        worker.join(10)


def test_a_segment_nobody_staged_is_made_by_the_append_path(tmp_path: Path) -> None:
    svc = AllocateMappedFileService()
    path = tmp_path / segment_name(3 * SIZE)
    mf = svc.allocate(path, SIZE, False)
    assert path.stat().st_size == SIZE and not staging_path(path).exists()
    mf.close()
    svc.run_once()  # stages the next one; the segment just made is left alone
    assert staging_path(tmp_path / segment_name(4 * SIZE)).exists()


def test_segments_are_not_warmed_by_default(tmp_path: Path) -> None:
    """Without warmMapedFileEnable nothing is read: the pages of a segment are made by the
    appends themselves (allocate.py says why that is the default)."""
    svc = AllocateMappedFileService()
    first = svc.allocate(tmp_path / segment_name(0), SIZE, False)
    svc.run_once()
    second = svc.allocate(tmp_path / segment_name(SIZE), SIZE, False)
    svc.run_once()
    assert svc.warmed_bytes == 0
    assert staging_path(tmp_path / segment_name(2 * SIZE)).exists()
    first.close()
    second.close()


def test_created_and_staged_segments_are_warmed_once(tmp_path: Path) -> None:
    """With warming on, the service reads the segment the append path created and the one it
    stages through once (their pages into the page cache before appends touch them); a staged
    segment is not read again when it is renamed into use, and the bytes stay zeros (nothing is
    written)."""
    svc = AllocateMappedFileService(warm=True)
    first = svc.allocate(tmp_path / segment_name(0), SIZE, False)
    svc.run_once()  # warms segment 0, stages and warms segment 1
    assert svc.warmed_bytes == 2 * SIZE
    second = svc.allocate(tmp_path / segment_name(SIZE), SIZE, False)
    svc.run_once()  # segment 1 was warmed when staged; segment 2 is staged and warmed
    assert svc.warmed_bytes == 3 * SIZE
    assert (tmp_path / segment_name(SIZE)).read_bytes() == bytes(SIZE)
    assert warm_pages(tmp_path / "gone") == 0
    stop = threading.Event()
    stop.set()
    assert warm_pages(tmp_path / segment_name(0), stop) == 0
    first.close()
    second.close()


def test_a_clean_shutdown_leaves_only_segments(open_store: StoreFactory, tmp_path: Path) -> None:
    """The next segment is staged beside commitlog/, never in it (RocketMQ's broker loads every
    file of commitlog/ as a segment and refuses a store with any other name there;
    tests/peers/rocketmq/test_store_exchange.py opens a crashed store with it), and the staged
    file is removed at a clean shutdown."""
    store = open_store(tmp_path / "store")
    for i in range(40):
        assert store.put_message(message(body=bytes(4000), keys=f"k{i}")).status is PutMessageStatus.PUT_OK
    store.allocator.run_once()  # stage the next segment now
    commitlog = tmp_path / "store" / "commitlog"
    staged = tmp_path / "store" / "commitlog.alloc"
    assert list(staged.iterdir()) and all(p.name.isdigit() for p in commitlog.iterdir())
    store.shutdown()
    assert not staged.exists()
    assert all(p.name.isdigit() for p in commitlog.iterdir()), sorted(p.name for p in commitlog.iterdir())
    assert len(list(commitlog.iterdir())) >= 2  # rolled: 160 KB over 64 KiB segments


def test_warm_setting_reaches_the_store_allocator(tmp_path: Path) -> None:
    """`warmMapedFileEnable=true` in broker.conf turns warming on in the store's allocator."""
    on = build_config(StoreConfig, {"storePathRootDir": str(tmp_path), "warmMapedFileEnable": "true"})
    assert not StoreConfig().warm_maped_file_enable
    svc = MessageStore(on).allocator
    mf = svc.allocate(tmp_path / segment_name(0), SIZE, False)
    svc.run_once()
    assert svc.warmed_bytes == 2 * SIZE
    mf.close()
