"""Which implementation a differential test of the compiled data plane pins against its reference."""

from __future__ import annotations

from typing import Any

import pytest

from rocketlite import native


def compiled_or(fallback: Any, module: str) -> Any:
    """The compiled `module`, or `fallback` under `ROCKETLITE_NATIVE=0` (the reference is then
    compared with itself); without the compiled module the calling test module is skipped."""
    if native.REFERENCE_ONLY:
        return fallback
    return pytest.importorskip(module, reason="the compiled data plane is not built")
