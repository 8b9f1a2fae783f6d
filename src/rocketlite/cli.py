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
from rocketlite.config import build_config, config_keys, load_properties, warn_unknown_keys
from rocketlite.logs import configure_logging
from rocketlite.namesrv.config import NamesrvConfig
from rocketlite.namesrv.server import NameServer
from rocketlite.protocol.errors import RocketliteError
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
    props = load_properties(path) if path is not None else {}
    warn_unknown_keys(props, config_keys(NamesrvConfig), str(path))
    return build_config(NamesrvConfig, props, **overrides)


def load_broker_config(path: Path) -> tuple[BrokerConfig, StoreConfig]:
    """Both configs from one broker.conf (RocketMQ keeps broker and store keys in one file)."""
    props = load_properties(path)
    warn_unknown_keys(props, config_keys(BrokerConfig) | config_keys(StoreConfig), str(path))
    return build_config(BrokerConfig, props), build_config(StoreConfig, props)


def cmd_namesrv(args: argparse.Namespace) -> int:
    overrides: dict[str, Any] = {}
    if args.port is not None:
        overrides["listen_port"] = args.port
    config = load_namesrv_config(Path(args.config) if args.config else None, **overrides)
    _run(_serve_until_signal(NameServer(config)))
    return 0


def cmd_broker(args: argparse.Namespace) -> int:
    broker, store = load_broker_config(Path(args.config))
    if args.namesrv:
        broker = dataclasses.replace(broker, namesrv_addr=args.namesrv)
    _run(_serve_until_signal(BrokerController(broker, store)))
    return 0


def cmd_dev(args: argparse.Namespace) -> int:
    """Name server + broker in one process: store ./data, ports 9876 / 10911, auto-create on."""
    store_root = Path(args.store)
    namesrv = NameServer(
        NamesrvConfig(listen_port=args.namesrv_port, kv_config_path=store_root / "namesrv" / "kvConfig.json")
    )
    broker = BrokerConfig(
        listen_port=args.broker_port,
        namesrv_addr=f"127.0.0.1:{args.namesrv_port}",
        broker_ip1=args.broker_ip,
        auto_create_topic_enable=True,
    )
    store = build_config(StoreConfig, {}, store_path_root_dir=store_root)
    log.info(
        "rocketlite dev: name server 127.0.0.1:%d, broker %s:%d, store %s",
        args.namesrv_port,
        args.broker_ip,
        args.broker_port,
        store.store_path_root_dir,
    )
    _run(_serve_until_signal(namesrv, BrokerController(broker, store)))
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

    dev = sub.add_parser("dev", help="name server + broker in one process (store ./data, ports 9876/10911)")
    dev.add_argument("--store", default="./data", help="store root directory (default ./data)")
    dev.add_argument("--namesrv-port", type=int, default=9876)
    dev.add_argument("--broker-port", type=int, default=10911)
    dev.add_argument("--broker-ip", default="127.0.0.1", help="address put in message ids and routes")
    dev.set_defaults(func=cmd_dev)

    ns = sub.add_parser("namesrv", help="run a name server")
    ns.add_argument("-c", "--config", help="namesrv.conf (RocketMQ properties; key listenPort)")
    ns.add_argument("-p", "--port", type=int, default=None, help="override listenPort")
    ns.set_defaults(func=cmd_namesrv)

    br = sub.add_parser("broker", help="run a broker")
    br.add_argument("-c", "--config", required=True, help="broker.conf (RocketMQ properties)")
    br.add_argument("-n", "--namesrv", help="override namesrvAddr (host:port;host:port)")
    br.set_defaults(func=cmd_broker)

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
