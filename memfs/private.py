"""Files on local disk that hold memory or secrets belong to their owner alone.

Recovery copies of unsaved memory, their manifests, logs (which name files and quote
errors), pid and result files, spill files and sockets: every file 0600, every folder
0700.  ``memfs`` commands run under umask 077 (``PRIVATE_UMASK``) so nothing they create
is readable by others; folders that an older memfs made 0755 are narrowed when used.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

#: The umask every memfs command runs under.
PRIVATE_UMASK = 0o077


def private_dir(path: Path, *, narrow: bool = True) -> Path:
    """Make ``path`` (and missing parents) a folder only its owner can enter.

    A folder memfs made is narrowed to 0700 if an older memfs made it wider; a folder the
    user named (``narrow`` False: the folder of ``--log-file``) keeps its mode if it
    exists: memfs tightens only the folders it creates (a shared folder narrowed locked a
    PostgreSQL server out of its files)."""
    existed = path.is_dir()
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if existed and not narrow:
        return path
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


#: A password inside a URL (``scheme://user:PASSWORD@host``) or a keyword conninfo.
_URL_PASSWORD = re.compile(r"(\w+://[^/:@\s]*:)([^/\s]+)(@)")
_KEYWORD_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s,]+)")

#: What a command says once when it finds a password among its arguments.
PASSWORD_WARNING = (
    "memfs: warning: a database password is on the command line, where every local user "
    "can read it until the process title is rewritten (`ps`); give it in PGPASSWORD, a "
    "password file (~/.pgpass or PGPASSFILE) or the env file (`memfs install-unit`) instead"
)


def redact(argv: list[str]) -> tuple[list[str], bool]:
    """``argv`` with every database password replaced by ``***``, and whether one was."""
    found = False
    out = []
    for arg in argv:
        clean = _KEYWORD_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***\3", arg))
        found = found or clean != arg
        out.append(clean)
    return out, found


def hide_passwords(argv: list[str]) -> bool:
    """Rewrite this process's title (``/proc/<pid>/cmdline``, ``ps``) without the
    passwords ``argv`` holds; True if there were any (the caller warns)."""
    clean, found = redact(argv)
    if found:
        import setproctitle

        setproctitle.setproctitle(" ".join(["memfs", *clean]))
    return found
