"""One store, one broker: rocketlite and RocketMQ 5.3.3 refuse a store the other one holds.

RocketMQ locks `<store>/lock` with `FileChannel.tryLock(0, 1, false)`, a POSIX record lock;
rocketlite with an flock plus a record lock on the same byte (rocketlite.store.store_lock). Linux
keeps flocks and record locks apart, so before the record lock the two brokers could both open
one store. Checked here with RocketMQ's own lock call (tests/peers/rocketmq/java/LockProbe.java,
run by the JVM) and with RocketMQ's broker:

- rocketlite holds a store: Java's tryLock fails, and RocketMQ's broker started on it exits
  without booting, and rocketlite's messages stay whole;
- RocketMQ's broker (or a bare Java lock) holds a store: rocketlite refuses to open it, and opens
  it once the lock is let go.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rocketlite.embedded import embedded
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import StoreError
from rocketlite.remoting.client import RemotingClient
from rocketlite.store.config import StoreConfig
from rocketlite.store.inspect import lock_holder
from rocketlite.store.message_store import MessageStore
from tests.peers.rocketmq.steps import send
from tests.support.aio import run
from tests.support.foreign_clients.rocketmq_peer import (
    BOOT_TIMEOUT,
    PEER_STORE,
    launch_broker,
    require,
    start_broker,
)
from tests.support.wire import pull_until_end

pytestmark = pytest.mark.timeout(600)
TOPIC = "LockedStore"
PROBE = Path(__file__).parent / "java" / "LockProbe.java"


def store_config(root: Path) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=root,
        maped_file_size_commit_log=PEER_STORE["mappedFileSizeCommitLog"],
        maped_file_size_consume_queue=PEER_STORE["mappedFileSizeConsumeQueue"],
        max_hash_slot_num=PEER_STORE["maxHashSlotNum"],
        max_index_num=PEER_STORE["maxIndexNum"],
    )


def send_one(addr: str, i: int) -> int:
    """SEND_MESSAGE_V2 of body m<i> to TOPIC queue 0; the answer's code."""

    async def go() -> int:
        client = RemotingClient()
        try:
            return (await client.invoke(addr, send(TOPIC, f"m{i}".encode(), uniq=f"L{i}"), 10)).code
        finally:
            await client.close()

    return run(go())


def bodies(addr: str) -> list[bytes]:
    async def read() -> list[bytes]:
        client = RemotingClient()
        try:
            records, _ = await pull_until_end(client, addr, TOPIC, 0, group="lock_check")
        finally:
            await client.close()
        return [r.body for r in records]

    return run(read())


def probe(lock_file: Path, mode: str) -> subprocess.Popen[str]:
    require()
    java = shutil.which("java")
    assert java is not None
    return subprocess.Popen(
        [java, str(PROBE), str(lock_file), mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def probe_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


def try_lock(lock_file: Path) -> str:
    """What Java's tryLock finds: "locked" (someone holds it) or "free"."""
    out, _ = probe(lock_file, "try").communicate(timeout=60)
    return out.strip()


def test_rocketmq_refuses_a_store_rocketlite_runs_on(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with embedded(root, grpc_server_port=0) as lite:
        for i in range(3):
            assert send_one(lite.broker_addr, i) == ResponseCode.SUCCESS
        assert lite.broker.store.wait_dispatched(10)
        assert try_lock(root / "lock") == "locked"
        java = launch_broker(tmp_path / "rocketmq", root, None)
        rc = java.popen.wait(BOOT_TIMEOUT)
        console = java.console.read_text(errors="replace")
        assert rc != 0 and "boot success" not in console, java.diagnostics()
        # rocketlite goes on as if nothing happened: its messages, and a new one
        assert send_one(lite.broker_addr, 3) == ResponseCode.SUCCESS
        assert lite.broker.store.wait_dispatched(10)
        assert bodies(lite.broker_addr) == [f"m{i}".encode() for i in range(4)]
    with embedded(root, grpc_server_port=0) as lite:  # ... and after a restart
        assert bodies(lite.broker_addr) == [f"m{i}".encode() for i in range(4)]
    assert try_lock(root / "lock") == "free"  # stopped: the lock is free again


def test_rocketlite_refuses_a_store_java_has_locked(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.mkdir()
    holder = probe(root / "lock", "hold")
    try:
        assert probe_line(holder) == "held"
        assert lock_holder(root) == holder.pid
        with pytest.raises(StoreError, match="in use by another process"):
            MessageStore(store_config(root)).start()
    finally:
        holder.communicate("release\n", timeout=60)
    assert holder.returncode == 0
    store = MessageStore(store_config(root))  # let go: rocketlite opens it
    store.start()
    store.shutdown()


def test_rocketlite_refuses_a_store_rocketmq_runs_on(tmp_path: Path) -> None:
    root = tmp_path / "store"
    java = start_broker(tmp_path / "rocketmq", root, None)
    try:
        assert send_one(java.addr, 0) == ResponseCode.SUCCESS
        assert lock_holder(root) == java.popen.pid
        with pytest.raises(StoreError, match="in use by another process"):
            MessageStore(store_config(root)).start()
        assert send_one(java.addr, 1) == ResponseCode.SUCCESS
        assert bodies(java.addr) == [b"m0", b"m1"]
    finally:
        java.kill9()  # the store is thrown away: no clean stop to wait for
