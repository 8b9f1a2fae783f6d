"""CPU per send request inside one process: frame bytes -> decoder -> handler -> response bytes.

`bench/broker_bench.py` measures the broker from outside, over loopback, which on a busy machine
says little. This script isolates what the send path costs: it starts a real `BrokerController`
(ASYNC_FLUSH, a temporary store) on this process's loop, opens `Connection`s on a stub transport
(no socket) that share the broker's request table, and feeds them prebuilt SEND_MESSAGE_V2 (and
SEND_BATCH_MESSAGE of 32) frames the way a socket would: 32 requests per `data_received`, 16
connections, then one loop turn, in which the broker's dispatch round for those appends runs.

Printed per path and body size (1 KiB and 128 B by default), in µs per message, each the
minimum of `--runs` runs: the process's CPU over the whole run (handling, encoding the answers,
the dispatch rounds, and the store's threads: the allocation service staging segments, the
reput thread if it took a round), the loop thread's CPU alone (the figure to compare on a busy
machine: other processes do not count in it) and the handling alone (wall time inside
`data_received`). Segments are `--segment-mib` (64 MiB) so that the runs roll over several and
the segment staging the allocation service does is paid at its steady rate; each run waits for
the dispatch to catch up before the clocks are read (`caught_up`), so its cost is in them.
The loop thread's page faults per 1,000 messages (Linux) say how many first touches of the
store's mappings it still takes itself (see "Pages mapped ahead of the writes" in
`docs/benchmarks.md`).

    .venv/bin/python bench/send_path.py [--messages 16384] [--runs 5] [--sizes 1024,128]
        [--lane on|commands|off] [--phases single,batch,pull] [--pull-lane on|off]

The `pull` phase (`--phases single,pull`: after a phase that filled the queues) pulls what the
queues hold back, 32 messages a PULL_MESSAGE as RocketMQ's push consumer asks (a carried "*"
subscription, the commit offset piggy-backed, the suspend flag), one pull per read per connection
(one queue each), and prints the same figures per message pulled. `--pull-lane off` takes the
pull lane away (`broker/processors/pull_lane.py`): every pull is decoded and goes through
`PullMessageProcessor`, the path before the lane.

`--lane off` takes the coalescing lane of single sends away (`broker/processors/send_group.py`):
every SEND_MESSAGE_V2 then goes through the per-message handler, the path before the lane.
`--lane commands` keeps the lane but not its raw half: every frame is decoded into a command
first (the path before `gather_raw_sends`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.broker.config import BATCH, CONNECTIONS, MIB, WINDOW
from bench.broker.loadgen import Sender
from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.controller import BrokerController
from rocketlite.broker.processors.send_group import SendGroupLane
from rocketlite.protocol.codes import PullSysFlag, RequestCode
from rocketlite.protocol.wire import speedups
from rocketlite.protocol.wire.command import make_request
from rocketlite.protocol.wire.frame import encode_command
from rocketlite.protocol.wire.headers import PullMessageRequestHeader
from rocketlite.remoting.connection import Connection, chain_raw
from rocketlite.store.config import StoreConfig

TOPIC = "SendPathTopic"


class StubTransport:
    """What `Connection` needs of a transport; writes are counted, not sent."""

    def __init__(self, keep: bool = False) -> None:
        self.written = 0
        self.kept: list[bytes] | None = [] if keep else None

    def write(self, data: bytes) -> None:
        self.written += len(data)
        if self.kept is not None:
            self.kept.append(data)

    def writelines(self, parts: list[bytes]) -> None:
        self.written += sum(map(len, parts))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 10911)}.get(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        del high, low

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def build_reads(n_messages: int, size: int, batch: bool, batches_per_read: int = 1) -> list[list[bytes]]:
    """Per connection, its reads: each the bytes of WINDOW requests (or of `batches_per_read`
    batch requests: a producer with that many batches in flight)."""
    body = os.urandom(size)
    reads: list[list[bytes]] = []
    per_conn = max(1, n_messages // CONNECTIONS)
    for q in range(CONNECTIONS):
        sender = Sender(TOPIC, q, batch=batch)
        conn_reads: list[bytes] = []
        if batch:
            frames = []
            for i in range(max(1, per_conn // BATCH)):
                cmd = sender.batch_of(body, BATCH)
                cmd.opaque = i + 1
                frames.append(encode_command(cmd))
            step = batches_per_read
            conn_reads = [b"".join(frames[i : i + step]) for i in range(0, len(frames), step)]
        else:
            frames = []
            for i in range(per_conn):
                cmd = sender.single(body)
                cmd.opaque = i + 1
                frames.append(encode_command(cmd))
            conn_reads = [b"".join(frames[i : i + WINDOW]) for i in range(0, len(frames), WINDOW)]
        reads.append(conn_reads)
    return reads


PULL_BATCH = 32  # messages a pull asks for (the push consumer's pullBatchSize)
_PULL_FLAGS = int(PullSysFlag.COMMIT_OFFSET) | int(PullSysFlag.SUSPEND) | int(PullSysFlag.SUBSCRIPTION)


def build_pulls(controller: BrokerController) -> list[list[bytes]]:
    """Per connection, its reads: one pull of PULL_BATCH each, over its queue from offset 0 to
    the last full batch the queue holds."""
    reads: list[list[bytes]] = []
    for q in range(CONNECTIONS):
        top = controller.store.get_max_offset_in_queue(TOPIC, q)
        conn_reads = []
        for i, offset in enumerate(range(0, top - PULL_BATCH + 1, PULL_BATCH)):
            header = PullMessageRequestHeader(
                consumer_group="SendPathConsumer", topic=TOPIC, queue_id=q, queue_offset=offset,
                max_msg_nums=PULL_BATCH, sys_flag=_PULL_FLAGS, commit_offset=offset,
                suspend_timeout_millis=15_000, subscription="*", sub_version=1, expression_type="TAG",
            )  # fmt: skip
            request = make_request(RequestCode.PULL_MESSAGE, header.to_ext(), None, i + 1)
            conn_reads.append(encode_command(request))
        reads.append(conn_reads)
    return reads


def thread_faults() -> int:
    """Page faults this thread has taken (minor and major; Linux's /proc/thread-self/stat)."""
    fields = Path("/proc/thread-self/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[7]) + int(fields[9])  # minflt, majflt (fields 10 and 12 of stat)


async def run_once(
    controller: BrokerController, reads: list[list[bytes]], per_read: int
) -> tuple[float, float, float, float]:
    conns = []
    for _ in reads:
        conn = Connection(controller.table)
        conn.connection_made(StubTransport())  # type: ignore[arg-type]
        conns.append(conn)
    rounds = max(map(len, reads))
    n = 0
    handling = 0.0
    cpu0 = time.process_time()
    loop0 = time.thread_time()
    faults0 = thread_faults()
    for r in range(rounds):
        t0 = time.perf_counter()
        for conn, conn_reads in zip(conns, reads, strict=True):
            if r < len(conn_reads):
                conn.data_received(conn_reads[r])
                n += per_read
        handling += time.perf_counter() - t0
        await asyncio.sleep(0)  # the loop turn: this round's dispatch
    await caught_up(controller)
    cpu = time.process_time() - cpu0
    loop_cpu = time.thread_time() - loop0
    faults = thread_faults() - faults0
    assert all(c.transport.written > 0 for c in conns if c.transport is not None)  # type: ignore[attr-defined]
    return cpu / n * 1e6, loop_cpu / n * 1e6, handling / n * 1e6, faults / n * 1000


async def caught_up(controller: BrokerController, timeout: float = 10.0) -> None:
    """Wait, on the loop, until the dispatch has caught up with the appends, so that its cost is
    inside the clocks whichever thread ran it. One loop turn is not always enough, and that is
    not a lag: a loop round that finds the reput thread in a round (its safety-net poll) is
    deferred by `PACED_ROUND_S`, and a round does at most `INLINE_MAX_BYTES` and leaves the
    rest to the thread. Waiting costs next to no CPU; a dispatch that does not catch up in `timeout`
    seconds is a real lag and ends the run."""
    store = controller.store
    dispatcher = store.reput.dispatcher
    deadline = time.monotonic() + timeout
    await asyncio.sleep(0)
    while dispatcher.reput_from_offset < store.commit_log.max_offset:
        if time.monotonic() > deadline:
            raise SystemExit(f"the dispatch lagged behind the run by more than {timeout:.0f} s")
        await asyncio.sleep(0.001)


def check_answers(controller: BrokerController, reads: list[bytes]) -> None:
    """Feed `reads` on one connection and insist that every answer is SUCCESS."""
    conn = Connection(controller.table)
    transport = StubTransport(keep=True)
    conn.connection_made(transport)  # type: ignore[arg-type]
    for data in reads:
        conn.data_received(data)
    answers, _ = speedups.decode_frames(b"".join(transport.kept or []), 1 << 30)
    codes = {a.code for a in answers}
    if codes != {0}:
        raise SystemExit(f"unexpected answers: {[(a.code, a.remark) for a in answers if a.code]}")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=16384)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", default="1024,128", help="body sizes, comma-separated")
    ap.add_argument("--size", type=int, help="one body size (instead of --sizes)")
    ap.add_argument("--phases", default="single,batch")
    ap.add_argument(
        "--batches-per-read", type=int, default=1,
        help="SEND_BATCH_MESSAGE requests per read in the batch phase (batches in flight per connection)",
    )  # fmt: skip
    ap.add_argument("--segment-mib", type=int, default=64)
    ap.add_argument(
        "--lane", choices=("on", "commands", "off"), default="on",
        help="commands: the lane over decoded commands only (no raw lane, as before it); "
        "off: no coalescing lane for single sends (the per-message path)",
    )  # fmt: skip
    ap.add_argument(
        "--batch-lane", choices=("on", "off"), default="on",
        help="off: no batch lane (every SEND_BATCH_MESSAGE served by SendMessageProcessor)",
    )  # fmt: skip
    ap.add_argument(
        "--pull-lane", choices=("on", "off"), default="on",
        help="off: no pull lane (every pull decoded and served by PullMessageProcessor)",
    )  # fmt: skip
    args = ap.parse_args()
    print(f"codecs: {speedups.CHOSEN.name}")
    with tempfile.TemporaryDirectory(prefix="send_path_") as tmp:
        store_cfg = StoreConfig(
            store_path_root_dir=Path(tmp), maped_file_size_commit_log=args.segment_mib * MIB
        )
        broker = BrokerConfig(
            listen_port=0, listen_host="127.0.0.1", auto_create_topic_enable=True,
            default_topic_queue_nums=CONNECTIONS, grpc_server_port=0,
        )  # fmt: skip
        controller = BrokerController(broker, store_cfg)
        await controller.start()
        send_lane = controller.table.groups.get(int(RequestCode.SEND_MESSAGE_V2))
        if args.pull_lane == "off":  # the raw send lane alone, offered only its code's frames as the broker's
            raws = (
                {int(RequestCode.SEND_MESSAGE_V2): send_lane.raw}
                if isinstance(send_lane, SendGroupLane)
                else {}
            )
            controller.table.raw = chain_raw(raws)
        if args.lane != "on":
            controller.table.raw = None
        if args.lane == "off":
            controller.table.groups.clear()
        if args.batch_lane == "off":
            controller.table.groups.pop(int(RequestCode.SEND_BATCH_MESSAGE), None)
        lane = "off" if not controller.table.groups else "on" if controller.table.raw else "commands"
        print(f"coalescing lane: {lane}")
        try:
            sizes = [args.size] if args.size else [int(x) for x in args.sizes.split(",")]
            for size in sizes:
                for phase in args.phases.split(","):
                    if phase == "pull":
                        reads, per_read = build_pulls(controller), PULL_BATCH
                        check_answers(controller, reads[0][:1])  # warm-up: the subscription parsed
                        note = f" ({sum(map(len, reads))} pulls of {PULL_BATCH})"
                    else:
                        batch = phase == "batch"
                        per_read, note = (BATCH * args.batches_per_read if batch else WINDOW), ""
                        reads = build_reads(args.messages, size, batch, args.batches_per_read)
                        check_answers(controller, reads[0][:2])  # warm-up, topic created, answers SUCCESS
                    results = [await run_once(controller, reads, per_read) for _ in range(args.runs)]
                    cpu, loop_cpu, handling, faults = (min(r[i] for r in results) for i in range(4))
                    print(
                        f"{phase:6s} {size:4d} B, µs per message: process CPU {cpu:6.2f}, "
                        f"loop thread CPU {loop_cpu:6.2f}, handling (wall) {handling:6.2f}{note}; "
                        f"loop thread page faults per 1,000 messages {faults:6.1f}"
                    )
        finally:
            await controller.close()


if __name__ == "__main__":
    asyncio.run(main())
