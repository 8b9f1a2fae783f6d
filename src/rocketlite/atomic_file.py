"""`write_atomically`: replace a small file so a crash leaves the old or the new content, never half.

A leaf: the broker's state files (`broker/state_files.py`), the POP log's snapshot
(`broker/pop/log.py`) and the name server's KV config persist through it, and none should import
another's package to get it.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, content: str | bytes, *, keep_backup: bool = True) -> None:
    """Replace `path` with `content` (text is written as UTF-8): temp file, fsync, keep a `.bak` of
    the old one (unless `keep_backup` is false), rename, fsync the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    data = content.encode("utf-8") if isinstance(content, str) else content
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
    if keep_backup and path.exists():
        path.replace(path.with_name(path.name + ".bak"))
    tmp.replace(path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
