"""The RocketMQ 5.x gRPC protocol (`apache.rocketmq.v2`): the `.proto` files under `apache/`, and
the Python stubs generated from them at build time into `v2/` (git-ignored, never checked in).

`setup.py` runs `generate()` on every install (`make install`), with grpcio-tools from the build
requirements. The stubs need the optional `grpc` extra at run time (`pip install rocketlite[grpc]`);
`available()` says whether they load, so the broker can leave its gRPC endpoint off without them.
"""

from __future__ import annotations

import importlib
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


def available() -> str | None:
    """None when the generated stubs and grpcio load; else why not (for a log line or a skip)."""
    try:
        importlib.import_module("grpc")
        importlib.import_module("rocketlite.protocol.proto.v2.service_pb2_grpc")
    except ImportError as exc:
        return f"the gRPC stubs do not load ({exc}): install the grpc extra (make install)"
    return None
