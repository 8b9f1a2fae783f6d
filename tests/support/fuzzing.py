"""Fuzzing material shared by tests/reliability/test_fuzz.py and bench/fuzz.py: valid sample frames
of every kind a broker sees, byte-level mutations of them, every custom header class, and a load
that measures a producer's throughput with and without many idle connections held open."""

from __future__ import annotations

import asyncio
import random
import struct
import time

from rocketlite.protocol.codes import RequestCode, ResponseCode, SerializeType
from rocketlite.protocol.formats.batch import BatchEntry, encode_batch
from rocketlite.protocol.wire import headers as headers_mod
from rocketlite.protocol.wire.command import make_request
from rocketlite.protocol.wire.custom_header import CustomHeader
from rocketlite.protocol.wire.frame import encode_command
from rocketlite.protocol.wire.headers import SendMessageRequestHeader
from tests.support.broker_harness import BrokerUnderTest


def sample_frames() -> list[bytes]:
    """Valid frames of the kinds a broker sees: JSON and ROCKETMQ headers, send, pull, batch."""
    send = SendMessageRequestHeader(
        producer_group="pg", topic="FuzzTopic", default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=0, sys_flag=0, born_timestamp=1, flag=0, properties="KEYS\x01k\x02TAGS\x01t",
        reconsume_times=0,
    )  # fmt: skip
    batch = encode_batch([BatchEntry(0, b"a", "KEYS\x01x"), BatchEntry(1, b"bb", "")])
    cmds = [
        make_request(RequestCode.SEND_MESSAGE_V2, send.to_ext_v2(), b"body"),
        make_request(RequestCode.SEND_MESSAGE, send.to_ext(), b"body"),
        make_request(RequestCode.SEND_BATCH_MESSAGE, {**send.to_ext_v2(), "j": "1"}, batch),
        make_request(
            RequestCode.HEART_BEAT, {}, b'{"clientID":"c","consumerDataSet":[],"producerDataSet":[]}'
        ),
        make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "FuzzTopic"}),
        make_request(
            RequestCode.QUERY_MESSAGE,
            {"topic": "FuzzTopic", "key": "k", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "9"},
        ),
        make_request(
            RequestCode.PULL_MESSAGE,
            {
                "consumerGroup": "g",
                "topic": "FuzzTopic",
                "queueId": "0",
                "queueOffset": "0",
                "maxMsgNums": "32",
                "sysFlag": "4",
                "commitOffset": "0",
                "suspendTimeoutMillis": "0",
                "subscription": "*",
                "subVersion": "0",
            },
        ),
        make_request(RequestCode.GET_MAX_OFFSET, {"topic": "FuzzTopic", "queueId": "0"}),
    ]
    out: list[bytes] = []
    for cmd in cmds:
        out.append(encode_command(cmd))
        cmd.serialize_type = SerializeType.ROCKETMQ
        out.append(encode_command(cmd))
    return out


SAMPLES = sample_frames()


def mutate(rng: random.Random, data: bytes) -> bytes:
    """A few random byte-level mutations (flip, set interesting value, insert, delete, splice)."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        pos = rng.randrange(len(buf)) if buf else 0
        if op == 0 and buf:
            buf[pos] ^= 1 << rng.randrange(8)
        elif op == 1 and buf:
            buf[pos] = rng.choice((0, 0x7F, 0x80, 0xFF, ord('"'), ord("{"), ord("}"), ord(":")))
        elif op == 2:
            buf[pos:pos] = rng.randbytes(rng.randint(1, 8))
        elif op == 3 and buf:
            del buf[pos : pos + rng.randint(1, 8)]
        elif op == 4 and len(buf) >= 4:
            word = rng.choice((0, 1, 0x7FFF_FFFF, 0xFFFF_FFFF, 0x0100_0000, 0x00FF_FFFF, rng.getrandbits(32)))
            p = rng.randrange(len(buf) - 3)
            buf[p : p + 4] = struct.pack(">I", word)
        else:
            other = rng.choice(SAMPLES)
            buf[pos:] = other[rng.randrange(len(other)) :]
    return bytes(buf)


HEADER_CLASSES = sorted(
    (c for c in vars(headers_mod).values()
     if isinstance(c, type) and issubclass(c, CustomHeader) and c is not CustomHeader),
    key=lambda c: c.__name__,
)  # fmt: skip


async def throughput(b: BrokerUnderTest, seconds: float) -> float:
    sent = 0
    deadline = time.monotonic() + seconds
    started = time.monotonic()
    while time.monotonic() < deadline:
        r = await b.send("LoadTopic", b"y" * 128, keys=f"k{sent}")
        assert r.code == ResponseCode.SUCCESS, r.remark
        sent += 1
    return sent / (time.monotonic() - started)


async def hold_idle_connections(b: BrokerUnderTest, count: int, seconds: float) -> tuple[float, float, int]:
    """Throughput without, then with `count` idle connections held; and how many the broker holds.

    Each rate is the best of three windows of `seconds / 2`: one send in flight at a time is
    bound by scheduling, and a single window on a loaded machine (CI's two workers, other
    processes) once measured 5,164 then 2,064 sends/s with nothing wrong. Starvation by idle
    connections lowers every window; another process's burst lowers only some."""
    await throughput(b, 0.3)  # warm-up: topic creation, caches
    baseline = max([await throughput(b, seconds / 2) for _ in range(3)])
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    for _ in range(count):
        idle.append(await asyncio.open_connection("127.0.0.1", b.controller.port))
    # Half of them hold a partial frame (a header word, no more), the rest nothing at all.
    for _r, w in idle[::2]:
        w.write(SAMPLES[0][:6])
    with_idle = max([await throughput(b, seconds / 2) for _ in range(3)])
    held = sum(1 for r, w in idle if not r.at_eof() and not w.is_closing())
    for _r, w in idle:
        w.close()
    return baseline, with_idle, held
