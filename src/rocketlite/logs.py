"""Log output for the command line: human text or one JSON object per line.

Only the CLI configures logging; library code just logs to named loggers (`rocketlite.store.*`,
`rocketlite.broker.*`, ...). With `--log-format json` every record becomes one line that a log
pipeline can parse without regular expressions::

    {"ts": "2026-11-22T03:05:02.123Z", "level": "INFO", "logger": "rocketlite.broker",
     "msg": "broker broker-a ...", "thread": "MainThread"}

plus `"exc"` (the formatted traceback) when the record carries one, and any `extra={...}` fields
a caller passed, under their own names.
"""

from __future__ import annotations

import json
import logging
import sys
import time

TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        ms = int(record.msecs)
        out: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{ms:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            "thread": record.threadName,
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in out:
                out[key] = value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def configure_logging(level: str, fmt: str = "text") -> None:
    """Log to stderr at `level` ("DEBUG", "INFO", ...) as `fmt` ("text" or "json")."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=[handler])
