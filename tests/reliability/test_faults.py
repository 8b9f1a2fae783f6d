"""Fault injection against a real broker process: a full disk, an unreadable file, a slow disk.

* Disk full: the store lives on a 4 MiB tmpfs (mounting needs root; skipped otherwise) that a
  filler file then fills to the last byte. Sends must get a clear error, reads must keep
  working, nothing acknowledged may be lost, and once the filler is gone writes resume with no
  restart. Afterwards the store restarts and verifies clean.
* Unreadable file: a Python audit hook installed in the broker process (the same process
  otherwise) makes opening one named store file fail with EACCES, as `chmod 000` would for a
  non-root broker. The broker must refuse to start with the file's name in the message and
  change nothing on disk; `rocketlite store verify` must fail the same way.
* Slow disk: `slow_disk.c`, LD_PRELOADed into the broker, delays every fdatasync/fsync/msync (or
  pwrite) by what a control file says. SYNC_FLUSH sends must answer FLUSH_DISK_TIMEOUT after
  `syncFlushTimeout` (the message is stored), other requests must not wait for the disk, and
  when the disk is fast again sends succeed and every message is there. With
  `transientStorePoolEnable`, slow writes must not let segment buffers pile up in memory: once
  `transientStorePoolSize` are taken, sends get SYSTEM_BUSY.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.wire.command import make_request
from rocketlite.remoting.client import RemotingClient
from tests.support.ports import broker_port, free_port
from tests.support.processes import ROCKETLITE, child_env
from tests.support.wire import QUEUES, TOPIC, pull_queue, query_key, send_request

SMALL_SEGMENTS = {"mapedFileSizeCommitLog": "65536", "mapedFileSizeConsumeQueue": "2000"}
HERE = Path(__file__).resolve().parent

# Makes `open` of any path ending with $UNREADABLE fail with EACCES, then runs the CLI.
_UNREADABLE_WRAPPER = """
import os, sys
target = os.environ["UNREADABLE"]
def hook(event, args):
    if event == "open" and args and str(args[0]).endswith(target):
        raise PermissionError(13, "Permission denied", str(args[0]))
sys.addaudithook(hook)
from rocketlite.cli import main
sys.exit(main(sys.argv[1:]))
"""


class Broker:
    """`rocketlite broker -c broker.conf` as a child process on a free port."""

    def __init__(self, root: Path, store: Path, settings: dict[str, str], env: dict[str, str] | None = None,
                 wrapper: str | None = None) -> None:  # fmt: skip
        self.port = broker_port()  # its VIP (port - 2) must be free too
        conf = {
            "brokerClusterName": "FaultCluster",
            "brokerName": "fault-broker",
            "listenPort": str(self.port),
            "haListenPort": str(free_port()),
            "storePathRootDir": str(store),
            "mapedFileSizeCommitLog": str(1 << 20),
            "mapedFileSizeConsumeQueue": "20000",
            "maxHashSlotNum": "1000",
            "maxIndexNum": "4000",
            "autoCreateTopicEnable": "true",
            **settings,
        }
        self.conf = root / "broker.conf"
        self.conf.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        self.log_path = root / f"broker-{self.port}.log"
        head = [sys.executable, "-c", wrapper] if wrapper else [*ROCKETLITE]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [*head, "--log-level", "WARNING", "broker", "-c", str(self.conf)],
                stdout=log, stderr=log, env=child_env(env),
            )  # fmt: skip
        self.addr = f"127.0.0.1:{self.port}"

    @property
    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, f"broker exited with {self.proc.returncode}:\n{self.output}"
            try:
                _r, w = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                assert time.monotonic() < deadline, "broker did not start listening"
                await asyncio.sleep(0.02)  # polling for the listener to appear
                continue
            w.close()
            return

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()


def _store_verify(store: Path, hook_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    head = [sys.executable, "-c", _UNREADABLE_WRAPPER] if hook_env else [*ROCKETLITE]
    command = [*head, "store", "verify", str(store)]
    env = child_env(hook_env)
    return subprocess.run(command, check=False, capture_output=True, text=True, env=env, timeout=120)


async def _send(client: RemotingClient, addr: str, key: str, body_size: int = 0) -> tuple[int, str, int, int]:
    """Send one message with KEYS=key; (code, remark, queueId, queueOffset)."""
    body = f"body-{key}".encode().ljust(body_size, b".")
    request = send_request(key, sum(key.encode()) % QUEUES, body)
    r = await client.invoke(addr, request, timeout=30.0)
    ext = r.ext_fields
    if r.code in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT):
        return r.code, r.remark or "", int(ext["queueId"]), int(ext["queueOffset"])
    return r.code, r.remark or "", -1, -1


async def _all_queues(client: RemotingClient, addr: str) -> dict[str, tuple[int, int]]:
    found: dict[str, tuple[int, int]] = {}
    for queue_id in range(QUEUES):
        entries = await pull_queue(client, addr, queue_id)
        assert [off for off, _ in entries] == list(range(len(entries))), f"queue {queue_id} has gaps"
        for off, key in entries:
            assert key not in found, f"{key} stored twice"
            found[key] = (queue_id, off)
    return found


async def _await_consumable(client: RemotingClient, addr: str, acks: dict[str, tuple[int, int]],
                            timeout: float = 30.0) -> dict[str, tuple[int, int]]:  # fmt: skip
    """Pull until every ack is in its queue (dispatch may still be catching up)."""
    deadline = time.monotonic() + timeout
    while True:
        found = await _all_queues(client, addr)
        if all(found.get(k) == v for k, v in acks.items()) or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.1)  # dispatch retries on its own schedule; nothing to await here


# -- disk full ------------------------------------------------------------------------------------
@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "fs"
    mnt.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)]
    done = subprocess.run(mount, check=False, capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(path: Path) -> int:
    """Write zeros to `path` until the file system is full; bytes written."""
    chunk = bytes(64 * 1024)
    total = 0
    with path.open("wb", buffering=0) as f:
        while True:
            try:
                total += f.write(chunk) or 0
            except OSError as exc:
                assert exc.errno == 28, exc
                break
        for size in (4096, 512, 1):  # the last partial blocks
            while True:
                try:
                    total += f.write(bytes(size)) or 0
                except OSError:
                    break
    return total


def test_disk_full_refuses_puts_keeps_reads_and_resumes(small_fs: Path, tmp_path: Path) -> None:
    store = small_fs / "store"
    # The disk guard (diskSpaceWarningLevelRatio) is kept out of the way: this is about the real ENOSPC.
    settings = {"diskSpaceWarningLevelRatio": "100", "diskSpaceCleanForciblyRatio": "100",
                "cleanResourceInterval": "3600000"}  # fmt: skip

    async def scenario() -> None:
        broker = Broker(tmp_path, store, settings)
        client = RemotingClient()
        acks: dict[str, tuple[int, int]] = {}
        try:
            await broker.ready()
            for i in range(50):  # some data before the disk fills
                code, remark, q, off = await _send(client, broker.addr, f"pre-{i}", 1024)
                assert code == ResponseCode.SUCCESS, (code, remark)
                acks[f"pre-{i}"] = (q, off)
            assert _fill(small_fs / "filler") > 0
            failures: list[tuple[int, str]] = []
            for i in range(6000):  # at most ~6 MiB: more than the whole file system
                code, remark, q, off = await _send(client, broker.addr, f"full-{i}", 1024)
                if code == ResponseCode.SUCCESS:
                    acks[f"full-{i}"] = (q, off)
                    continue
                failures.append((code, remark))
                if len(failures) == 5:
                    break
            assert len(failures) == 5, "the disk never filled up"
            for code, remark in failures:
                assert code == ResponseCode.SYSTEM_ERROR, (code, remark)
                assert "create mapped file failed" in remark and "No space left on device" in remark, remark
            # Reads keep working while writes fail.
            assert await query_key(client, broker.addr, "pre-7") == ["body-pre-7".ljust(1024, ".")]
            found = await _all_queues(client, broker.addr)
            assert found.get("pre-0") == acks["pre-0"]
            # Space returns: the very next put creates its segment; dispatch catches up on its own.
            (small_fs / "filler").unlink()
            for i in range(200):
                code, remark, q, off = await _send(client, broker.addr, f"after-{i}", 1024)
                assert code == ResponseCode.SUCCESS, (i, code, remark)
                acks[f"after-{i}"] = (q, off)
            found = await _await_consumable(client, broker.addr, acks)
            assert {k: found.get(k) for k in acks} == acks
        finally:
            await client.close()
            assert broker.stop() == 0, broker.output
        assert "Traceback" not in broker.output.replace("OSError: [Errno 28]", ""), broker.output[-3000:]

        # A restart finds every acknowledged message, by queue and by key, and the store is sound.
        again = Broker(tmp_path, store, settings)
        client = RemotingClient()
        try:
            await again.ready()
            found = await _all_queues(client, again.addr)
            assert {k: found.get(k) for k in acks} == acks
            for key in ("pre-3", "full-0", f"after-{199}"):
                assert len(await query_key(client, again.addr, key)) == 1, key
        finally:
            await client.close()
            again.stop()
        verify = _store_verify(store)
        assert verify.returncode == 0, verify.stdout + verify.stderr

    asyncio.run(scenario())


# -- unreadable file ------------------------------------------------------------------------------
def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".alloc") and p.name != "lock"
    }


@pytest.fixture(scope="module")
def written_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with 600 messages in 64 KiB segments (several of each kind of file), cleanly shut."""
    root = tmp_path_factory.mktemp("unreadable")
    store = root / "store"

    async def fill() -> None:
        broker = Broker(root, store, SMALL_SEGMENTS)
        client = RemotingClient()
        try:
            await broker.ready()
            for i in range(600):
                code, remark, _, _ = await _send(client, broker.addr, f"m-{i}", 300)
                assert code == ResponseCode.SUCCESS, (code, remark)
        finally:
            await client.close()
            assert broker.stop() == 0, broker.output

    asyncio.run(fill())
    return store


@pytest.mark.parametrize(
    "victim",
    ["commitlog", "consumequeue", "index", "checkpoint", "config/topics.json", "config/consumerOffset.json"],
)
def test_unreadable_file_stops_startup_and_changes_nothing(written_store: Path, victim: str,
                                                          tmp_path: Path) -> None:  # fmt: skip
    store = written_store
    if victim == "commitlog":
        segments = sorted(p.name for p in (store / "commitlog").iterdir() if "." not in p.name)
        target = "commitlog/" + segments[1]
    elif victim == "consumequeue":
        queue_dir = next(p for p in (store / "consumequeue" / TOPIC).iterdir() if len(list(p.iterdir())) > 1)
        target = str(sorted(queue_dir.iterdir())[1].relative_to(store))
    elif victim == "index":
        target = "index/" + next(iter(sorted(p.name for p in (store / "index").iterdir())))
    else:
        target = victim
    assert (store / target).is_file(), target
    before = _digest(store)

    broker = Broker(tmp_path, store, SMALL_SEGMENTS,
                    env={"UNREADABLE": target}, wrapper=_UNREADABLE_WRAPPER)  # fmt: skip
    try:
        code = broker.proc.wait(60)
    finally:
        broker.stop()
    assert code == 2, broker.output
    assert f"Permission denied: '{store / target}'" in broker.output, broker.output
    assert _digest(store) == before, "a failed start changed the store"
    assert not (store / "abort").exists(), "a failed start left the abort file (forcing abnormal recovery)"

    verify = _store_verify(store, {"UNREADABLE": target})
    assert verify.returncode == 1, verify
    assert f"BROKEN: cannot read {store / target}: Permission denied" in verify.stdout, verify
    assert _digest(store) == before

    async def still_whole() -> None:  # readable again: everything is there
        again = Broker(tmp_path, store, SMALL_SEGMENTS)
        client = RemotingClient()
        try:
            await again.ready()
            found = await _all_queues(client, again.addr)
            assert sorted(found) == sorted(f"m-{i}" for i in range(600))
        finally:
            await client.close()
            assert again.stop() == 0, again.output

    asyncio.run(still_whole())


# -- slow disk ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def slow_disk_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the LD_PRELOAD slow-disk shim")
    out = tmp_path_factory.mktemp("shim") / "slow_disk.so"
    source = HERE / "slow_disk.c"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(out), str(source), "-ldl"], check=True)
    return out


def test_slow_fsync_answers_flush_disk_timeout_and_never_hangs(slow_disk_lib: Path, tmp_path: Path) -> None:
    ctl = tmp_path / "sync_delay_ms"
    ctl.write_text("0")
    settings = {"flushDiskType": "SYNC_FLUSH", "syncFlushTimeout": "400"}
    env = {"LD_PRELOAD": str(slow_disk_lib), "SLOW_SYNC_CTL": str(ctl)}

    async def scenario() -> None:
        broker = Broker(tmp_path, tmp_path / "store", settings, env=env)
        client = RemotingClient()
        stored: dict[str, tuple[int, int]] = {}
        try:
            await broker.ready()
            code, remark, q, off = await _send(client, broker.addr, "fast-0")
            assert code == ResponseCode.SUCCESS, (code, remark)
            stored["fast-0"] = (q, off)

            ctl.write_text("3000")  # every sync now takes 3 s
            started = time.monotonic()
            results = await asyncio.gather(*(_send(client, broker.addr, f"slow-{i}") for i in range(20)))
            answered_in = time.monotonic() - started
            # Probe: a request that needs no disk is answered while the sync is stuck.
            probe_started = time.monotonic()
            r = await client.invoke(broker.addr, make_request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 5.0)
            probe_s = time.monotonic() - probe_started
            assert r.code == ResponseCode.SUCCESS and probe_s < 1.0, (r.code, probe_s)
            for i, (code, remark, q, off) in enumerate(results):
                assert code == ResponseCode.FLUSH_DISK_TIMEOUT, (i, code, remark)
                stored[f"slow-{i}"] = (q, off)  # FLUSH_DISK_TIMEOUT: stored, not yet durable
            # Every answer came after syncFlushTimeout, long before the 3 s sync finished.
            assert 0.4 <= answered_in < 2.5, answered_in

            ctl.write_text("0")
            # The sync in progress still has its 3 s to serve; then sends are fast again.
            deadline = time.monotonic() + 15
            i = 0
            while True:
                code, remark, q, off = await _send(client, broker.addr, f"back-{i}")
                assert code in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT), (code, remark)
                stored[f"back-{i}"] = (q, off)
                i += 1
                if code == ResponseCode.SUCCESS:
                    break
                assert time.monotonic() < deadline, "sends never became durable again"
            found = await _await_consumable(client, broker.addr, stored)
            assert {k: found.get(k) for k in stored} == stored
        finally:
            await client.close()
            assert broker.stop() == 0, broker.output
        assert "sync flush timed out" in broker.output

    asyncio.run(scenario())


Stored = dict[str, tuple[int, int]]


async def _send_until_success(client: RemotingClient, addr: str, prefix: str, stored: Stored,
                              allowed: tuple[int, ...], timeout: float = 15.0) -> None:  # fmt: skip
    """Send until one is answered SUCCESS (the disk has caught up); record what was stored."""
    deadline = time.monotonic() + timeout
    i = 0
    while True:
        code, remark, q, off = await _send(client, addr, f"{prefix}-{i}", 1024)
        assert code in (ResponseCode.SUCCESS, *allowed), (code, remark)
        if q >= 0:
            stored[f"{prefix}-{i}"] = (q, off)
        i += 1
        if code == ResponseCode.SUCCESS:
            return
        assert time.monotonic() < deadline, "sends never succeeded again"


def test_slow_writes_with_write_buffers_answer_system_busy(slow_disk_lib: Path, tmp_path: Path) -> None:
    ctl = tmp_path / "write_delay_ms"
    ctl.write_text("0")
    settings = {
        **SMALL_SEGMENTS,
        "transientStorePoolEnable": "true",
        "transientStorePoolSize": "2",
        "commitIntervalCommitLog": "50",
    }
    env = {"LD_PRELOAD": str(slow_disk_lib), "SLOW_WRITE_CTL": str(ctl)}

    async def scenario() -> None:
        broker = Broker(tmp_path, tmp_path / "store", settings, env=env)
        client = RemotingClient()
        stored: dict[str, tuple[int, int]] = {}
        try:
            await broker.ready()
            await _send_until_success(client, broker.addr, "fast", stored, ())
            ctl.write_text("3000")  # each pwrite of the commit service now takes 3 s
            busy = None
            for i in range(400):  # ~6 segments of 64 KiB: more than 2 buffers can hold
                started = time.monotonic()
                code, remark, q, off = await _send(client, broker.addr, f"slow-{i}", 1024)
                assert time.monotonic() - started < 1.0, "a send waited for the disk"
                if code == ResponseCode.SYSTEM_BUSY:
                    busy = remark
                    break
                assert code == ResponseCode.SUCCESS, (code, remark)
                stored[f"slow-{i}"] = (q, off)
            assert busy is not None and busy.startswith("[REJECTREQUEST]system busy"), busy
            # At most two segments' worth was taken in while the disk was stuck.
            assert len(stored) <= 1 + 2 * 65536 // 1024, len(stored)
            ctl.write_text("0")
            await _send_until_success(client, broker.addr, "back", stored, (ResponseCode.SYSTEM_BUSY,))
            found = await _await_consumable(client, broker.addr, stored)
            assert {k: found.get(k) for k in stored} == stored
        finally:
            await client.close()
            assert broker.stop() == 0, broker.output

    asyncio.run(scenario())
