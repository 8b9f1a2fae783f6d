"""`embedded()`: a name server and a broker in-process, on free ports, with a temporary store.

For users' own tests and for ours::

    with rocketlite.embedded.embedded() as cluster:
        producer = Producer(namesrv=cluster.namesrv_addr, ...)

The servers run on an event loop in a background thread, so the caller may be synchronous.
Broker settings are `BrokerConfig` field names; store settings take a `store_` prefix
(`store_flush_disk_type=FlushDiskType.SYNC_FLUSH`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.controller import BrokerController
from rocketlite.namesrv.config import NamesrvConfig
from rocketlite.namesrv.server import NameServer
from rocketlite.remoting.tls import TlsConfig
from rocketlite.runtime import LoopThread
from rocketlite.store.config import StoreConfig


@dataclass
class EmbeddedCluster:
    namesrv: NameServer
    broker: BrokerController
    runner: LoopThread
    store_dir: Path

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv.port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker.port}"


def _split(overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    store = {k[len("store_") :]: v for k, v in overrides.items() if k.startswith("store_")}
    broker = {k: v for k, v in overrides.items() if not k.startswith("store_")}
    known = {f.name for f in dataclasses.fields(BrokerConfig)}
    unknown = set(broker) - known
    if unknown:
        raise TypeError(f"unknown broker settings: {sorted(unknown)}")
    return broker, store


@contextlib.contextmanager
def embedded(
    store_dir: Path | None = None, *, tls: TlsConfig | None = None, **overrides: Any
) -> Iterator[EmbeddedCluster]:
    """Start name server + broker on 127.0.0.1 free ports; stop them (and remove a temp store) after.

    `tls` (the `tls.*` keys) applies to both servers' ports and to the broker's registration."""
    broker_kw, store_kw = _split(overrides)
    with contextlib.ExitStack() as stack:
        if store_dir is None:
            store_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rocketlite-")))
        store_kw.setdefault("maped_file_size_commit_log", 64 * 1024 * 1024)
        store_kw.setdefault("maped_file_size_consume_queue", 30_000 * 20)
        store_kw.setdefault("max_hash_slot_num", 50_000)
        store_kw.setdefault("max_index_num", 200_000)
        store_cfg = StoreConfig(store_path_root_dir=store_dir, **store_kw)
        runner = LoopThread("rocketlite-embedded")
        stack.callback(runner.stop)
        namesrv = NameServer(
            NamesrvConfig(
                listen_port=0, listen_host="127.0.0.1", kv_config_path=store_dir / "namesrv" / "kvConfig.json"
            ),
            tls=tls,
        )
        runner.call(namesrv.start())
        stack.callback(lambda: runner.call(namesrv.close()))
        broker_kw.setdefault("listen_host", "127.0.0.1")
        broker_kw.setdefault("broker_ip1", "127.0.0.1")
        broker_kw["namesrv_addr"] = f"127.0.0.1:{namesrv.port}"
        broker_kw["listen_port"] = broker_kw.get("listen_port", 0)
        broker = BrokerController(BrokerConfig(**broker_kw), store_cfg, tls=tls)
        runner.call(broker.start())
        stack.callback(lambda: runner.call(broker.close()))
        yield EmbeddedCluster(namesrv, broker, runner, store_dir)
