"""`write_atomically`: replace a small file so a crash leaves the old or the new content, never half.

A leaf: the broker's state files (`broker/state_files.py`) and the name server's KV config both
persist through it, and neither should import the other's package to get it.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text`: temp file, fsync, keep a `.bak` of the old one, rename, fsync dir."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    data = text.encode("utf-8")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)  # a half-written temp file only holds space on a full disk
        raise
    os.close(fd)
    if path.exists():
        path.replace(path.with_name(path.name + ".bak"))
    tmp.replace(path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
