"""Compiled or reference codecs: the one switch, `ROCKETLITE_NATIVE`, read once at import.

The hot-path codecs come in families, each with its compiled twins in a `_native/` folder beside
its Python references and one chooser module that picks between them: the remoting wire
(`protocol/wire/speedups.py`), the stored formats (`protocol/formats/speedups.py`), the store's
read side (`store/codec/speedups.py`) and the Spark readers and sink (`spark/codec/speedups.py`).
Every chooser reads the mode from here and builds its set with `load`, so one setting decides
for all of them (aiokafka's `NO_EXTENSIONS` pattern):

* `ROCKETLITE_NATIVE=0`: the references only (to check them, or to rule the compiled code out
  when hunting a bug); `REFERENCE_ONLY` is True;
* unset: the compiled twins where they were built, the references otherwise. A compiled module
  that is not there (no C compiler at install time) is remembered and said once, through
  logging, by `warn_if_missing` (called when a server starts, after the command line has
  configured logging);
* `ROCKETLITE_NATIVE=1`: a missing compiled module is an ImportError (CI sets it: a broken build
  must not pass as a slow one).

A leaf module: it imports nothing of rocketlite, so every layer may read it.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    CodecSet = TypeVar("CodecSet", bound=DataclassInstance)
else:
    CodecSet = TypeVar("CodecSet")

__all__ = ["REFERENCE_ONLY", "REQUIRED", "SETTING", "load", "missing", "warn_if_missing"]

SETTING: Final = os.environ.get("ROCKETLITE_NATIVE", "").strip()
REFERENCE_ONLY: Final = SETTING == "0"
REQUIRED: Final = SETTING == "1"

_missing: list[str] = []
_warned = False


def load(reference: CodecSet, modules: Sequence[str]) -> CodecSet:
    """`reference` (a frozen dataclass of codecs with a `name` field) with every codec that one of
    the compiled `modules` provides, under the same name, put in its place; `reference` itself
    under `ROCKETLITE_NATIVE=0` or when none of the modules could be imported."""
    if REFERENCE_ONLY:
        return reference
    fields = {f.name for f in dataclasses.fields(reference)} - {"name"}
    found: dict[str, object] = {}
    absent: list[str] = []
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:
            absent.append(name)
            continue
        found.update({f: getattr(module, f) for f in fields if hasattr(module, f)})
    if absent and REQUIRED:
        raise ImportError(f"ROCKETLITE_NATIVE=1 but the compiled data plane is missing: {absent}")
    _missing.extend(name.rsplit(".", 1)[1] for name in absent)
    if not found:
        return reference
    return dataclasses.replace(reference, name="native", **found)


def missing() -> tuple[str, ...]:
    """The compiled modules the choosers imported so far could not load (no C compiler at install
    time)."""
    return tuple(_missing)


def warn_if_missing() -> None:
    """Say once, through logging, that the compiled data plane is missing. Called when a server
    starts (`BrokerController.start`), after the command line has configured logging: a warning
    printed at import would bypass the configured format (JSON logs)."""
    global _warned
    if _missing and not _warned:
        _warned = True
        logging.getLogger("rocketlite.speedups").warning(
            "compiled data plane not built (%s): running on the Python implementations; "
            "reinstall with a C compiler (make install) for full speed",
            ", ".join(_missing),
        )
