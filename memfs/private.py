"""Files on local disk that hold memory or secrets belong to their owner alone.

Recovery copies of unsaved memory, their manifests, logs (which name files and quote
errors), pid and result files, spill files and sockets: every file 0600, every folder
0700.  ``memfs`` commands run under umask 077 (``PRIVATE_UMASK``) so nothing they create
is readable by others; folders that an older memfs made 0755 are narrowed when used.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

#: The umask every memfs command runs under.
PRIVATE_UMASK = 0o077


def private_dir(path: Path) -> Path:
    """Make ``path`` (and missing parents) a folder only its owner can enter."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(PermissionError):  # not ours (a shared runtime root): leave it
        if path.stat().st_mode & 0o077:
            path.chmod(0o700)
    return path


def write_private(path: Path, data: bytes, *, durable: bool = False) -> None:
    """Write ``path`` atomically (a temporary beside it, then rename), mode 0600."""
    private_dir(path.parent)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            if durable:
                os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
        raise
