"""GRPC_ENABLE_FORK_SUPPORT as rocketlite leaves it, each case in a fresh interpreter (grpc reads
the variable once, on import): off once the broker is imported, before a program's own `import
grpc`; a user's own value kept; a warning when grpc runs with its fork handlers on. Why:
protocol/proto/__init__.py; the fork itself is tested in tests/spark/test_grpc_fork.py."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.support.processes import child_env

pytestmark = pytest.mark.skipif(importlib.util.find_spec("grpc") is None, reason="grpcio is not installed")

SNIPPET = """
import logging, os, sys
logging.basicConfig(level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")
if sys.argv[1] == "grpc-first":
    import grpc
import rocketlite.embedded
import grpc  # the program's own, after the broker's import
from rocketlite.protocol.proto import available
assert available() is None, available()
assert available() is None  # a second call warns no more
print("VALUE", os.environ.get("GRPC_ENABLE_FORK_SUPPORT"))
"""


def _run(order: str, value: str | None) -> tuple[str, list[str]]:
    env = child_env()
    env.pop("GRPC_ENABLE_FORK_SUPPORT", None)
    if value is not None:
        env["GRPC_ENABLE_FORK_SUPPORT"] = value
    argv = [sys.executable, "-c", SNIPPET, order]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    warnings = [x for x in done.stderr.splitlines() if x.startswith("rocketlite.protocol.proto WARNING")]
    return done.stdout.split("VALUE ", 1)[1].strip(), warnings


def test_importing_the_broker_turns_grpcs_fork_handlers_off() -> None:
    assert _run("broker-first", None) == ("false", [])


def test_a_value_the_user_set_is_kept() -> None:
    assert _run("broker-first", "0") == ("0", [])
    value, warnings = _run("broker-first", "1")
    assert value == "1"
    assert len(warnings) == 1 and "GRPC_ENABLE_FORK_SUPPORT=1" in warnings[0]


def test_grpc_loaded_first_with_the_handlers_on_is_warned_about_once() -> None:
    value, warnings = _run("grpc-first", None)
    assert value == "None"  # not set: grpc was loaded already
    assert len(warnings) == 1
    assert "GRPC_ENABLE_FORK_SUPPORT=unset" in warnings[0] and "grpc/grpc#43055" in warnings[0]
    assert _run("grpc-first", "false") == ("false", [])
