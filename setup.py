"""Builds the compiled data plane (`src/rocketlite/protocol/_native/*.pyx`) and generates the gRPC
stubs of the 5.x protocol (`src/rocketlite/protocol/proto/`); everything else is in pyproject.toml.

The extensions are optional: where the C compiler is missing or fails, the install goes on and
rocketlite runs on its Python implementations (`protocol.speedups` says so once, at start).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

NATIVE = Path("src/rocketlite/protocol/_native")
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
        f"rocketlite.protocol._native.{pyx.stem}",
        [str(pyx)],
        depends=[str(pxi) for pxi in NATIVE.glob("*.pxi")],  # included source: rebuild on change
        optional=True,
        extra_compile_args=["-O3"],
    )
    for pyx in sorted(NATIVE.glob("*.pyx"))
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    )
)
