"""``.prompt``: the system prompt IronClaw (legacy layout, v0.22 to v1.0) assembles from the
workspace, as a read-only file at the mount root.

IronClaw's rule (its ``system_prompt_for_context``, for a direct session), in order, each
part only if its document is non-empty, parts joined by a line ``---`` between blank lines:

1. ``BOOTSTRAP.md`` as "First-Run Bootstrap", unless IronClaw's settings say onboarding
   was completed (``profile_onboarding_completed``);
2. ``AGENTS.md`` "Agent Instructions", ``SOUL.md`` "Core Values", ``USER.md`` "User
   Context", ``IDENTITY.md`` "Identity", ``TOOLS.md`` "Tool Notes", all from the mount's own
   workspace (never a read scope; the other parts come from the first read scope that has
   them when the workspace has none);
3. ``MEMORY.md`` "Long-Term Memory" (IronClaw leaves it out of group chats only);
4. today's and yesterday's ``daily/YYYY-MM-DD.md``, "Today's Notes" and "Yesterday's
   Notes" (dates in UTC, IronClaw's default when it is given no time zone);
5. the "Interaction Style" and "Personalization" sections derived from
   ``context/profile.json`` (``memfs.ironclaw.profile``);
6. ``context/assistant-directives.md`` as it is.

Each heading is a level-2 Markdown heading followed by a blank line and the content.  Left
out, and said so in SEMANTICS.md: the admin instructions of multi-tenant deployments, and
the profile-analysis instructions IronClaw adds during onboarding (its own text).

The file is built when looked up and rebuilt when one of its inputs changed (a save here,
or another writer's seen by the change feed); the kernel is told not to cache its name.
It is not listed in the root, so ``rsync``, ``grep -r`` and backups of the mount never copy
or match it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from uuid import UUID

from memfs.db.calls import RunDb
from memfs.db.interface import DocumentStore
from memfs.ironclaw.profile import profile_sections
from memfs.paths import PROMPT_FILE
from memfs.tree import FileNode, Node, SyntheticFile, Tree
from memfs.vfs.extensions import MountView

BOOTSTRAP = "BOOTSTRAP.md"
IDENTITY_PARTS = (
    ("AGENTS.md", "Agent Instructions"),
    ("SOUL.md", "Core Values"),
    ("USER.md", "User Context"),
    ("IDENTITY.md", "Identity"),
    ("TOOLS.md", "Tool Notes"),
)
MEMORY = "MEMORY.md"
#: Read from the mount's own workspace only, never lent by a read scope.
PRIMARY_ONLY = frozenset({BOOTSTRAP, *(path for path, _ in IDENTITY_PARTS)})
PROFILE = "context/profile.json"
DIRECTIVES = "context/assistant-directives.md"
SEPARATOR = "\n\n---\n\n"


def daily_path(day: date) -> str:
    return f"daily/{day:%Y-%m-%d}.md"


def inputs(today: date) -> list[str]:
    """Every document the prompt is made of, for ``today``."""
    yesterday = today - timedelta(days=1)
    return [
        BOOTSTRAP,
        *(path for path, _ in IDENTITY_PARTS),
        MEMORY,
        daily_path(today),
        daily_path(yesterday),
        PROFILE,
        DIRECTIVES,
    ]


def assemble_prompt(
    contents: dict[str, str], today: date, *, onboarded: bool, now: datetime | None = None
) -> str:
    """IronClaw's system prompt from the documents' contents (absent: not a key)."""
    parts: list[str] = []

    def add(path: str, heading: str | None) -> None:
        text = contents.get(path, "")
        if text:
            parts.append(f"## {heading}\n\n{text}" if heading else text)

    if not onboarded:
        add(BOOTSTRAP, "First-Run Bootstrap")
    for path, heading in IDENTITY_PARTS:
        add(path, heading)
    add(MEMORY, "Long-Term Memory")
    add(daily_path(today), "Today's Notes")
    add(daily_path(today - timedelta(days=1)), "Yesterday's Notes")
    if contents.get(PROFILE):
        parts.extend(profile_sections(contents[PROFILE], now))
    add(DIRECTIVES, None)
    return SEPARATOR.join(parts)


class PromptFile:
    """Builds ``.prompt`` for one workspace when it is looked up."""

    def __init__(
        self,
        documents: DocumentStore,
        calls: RunDb,
        *,
        onboarded: Callable[[], bool] | None = None,
        shared: Callable[[Sequence[str]], dict[str, str]] | None = None,
    ) -> None:
        self.documents = documents
        self.calls = calls
        #: Whether IronClaw's settings say onboarding is done (a database read).
        self.onboarded = onboarded
        #: The contents of the paths given, from the read scopes in order (the first that
        #: has each): IronClaw reads everything but the identity files there too when the
        #: workspace itself has none.
        self.shared = shared
        #: IronClaw's day, for the daily logs it reads (UTC).
        self.today: Callable[[], date] = lambda: datetime.now(UTC).date()
        self.clock: Callable[[], int] = time.time_ns
        self.node: SyntheticFile | None = None
        self._key: object = None

    def shows(self, node: Node) -> bool:
        return node is self.node

    async def content_at_open(self, node: SyntheticFile, fs: MountView) -> bytes | None:
        return None  # made at lookup (rare), kept while its inputs are unchanged

    async def lookup(self, tree: Tree, name: str) -> SyntheticFile | None:
        if name != PROMPT_FILE:
            return None
        today = self.today()
        found: dict[str, FileNode] = {}
        for path in inputs(today):
            node = tree.resolve(path)
            if isinstance(node, FileNode) and node.doc_id is not None and not node.scratch:
                found[path] = node
        # Decided anew at each lookup (rare): onboarding, and what read scopes lend.
        onboarded = bool(await self.calls(self.onboarded)) if self.onboarded else False
        lent: dict[str, str] = {}
        missing = [p for p in inputs(today) if p not in found and p not in PRIMARY_ONLY]
        if self.shared is not None and missing:
            lent = await self.calls(self.shared, missing)
        key = (
            today, onboarded, tuple(sorted(lent.items())),
            tuple((p, n.doc_id, n.updated_at, n.size) for p, n in found.items()),
        )  # fmt: skip
        if self.node is not None and key == self._key and self.node.ino in tree.inodes:
            return self.node
        ids: Sequence[UUID] = [n.doc_id for n in found.values() if n.doc_id is not None]
        read = await self.calls(self.documents.read_contents, ids) if ids else {}
        contents = dict(lent)
        contents.update(
            (path, read[node.doc_id].data.decode("utf-8"))
            for path, node in found.items()
            if node.doc_id in read
        )
        text = assemble_prompt(contents, today, onboarded=onboarded)
        mtime = max((n.mtime_ns for n in found.values()), default=self.clock())
        node = tree.new_synthetic_file(PROMPT_FILE, text.encode("utf-8"), mtime)
        node.parent = tree.root  # reachable by lookup only, never listed
        if self.node is not None:
            tree.detach(self.node)
        self.node, self._key = node, key
        return node
