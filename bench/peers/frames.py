"""The RocketMQ remoting frames the native generator writes to rocketlite and to RocketMQ's
broker alike, encoded once here with rocketlite's own encoder (the bytes a Java client sends:
JSON headers, UNIQ_KEY / TAGS / WAIT properties) by bench/broker's request builders; the
generator patches only the opaque, a pull's queueOffset and, for latency, the body's first
8 bytes (bench/peers/loadgen/remoting.go)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from bench.broker.config import BATCH, CONNECTIONS
from bench.broker.frames import FrameTemplate
from bench.broker.loadgen import Sender, pull_request, pull_template

E2E_SUSPEND_MS = 1000


def _template(t: FrameTemplate) -> dict[str, object]:
    return {
        "data": base64.b64encode(t.frame).decode(),
        "opaque_pos": t.opaque_pos,
        "body_pos": t.body_pos,
        "offset_pos": t.offset_pos,
    }


def write_frames(path: Path, topic: str, size: int, *, batch: bool, suspend_ms: int = 0) -> Path:
    """One send frame (SEND_MESSAGE_V2, or SEND_BATCH_MESSAGE of BATCH) and one pull frame per
    queue 0..CONNECTIONS-1 of `topic`, as JSON for `peersgen -frames`."""
    body = bytes(size)
    frames, pulls = [], []
    for q in range(CONNECTIONS):
        sender = Sender(topic, q, batch=batch)
        cmd = sender.batch_of(body, BATCH) if batch else sender.single(body)
        frames.append(_template(FrameTemplate(cmd)))
        pull = pull_request(pull_template(topic, q, suspend_ms=suspend_ms), 0)
        pulls.append(_template(FrameTemplate(pull, offset_key="queueOffset")))
    doc = {"batch": BATCH if batch else 1, "frames": frames, "pulls": pulls}
    path.write_text(json.dumps(doc))
    return path
