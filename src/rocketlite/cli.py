"""`rocketlite` command line: servers and store tools. The only place that configures logging."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Protocol

from rocketlite import __version__
from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.controller import BrokerController
from rocketlite.broker.failover.node import FailoverBroker
from rocketlite.config import build_config, config_keys, load_properties, warn_unknown_keys
from rocketlite.controller.config import ControllerConfig
from rocketlite.controller.service import ControllerService
from rocketlite.logs import configure_logging
from rocketlite.namesrv.config import NamesrvConfig
from rocketlite.namesrv.server import NameServer
from rocketlite.protocol.errors import RocketliteError
from rocketlite.remoting.tls import TlsConfig, load_tls_config, tls_config_keys
from rocketlite.runtime import new_event_loop
from rocketlite.store.config import StoreConfig

log = logging.getLogger("rocketlite.cli")


class Server(Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...


# -- servers --------------------------------------------------------------------------------
async def _serve_until_signal(*servers: Server) -> None:
    """Start the servers in order, wait for SIGINT/SIGTERM, close them in reverse order."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    started: list[Server] = []
    reloads: set[asyncio.Task[None]] = set()
    # SIGHUP: servers that can, reload their config files (a broker re-reads topics.json).
    loop.add_signal_handler(signal.SIGHUP, _reload_all, started, reloads)
    try:
        for server in servers:
            await server.start()
            started.append(server)
        await stop.wait()
        log.info("shutting down")
    finally:
        for server in reversed(started):
            await server.close()


def _reload_all(servers: list[Server], tasks: set[asyncio.Task[None]]) -> None:
    async def reload(server: Any) -> None:
        try:
            await server.reload()
        except Exception:
            log.exception("reload failed")

    for server in servers:
        if callable(getattr(server, "reload", None)):
            log.info("SIGHUP: reloading %s", type(server).__name__)
            task = asyncio.ensure_future(reload(server))
            tasks.add(task)
            task.add_done_callback(tasks.discard)


def _run(coro: Coroutine[Any, Any, None]) -> None:
    loop = new_event_loop()
    try:
        loop.run_until_complete(coro)
    finally:
        loop.close()


def load_namesrv_config(path: Path | None, **overrides: Any) -> NamesrvConfig:
    return load_namesrv_configs(path, **overrides)[0]


def load_namesrv_configs(path: Path | None, **overrides: Any) -> tuple[NamesrvConfig, TlsConfig]:
    """The name server's config and its `tls.*` keys, from one namesrv.conf."""
    props = load_properties(path) if path is not None else {}
    warn_unknown_keys(props, config_keys(NamesrvConfig) | tls_config_keys(), str(path))
    return build_config(NamesrvConfig, props, **overrides), load_tls_config(props)


def load_broker_config(path: Path) -> tuple[BrokerConfig, StoreConfig]:
    """Both configs from one broker.conf (RocketMQ keeps broker and store keys in one file)."""
    broker, store, _tls = load_broker_configs(path)
    return broker, store


def load_broker_configs(path: Path) -> tuple[BrokerConfig, StoreConfig, TlsConfig]:
    """The broker's, the store's and the `tls.*` configs, all from one broker.conf."""
    props = load_properties(path)
    warn_unknown_keys(props, _broker_file_keys(), str(path))
    return build_config(BrokerConfig, props), build_config(StoreConfig, props), load_tls_config(props)


def _broker_file_keys() -> set[str]:
    return config_keys(BrokerConfig) | config_keys(StoreConfig) | tls_config_keys()


def build_name_server(path: Path | None, **overrides: Any) -> NameServer:
    """The name server of a namesrv.conf; with `enableControllerInNamesrv=true`, with controller
    mode's controller on its port, configured by the same file's controller keys (etcdEndpoints,
    etcdKeyPrefix, ...), as RocketMQ's name server reads its ControllerConfig from its own file."""
    props = load_properties(path) if path is not None else {}
    warn_unknown_keys(props, config_keys(NamesrvConfig) | tls_config_keys() | config_keys(ControllerConfig),
                      str(path))  # fmt: skip
    config = build_config(NamesrvConfig, props, **overrides)
    controller = None
    if config.enable_controller_in_namesrv:
        controller_props = {k: v for k, v in props.items() if k in config_keys(ControllerConfig)}
        controller = ControllerService(build_config(ControllerConfig, controller_props))
    return NameServer(config, tls=load_tls_config(props), embedded=controller)


def cmd_namesrv(args: argparse.Namespace) -> int:
    overrides: dict[str, Any] = {}
    if args.port is not None:
        overrides["listen_port"] = args.port
    _run(_serve_until_signal(build_name_server(Path(args.config) if args.config else None, **overrides)))
    return 0


def cmd_broker(args: argparse.Namespace) -> int:
    broker, store, tls = load_broker_configs(Path(args.config))
    if args.namesrv:
        broker = dataclasses.replace(broker, namesrv_addr=args.namesrv)
    if broker.enable_controller_mode:  # the controller decides the role (broker/failover/)
        _run(_serve_until_signal(FailoverBroker(broker, store, tls=tls)))
    else:
        _run(_serve_until_signal(BrokerController(broker, store, tls=tls)))
    return 0


def cmd_controller(args: argparse.Namespace) -> int:
    path = Path(args.config) if args.config else None
    props = load_properties(path) if path is not None else {}
    warn_unknown_keys(props, config_keys(ControllerConfig), str(path))
    overrides: dict[str, Any] = {}
    if args.port is not None:
        overrides["listen_port"] = args.port
    _run(_serve_until_signal(ControllerService(build_config(ControllerConfig, props, **overrides))))
    return 0


# Store sizes for a laptop: RocketMQ's defaults zero a 1 GiB commit-log segment (and stage the
# next one) and reserve 420 MB per index file and 6 MB per consume queue, 2.1 GiB at first start.
# conf/broker.conf ships the same values, so `rocketlite broker -c conf/broker.conf` opens a
# store `rocketlite dev` made.
DEV_STORE_DEFAULTS: dict[str, str] = {
    "mapedFileSizeCommitLog": str(64 * 1024 * 1024),  # 64 MiB segments
    "mapedFileSizeConsumeQueue": str(30_000 * 20),  # 30,000 units of 20 bytes, 586 KiB a file
    "maxHashSlotNum": "100000",  # with maxIndexNum: 8.4 MB index files
    "maxIndexNum": "400000",
}
DEV_HOST = "127.0.0.1"
_WILDCARDS = ("0.0.0.0", "::", "")


def _reachable(host: str) -> str:
    """The address to reach a server bound to `host` from this machine (wildcards: loopback)."""
    return "127.0.0.1" if host in _WILDCARDS else host


def _addr(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def dev_configs(args: argparse.Namespace) -> tuple[NamesrvConfig, BrokerConfig, StoreConfig]:
    """The three configs of `rocketlite dev`: dev defaults, then `-c broker.conf`, then flags.

    The dev name server is the broker's: a `namesrvAddr` in the file is ignored (with a warning);
    the broker's address is filled in once the name server has bound its port.
    """
    props: dict[str, str] = {}
    source = "rocketlite dev"
    if args.config:
        source = str(args.config)
        props = load_properties(Path(args.config))
        warn_unknown_keys(props, _broker_file_keys(), source)
        if props.get("namesrvAddr"):
            log.warning("%s: namesrvAddr ignored: rocketlite dev registers with its own name server", source)
    host = args.host if args.host is not None else props.get("listenHost", DEV_HOST).strip() or DEV_HOST
    merged = {**DEV_STORE_DEFAULTS, "storePathRootDir": "./data", **props}
    if args.store is not None:
        merged["storePathRootDir"] = args.store
    store = build_config(StoreConfig, merged)
    overrides: dict[str, Any] = {"listen_host": host, "namesrv_addr": None}
    if args.broker_port is not None:
        overrides["listen_port"] = args.broker_port
    if args.broker_ip is not None:
        overrides["broker_ip1"] = args.broker_ip
    elif "brokerIP1" not in merged and "brokerIp1" not in merged:
        overrides["broker_ip1"] = _reachable(host)
    broker = build_config(BrokerConfig, merged, **overrides)
    namesrv = NamesrvConfig(
        listen_port=args.namesrv_port,
        listen_host=host,
        kv_config_path=store.store_path_root_dir / "namesrv" / "kvConfig.json",
    )
    return namesrv, broker, store


class DevServer:
    """A name server, then a broker registered with it; logs the addresses really bound."""

    def __init__(
        self, namesrv: NamesrvConfig, broker: BrokerConfig, store: StoreConfig, tls: TlsConfig | None = None
    ) -> None:
        self.tls = tls or TlsConfig()
        self.namesrv = NameServer(namesrv, tls=self.tls)
        self.broker_config = broker
        self.store_config = store
        self.broker: BrokerController | None = None

    async def start(self) -> None:
        await self.namesrv.start()
        host = self.broker_config.listen_host
        namesrv_addr = _addr(_reachable(host), self.namesrv.port)
        broker = BrokerController(
            dataclasses.replace(self.broker_config, namesrv_addr=namesrv_addr),
            self.store_config,
            tls=self.tls,
        )
        try:
            await broker.start()
        except BaseException:
            await self.namesrv.close()
            raise
        self.broker = broker
        log.info("%s", self.listening())

    def listening(self) -> str:
        """One line: every address the process listens on, read from the bound sockets."""
        broker = self.broker
        assert broker is not None and self.namesrv.remoting is not None
        parts = [f"name server {_addr(*self.namesrv.remoting.addresses[0])}"]
        main, *vip = broker.server.addresses
        parts.append(f"broker {_addr(*main)}" + "".join(f" (VIP channel {_addr(*a)})" for a in vip))
        served = broker.parts
        if served is not None and served.ha_master is not None:
            host, port = served.ha_master.sock.getsockname()[:2]
            parts.append(f"HA {_addr(str(host), int(port))}")
        if served is not None and served.metrics is not None:
            parts.append(f"metrics http://{_addr(served.metrics.host, served.metrics.port)}/metrics")
        size = self.store_config.maped_file_size_commit_log
        root = self.store_config.store_path_root_dir
        shown = str(root) if root.is_absolute() or str(root).startswith(".") else f"./{root}"
        store = f"store {shown} (commit-log segments of {size // (1 << 20)} MiB)"
        return "rocketlite dev listening on: " + ", ".join(parts) + "; " + store

    async def close(self) -> None:
        if self.broker is not None:
            await self.broker.close()
        await self.namesrv.close()


def cmd_dev(args: argparse.Namespace) -> int:
    """Name server + broker in one process, on 127.0.0.1 unless --host says otherwise."""
    tls = load_tls_config(load_properties(Path(args.config))) if args.config else TlsConfig()
    _run(_serve_until_signal(DevServer(*dev_configs(args), tls=tls)))
    return 0


# -- store tools ----------------------------------------------------------------------------
def _with_progress(what: str, scan: Callable[[Callable[[int, int], None]], Any]) -> Any:
    """Run `scan(progress)`: a rich bar on stderr when it is a terminal (and rich, the `cli` extra,
    is installed); otherwise log lines, one every few seconds and one at the end."""
    from rocketlite.progress import LogProgress  # noqa: PLC0415

    if sys.stderr.isatty():
        try:
            from rich.console import Console  # noqa: PLC0415
            from rich.progress import (  # noqa: PLC0415
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TransferSpeedColumn,
            )
        except ImportError:
            pass
        else:
            columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
            with Progress(*columns, TimeElapsedColumn(), console=Console(stderr=True)) as bar:
                task = bar.add_task(what, total=None)

                def update(done: int, total: int) -> None:
                    bar.update(task, completed=done, total=total)

                result = scan(update)
                done = int(bar.tasks[0].completed)
                bar.update(task, total=max(done, 1), description=f"{what} (to the end of data)")
            return result
    watcher = LogProgress(logging.getLogger("rocketlite.store.tools"), what)
    result = scan(watcher)
    watcher.finish("read to the end of data")
    return result


def cmd_store_inspect(args: argparse.Namespace) -> int:
    from rocketlite.store.inspect import format_inspection, inspect_store  # noqa: PLC0415

    info = _with_progress(
        "store inspect: commit log",
        lambda progress: inspect_store(
            Path(args.dir), commit_log_file_size=args.segment_size, progress=progress
        ),
    )
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
    else:
        print(format_inspection(info))
    return 0


def cmd_store_verify(args: argparse.Namespace) -> int:
    from rocketlite.store.inspect import verify_store  # noqa: PLC0415

    report = _with_progress(
        "store verify: commit log",
        lambda progress: verify_store(
            Path(args.dir), commit_log_file_size=args.segment_size, progress=progress
        ),
    )
    for line in report.lines():
        print(line)
    return 0 if report.ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rocketlite", description=__doc__)
    parser.add_argument("--version", action="version", version=f"rocketlite {__version__}")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    parser.add_argument(
        "--log-format", choices=("text", "json"), default="text", help="json: one JSON object per line"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    dev = sub.add_parser(
        "dev",
        help="name server + broker in one process, on 127.0.0.1 (store ./data, ports 9876/10911)",
        description="A name server and a broker in one process, for a laptop: binds 127.0.0.1, "
        "64 MiB commit-log segments, store ./data. Flags win over -c broker.conf, which wins over "
        "these defaults.",
    )
    dev.add_argument("-c", "--config", help="broker.conf: any broker or store key over the dev defaults")
    dev.add_argument(
        "--host", default=None, help="address every port binds to (default 127.0.0.1; 0.0.0.0: all)"
    )
    dev.add_argument("--store", default=None, help="store root directory (default ./data)")
    dev.add_argument(
        "--namesrv-port", type=int, default=9876, help="name server port (default 9876; 0: any free)"
    )
    dev.add_argument(
        "--broker-port", type=int, default=None, help="broker listenPort (default 10911; 0: any free)"
    )
    dev.add_argument(
        "--broker-ip",
        default=None,
        help="brokerIP1, the address put in routes and message ids (default: the host)",
    )
    dev.set_defaults(func=cmd_dev)

    ns = sub.add_parser("namesrv", help="run a name server")
    ns.add_argument("-c", "--config", help="namesrv.conf (RocketMQ properties; key listenPort)")
    ns.add_argument("-p", "--port", type=int, default=None, help="override listenPort")
    ns.set_defaults(func=cmd_namesrv)

    br = sub.add_parser("broker", help="run a broker")
    br.add_argument("-c", "--config", required=True, help="broker.conf (RocketMQ properties)")
    br.add_argument("-n", "--namesrv", help="override namesrvAddr (host:port;host:port)")
    br.set_defaults(func=cmd_broker)

    ctl = sub.add_parser("controller", help="run a controller (controller mode; its state lives in etcd)")
    ctl.add_argument("-c", "--config", help="controller.conf (listenPort, etcdEndpoints, ...)")
    ctl.add_argument("-p", "--port", type=int, default=None, help="override listenPort")
    ctl.set_defaults(func=cmd_controller)

    from rocketlite.admin.cli import add_admin_parser  # noqa: PLC0415

    add_admin_parser(sub)

    store = sub.add_parser("store", help="offline tools for a store directory")
    store_sub = store.add_subparsers(dest="store_command", required=True)
    for name, func, text in (
        ("inspect", cmd_store_inspect, "segments, records, queues, index files, checkpoint"),
        ("verify", cmd_store_verify, "read-only recovery check; non-zero exit if broken"),
    ):
        p = store_sub.add_parser(name, help=text)
        p.add_argument("dir", help="store root (the directory holding commitlog/)")
        p.add_argument(
            "--segment-size",
            type=int,
            default=None,
            help="commit-log segment size (default: taken from the segment files)",
        )
        if name == "inspect":
            p.add_argument("--json", action="store_true", help="machine-readable output")
        p.set_defaults(func=func)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    try:
        return int(args.func(args))
    except (RocketliteError, OSError) as exc:
        print(f"rocketlite: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
