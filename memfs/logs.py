"""Logging, configured once per process: stderr for commands, a rotating file per mount.

Commands print one line per problem (``memfs: …``) and keep tracebacks for ``--log-level
debug``; a mount's daemon writes to its own file, rotated at 10 MiB with three old files
kept, named after the mount point's path (two mounts both named ``memory`` do not share one).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import logging.handlers
import sys
from pathlib import Path
from typing import TextIO

from memfs.config import default_log_dir
from memfs.private import private_dir

#: Rotate a mount's log at this size, keeping this many old files.
MAX_BYTES = 10 * 1024 * 1024
BACKUPS = 3
DAEMON_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
COMMAND_FORMAT = "memfs: %(message)s"


def log_file_for(mountpoint: Path) -> Path:
    """This mount point's log: ``<name>-<hash of its path>.log`` in the state directory."""
    digest = hashlib.sha256(str(mountpoint).encode()).hexdigest()[:8]
    # A name may take all of NAME_MAX (255 bytes): keep what fits beside "-<hash>.log".
    name = (mountpoint.name or "root").encode()[:200].decode(errors="ignore")
    return default_log_dir() / f"{name}-{digest}.log"


def configure(
    level: str,
    *,
    file: Path | None = None,
    stream: TextIO | None = None,
    daemon_format: bool = True,
) -> None:
    """Set the root logger's one handler: a rotating ``file``, or ``stream`` (stderr)."""
    handler: logging.Handler
    if file is not None:
        private_dir(file.parent, narrow=file.parent == default_log_dir())
        handler = logging.handlers.RotatingFileHandler(
            file, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8"
        )
        with contextlib.suppress(OSError):
            file.chmod(0o600)
    else:
        handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter(DAEMON_FORMAT if daemon_format else COMMAND_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper()))


def current_log_file() -> str:
    """Where this process logs ("" for a stream): the daemon records it in its pid file,
    so ``memfs status`` reads the errors of this mount's run, wherever they went."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            return handler.baseFilename
    return ""
