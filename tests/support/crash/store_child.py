"""Crash-test child: append to a SYNC_FLUSH store forever, acknowledging every durable message.

Run as ``python tests/support/crash/store_child.py STORE_DIR CYCLE``; `tests/store/test_crash_recovery.py`
starts it, reads the acknowledgements and SIGKILLs it at a moment chosen by the ACK stream.

Once a put (or a batch) returns PUT_OK, i.e. after the group commit has fdatasync'ed it, one line
per message goes to stdout and stdout is flushed::

    ACK <key> <queue_id> <queue_offset> <commit_log_offset>

Keys are ``k-<cycle>-<n>``, unique across cycles as long as every cycle gets its own id. Bodies
are `body_for(key, size)`, so a reader can check the bytes it gets back. Segments are tiny (64 KiB
commit log, 100-unit consume queues, small index files) so that rolls happen all the time. Not a
test module (no ``test_`` prefix): pytest does not collect it.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from rocketlite.protocol.formats.record import MessageInner
from rocketlite.protocol.message import HostAddress, properties_to_string
from rocketlite.store.config import FlushDiskType, StoreConfig
from rocketlite.store.message_store import MessageStore
from rocketlite.store.results import PutMessageStatus
from tests.support.store import put_batch, stored_batch

TOPIC = "CrashTopic"
QUEUES = 4
MAX_BODY = 3000
MAX_BATCH = 5
HOST = HostAddress.parse("127.0.0.1:10911")


def crash_config(root: Path, flush_disk_type: FlushDiskType = FlushDiskType.SYNC_FLUSH) -> StoreConfig:
    """The store the child writes and the test reopens: tiny segments, the disk check relaxed."""
    return StoreConfig(
        store_path_root_dir=root,
        flush_disk_type=flush_disk_type,
        maped_file_size_commit_log=64 * 1024,
        maped_file_size_consume_queue=100 * 20,
        max_hash_slot_num=500,
        max_index_num=1500,
        flush_interval_commit_log=50,
        flush_interval_consume_queue=50,
        disk_space_clean_forcibly_ratio=100,  # whatever the host's disk, nothing is deleted
        disk_space_warning_level_ratio=100,
    )


def body_for(key: str, size: int) -> bytes:
    """The body stored under `key`: the key and a dot, repeated, cut to `size` bytes."""
    unit = f"{key}.".encode()
    return (unit * (size // len(unit) + 1))[:size]


def make_message(key: str, queue_id: int, size: int) -> MessageInner:
    props = {"KEYS": key, "TAGS": f"tag{queue_id}"}
    return MessageInner(
        topic=TOPIC,
        body=body_for(key, size),
        born_host=HOST,
        store_host=HOST,
        queue_id=queue_id,
        properties_string=properties_to_string(props),
        born_timestamp=1,
    )


def run(root: Path, cycle: int) -> None:
    rng = random.Random(cycle)
    store = MessageStore(crash_config(root))
    store.start()
    out = sys.stdout
    n = 0
    while True:
        queue_id = rng.randrange(QUEUES)
        count = rng.randint(2, MAX_BATCH) if rng.random() < 0.3 else 1
        keys = [f"k-{cycle}-{n + i}" for i in range(count)]
        n += count
        msgs = [make_message(key, queue_id, rng.randint(0, MAX_BODY)) for key in keys]
        res = store.put_message(msgs[0]) if count == 1 else put_batch(store, msgs)
        if res.status is not PutMessageStatus.PUT_OK:
            print(f"put of {keys} not acknowledged: {res.status.name} {res.remark}", file=sys.stderr)
            continue
        if count > 1:
            assert res.append is not None
            msgs = stored_batch(msgs, res.append)
        out.write(
            "".join(
                f"ACK {key} {m.queue_id} {m.queue_offset} {m.commit_log_offset}\n"
                for key, m in zip(keys, msgs, strict=True)
            )
        )
        out.flush()


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(f"usage: {argv[0]} STORE_DIR CYCLE", file=sys.stderr)
        return 2
    try:
        run(Path(argv[1]), int(argv[2]))
    except BrokenPipeError:  # the test went away: nobody to acknowledge to
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
