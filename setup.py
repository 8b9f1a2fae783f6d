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
import os
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

# The compiled HTTP/2 core (remoting/h2) wraps libnghttp2: its headers come from Debian's
# libnghttp2-dev, unpacked by the Makefile into .clients/nghttp2 (or installed system-wide), and it
# links the runtime library the system has (libnghttp2.so.14). Without the headers it is left out
# and the broker serves 5.x on grpc.aio; with CI=true that is an error.
H2_PYX = "_h2.pyx"
NGHTTP2_INCLUDES = [
    p
    for p in (Path(".clients/nghttp2/usr/include"), Path("/usr/include"))
    if (p / "nghttp2/nghttp2.h").is_file()
]


def native_settings(pyx: Path) -> dict[str, list[str]] | None:
    """Per-extension compiler and linker settings; None leaves the extension out."""
    if pyx.name != H2_PYX:
        return {}
    if not NGHTTP2_INCLUDES:
        message = "libnghttp2 headers missing (make nghttp2): the compiled HTTP/2 core is not built"
        if os.environ.get("CI") == "true":
            raise SystemExit(f"error: {message}; CI=true requires it")
        print(f"warning: {message}", file=sys.stderr)
        return None
    return {"include_dirs": [str(NGHTTP2_INCLUDES[0])], "extra_link_args": ["-l:libnghttp2.so.14"]}


extensions = [
    Extension(
        ".".join(pyx.relative_to(SRC).with_suffix("").parts),
        [str(pyx)],
        # included source: rebuild on change
        depends=[str(pxi) for pxi in sorted({*pyx.parent.glob("*.pxi"), *SHARED.glob("*.pxi")})],
        optional=os.environ.get("CI") != "true" or pyx.name != H2_PYX,
        extra_compile_args=["-O3"],
        **settings,
    )
    for pyx in sorted(SRC.glob("rocketlite/**/_native/*.pyx"))
    if (settings := native_settings(pyx)) is not None
]

# One job per core for both steps (Cython's translation and the C compiler): the native build is
# the longest step of a fresh `make install`, and it ran on one core while the other idled.
JOBS = os.cpu_count() or 1

setup(
    options={"build_ext": {"parallel": JOBS}},
    ext_modules=cythonize(
        extensions,
        nthreads=JOBS,
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
