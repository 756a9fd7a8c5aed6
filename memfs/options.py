"""Every mount setting, declared once: its flag, ``-o`` key, environment variables and parser.

The command line (``memfs mount --user-id``), mount(8) and fstab (``-o user_id=…``), the
environment (``MEMFS_USER_ID``), systemd profiles (``~/.config/memfs/NAME.env``), shell
completion and the man page are all built from this table, so a setting cannot be
reachable one way and missing another.  Values are parsed here with messages that name
where the bad value came from; nothing in this module imports more than the stdlib.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class SettingError(ValueError):
    """A setting's value cannot be used; the message names the setting and what it takes."""


def parse_int(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        within = f"from {minimum} to {maximum}" if maximum is not None else f"≥ {minimum}"
        try:
            value = int(text.strip().replace("_", ""))
        except ValueError:
            raise SettingError(f"expected a whole number {within}") from None
        if value < minimum or (maximum is not None and value > maximum):
            raise SettingError(f"expected a whole number {within}")
        return value

    return parse


#: The largest user or group id the kernel's FUSE attributes carry (32 bits; -1 is "none").
MAX_ID = (1 << 32) - 2


def parse_seconds(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise SettingError("expected seconds, e.g. 1 or 0.5") from None
    if not value >= 0 or value == float("inf"):
        raise SettingError("expected seconds, e.g. 1 or 0.5")
    return value


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``PORT`` (on 127.0.0.1): where ``--metrics`` listens."""
    host, _, port = text.strip().rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise SettingError("expected HOST:PORT or PORT, e.g. 127.0.0.1:9567")
    return host, int(port)


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """Bytes, with an optional binary suffix: ``65536``, ``64M``, ``64MiB``, ``1G``."""
    match = _SIZE.match(text)
    if not match:
        raise SettingError("expected a size in bytes, e.g. 67108864, 64M or 1G")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise SettingError("expected true or false (1/0, yes/no, on/off)")


def parse_user_id(text: str) -> str:
    value = text.strip()
    if not value:
        raise SettingError("expected a user id, e.g. alice")
    return value


def parse_agent(text: str) -> str:
    """An agent id: a UUID in the legacy layout, a name in Reborn (checked per layout)."""
    value = text.strip()
    if (
        not value
        or value in (".", "..")
        or any(c in value for c in ":/\\")
        or any(ord(c) < 32 or ord(c) == 127 for c in value)
    ):
        raise SettingError(
            "expected an agent id: a UUID (legacy layout), or a Reborn agent name "
            "without ':', '/', '\\' or control characters"
        )
    return value


def parse_scope_segment(text: str) -> str:
    value = text.strip()
    if not value:
        raise SettingError("expected an id, e.g. reborn-cli")
    return value


def parse_path(text: str) -> Path:
    if not text.strip():
        raise SettingError("expected a path")
    return Path(text).expanduser().absolute()


def parse_scope(text: str) -> str:
    value = text.strip()
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,128}", value):
        raise SettingError("use 1-128 of A-Z a-z 0-9 _ -")
    return value


def parse_pattern(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise SettingError(f"not a regular expression ({exc})") from None
    return text


def parse_tool_folder(text: str) -> str:
    value = text.strip()
    if not value or "/" in value or value in (".", "..", ".git") or "\x00" in value:
        raise SettingError("expected a folder name at the mount's root, e.g. .obsidian")
    return value


#: What libfuse 3 and the kernel take besides memfs's settings (``fuse_session_new`` and
#: ``fuse_kern_mount``); anything else makes libfuse refuse the mount with no reason given.
_FUSE_FLAGS = frozenset(
    {
        "allow_root",
        "auto_unmount",
        "blkdev",
        "default_permissions",
        "debug",
        "ro",
        "rw",
        "suid",
        "nosuid",
        "dev",
        "nodev",
        "exec",
        "noexec",
        "async",
        "sync",
        "dirsync",
        "atime",
        "noatime",
        "nodiratime",
        "relatime",
        "norelatime",
        "strictatime",
        "nostrictatime",
        "lazytime",
        "nolazytime",
    }
)
_FUSE_VALUED = ("fsname=", "subtype=", "max_read=", "blksize=", "context=", "fscontext=",
                "defcontext=", "rootcontext=", "user=")  # fmt: skip
#: Options of other FUSE tools people bring along, and what memfs offers instead.
_FUSE_INSTEAD = {
    "nonempty": "libfuse 3 has no nonempty; use -o allow_non_empty (memfs's option) to mount "
    "over a folder that holds files",
}


def parse_fuse_option(text: str) -> str:
    """One libfuse or kernel option passed through; an unknown one is refused here, with
    a reason, rather than by libfuse without one."""
    item = text.strip()
    if item in _FUSE_FLAGS or item.startswith(_FUSE_VALUED):
        return item
    key = item.partition("=")[0]
    if key in _FUSE_INSTEAD:
        raise SettingError(_FUSE_INSTEAD[key])
    raise SettingError("neither a memfs setting nor an option libfuse 3 or the kernel takes "
                       "(`memfs mount --help` lists memfs's)")  # fmt: skip


def parse_umask(text: str) -> int:
    """An octal permission mask, as umask(1) and sshfs's ``umask=`` take it (``077``)."""
    try:
        value = int(text.strip(), 8)
    except ValueError:
        raise SettingError("expected an octal mask such as 022 or 077") from None
    if not 0 <= value <= 0o777:
        raise SettingError("expected an octal mask between 000 and 777")
    return value


def parse_level(text: str) -> str:
    value = text.strip().lower()
    if value not in LOG_LEVELS:
        raise SettingError(f"expected one of {', '.join(LOG_LEVELS)}")
    return value


LOG_LEVELS = ("debug", "info", "warning", "error")


@dataclass(frozen=True)
class Option:
    """One setting.  ``name`` is its ``Settings`` attribute and its ``-o`` key."""

    name: str
    help: str
    parse: Callable[[str], Any] = str
    #: Environment variables, the first one set wins.
    env: tuple[str, ...] = ()
    #: A switch (``--read-only``, ``-o read_only``) rather than a valued flag.
    switch: bool = False
    #: May be given several times (a list); in the environment, ``separator``-separated.
    repeated: bool = False
    separator: str = ","
    #: Has a ``--flag`` on ``memfs mount`` (otherwise environment and ``-o`` only).
    flag: bool = True
    #: Shared by every workspace command (``status``, ``import``, …), not only ``mount``.
    database: bool = False
    metavar: str | None = None

    @property
    def cli_flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def from_text(self, text: str, source: str) -> Any:
        """Parse ``text``; a bad value raises SettingError naming ``source``."""
        try:
            if self.repeated:
                return [self.parse(part) for part in text.split(self.separator) if part.strip()]
            return parse_bool(text) if self.switch else self.parse(text)
        except SettingError as exc:
            raise SettingError(f"{source}={text!r}: {exc}") from None


OPTIONS: tuple[Option, ...] = (
    Option("database_url", "PostgreSQL URL or key=value DSN (default: the embedded server)",
           env=("MEMFS_DATABASE_URL", "DATABASE_URL"), database=True, metavar="URL"),
    Option("user_id", "workspace owner, as IronClaw's owner id (default: 'default'; "
           "Reborn: 'reborn-cli')", parse_user_id,
           env=("MEMFS_USER_ID", "IRONCLAW_OWNER_ID", "IRONCLAW_REBORN_WEBUI_USER_ID"),
           database=True, metavar="ID"),
    Option("agent_id", "agent: a UUID in the legacy layout (default: none, agent_id NULL), "
           "a name in Reborn (default: 'reborn-cli-agent'; 'none' for no agent)",
           parse_agent, env=("MEMFS_AGENT_ID",), database=True, metavar="ID"),
    Option("tenant", "Reborn tenant (default: 'reborn-cli')", parse_scope_segment,
           env=("MEMFS_TENANT",), database=True, metavar="ID"),
    Option("project", "Reborn project (default: none)", parse_scope_segment,
           env=("MEMFS_PROJECT",), database=True, metavar="ID"),
    Option("data_dir", "where the embedded PostgreSQL keeps its data "
           "(default: ~/.local/share/memfs)", parse_path, env=("MEMFS_DATA_DIR",),
           database=True, metavar="DIR"),
    Option("read_only", "refuse every change with EROFS (the kernel mount is read-only too)",
           env=("MEMFS_READ_ONLY",), switch=True),
    Option("read_scopes", "show another user's workspace read-only under .scopes/ID "
           "(repeatable)", parse_scope, env=("MEMFS_READ_SCOPES", "WORKSPACE_READ_SCOPES"),
           repeated=True, metavar="ID"),
    Option("scratch_patterns", "extra file-name pattern kept out of the database "
           "(repeatable; see SEMANTICS.md)", parse_pattern, env=("MEMFS_SCRATCH_PATTERNS",),
           repeated=True, separator="\n", metavar="REGEX"),
    Option("tool_folders", "another top-level folder whose files persist in memfs's own "
           "schema but are never memory (repeatable; besides .obsidian, .trash, .vscode, "
           ".idea; see SEMANTICS.md)", parse_tool_folder, env=("MEMFS_TOOL_FOLDERS",),
           repeated=True, metavar="NAME"),
    Option("no_trigger", "poll for other writers every second instead of LISTEN",
           env=("MEMFS_NO_TRIGGER",), switch=True),
    Option("pooler", "the database URL is a transaction-mode pooler (PgBouncer, a managed "
           "service's pooler): no session state; LISTEN needs --listen-url",
           env=("MEMFS_POOLER",), switch=True, database=True),
    Option("listen_url", "a direct PostgreSQL URL for the change feed's LISTEN (default: "
           "the database URL; with --pooler, polling unless given)",
           env=("MEMFS_LISTEN_URL",), metavar="URL"),
    Option("attr_timeout", "seconds the kernel caches names and attributes (default: 3600; "
           "every change the mount hears of is dropped from the kernel at once)", parse_seconds,
           env=("MEMFS_ATTR_TIMEOUT",), metavar="SECONDS"),
    Option("metrics", "serve the mount's live statistics to Prometheus at HOST:PORT "
           "(a port alone listens on 127.0.0.1; `memfs stats` reads them without it)",
           parse_address, env=("MEMFS_METRICS",), metavar="HOST:PORT"),
    Option("allow_other", "let other users into the mount (needs user_allow_other in "
           "/etc/fuse.conf)", env=("MEMFS_ALLOW_OTHER",), switch=True),
    Option("allow_non_empty", "mount over a directory that holds files (they are hidden "
           "until unmount)", env=("MEMFS_ALLOW_NON_EMPTY",), switch=True),
    Option("uid", "the owner every file is shown with (default: the mounting user; with "
           "allow_other, as sshfs's uid=)", parse_int(0, MAX_ID), env=("MEMFS_UID",),
           metavar="UID"),
    Option("gid", "the group every file is shown with (default: the mounting user's)",
           parse_int(0, MAX_ID), env=("MEMFS_GID",), metavar="GID"),
    Option("umask", "permission bits taken away from every file and folder shown, octal "
           "(077: the owner's alone)", parse_umask, env=("MEMFS_UMASK",), metavar="MASK"),
    Option("fuse_options", "extra libfuse/kernel mount options, comma-separated",
           parse_fuse_option, env=("MEMFS_FUSE_OPTIONS",), repeated=True, flag=False,
           metavar="OPTS"),
    Option("debug_fuse", "print libfuse's protocol trace to the log",
           env=("MEMFS_DEBUG_FUSE",), switch=True),
    Option("log_file", "the daemon's log (default: ~/.local/state/memfs/log/<mount>.log; "
           "stderr with -f)", parse_path, env=("MEMFS_LOG_FILE",), metavar="FILE"),
    Option("pool_size", "most database connections (and worker threads) per mount; at rest "
           "it holds one (plus the change feed's)", parse_int(1), env=("MEMFS_POOL_SIZE",),
           flag=False),
    Option("statement_timeout_ms", "server-side statement timeout, ms",
           parse_int(100), env=("MEMFS_STATEMENT_TIMEOUT_MS",), flag=False),
    Option("lock_timeout_ms", "server-side lock timeout, ms", parse_int(10),
           env=("MEMFS_LOCK_TIMEOUT_MS",), flag=False),
    Option("cache_bytes", "document content held in the daemon (cache, merge bases), 64M/1G",
           parse_size, env=("MEMFS_CACHE_BYTES",), flag=False),
    Option("search_ttl", "seconds .search results are kept", parse_seconds,
           env=("MEMFS_SEARCH_TTL",), flag=False),
    Option("search_timeout", "seconds a .search lookup may take in all", parse_seconds,
           env=("MEMFS_SEARCH_TIMEOUT",), flag=False),
    Option("keep_deleted_days", "days deleted documents are kept for memfs undelete and "
           ".at/ (and moves for .at/, and saves as written that a merge changed)",
           parse_int(1), env=("MEMFS_KEEP_DELETED_DAYS",), flag=False),
)  # fmt: skip

BY_NAME: dict[str, Option] = {option.name: option for option in OPTIONS}
#: ``-o`` keys also accepted under their flag's spelling (``read-only``, ``user-id``).
_ALIASES = {option.name.replace("_", "-"): option.name for option in OPTIONS}
_ALIASES.update({"read_scope": "read_scopes", "read-scope": "read_scopes",
                 "scratch_pattern": "scratch_patterns", "scratch-pattern": "scratch_patterns",
                 "tool_folder": "tool_folders", "tool-folder": "tool_folders",
                 "ro": "read_only"})  # fmt: skip

#: mount(8) and fstab options that are for mount itself, never for the filesystem.
MOUNT_ONLY = re.compile(
    r"^(rw|defaults|auto|noauto|user|users|nouser|owner|group|_netdev|nofail|comment=.*|"
    r"x-.*|helper=.*|setuid=.*)$"
)


def from_environment(env: Mapping[str, str]) -> dict[str, Any]:
    """The settings the environment sets (only those; the first variable set wins)."""
    values: dict[str, Any] = {}
    for option in OPTIONS:
        for variable in option.env:
            text = env.get(variable)
            if text is not None and (text.strip() or option.switch):
                values[option.name] = option.from_text(text, variable)
                break
    return values


def from_mount_options(text: str) -> tuple[dict[str, Any], list[str]]:
    """Split ``-o a=b,c`` into memfs settings and the options left for libfuse.

    mount(8)'s own options (``noauto``, ``_netdev``, ``x-systemd.*``, ``rw``…) are dropped.
    A value holding commas cannot be given this way: use the environment or a profile.
    """
    values: dict[str, Any] = {}
    fuse: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        if not item or MOUNT_ONLY.match(item):
            continue
        key, sep, value = item.partition("=")
        name = _ALIASES.get(key, key)
        option = BY_NAME.get(name)
        if option is None:
            fuse.extend(BY_NAME["fuse_options"].from_text(item, "-o"))
            continue
        if option.switch:
            values[name] = option.from_text(value if sep else "true", f"-o {key}")
        elif not sep:
            raise SettingError(f"-o {key}: needs a value ({key}=…)")
        elif option.repeated:
            values.setdefault(name, []).extend(option.from_text(value, f"-o {key}"))
        else:
            values[name] = option.from_text(value, f"-o {key}")
    return values, fuse


def environment_lines(values: Mapping[str, Any]) -> list[str]:
    """``VARIABLE=value`` lines for a profile's environment file, one per set option."""
    lines = []
    for name, value in values.items():
        option = BY_NAME[name]
        if value is None or value is False or value == []:
            continue
        if option.repeated:
            text = option.separator.join(str(v) for v in value)
        elif option.switch:
            text = "true"
        else:
            text = str(value)
        lines.append(f"{option.env[0]}={text}")
    return lines
