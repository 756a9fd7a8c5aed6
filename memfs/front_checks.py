"""What every network front checks before it listens: the address it is given and the
private file that holds its secrets (WebDAV's users, MCP's bearer token)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from memfs.errors import EXIT_USAGE, CommandError


def parse_listen(text: str, flag: str = "--listen") -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8765`` for IPv6); a mistake is one clear line."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise CommandError(f"{flag} {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8765",
                           EXIT_USAGE)  # fmt: skip
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def refuse_exposed(flag: str, host: str, secured: bool, needs: str) -> None:
    """A front listening beyond loopback must be given its secret (``needs``, the flag
    and what it holds); without it memfs refuses to start, in one line."""
    if not secured and not is_loopback(host):
        raise CommandError(
            f"{flag} {host}: serving beyond this machine needs {needs}; "
            "without it memfs listens on 127.0.0.1 only"
        )


def read_private(path: Path, flag: str) -> str:
    """The text of a secrets file, which must be its owner's alone."""
    if not path.is_file():
        raise CommandError(f"{flag} {path}: no such file")
    if path.stat().st_mode & 0o077:
        raise CommandError(f"{flag} {path}: readable by others; `chmod 600 {path}` first")
    return path.read_text(encoding="utf-8")
