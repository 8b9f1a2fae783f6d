"""`rocketlite` command line: servers, store tools. The only place that configures logging."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from rocketlite import __version__
from rocketlite.config import build_config, config_keys, load_properties, warn_unknown_keys
from rocketlite.errors import RocketliteError
from rocketlite.store.config import StoreConfig

log = logging.getLogger("rocketlite.cli")


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _wait_for_signal() -> None:
    """Block until SIGINT or SIGTERM."""
    stop = threading.Event()

    def _handler(signum: int, _frame: object) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGINT, _handler)
    signal.signal(signal.SIGTERM, _handler)
    while not stop.wait(1.0):
        pass


def cmd_store_inspect(args: argparse.Namespace) -> int:
    from rocketlite.store.inspect import format_inspection, inspect_store  # noqa: PLC0415

    info = inspect_store(Path(args.dir), commit_log_file_size=args.segment_size)
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
    else:
        print(format_inspection(info))
    return 0


def cmd_store_verify(args: argparse.Namespace) -> int:
    from rocketlite.store.inspect import verify_store  # noqa: PLC0415

    report = verify_store(Path(args.dir), commit_log_file_size=args.segment_size)
    for line in report.lines():
        print(line)
    return 0 if report.ok else 1


def cmd_dev(args: argparse.Namespace) -> int:
    """Until the broker exists: open (recover) the store at ./data and keep it open."""
    from rocketlite.store.message_store import MessageStore  # noqa: PLC0415

    config = build_config(StoreConfig, {}, store_path_root_dir=Path(args.store))
    store = MessageStore(config)
    store.start()
    report = store.recovery_report
    log.info(
        "store open at %s: commit log %d..%d%s",
        config.store_path_root_dir,
        store.min_phy_offset,
        store.max_phy_offset,
        f" (recovered: {'; '.join(report.actions)})" if report and report.actions else "",
    )
    log.info("the broker is not built yet; press Ctrl-C to stop")
    try:
        _wait_for_signal()
    finally:
        store.shutdown()
    return 0


def load_store_config(path: Path) -> tuple[StoreConfig, dict[str, str]]:
    props = load_properties(path)
    return build_config(StoreConfig, props), props


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rocketlite", description=__doc__)
    parser.add_argument("--version", action="version", version=f"rocketlite {__version__}")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    sub = parser.add_subparsers(dest="command", required=True)

    dev = sub.add_parser("dev", help="development server on ./data (store only until the broker lands)")
    dev.add_argument("--store", default="./data", help="store root directory (default ./data)")
    dev.set_defaults(func=cmd_dev)

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
    configure_logging(args.log_level)
    try:
        result: Any = args.func(args)
        return int(result)
    except RocketliteError as exc:
        print(f"rocketlite: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


__all__ = ["config_keys", "main", "warn_unknown_keys"]

if __name__ == "__main__":
    sys.exit(main())
