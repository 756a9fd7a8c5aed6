"""Where IronClaw's Reborn memory keeps a workspace, and the shapes of its rows.

A scope (tenant, user, agent, project) is the path prefix
``/memory/tenants/<t>/users/<u>/agents/<a|_none>/projects/<p|_none>``; document ``R`` is the
row ``<prefix>/R`` and its sidecars are siblings: ``R.meta`` (metadata), ``R.chunks/<i>``
and ``R.versions/<n>``.  The rules here are IronClaw v1.3's
(docs/ironclaw/reborn.md §3 and §6), stated in memfs's words; nothing here touches the
database.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from typing import Any

from memfs.ironclaw.hashing import bytes_hash

#: The id IronClaw writes for "absent" in a scope path; forbidden as a real id.
NONE = "_none"
#: IronClaw's scope when its configuration names none (docs/ironclaw/reborn.md §3.1).
DEFAULT_TENANT = "reborn-cli"
DEFAULT_USER = "reborn-cli"
DEFAULT_AGENT = "reborn-cli-agent"
#: Suffixes of sidecar segments: no document name may end a segment with one.
SIDECAR_SUFFIXES = (".meta", ".chunks", ".versions")

DOCUMENT_KIND = "memory_document"
CHUNK_KIND = "memory_chunk"
VERSION_KIND = "memory_document_version"
#: IronClaw stores every memory record as application/json, Markdown included; ``.meta``
#: sidecars are opaque files.
RECORD_TYPE = "application/json"
META_TYPE = "application/octet-stream"


def _has_control(text: str) -> bool:
    # ``isprintable`` (C) is False for every control character: the scan by category only
    # for the rare text it refuses for another reason (a non-ASCII space, a format mark).
    return not text.isprintable() and any(unicodedata.category(c) == "Cc" for c in text)


def segment_problem(value: str) -> str | None:
    """Why IronClaw refuses ``value`` as a scope segment (None: it accepts it)."""
    if not value.strip():
        return "is blank"
    if len(value.encode("utf-8")) > 256:
        return "is longer than 256 bytes"
    if value in (".", ".."):
        return "is . or .."
    if any(c in value for c in ":/\\\x00") or _has_control(value):
        return "contains ':', '/', '\\', NUL or a control character"
    return None


@dataclass(frozen=True)
class RebornScope:
    """One Reborn workspace: tenant, user, and optional agent and project."""

    tenant: str = DEFAULT_TENANT
    user_id: str = DEFAULT_USER
    agent: str | None = DEFAULT_AGENT
    project: str | None = None

    def __post_init__(self) -> None:
        for what, value in (("tenant", self.tenant), ("user", self.user_id),
                            ("agent", self.agent), ("project", self.project)):  # fmt: skip
            if value is None:
                continue
            if value == NONE:
                raise ValueError(f"{what} id {NONE!r} is IronClaw's word for 'none'")
            problem = segment_problem(value)
            if problem is not None:
                raise ValueError(f"{what} id {value!r} {problem}")

    @property
    def prefix(self) -> str:
        """The path every row of the workspace starts with (no trailing slash)."""
        return (
            f"/memory/tenants/{self.tenant}/users/{self.user_id}"
            f"/agents/{self.agent or NONE}/projects/{self.project or NONE}"
        )

    def keys(self) -> dict[str, str]:
        """The scope keys IronClaw puts in a record's ``indexed`` (absent, never null)."""
        keys = {"tenant_id": self.tenant, "user_id": self.user_id}
        if self.agent is not None:
            keys["agent_id"] = self.agent
        if self.project is not None:
            keys["project_id"] = self.project
        return keys

    @property
    def changed_by(self) -> str:
        """A version's ``changed_by``: who wrote through this scope."""
        agent = f"agent:{self.agent}:" if self.agent is not None else ""
        return f"tenant:{self.tenant}:user:{self.user_id}:{agent}project:{self.project or NONE}"

    def row(self, relative: str) -> str:
        return f"{self.prefix}/{relative}"

    def describe(self) -> str:
        return (
            f"tenant {self.tenant!r}, user {self.user_id!r}, agent {self.agent or 'none'!r}, "
            f"project {self.project or 'none'!r}"
        )


def path_problem(relative: str) -> str | None:
    """Why IronClaw refuses ``relative`` as a document path (None: it accepts it)."""
    if not relative.strip():
        return "is blank"
    if relative.startswith("/"):
        return "starts with '/'"
    if "\\" in relative or "\x00" in relative or _has_control(relative):
        return "contains a backslash, NUL or a control character"
    for segment in relative.split("/"):
        if segment in ("", ".", ".."):
            return "has an empty, '.' or '..' segment"
        if segment.endswith(SIDECAR_SUFFIXES):
            return f"has a segment ending in {', '.join(SIDECAR_SUFFIXES)} (IronClaw's sidecars)"
    return None


def agent_cannot_write(relative: str) -> str | None:
    """Why IronClaw's memory tools refuse to write ``relative`` although its layout holds
    it (docs/ironclaw/reborn.md §6), or None: they refuse ``..`` anywhere in a target, and keep
    ``threads/`` for the conversation recorder."""
    if ".." in relative:
        return "cannot write it (its memory tools refuse '..' anywhere in a path)"
    if relative.lower().startswith("threads/"):
        return "never writes it (threads/ is kept for IronClaw's conversation recorder)"
    return None


def is_listed(relative: str) -> bool:
    """Whether a ``memory_document`` row at ``relative`` is one IronClaw lists (reborn.md §3.3)."""
    return path_problem(relative) is None


def meta_path(relative: str) -> str:
    return f"{relative}.meta"


def chunk_path(relative: str, index: int) -> str:
    return f"{relative}.chunks/{index}"


def version_path(relative: str, number: int) -> str:
    return f"{relative}.versions/{number}"


def config_candidates(relative: str) -> list[str]:
    """The ``.config`` documents whose metadata ``relative`` inherits, nearest first."""
    parts = relative.split("/")[:-1]
    found = ["/".join([*parts[:i], ".config"]) for i in range(len(parts), 0, -1)]
    found.append(".config")
    return found


def dumps(value: Any) -> str:
    """JSON as IronClaw's serde_json writes it: compact, keys sorted, non-ASCII raw,
    control characters escaped."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def content_hash(data: bytes) -> str:
    """A version's ``content_hash`` (``memfs.ironclaw.hashing``)."""
    return bytes_hash(data)


def version_body(scope: RebornScope, old: bytes, changed_by: str | None = None) -> bytes:
    """The contents of a version sidecar keeping ``old`` (written by ``changed_by``,
    by default whoever writes through ``scope``)."""
    body = {
        "changed_by": changed_by or scope.changed_by,
        "content": old.decode("utf-8"),
        "content_hash": content_hash(old),
    }
    return dumps(body).encode("utf-8")
