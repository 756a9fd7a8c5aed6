"""Workspace path rules: IronClaw's normalisation plus the names a mount accepts.

IronClaw stores a document under a *normalised* path (``normalize_path`` in its
``src/workspace/mod.rs``): Rust-``trim`` the string, strip every leading and
trailing ``/``, collapse runs of ``/``.  A name that normalisation would change
cannot round-trip through IronClaw, so the mount refuses it instead of storing
something the agent would read back under another name.
"""

from __future__ import annotations

import errno
import re
from datetime import UTC, datetime

from memfs.errors import FsError

#: Unicode White_Space as Rust's ``char::is_whitespace`` defines it.  Python's
#: ``str.isspace`` also counts U+001C..U+001F, which Rust does not.
RUST_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000"
)
_WS_CLASS = "[" + re.escape(RUST_WHITESPACE) + "]"
_LEADING_WS = re.compile(f"^{_WS_CLASS}+")
_TRAILING_WS = re.compile(f"{_WS_CLASS}+$")
_SLASH_RUN = re.compile("/{2,}")
# C0 controls, DEL and C1 controls: never valid in a document name.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")

#: Longest name (one path segment) in bytes, as on ext4 and in NAME_MAX.
NAME_MAX = 255
#: The synthetic search directory at the mount root; no document may live there.
SEARCH_DIR = ".search"
#: Other users' read-only workspaces (``--read-scope``) at the mount root.
SCOPES_DIR = ".scopes"
#: Every document's kept versions, read-only, at the mount root.
VERSIONS_DIR = ".versions"
#: The system prompt IronClaw assembles from the workspace, read-only, at the mount root.
PROMPT_FILE = ".prompt"
#: What the mount holds that is not where its user thinks yet, as text and as JSON.
STATUS_FILE = ".status"
STATUS_JSON_FILE = ".status.json"
#: Documents by last change, newest first, read-only, at the mount root.
RECENT_DIR = ".recent"
#: The whole workspace at a past moment (``.at/<time>/``), read-only, at the mount root.
AT_DIR = ".at"
RESERVED_ROOT_NAMES = frozenset({
    SEARCH_DIR, SCOPES_DIR, VERSIONS_DIR, PROMPT_FILE, STATUS_FILE, STATUS_JSON_FILE,
    RECENT_DIR, AT_DIR,
})  # fmt: skip


def rust_trim(text: str) -> str:
    """Trim leading and trailing Unicode White_Space exactly as Rust's ``str::trim``."""
    return _TRAILING_WS.sub("", _LEADING_WS.sub("", text))


def normalize_path(path: str) -> str:
    """IronClaw's ``normalize_path``: trim, strip outer slashes, collapse ``//``."""
    return _SLASH_RUN.sub("/", rust_trim(path).strip("/"))


def join(parent: str, name: str) -> str:
    """Join a workspace directory path ('' is the root) and a child name."""
    return f"{parent}/{name}" if parent else name


def decode_name(raw: bytes) -> str:
    """Decode a file name handed over by the kernel, refusing what Postgres text cannot hold."""
    if len(raw) > NAME_MAX:
        raise FsError(errno.ENAMETOOLONG, f"name is {len(raw)} bytes, the limit is {NAME_MAX}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FsError(errno.EILSEQ, f"name {raw!r} is not valid UTF-8") from None


def check_new_name(parent_path: str, name: str) -> str:
    """Validate a name about to be created (or renamed to) and return the full path.

    Errors: ENAMETOOLONG over 255 bytes, EINVAL for control characters or a name that
    IronClaw's normalisation would alter, EPERM for the reserved ``.search`` root name.
    """
    if len(name.encode("utf-8")) > NAME_MAX:
        raise FsError(errno.ENAMETOOLONG, f"name {name!r} is longer than {NAME_MAX} bytes")
    if name in ("", ".", "..") or "/" in name:
        raise FsError(errno.EINVAL, f"invalid name {name!r}")
    if _CONTROL.search(name):
        raise FsError(errno.EINVAL, f"name {name!r} contains a control character")
    if not parent_path and name in RESERVED_ROOT_NAMES:
        raise FsError(errno.EPERM, f"{name!r} is reserved at the mount root")
    full = join(parent_path, name)
    if normalize_path(full) != full:
        raise FsError(
            errno.EINVAL,
            f"path {full!r} starts or ends with white space, which IronClaw's path "
            "normalisation would strip",
        )
    return full


def loadable_path(path: str) -> bool:
    """True if a stored document path can be shown in the mount.

    Rows written behind our back may hold paths IronClaw itself could never address
    (not normalised, empty, with control characters, ``.``/``..`` segments, over-long
    segments) or live under the reserved ``.search`` name.  Those are skipped, with a log
    line from the caller, rather than shown under a name that would not round-trip.
    """
    if not path or normalize_path(path) != path:
        return False
    segments = path.split("/")
    if segments[0] in RESERVED_ROOT_NAMES:
        return False
    for seg in segments:
        if seg in (".", "..") or _CONTROL.search(seg):
            return False
        if len(seg.encode("utf-8")) > NAME_MAX:
            return False
    return True


def escape_like(text: str) -> str:
    """Escape ``\\``, ``%`` and ``_`` for a ``LIKE ... ESCAPE '\\'`` prefix match."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def conflict_copy(path: str, at: datetime) -> str:
    """Where another writer's content is kept beside ``path`` when a save cannot keep it as
    a version (``skip_versioning``, no versions table, a tool file): ``<stem>.conflict-
    <UTC time>.<ext>``, so the copy keeps the extension editors open it by.  One name and
    one clock (UTC, the daemon's) for every engine and every kind of file."""
    folder, slash, name = path.rpartition("/")
    stem, dot, ext = name.rpartition(".")
    stamp = at.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    copy = f"{stem}.conflict-{stamp}.{ext}" if dot and stem else f"{name}.conflict-{stamp}"
    return f"{folder}{slash}{copy}"
