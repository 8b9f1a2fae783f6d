"""Builds the compiled data plane (every `_native/*.pyx` under `src/rocketlite/`: one folder per
codec family, beside its Python references) and generates the gRPC stubs of the 5.x protocol
(`src/rocketlite/protocol/proto/`); everything else is in pyproject.toml.

The shared Cython includes (`src/rocketlite/protocol/_native/*.pxi`: CRC-32, byte order, text,
property arrays) are found through the include path, so every family includes them by name.
The extensions are optional: where the C compiler is missing or fails, the install goes on and
rocketlite runs on its Python references (`rocketlite.native` says so once, at start).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

SRC = Path("src")
SHARED = Path("src/rocketlite/protocol/_native")  # .pxi included by the compiled modules of every family
PROTO = Path("src/rocketlite/protocol/proto/__init__.py")


def generate_grpc_stubs() -> None:
    """`rocketlite.protocol.proto.generate`, loaded by path (the package's imports are not
    installed yet). Without grpcio-tools (a build requirement) the stubs are skipped: the gRPC
    endpoint is optional and the broker says why it is off."""
    if importlib.util.find_spec("grpc_tools") is None:
        print("warning: grpcio-tools missing; the 5.x gRPC stubs are not generated", file=sys.stderr)
        return
    spec = importlib.util.spec_from_file_location("_rocketlite_proto", PROTO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.generate()


generate_grpc_stubs()

extensions = [
    Extension(
        ".".join(pyx.relative_to(SRC).with_suffix("").parts),
        [str(pyx)],
        # included source: rebuild on change
        depends=[str(pxi) for pxi in sorted({*pyx.parent.glob("*.pxi"), *SHARED.glob("*.pxi")})],
        optional=True,
        extra_compile_args=["-O3"],
    )
    for pyx in sorted(SRC.glob("rocketlite/**/_native/*.pyx"))
]

setup(
    ext_modules=cythonize(
        extensions,
        include_path=[str(SHARED)],
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    )
)
