"""Unmodified real RocketMQ 4.x clients against an embedded name server + broker.

Clients (installed by `make test` into `.clients/`, see the Makefile):

- `ons`: npm ali-ons@3.12.0, pure JavaScript (Node), driven by tests/clients/ons_*.js.
- `cpp`: PyPI rocketmq==0.4.4, the real rocketmq-client-cpp 1.x (x86_64 only), in its own venv
  `.clients/cpp044`, driven by tests/clients/cpp_client.py.

Each test starts `embedded(...)`, starts consumer script(s) as subprocesses and waits for their
"ready"/"started" line, runs a producer script to completion, then reads the consumers' JSON lines
until the expected messages (or a deadline) arrive. A missing client skips its tests with the
reason, except on x86_64 with CI=true, where it fails.

Offsets: the C++ push consumer starts a new group at the queue's max offset and rebalances
asynchronously after `start()` returns, so a producer could win the race. Tests that use it
commit offset 0 for the group's queues on the broker first (`start_from_zero`); the client then
reads from the head no matter when its rebalance runs. ali-ons consumers use
CONSUME_FROM_FIRST_OFFSET and print "ready" once their first rebalance assigned queues.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import queue
import shutil
import subprocess
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rocketlite.broker.subscription_group import SubscriptionGroupConfig
from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.bodies import TopicConfig
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand, make_request
from rocketlite.protocol.message import string_to_properties
from rocketlite.protocol.record import StoredRecord, decode_records
from rocketlite.remoting.client import RemotingClient

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parents[1] / "clients"
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


def _probe(kind: str) -> str | None:
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
    why = _probe(kind)
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


@pytest.fixture
def clients(tmp_path: Path) -> Iterator[Clients]:
    c = Clients(tmp_path)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path / "store", **BROKER_OVERRIDES) as c:
        yield c


# -- broker-side helpers -------------------------------------------------------------------------
def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


async def _invoke(addr: str, cmd: RemotingCommand) -> RemotingCommand:
    client = RemotingClient()
    try:
        return await client.invoke(addr, cmd, 5)
    finally:
        await client.close()


def raw_request(addr: str, code: int, ext: dict[str, str]) -> RemotingCommand:
    return asyncio.run(_invoke(addr, make_request(code, ext)))


def consumer_ids(cluster: EmbeddedCluster, group: str) -> list[str]:
    """GET_CONSUMER_LIST_BY_GROUP, as the clients ask it before every rebalance."""
    resp = raw_request(cluster.broker_addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
    if resp.code != ResponseCode.SUCCESS or not resp.body:
        return []
    ids = json.loads(resp.body).get("consumerIdList") or []
    return [str(i) for i in ids]


def wait_until(cond: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def create_topic(cluster: EmbeddedCluster, topic: str, queues: int = 4) -> None:
    """Create `topic` on the broker and wait until the name server routes it."""
    cluster.broker.topics.update(TopicConfig(topic, queues, queues))

    def routed() -> bool:
        resp = raw_request(cluster.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        return resp.code == ResponseCode.SUCCESS

    wait_until(routed, 15, f"a name-server route for {topic}")


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


# -- scenarios -----------------------------------------------------------------------------------
PAIRS = [("ons", "ons"), ("cpp", "cpp"), ("ons", "cpp"), ("cpp", "ons")]


@pytest.mark.parametrize(("producer", "consumer"), PAIRS, ids=[f"{p}-to-{c}" for p, c in PAIRS])
def test_tags_keys_properties_exactly_once(
    cluster: EmbeddedCluster, clients: Clients, producer: str, consumer: str
) -> None:
    """Tags + keys + user properties; 'TagA || TagB' in a group gets exactly its messages, once."""
    require(producer)
    require(consumer)
    topic, group = unique("TagTopic"), unique("cg_tags")
    create_topic(cluster, topic)
    if consumer == "cpp":
        start_from_zero(cluster, group, topic)
    c = clients.consumer(consumer, cluster, group, topic, expression="TagA || TagB", props=("color", "seq"))
    tags = ["TagA", "TagB", "TagC"]
    messages = [
        msg_spec(
            producer,
            topic,
            f"m{i}",
            tags=tags[i % 3],
            keys=[f"key{i}", f"k2_{i}"],
            props={"color": "red" if i % 2 else "blue", "seq": str(i)},
        )
        for i in range(24)
    ]
    sent = clients.produce(producer, cluster, unique("pg"), messages)
    sent_ids = {messages[ev["i"]]["body"]: ev.get("msgId", ev.get("msg_id")) for ev in sent}
    wanted = {m["body"]: m for m in messages if m["tags"] != "TagC"}
    c.collect(lambda got: {body_of(ev) for ev in got} >= set(wanted), 30, f"{len(wanted)} TagA/TagB messages")
    c.stop()
    got = c.received()
    counts = Counter(body_of(ev) for ev in got)
    assert set(counts) == set(wanted), f"unexpected messages: {set(counts) - set(wanted)}"
    assert all(n == 1 for n in counts.values()), f"duplicates: {[b for b, n in counts.items() if n > 1]}"
    for ev in got:
        m = wanted[body_of(ev)]
        assert ev["topic"] == topic
        assert ev["tags"] == m["tags"]
        assert ev["keys"] == " ".join(m["keys"])
        assert reconsumes(ev) == 0
        props = ev["props"]
        assert props["color"] == m["props"]["color"] and props["seq"] == m["props"]["seq"], props
        # The id the producer got back: the broker's offset msgId (ali-ons), or the client's UNIQ_KEY
        # (C++), which the C++ consumer reports as the id and ali-ons keeps as a property.
        seen = (
            ev["props"].get("UNIQ_KEY")
            if (producer, consumer) == ("cpp", "ons")
            else ev.get("msgId", ev.get("msg_id"))
        )
        want = sent_ids[body_of(ev)]
        assert same_msg_id(seen, want), f"{body_of(ev)}: consumer saw id {seen}, producer got {want}"


@pytest.mark.parametrize("producer", ["ons", "cpp"])
def test_keys_are_queryable(cluster: EmbeddedCluster, clients: Clients, producer: str) -> None:
    """Every key of a message finds it: in the store's index and by QUERY_MESSAGE to the broker."""
    topic = unique("KeyTopic")
    create_topic(cluster, topic)
    messages = [
        msg_spec(producer, topic, f"q{i}", tags="T", keys=[f"order-{i}", f"user-{i % 2}"]) for i in range(6)
    ]
    clients.produce(producer, cluster, unique("pg"), messages)
    store = cluster.broker.store
    assert store.wait_dispatched(10)
    end = int(time.time() * 1000) + 60_000
    found = decode_records(bytes(store.query_message(topic, "order-3", 32, 0, end).body()))
    assert [r.body for r in found] == [b"q3"]
    user1 = decode_records(bytes(store.query_message(topic, "user-1", 32, 0, end).body()))
    assert sorted(r.body for r in user1) == [b"q1", b"q3", b"q5"]

    ext = {"topic": topic, "key": "order-4", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": str(end)}
    resp = raw_request(cluster.broker_addr, RequestCode.QUERY_MESSAGE, ext)
    assert resp.code == ResponseCode.SUCCESS, f"QUERY_MESSAGE answered {resp.code} {resp.remark!r}"
    records = decode_records(resp.body or b"")
    assert [r.body for r in records] == [b"q4"]
    assert records[0].topic == topic
    assert string_to_properties(records[0].properties_string)["KEYS"] == "order-4 user-0"


def test_sharding_key_and_orderly(cluster: EmbeddedCluster, clients: Clients) -> None:
    """ali-ons shardingKey and C++ send_orderly keep a key on one queue, in order; C++ orderly consumer."""
    require("ons")
    require("cpp")
    topic, group = unique("OrderTopic"), unique("cg_order")
    create_topic(cluster, topic)
    start_from_zero(cluster, group, topic)
    c = clients.consumer("cpp", cluster, group, topic, orderly=True)
    n = 15
    ons_msgs = [
        msg_spec("ons", topic, f"{key}:{i}", tags="O", sharding=key) for i in range(n) for key in ("sa", "sb")
    ]
    cpp_msgs = [msg_spec("cpp", topic, f"{key}:{i}", tags="O", order_arg=arg)
                for i in range(n) for key, arg in (("ca", 1), ("cb", 2))]  # fmt: skip
    sent = clients.produce("ons", cluster, unique("pg"), ons_msgs)
    sent_cpp = clients.produce("cpp", cluster, unique("pg"), cpp_msgs)

    # Producer side: one queue per key, offsets increasing in send order.
    placed: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for ev in sent:
        key = str(ons_msgs[ev["i"]]["body"]).split(":")[0]
        placed[key].append((int(ev["queueId"]), int(ev["queueOffset"])))
    for ev in sent_cpp:
        key = str(cpp_msgs[ev["i"]]["body"]).split(":")[0]
        placed[key].append((int(ev["queue_id"]), int(ev["offset"])))
    for key, spots in placed.items():
        assert len({q for q, _ in spots}) == 1, f"{key} spread over queues {spots}"
        offsets = [o for _, o in spots]
        assert offsets == sorted(offsets), f"{key} offsets out of order: {offsets}"
    assert placed["ca"][0][0] == 1 and placed["cb"][0][0] == 2  # arg % 4 queues

    total = 4 * n
    got = c.collect(lambda got: len({body_of(ev) for ev in got}) >= total, 40, f"{total} ordered messages")
    c.stop()
    per_key: dict[str, list[int]] = defaultdict(list)
    for ev in c.received():
        key, seq = body_of(ev).split(":")
        per_key[key].append(int(seq))
    for key, seqs in per_key.items():
        assert seqs == list(range(n)), f"{key} received out of order / duplicated: {seqs}"
    assert len(got) == total


@pytest.mark.parametrize("consumer", ["ons", "cpp"])
def test_retry_then_dead_letter_queue(cluster: EmbeddedCluster, clients: Clients, consumer: str) -> None:
    """A failed message comes back from %RETRY%<group> (reconsumeTimes 1, 2), then lands in %DLQ%<group>."""
    require("ons")
    require(consumer)
    topic, group = unique("RetryTopic"), unique("cg_retry")
    create_topic(cluster, topic)
    cluster.broker.groups.update(SubscriptionGroupConfig(group, retry_max_times=2))
    if consumer == "cpp":
        start_from_zero(cluster, group, topic)
    # A fresh group: the C++ client looks %RETRY%<group> up before its first heartbeat makes the
    # broker create it, so it only pulls the retry queue after its next route poll + rebalance
    # (~10 s); ali-ons happens to look it up after its heartbeat.
    c = clients.consumer(consumer, cluster, group, topic, fail_match="poison", max_reconsume=2)
    messages = [
        msg_spec("ons", topic, "ok-1", tags="T", keys=["ok1"]),
        msg_spec("ons", topic, "poison", tags="T", keys=["poison-key"], props={"color": "green"}),
        msg_spec("ons", topic, "ok-2", tags="T", keys=["ok2"]),
    ]
    sent = clients.produce("ons", cluster, unique("pg"), messages)
    poison_id = next(ev["msgId"] for ev in sent if ev["i"] == 1)

    def poison_tries(got: list[Event]) -> list[Event]:
        return [ev for ev in got if body_of(ev) == "poison"]

    c.collect(lambda got: len(poison_tries(got)) >= 3 and {"ok-1", "ok-2"} <= {body_of(ev) for ev in got},
              40, "3 deliveries of the failing message")  # fmt: skip
    dlq = f"%DLQ%{group}"
    wait_until(lambda: cluster.broker.store.get_max_offset_in_queue(dlq, 0) >= 1, 20, f"a message in {dlq}")
    c.stop()
    tries = poison_tries(c.received())
    assert [reconsumes(ev) for ev in tries] == [0, 1, 2], tries
    for ev in tries:
        assert ev["topic"] == topic, "the retry message must carry its original topic back (RETRY_TOPIC)"
        assert ev["tags"] == "T" and ev["keys"] == "poison-key"
    if consumer == "ons":  # ali-ons shows every property: redeliveries name their origin
        assert "RETRY_TOPIC" not in tries[0]["props"]
        for ev in tries[1:]:
            assert ev["props"].get("RETRY_TOPIC") == topic, ev["props"]
            assert ev["props"].get("ORIGIN_MESSAGE_ID") == poison_id, ev["props"]
    ok = Counter(body_of(ev) for ev in c.received() if body_of(ev) != "poison")
    assert ok == {"ok-1": 1, "ok-2": 1}
    [dead] = stored(cluster, dlq)
    assert dead.body == b"poison"
    props = string_to_properties(dead.properties_string)
    assert props.get("KEYS") == "poison-key" and props.get("color") == "green", props
    assert props.get("ORIGIN_MESSAGE_ID") == poison_id, props
    assert props.get("RETRY_TOPIC") == topic, props


@pytest.mark.parametrize("producer", ["ons", "cpp"])
def test_delay_level(cluster: EmbeddedCluster, clients: Clients, producer: str) -> None:
    """A level-2 message (3 s in this broker's table) arrives 3 s after its send, not before."""
    require(producer)
    topic, group = unique("DelayTopic"), unique("cg_delay")
    create_topic(cluster, topic)
    c = clients.consumer("ons", cluster, group, topic)
    messages = [
        msg_spec(producer, topic, "delayed", tags="D", keys=["dk"], delay_level=2),
        msg_spec(producer, topic, "now", tags="N"),
    ]
    sent = {ev["i"]: ev for ev in clients.produce(producer, cluster, unique("pg"), messages)}
    got = c.collect(lambda got: {"delayed", "now"} <= {body_of(ev) for ev in got}, 20, "both messages")
    by_body = {body_of(ev): ev for ev in got}
    delayed, now = by_body["delayed"], by_body["now"]
    waited = int(delayed["ts"]) - int(sent[0]["ts"])
    assert waited >= 3000 - 20, f"delayed message arrived after {waited} ms"
    assert waited < 3000 + 10_000, f"delayed message took {waited} ms"
    assert int(now["ts"]) < int(delayed["ts"]), "the undelayed message must arrive first"
    assert delayed["topic"] == topic and delayed["tags"] == "D" and delayed["keys"] == "dk"
    c.stop()
    assert Counter(body_of(ev) for ev in c.received()) == {"delayed": 1, "now": 1}


def test_unknown_topic_auto_created_via_tbw102(cluster: EmbeddedCluster, clients: Clients) -> None:
    """The C++ producer falls back to TBW102's route; the broker creates the topic on the first send."""
    require("cpp")
    topic = unique("AutoTopic")
    assert cluster.broker.topics.select(topic) is None
    messages = [msg_spec("cpp", topic, f"a{i}", tags="A", keys=[f"ak{i}"]) for i in range(5)]
    sent = clients.produce("cpp", cluster, unique("pg"), messages)
    assert len(sent) == 5
    tc = cluster.broker.topics.select(topic)
    assert tc is not None, "the topic was not created"
    assert tc.write_queue_nums == 4, "defaultTopicQueueNums from the C++ client is 4"
    wait_until(
        lambda: (
            raw_request(cluster.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}).code
            == ResponseCode.SUCCESS
        ),
        15,
        "the name server to route the new topic",
    )
    if _probe("ons") is None:
        c = clients.consumer("ons", cluster, unique("cg_auto"), topic)
        c.collect(lambda got: len(got) >= 5, 20, "5 messages")
        c.stop()
        assert sorted(body_of(ev) for ev in c.received()) == [f"a{i}" for i in range(5)]


def test_two_consumers_split_queues_and_take_over(cluster: EmbeddedCluster, clients: Clients) -> None:
    """Two ali-ons consumers in one group split 4 queues; when one leaves, the other takes all."""
    require("ons")
    topic, group = unique("SplitTopic"), unique("cg_split")
    create_topic(cluster, topic, queues=4)
    a = clients.consumer("ons", cluster, group, topic, rebalance_ms=1000)
    b = clients.consumer("ons", cluster, group, topic, rebalance_ms=1000)
    assert b.ready is not None
    b_queues = set(b.ready["queues"])
    # A drops B's queues on its next rebalance (ali-ons ignores NOTIFY_CONSUMER_IDS_CHANGED).
    a_ev = a.wait_for(
        lambda ev: ev.get("event") in ("ready", "queues") and set(ev["queues"]).isdisjoint(b_queues),
        20,
        f"A to give up B's queues {sorted(b_queues)}",
    )
    a_queues = set(a_ev["queues"])
    assert a_queues | b_queues == {0, 1, 2, 3} and len(a_queues) == len(b_queues) == 2

    batch1 = [msg_spec("ons", topic, f"b1-{i}", tags="S") for i in range(20)]
    clients.produce("ons", cluster, unique("pg"), batch1)

    def bodies(cp: ClientProc) -> set[str]:
        return {body_of(ev) for ev in cp.received()}

    want1 = {m["body"] for m in batch1}
    deadline = time.monotonic() + 30
    while not want1 <= bodies(a) | bodies(b):
        ev_a = a.next_event(min(deadline, time.monotonic() + 0.2))
        ev_b = b.next_event(min(deadline, time.monotonic() + 0.2))
        if ev_a is None and ev_b is None and time.monotonic() > deadline:
            raise AssertionError(f"batch 1 incomplete: {sorted(want1 - bodies(a) - bodies(b))}")
    assert {queue_of(ev) for ev in a.received()} <= a_queues
    assert {queue_of(ev) for ev in b.received()} <= b_queues
    assert bodies(a).isdisjoint(bodies(b)) and bodies(a) and bodies(b)

    b.stop()
    assert any(ev.get("event") == "closed" for ev in b.events), b.diagnostics()
    batch2 = [msg_spec("ons", topic, f"b2-{i}", tags="S") for i in range(20)]
    clients.produce("ons", cluster, unique("pg"), batch2)
    a.wait_for(
        lambda ev: ev.get("event") == "queues" and set(ev["queues"]) == {0, 1, 2, 3}, 20, "A to take all"
    )
    want2 = {m["body"] for m in batch2}
    a.collect(lambda got: want2 <= {body_of(ev) for ev in got}, 30, "batch 2 on A")
    a.stop()
    counts = Counter(body_of(ev) for ev in a.received() + b.received())
    assert set(counts) == want1 | want2
    dupes = {k: v for k, v in counts.items() if v > 1}
    assert not dupes, f"delivered more than once: {dupes}"
