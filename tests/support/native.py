"""Which implementation a differential test of the compiled data plane pins against its reference."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from rocketlite import native


def compiled_or(fallback: Any, module: str) -> Any:
    """The compiled `module`, or `fallback` under `ROCKETLITE_NATIVE=0` (the reference is then
    compared with itself); without the compiled module the calling test module is skipped."""
    if native.REFERENCE_ONLY:
        return fallback
    return pytest.importorskip(module, reason="the compiled data plane is not built")


def compiled_or_none(fallback: Any, module: str) -> Any:
    """As `compiled_or`, but None without the compiled module, for a test module that runs its
    other tests all the same (those that need it skip themselves)."""
    if native.REFERENCE_ONLY:
        return fallback
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
