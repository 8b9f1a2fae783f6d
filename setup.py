"""Builds the compiled data plane (`src/rocketlite/protocol/_native/*.pyx`); everything else is in
pyproject.toml.

The extensions are optional: where the C compiler is missing or fails, the install goes on and
rocketlite runs on its Python implementations (`protocol.speedups` says so once, at start).
"""

from __future__ import annotations

from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

NATIVE = Path("src/rocketlite/protocol/_native")

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
