"""rocketmq==0.4.4 (rocketmq-client-cpp 1.x, V3_1_8) driver for tests/support/foreign_clients/real.py.

Runs under the client's own venv (`.clients/cpp044/bin/python`), never the project's. stdout
carries one JSON object per line; the C++ library logs to $HOME/logs/rocketmq-cpp. Every run
ends by itself: done, fatal error, or --timeout-s ({"event":"timeout"}, exit code 3).

    cpp_client.py produce --namesrv ADDR --group PG --spec JSON [--timeout-s 30]

  spec: {"messages": [{"topic": T, "body": "...", "tags": "TagA", "keys": ["k1", "k2"],
         "props": {"name": "value"}, "delay_level": 3, "order_arg": 7}, ...]}
  `order_arg` sends with `send_orderly` (queue = arg % queue count, chosen by the client).
  Prints per message {"event":"sent","i":..,"msg_id":..,"offset":..,"status":..,"queue_id":..,
  "ts":..} (queue_id only for orderly sends) or {"event":"send_error","i":..,"error":..}, then
  {"event":"done","sent":N,"failed":M}. Exit code 0 when every send succeeded.

    cpp_client.py consume --namesrv ADDR --group G --topic T [--expression 'TagA || TagB']
        [--orderly] [--fail-match TEXT] [--fail-until N] [--props a,b] [--instance NAME]
        [--timeout-s 60]

  {"event":"started"}   PushConsumer.start() returned (route and heartbeat done; the C++
                        client rebalances asynchronously right after)
  {"event":"recv","topic":..,"tags":..,"keys":..,"body":..,"msg_id":..,"queue_id":..,
   "queue_offset":..,"reconsume_times":..,"props":{name: value},"ts":ms,"action":"ok"|"fail"}
  {"event":"closed"}    after shutdown()
  A message whose body contains --fail-match ("*": every message) is answered RECONSUME_LATER
  while its reconsume_times < --fail-until (default: always). Write "exit" on stdin (or close
  it) to shut down and exit 0.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import threading
import time
from typing import Any

from rocketmq.client import Message, Producer, PushConsumer, RecvMessage  # type: ignore[import-not-found, unused-ignore]
from rocketmq.ffi import dll  # type: ignore[import-not-found, unused-ignore]

CONSUME_SUCCESS = 0
RECONSUME_LATER = 1  # orderly: SUSPEND_CURRENT_QUEUE_A_MOMENT

_out_lock = threading.Lock()


def emit(**fields: Any) -> None:
    line = json.dumps(fields, sort_keys=True)
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def now_ms() -> int:
    return int(time.time() * 1000)


def text(value: object) -> str | None:
    """The C API hands back bytes (or None); make them JSON-friendly."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def exit_after(seconds: float, what: str) -> None:
    """Hard deadline: print a timeout line and leave even if the native client hangs."""

    def fire() -> None:
        emit(event="timeout", what=what, seconds=seconds)
        os._exit(3)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()


def build(spec: dict[str, Any]) -> Any:
    msg = Message(spec["topic"])
    if spec.get("tags"):
        msg.set_tags(spec["tags"])
    if spec.get("keys"):
        msg.set_keys(" ".join(spec["keys"]))
    for name, value in (spec.get("props") or {}).items():
        msg.set_property(name, value)
    if spec.get("delay_level"):
        msg.set_delay_time_level(int(spec["delay_level"]))
    msg.set_body(spec.get("body", ""))
    return msg


def produce(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--timeout-s", type=float, default=30.0)
    ap.add_argument("--access-key")  # optional ACL credentials
    ap.add_argument("--secret-key", default="")
    args = ap.parse_args(argv)
    exit_after(args.timeout_s, "producer")
    messages: list[dict[str, Any]] = json.loads(args.spec)["messages"]

    producer = Producer(args.group)
    producer.set_namesrv_addr(args.namesrv)
    if args.access_key is not None:
        producer.set_session_credentials(args.access_key, args.secret_key, "ALIYUN")
    producer.start()
    failed = 0
    for i, spec in enumerate(messages):
        msg = build(spec)
        chosen: dict[str, int] = {}

        def select(mq_size: int, _msg: Any, arg: Any, chosen: dict[str, int] = chosen) -> int:
            value = ctypes.cast(arg, ctypes.POINTER(ctypes.c_int))[0]
            chosen["queue_id"] = value % mq_size
            return chosen["queue_id"]

        ts = now_ms()
        try:
            if "order_arg" in spec:
                result = producer.send_orderly(msg, int(spec["order_arg"]), queue_selector=select)
            else:
                result = producer.send_sync(msg)
        except Exception as exc:
            failed += 1
            emit(event="send_error", i=i, ts=ts, error=f"{type(exc).__name__}: {exc}")
            continue
        emit(
            event="sent", i=i, ts=ts, topic=spec["topic"], status=int(result.status),
            msg_id=result.msg_id, offset=result.offset, queue_id=chosen.get("queue_id"),
        )  # fmt: skip
    emit(event="done", sent=len(messages) - failed, failed=failed)
    producer.shutdown()
    sys.stdout.flush()
    os._exit(1 if failed else 0)


def consume(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--expression", default="*")
    ap.add_argument("--orderly", action="store_true")
    ap.add_argument("--fail-match")
    ap.add_argument("--fail-until", type=int, default=1 << 30)
    ap.add_argument("--props", default="")
    ap.add_argument("--instance")
    ap.add_argument("--timeout-s", type=float, default=60.0)
    ap.add_argument("--access-key")  # optional ACL credentials
    ap.add_argument("--secret-key", default="")
    args = ap.parse_args(argv)
    exit_after(args.timeout_s, "consumer")
    prop_names = [p for p in args.props.split(",") if p]

    consumer = PushConsumer(args.group, orderly=args.orderly)
    consumer.set_namesrv_addr(args.namesrv)
    if args.access_key is not None:
        consumer.set_session_credentials(args.access_key, args.secret_key, "ALIYUN")
    if args.instance:
        consumer.set_instance_name(args.instance)

    def on_message(_consumer: Any, handle: Any) -> int:
        # Registered directly (not through PushConsumer.subscribe, whose wrapper re-raises the
        # handler's exception inside the ctypes callback) so the status returned is explicit.
        try:
            msg = RecvMessage(handle)
            body = text(msg.body) or ""
            reconsume = int(msg.reconsume_times)
            fail = (
                args.fail_match is not None
                and (args.fail_match == "*" or args.fail_match in body)
                and reconsume < args.fail_until
            )
            emit(
                event="recv", topic=msg.topic, tags=text(msg.tags), keys=text(msg.keys), body=body,
                msg_id=msg.id, queue_id=int(msg.queue_id), queue_offset=int(msg.queue_offset),
                reconsume_times=reconsume, ts=now_ms(), action="fail" if fail else "ok",
                props={name: text(msg.get_property(name)) for name in prop_names},
            )  # fmt: skip
        except Exception as exc:
            emit(event="error", error=f"{type(exc).__name__}: {exc}")
            return RECONSUME_LATER
        return RECONSUME_LATER if fail else CONSUME_SUCCESS

    dll.Subscribe(consumer._handle, args.topic.encode(), args.expression.encode())
    consumer._register_callback(on_message)
    consumer.start()
    emit(event="started")

    done = threading.Event()

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "exit":
                break
        done.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    done.wait()
    consumer.shutdown()
    emit(event="closed")
    sys.stdout.flush()
    os._exit(0)


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in ("produce", "consume"):
        sys.stderr.write("usage: cpp_client.py produce|consume ...\n")
        return 2
    run = produce if sys.argv[1] == "produce" else consume
    return run(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
