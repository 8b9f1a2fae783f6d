"""`--log-format json`: every line a server writes to stderr is one JSON object."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
from pathlib import Path

from rocketlite.logs import JsonFormatter
from tests.support.ports import free_port
from tests.support.processes import ROCKETLITE, child_env


def test_json_formatter_fields_extra_and_traceback() -> None:
    logger = logging.getLogger("rocketlite.test")
    try:
        raise ValueError("boom")
    except ValueError:
        record = logger.makeRecord(
            "rocketlite.test", logging.ERROR, __file__, 1, "put failed for %s", ("T",), sys.exc_info(),
            extra={"topic": "T", "queue_id": 3, "obj": object()},
        )  # fmt: skip
    out = json.loads(JsonFormatter().format(record))
    assert out["level"] == "ERROR" and out["logger"] == "rocketlite.test"
    assert out["msg"] == "put failed for T"
    assert out["topic"] == "T" and out["queue_id"] == 3 and out["obj"].startswith("<object")
    assert "ValueError: boom" in out["exc"]
    assert out["ts"].endswith("Z") and "T" in out["ts"]


def test_namesrv_logs_json_lines(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"listenPort={free_port()}\nkvConfigPath={tmp_path / 'kv.json'}\n")
    env = child_env()
    proc = subprocess.Popen(
        [*ROCKETLITE, "--log-format", "json", "namesrv", "-c", str(conf)],
        stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:  # blocks until the server has said it listens
        lines.append(line)
        if "listening" in line:
            break
    proc.send_signal(signal.SIGTERM)
    _, rest = proc.communicate(timeout=30)
    assert proc.returncode == 0
    lines += rest.splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    assert records and all({"ts", "level", "logger", "msg"} <= r.keys() for r in records)
    assert any(r["logger"].startswith("rocketlite.") and "listening" in r["msg"] for r in records)
