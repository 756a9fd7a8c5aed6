"""IronClaw's memory tools' own rules (``memory_write``, ``memory_read``, ``memory_search``,
``memory_tree``): what the agent's tool layer decides before any store is touched.

The rules, as IronClaw v1.3 states them (its tool schemas and memory service) with v1.4's
stale-write check; the write itself (IronClaw's rows, versions, chunks, its refusals of
protected and schema-bound documents) is the workspace's, as for every other writer:

* A **target** is ``memory`` (``MEMORY.md``), ``heartbeat`` (``HEARTBEAT.md``),
  ``bootstrap`` (``BOOTSTRAP.md``, always cleared whatever the content), ``daily_log``
  (``daily/YYYY-MM-DD.md``, today in the given IANA zone, UTC by default; the default
  target) or a relative document path.
* A target or a read path that is blank, absolute (``/``, ``~/``, ``C:\\`` or ``C:/``),
  holds ``..`` anywhere or a backslash is refused, as is any write under ``threads/`` (the
  recorder's, ASCII case-insensitive).  ``memory_tree``'s path may be empty (the root).
* Blank content is refused except for ``bootstrap``; patch mode (``old_string`` →
  ``new_string``) refuses an empty ``old_string``, an empty ``new_string`` and no match.
* ``append`` (the default; always for ``daily_log``) adds the content with its trailing
  whitespace removed and one ``\\n``, with no separator before it (v1.3).  On the legacy
  layout the append is IronClaw 1.0's: after a ``\\n`` (``\\n\\n`` for ``memory``) unless
  the document is empty, a daily-log entry stamped ``[HH:MM:SS]`` in the call's zone.
* ``memory_search``'s ``limit`` defaults to 5, clamped to 1..20; its query is ``query``,
  or ``q``, ``text``, ``pattern`` (the aliases), trimmed.
* ``memory_tree``: depth defaults to 1, clamped to 1..10; folders first (``name/``, or
  ``{"name/": [...]}`` with what lies below while depth lasts), then files, by name.
* A read answers ``content_hash`` (``sha256:`` and the hex of the UTF-8 bytes, as every
  IronClaw hash); a write carrying ``expected_content_hash`` is made only if the document
  still has it, else it is a ``conflict`` (never an overwrite).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memfs.ironclaw.hashing import content_hash
from memfs.paths import RUST_WHITESPACE

__all__ = [
    "DEFAULT_TARGET",
    "Target",
    "ToolRefused",
    "appended",
    "check_path",
    "content_hash",
    "entry",
    "hash_matches",
    "patched",
    "resolve_target",
    "search_limit",
    "search_query",
    "tree",
    "tree_depth",
    "word_count",
]

#: Where ``memory_write`` writes when no target is given.
DEFAULT_TARGET = "daily_log"
#: Targets that name a document, not a path.
NAMED_TARGETS = {"memory": "MEMORY.md", "heartbeat": "HEARTBEAT.md", "bootstrap": "BOOTSTRAP.md"}
BOOTSTRAP = "bootstrap"
#: The after-turn recorder's folder; no tool writes below it.
THREADS = "threads/"
SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT = 5, 20
TREE_DEFAULT_DEPTH, TREE_MAX_DEPTH = 1, 10
#: ``memory_search``'s names for its query, the preferred first.
QUERY_NAMES = ("query", "q", "text", "pattern")


class ToolRefused(Exception):
    """A call IronClaw's tool refuses: one line the agent reads, nothing written."""


def _looks_like_filesystem_path(path: str) -> bool:
    if path.startswith(("/", "~/")):
        return True
    return (
        len(path) >= 3
        and path[0].isascii()
        and path[0].isalpha()
        and path[1] == ":"
        and (path[2] in "\\/")
    )


def check_path(path: str, what: str = "target", *, blank_ok: bool = False) -> None:
    """Refuse a path IronClaw's tools refuse (ToolRefused)."""
    if not path.strip(RUST_WHITESPACE):
        if blank_ok and not path:
            return
        raise ToolRefused(f"{what} is blank: give a document path or a target name")
    if _looks_like_filesystem_path(path):
        raise ToolRefused(f"{what} {path!r} looks like a filesystem path: give a path "
                          "relative to the memory root, e.g. notes/today.md")  # fmt: skip
    if ".." in path:
        raise ToolRefused(f"{what} {path!r} holds '..': memory paths never leave the root")
    if "\\" in path:
        raise ToolRefused(f"{what} {path!r} holds a backslash: separate folders with '/'")


@dataclass(frozen=True)
class Target:
    """Where a ``memory_write`` goes: its document and the writer's time of day."""

    name: str
    path: str
    #: Now in the zone the call gave (UTC by default): the daily log's date and stamp.
    local: datetime

    @property
    def always_appends(self) -> bool:
        return self.name == "daily_log"


def resolve_target(target: str, timezone: str | None, now: datetime) -> Target:
    """The document a ``memory_write`` target names (``now`` is aware, any zone)."""
    check_path(target)
    try:
        zone = ZoneInfo(timezone) if timezone else ZoneInfo("UTC")
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ToolRefused(f"timezone {timezone!r} is no IANA zone (e.g. Europe/Berlin)") from exc
    local = now.astimezone(zone)
    if target in NAMED_TARGETS:
        path = NAMED_TARGETS[target]
    elif target == "daily_log":
        path = f"daily/{local:%Y-%m-%d}.md"
    else:
        path = target
    if path[: len(THREADS)].lower() == THREADS:
        raise ToolRefused(f"{path!r}: threads/ is the conversation recorder's; write elsewhere")
    return Target(target, path, local)


def entry(target: Target, content: str, *, layout: str) -> str:
    """What an append adds: v1.3 ends the content with exactly one newline; IronClaw
    <= 1.0 stamps a daily-log entry ``[HH:MM:SS]`` and adds the content as given."""
    if layout == "legacy":
        return f"[{target.local:%H:%M:%S}] {content}" if target.always_appends else content
    return content.rstrip(RUST_WHITESPACE) + "\n"


def appended(existing: str, target: Target, content: str, *, layout: str) -> str:
    """The document after an append of ``content`` (blank content is refused before):
    v1.3 adds the entry with no separator; IronClaw <= 1.0 puts ``\n`` before it (two
    for ``memory``) unless the document is empty."""
    added = entry(target, content, layout=layout)
    if layout != "legacy" or not existing:
        return existing + added
    return existing + ("\n\n" if target.name == "memory" else "\n") + added


@dataclass(frozen=True)
class Patched:
    content: str
    replacements: int


def patched(content: str, old: str, new: str | None, replace_all: bool) -> Patched:
    """Patch mode: ``old`` replaced by ``new``, the first or every occurrence."""
    if not old:
        raise ToolRefused("old_string is empty: give the exact text to replace")
    if not new:
        raise ToolRefused("new_string is missing or empty: a patch never just deletes text")
    found = content.count(old)
    if found == 0:
        raise ToolRefused("old_string was not found in the document: read it again first")
    if replace_all:
        return Patched(content.replace(old, new), found)
    return Patched(content.replace(old, new, 1), 1)


def hash_matches(expected: str, content: str) -> bool:
    """Whether ``expected`` (with or without ``sha256:``) is ``content``'s hash."""
    actual = content_hash(content)
    given = expected.strip().lower()
    return given in (actual, actual.removeprefix("sha256:"))


def word_count(content: str) -> int:
    """Words as Rust's ``split_whitespace`` counts them."""
    count, in_word = 0, False
    for ch in content:
        if ch in RUST_WHITESPACE:
            in_word = False
        elif not in_word:
            in_word, count = True, count + 1
    return count


def _clamped(value: Any, default: int, top: int, what: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolRefused(f"{what} must be a whole number from 1 to {top}")
    return max(1, min(value, top))


def search_limit(limit: Any) -> int:
    return _clamped(limit, SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT, "limit")


def tree_depth(depth: Any) -> int:
    return _clamped(depth, TREE_DEFAULT_DEPTH, TREE_MAX_DEPTH, "depth")


def search_query(arguments: dict[str, Any]) -> str:
    """The query of a ``memory_search`` call: the first of its names given, trimmed."""
    for name in QUERY_NAMES:
        value = arguments.get(name)
        if isinstance(value, str) and value.strip(RUST_WHITESPACE):
            return value.strip(RUST_WHITESPACE)
    raise ToolRefused("query is missing or blank: say what to search for")


def tree(paths: list[str], root: str, depth: int) -> list[Any]:
    """``memory_tree``'s answer for the sorted document ``paths`` below ``root``."""
    prefix = f"{root.strip('/')}/" if root.strip("/") else ""
    folders: dict[str, list[str]] = {}
    files: list[str] = []
    for path in paths:
        if not path.startswith(prefix) or path == prefix:
            continue
        rest = path[len(prefix) :]
        folder, sep, _ = rest.partition("/")
        if sep:
            folders.setdefault(folder, []).append(path)
        else:
            files.append(rest)
    out: list[Any] = []
    for folder in sorted(folders):
        shown = f"{folder}/"
        below = tree(folders[folder], prefix + folder, depth - 1) if depth > 1 else []
        out.append({shown: below} if below else shown)
    out.extend(files)
    return out
