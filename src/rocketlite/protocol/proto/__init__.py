"""The RocketMQ 5.x gRPC protocol (`apache.rocketmq.v2`): the `.proto` files under `apache/`, and
the Python stubs generated from them at build time into `v2/` (git-ignored, never checked in).

`setup.py` runs `generate()` on every install (`make install`), with grpcio-tools from the build
requirements. The stubs need the optional `grpc` extra at run time (`pip install rocketlite[grpc]`);
`available()` says whether they load, so the broker can leave its gRPC endpoint off without them.

Importing this package sets GRPC_ENABLE_FORK_SUPPORT=false unless the environment already sets
it or grpc is loaded already; `available()`, the one door through which rocketlite loads grpc,
does the same first. The broker imports this package with itself (`rocketlite.embedded`, the CLI),
so a program's own `import grpc` after it finds the setting too. With the variable unset, grpc
core (grpcio 1.80 and later) runs fork handlers on every fork() of the process, and in a child
that is about to exec they restart grpc's threads, which can crash it first (SIGSEGV or SIGABRT,
"Epoll1Poller ... epoll_wait error: Bad file descriptor" once the exec preparation closed the
poller's descriptor; grpc/grpc#43055). PySpark starts its JVM that way (`Popen` with a
`preexec_fn`, a real fork, where CPython otherwise uses vfork): a SparkSession built next to a
broker whose gRPC endpoint ran died with JAVA_GATEWAY_EXITED. grpc reads the variable once, when
it is imported, so when grpc runs with the handlers on, `available()` warns (once). The handlers
only serve a forked child that goes on using grpc without an exec, which a process serving gRPC
cannot do anyway; grpc's Python layer leaves its own fork support off unless the variable says
otherwise.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTO_FILES = ("definition.proto", "service.proto", "admin.proto")
OUT = HERE / "v2"
# protoc writes `from apache.rocketmq.v2 import definition_pb2` (the import path inside the .proto
# files); the stubs live in this package instead, so that line becomes a relative import.
_ABSOLUTE_IMPORT = "from apache.rocketmq.v2 import "


def generate(out: Path = OUT) -> None:
    """Run grpcio-tools' protoc over the .proto files into `out`: `*_pb2.py`, `*_pb2.pyi` (types
    for mypy) and `*_pb2_grpc.py`. Raises RuntimeError naming protoc's failure."""
    import grpc_tools  # build-time only: setup.py's build requirements  # noqa: PLC0415
    from grpc_tools import protoc  # noqa: PLC0415

    out.mkdir(parents=True, exist_ok=True)
    well_known = Path(grpc_tools.__file__).resolve().parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{HERE}",
        f"-I{well_known}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *(f"apache/rocketmq/v2/{name}" for name in PROTO_FILES),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {', '.join(PROTO_FILES)} (see its message above)")
    # protoc nests the output as apache/rocketmq/v2/; flatten it into `out`, imports made relative.
    nested = out / "apache" / "rocketmq" / "v2"
    for generated in sorted(nested.iterdir()):
        text = generated.read_text(encoding="utf-8").replace(_ABSOLUTE_IMPORT, "from . import ")
        (out / generated.name).write_text(text, encoding="utf-8")
        generated.unlink()
    for empty in (nested, nested.parent, nested.parent.parent):
        empty.rmdir()
    (out / "__init__.py").write_text('"""Generated from ../apache/rocketmq/v2/*.proto; not in git."""\n')


FORK_SUPPORT_VAR = "GRPC_ENABLE_FORK_SUPPORT"
_OFF = ("0", "false", "no", "f", "n")
log = logging.getLogger("rocketlite.protocol.proto")
_warned = False


def fork_handlers_off() -> bool:
    """Whether grpc runs (or will run) with its fork handlers off; before grpc's first import, sets
    GRPC_ENABLE_FORK_SUPPORT=false when the environment does not set it (module docstring)."""
    if "grpc" not in sys.modules:
        os.environ.setdefault(FORK_SUPPORT_VAR, "false")
    return os.environ.get(FORK_SUPPORT_VAR, "").strip().lower() in _OFF


fork_handlers_off()  # on import, ahead of any `import grpc` that comes after the broker's import


def available() -> str | None:
    """None when the generated stubs and grpcio load; else why not (for a log line or a skip)."""
    global _warned
    if not fork_handlers_off() and not _warned:
        _warned = True
        log.warning(
            "grpc's fork handlers are on (%s=%s; grpc reads it when first imported): a fork+exec "
            "in this process while gRPC runs, such as PySpark starting its JVM, can crash before "
            "the exec (grpc/grpc#43055); set %s=false in the environment before grpc is imported",
            FORK_SUPPORT_VAR,
            os.environ.get(FORK_SUPPORT_VAR, "unset"),
            FORK_SUPPORT_VAR,
        )
    try:
        importlib.import_module("grpc")
        importlib.import_module("rocketlite.protocol.proto.v2.service_pb2_grpc")
    except ImportError as exc:
        return f"the gRPC stubs do not load ({exc}): install the grpc extra (make install)"
    return None
