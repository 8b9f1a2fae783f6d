"""rocketmq==0.4.4 (rocketmq-client-cpp 1.0.1) producer that keeps sending through a failover.

Runs under the client's own venv (`.clients/cpp044/bin/python`), for tests/failover/test_foreign_clients.py:

    cpp_keep_sending.py --namesrv ADDR --topic T [--key-prefix c] [--pace-ms 10]
        [--send-timeout-ms 3000] [--timeout-s 60] [--group PG]

Sends SYNC messages with unique keys and bodies (`<prefix>-<i>`) one at a time until a line (or
the end of input) arrives on stdin, or the deadline. Every send that returns is printed:
{"event":"sent","key":..,"status":0,"msg_id":..,"offset":..,"ts":..,"ms":..} (status 0 is
SEND_OK; the C API gives no queue id, `offset` is the queue offset) or {"event":"send_error",
"key":..,"error":..} once the client's own retries are spent; either way the loop goes on, as an
application would. The C API has no setting for the retries or for how often the client reads a
topic's route again (the C++ client does it every 30 s, and when it has no route for the topic):
only the send timeout (`--send-timeout-ms`). Ends with {"event":"done"}; a hard deadline
(--timeout-s + 10 s) prints {"event":"timeout"} and exits 3 even if the native client hangs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

from rocketmq.client import Message, Producer  # type: ignore[import-not-found, unused-ignore]


def emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def now_ms() -> int:
    return int(time.time() * 1000)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", default="cpp_keep_sending_pg")
    ap.add_argument("--key-prefix", default="c")
    ap.add_argument("--pace-ms", type=int, default=10)
    ap.add_argument("--send-timeout-ms", type=int, default=3000)
    ap.add_argument("--timeout-s", type=float, default=60.0)
    args = ap.parse_args()

    def hard_deadline() -> None:
        emit(event="timeout", seconds=args.timeout_s + 10)
        os._exit(3)

    timer = threading.Timer(args.timeout_s + 10, hard_deadline)
    timer.daemon = True
    timer.start()
    stop = threading.Event()

    def watch_stdin() -> None:
        for _ in sys.stdin:
            break
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    producer = Producer(args.group, timeout=args.send_timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    producer.start()
    emit(event="ready")
    deadline = time.monotonic() + args.timeout_s
    i = 0
    while not stop.is_set() and time.monotonic() < deadline:
        key = f"{args.key_prefix}-{i}"
        i += 1
        msg = Message(args.topic)
        msg.set_tags("F")
        msg.set_keys(key)
        msg.set_body(key)
        ts = now_ms()
        try:
            r = producer.send_sync(msg)
        except Exception as exc:
            emit(event="send_error", key=key, ts=ts, ms=now_ms() - ts, error=f"{type(exc).__name__}: {exc}")
        else:
            emit(event="sent", key=key, ts=ts, ms=now_ms() - ts, status=int(r.status), msg_id=r.msg_id,
                 offset=r.offset)  # fmt: skip
        stop.wait(args.pace_ms / 1000)
    emit(event="done")
    producer.shutdown()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
