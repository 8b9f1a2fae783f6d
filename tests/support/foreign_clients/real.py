"""Drivers for unmodified real RocketMQ 4.x clients, run as subprocesses against an embedded cluster.

Clients (installed by `make test` into `.clients/`, see the Makefile):

- `ons`: npm ali-ons@3.12.0, pure JavaScript (Node), driven by tests/support/foreign_clients/ons_*.js.
- `cpp`: PyPI rocketmq==0.4.4, the real rocketmq-client-cpp 1.x (x86_64 only), in its own venv
  `.clients/cpp044`, driven by tests/support/foreign_clients/cpp_client.py.

`Clients` starts consumer script(s) and waits for their "ready"/"started" line, runs producer
scripts to completion, and reads the consumers' JSON lines (`ClientProc`). A missing client skips
its tests with the reason (`require`), except on x86_64 with CI=true, where it fails. The
fixtures `clients` and `real_clients_cluster` are in tests/conftest.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rocketlite.embedded import EmbeddedCluster
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.formats.record import StoredRecord, decode_records
from tests.support.topics import wait_until
from tests.support.wire import raw_request

ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = ROOT / "tests" / "support" / "foreign_clients"
CLIENTS = Path(os.environ.get("ROCKETLITE_CLIENTS", ROOT / ".clients"))
ONS_MODULE = CLIENTS / "npm" / "node_modules" / "ali-ons"
CPP_PYTHON = CLIENTS / "cpp044" / "bin" / "python"

# Every level 1 s, except level 2 (3 s) for the delay test: retries (level 3 + reconsumeTimes) are quick.
DELAY_LEVELS = " ".join(["1s", "3s"] + ["1s"] * 16)
BROKER_OVERRIDES: dict[str, Any] = {"store_message_delay_level": DELAY_LEVELS}

Event = dict[str, Any]


# -- client availability -----------------------------------------------------------------------
def _must_have_clients() -> bool:
    """On x86_64 CI both clients must be installed (`make test` does it): missing ones fail."""
    return os.environ.get("CI", "").lower() == "true" and platform.machine() in ("x86_64", "AMD64")


def _unavailable(why: str) -> None:
    if _must_have_clients():
        pytest.fail(f"{why} (CI=true on x86_64: the real clients are required; run `make test`)")
    pytest.skip(why)


_probe_cache: dict[str, str | None] = {}


def probe(kind: str) -> str | None:
    """None when the client is usable, else why not."""
    if kind in _probe_cache:
        return _probe_cache[kind]
    why: str | None = None
    if kind == "ons":
        if shutil.which("node") is None:
            why = "node is not installed (ali-ons needs Node >= 14)"
        elif not (ONS_MODULE / "package.json").is_file():
            why = f"ali-ons is not installed in {ONS_MODULE} (run `make test` or `make clients`)"
    elif not CPP_PYTHON.is_file():
        arch = platform.machine()
        why = f"rocketmq==0.4.4 venv {CPP_PYTHON.parent.parent} is missing (run `make test`)"
        if arch not in ("x86_64", "AMD64"):
            why = f"rocketmq==0.4.4 ships a manylinux x86_64 wheel only; this machine is {arch}"
    else:
        probe = subprocess.run(
            [str(CPP_PYTHON), "-c", "import rocketmq.client"],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if probe.returncode != 0:
            arch = platform.machine()
            err = probe.stderr.strip()[-300:]
            why = f"rocketmq==0.4.4 does not import on {arch} (x86_64-only wheel): {err}"
    _probe_cache[kind] = why
    return why


def require(kind: str) -> None:
    why = probe(kind)
    if why is not None:
        _unavailable(why)


# -- subprocess driver ---------------------------------------------------------------------------
@dataclass
class ClientProc:
    """A client script whose stdout JSON lines are read by a thread into a queue."""

    name: str
    proc: subprocess.Popen[str]
    stderr_path: Path
    log_dir: Path | None
    events: list[Event] = field(default_factory=list)
    ready: Event | None = None
    _q: queue.Queue[Event | None] = field(default_factory=queue.Queue)
    _eof: bool = False
    _reader: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        self._reader = threading.Thread(target=self._read, name=f"read-{self.name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            text = line.strip()
            if not text:
                continue
            try:
                ev = json.loads(text)
            except ValueError:
                ev = {"event": "raw", "line": text}
            self._q.put(ev if isinstance(ev, dict) else {"event": "raw", "line": text})
        self._q.put(None)

    def next_event(self, deadline: float) -> Event | None:
        """The next line, or None at EOF / deadline."""
        if self._eof:
            return None
        try:
            ev = self._q.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None
        if ev is None:
            self._eof = True
            return None
        self.events.append(ev)
        if ev.get("event") == "fatal":
            raise AssertionError(f"{self.name} died: {ev.get('error')}\n{self.diagnostics()}")
        return ev

    def wait_for(self, pred: Callable[[Event], bool], timeout: float, what: str) -> Event:
        deadline = time.monotonic() + timeout
        while True:
            ev = self.next_event(deadline)
            if ev is None:
                raise AssertionError(
                    f"{self.name}: no {what} within {timeout:.0f}s (eof={self._eof}, "
                    f"rc={self.proc.poll()})\n{self.diagnostics()}"
                )
            if pred(ev):
                return ev

    def wait_event(self, name: str, timeout: float) -> Event:
        return self.wait_for(lambda ev: ev.get("event") == name, timeout, f'"{name}" line')

    def received(self) -> list[Event]:
        return [ev for ev in self.events if ev.get("event") == "recv"]

    def collect(self, done: Callable[[list[Event]], bool], timeout: float, what: str) -> list[Event]:
        """Read lines until `done(all recv events so far)`; returns those recv events."""
        deadline = time.monotonic() + timeout
        while not done(self.received()):
            if self.next_event(deadline) is None:
                raise AssertionError(
                    f"{self.name}: {what} not reached within {timeout:.0f}s; got "
                    f"{len(self.received())} messages: {summary(self.received())}\n{self.diagnostics()}"
                )
        return self.received()

    def drain(self, timeout: float) -> None:
        """Read everything until EOF (the process exits) or the deadline."""
        deadline = time.monotonic() + timeout
        while self.next_event(deadline) is not None:
            pass

    def stop(self, timeout: float = 20.0) -> None:
        """Ask a consumer to close ("exit" on stdin) and read its lines until it is gone."""
        if self.proc.poll() is None and self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.write("exit\n")
                self.proc.stdin.flush()
                self.proc.stdin.close()
        self.drain(timeout)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)

    def kill(self) -> None:
        """Kill the process if it still runs, and release its pipes."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self._reader.join(timeout=10)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    def diagnostics(self) -> str:
        parts = [f"--- {self.name} stderr (tail) ---", _tail(self.stderr_path, 40)]
        if self.log_dir is not None and self.log_dir.is_dir():
            for log in sorted(self.log_dir.rglob("*"))[-2:]:
                if log.is_file():
                    parts += [f"--- {log} (tail) ---", _tail(log, 40)]
        return "\n".join(parts)


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(none)"


def summary(events: list[Event]) -> str:
    return ", ".join(f"{ev.get('body')}@{ev.get('queue_id', ev.get('queueId'))}" for ev in events[:40])


class Clients:
    """Starts client scripts for one test and kills whatever is still running at the end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[ClientProc] = []
        self.seq = 0

    def _spawn(self, kind: str, name: str, argv: list[str]) -> ClientProc:
        require(kind)
        self.seq += 1
        label = f"{kind}-{name}-{self.seq}"
        env = dict(os.environ)
        log_dir: Path | None = None
        if kind == "ons":
            cmd = ["node", str(SCRIPTS / f"ons_{name}.js"), *argv]
            env["ONS_MODULE"] = str(ONS_MODULE)
        else:
            # rocketmq-client-cpp logs to $HOME/logs/rocketmq-cpp: give each process its own HOME.
            home = self.tmp / f"home-{label}"
            home.mkdir()
            env["HOME"] = str(home)
            log_dir = home / "logs"
            cmd = [
                str(CPP_PYTHON),
                str(SCRIPTS / "cpp_client.py"),
                "produce" if name == "producer" else "consume",
            ]
            cmd += argv
        stderr_path = self.tmp / f"{label}.stderr"
        with stderr_path.open("w") as err:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=env,
                cwd=self.tmp,
            )
        cp = ClientProc(label, proc, stderr_path, log_dir)
        self.procs.append(cp)
        return cp

    def consumer(
        self,
        kind: str,
        cluster: EmbeddedCluster,
        group: str,
        topic: str,
        *,
        expression: str = "*",
        fail_match: str | None = None,
        orderly: bool = False,
        props: tuple[str, ...] = (),
        max_reconsume: int | None = None,
        rebalance_ms: int | None = None,
        timeout_s: float = 90,
    ) -> ClientProc:
        """Start a push consumer and wait until it can receive (see the module docstring)."""
        argv = [
            "--namesrv",
            cluster.namesrv_addr,
            "--group",
            group,
            "--topic",
            topic,
            "--expression",
            expression,
        ]
        if fail_match is not None:
            argv += ["--fail-match", fail_match]
        if kind == "ons":
            assert not orderly, "ali-ons has no orderly consumer"
            argv += ["--timeout-ms", str(int(timeout_s * 1000))]
            if max_reconsume is not None:
                argv += ["--max-reconsume", str(max_reconsume)]
            if rebalance_ms is not None:
                argv += ["--rebalance-ms", str(rebalance_ms)]
            cp = self._spawn(kind, "consumer", argv)
            cp.ready = cp.wait_event("ready", 30)
        else:
            argv += ["--timeout-s", str(timeout_s)]
            if orderly:
                argv.append("--orderly")
            if props:
                argv += ["--props", ",".join(props)]
            cp = self._spawn(kind, "consumer", argv)
            cp.ready = cp.wait_event("started", 30)
            # start() returned after the heartbeat was sent; make sure the broker took it.
            wait_until(
                lambda: bool(consumer_ids(cluster, group)), 10, f"{group} to be registered on the broker"
            )
        return cp

    def produce(
        self,
        kind: str,
        cluster: EmbeddedCluster,
        group: str,
        messages: list[dict[str, Any]],
        timeout_s: float = 40,
    ) -> list[Event]:
        """Run a producer to completion; returns its "sent" lines (asserting every send succeeded)."""
        spec = json.dumps({"messages": messages})
        argv = ["--namesrv", cluster.namesrv_addr, "--group", group, "--spec", spec]
        argv += (
            ["--timeout-ms", str(int(timeout_s * 1000))] if kind == "ons" else ["--timeout-s", str(timeout_s)]
        )
        cp = self._spawn(kind, "producer", argv)
        cp.drain(timeout_s + 10)
        rc = cp.proc.wait(timeout=10)
        sent = [ev for ev in cp.events if ev.get("event") == "sent"]
        errors = [ev for ev in cp.events if ev.get("event") != "sent"]
        assert rc == 0 and len(sent) == len(messages), (
            f"{cp.name}: rc={rc}, sent {len(sent)}/{len(messages)}; other lines: {errors}\n{cp.diagnostics()}"
        )
        return sent

    def close(self) -> None:
        for cp in self.procs:
            cp.kill()


# -- broker-side helpers -------------------------------------------------------------------------


def consumer_ids(cluster: EmbeddedCluster, group: str) -> list[str]:
    """GET_CONSUMER_LIST_BY_GROUP, as the clients ask it before every rebalance."""
    resp = raw_request(cluster.broker_addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
    if resp.code != ResponseCode.SUCCESS or not resp.body:
        return []
    ids = json.loads(resp.body).get("consumerIdList") or []
    return [str(i) for i in ids]


def client_id_of(cluster: EmbeddedCluster, group: str) -> str:
    """The client id of the group's one consumer, once the broker lists it."""
    ids: list[str] = []

    def online() -> bool:
        ids[:] = consumer_ids(cluster, group)
        return len(ids) == 1

    wait_until(online, 15, f"one consumer of {group}")
    return ids[0]


def start_from_zero(cluster: EmbeddedCluster, group: str, topic: str, queues: int = 4) -> None:
    """Commit offset 0 for `group` (and its retry queue) so a C++ consumer reads from the head."""
    for qid in range(queues):
        cluster.broker.offsets.commit(group, topic, qid, 0)
    cluster.broker.offsets.commit(group, f"%RETRY%{group}", 0, 0)


def stored(cluster: EmbeddedCluster, topic: str, queue_id: int = 0) -> list[StoredRecord]:
    store = cluster.broker.store
    result = store.get_message("test", topic, queue_id, 0, 64)
    return [r for view in result.messages for r in decode_records(bytes(view))]


def same_msg_id(seen: object, sent: object) -> bool:
    """Equal msgIds, allowing the C++ 1.x client's quirk: it prints the IPv4 part of an offset
    msgId (storeHost + port + commitLogOffset) byte-swapped ("0100007F..." for 127.0.0.1)."""
    if not isinstance(seen, str) or not isinstance(sent, str):
        return False
    if seen == sent:
        return True
    swapped = bytes.fromhex(sent[:8])[::-1].hex().upper()
    return len(seen) == len(sent) == 32 and seen[8:] == sent[8:] and seen[:8] == swapped


def body_of(ev: Event) -> str:
    return str(ev["body"])


def queue_of(ev: Event) -> int:
    return int(ev["queue_id"] if "queue_id" in ev else ev["queueId"])


def reconsumes(ev: Event) -> int:
    return int(ev["reconsume_times"] if "reconsume_times" in ev else ev["reconsumeTimes"])


def msg_spec(kind: str, topic: str, body: str, *, tags: str | None = None, keys: list[str] | None = None,
             props: dict[str, str] | None = None, delay_level: int | None = None,
             sharding: str | None = None, order_arg: int | None = None) -> dict[str, Any]:  # fmt: skip
    """One message for a producer script (ons and cpp use slightly different spec keys)."""
    m: dict[str, Any] = {"topic": topic, "body": body}
    if tags:
        m["tags"] = tags
    if keys:
        m["keys"] = keys
    if props:
        m["props"] = props
    if delay_level:
        m["delayLevel" if kind == "ons" else "delay_level"] = delay_level
    if sharding is not None:
        assert kind == "ons"
        m["shardingKey"] = sharding
    if order_arg is not None:
        assert kind == "cpp"
        m["order_arg"] = order_arg
    return m


# -- scenario drivers (one scenario per process, JSON lines, "done" at the end) --------------------------


def finish(cp: ClientProc, timeout: float = 60) -> None:
    """Read a scenario driver's lines to its end; it must exit 0 after a "done" line."""
    cp.drain(timeout)
    rc = cp.proc.wait(timeout=10)
    assert rc == 0 and cp.events and cp.events[-1].get("event") == "done", (
        f"{cp.name}: rc={rc}, last lines {cp.events[-3:]}\n{cp.diagnostics()}"
    )


def answer(cp: ClientProc, line: str = "go") -> None:
    """Let a driver waiting on stdin (after its "wait" line) go on."""
    assert cp.proc.stdin is not None
    cp.proc.stdin.write(line + "\n")
    cp.proc.stdin.flush()


def events(cp: ClientProc, name: str, **match: Any) -> list[Event]:
    """The driver's lines named `name` whose fields equal `match`."""
    return [e for e in cp.events if e.get("event") == name and all(e.get(k) == v for k, v in match.items())]


def received(cp: ClientProc, **match: Any) -> list[dict[str, Any]]:
    """The messages of the driver's "recv" lines matching `match`."""
    return [e["message"] for e in events(cp, "recv", **match)]
