"""``--read-scope``: other users' workspaces, read-only, under ``.scopes/<user>/``.

As with IronClaw's ``WORKSPACE_READ_SCOPES``, a read scope is another ``user_id`` whose
memory this mount may read but never write; IronClaw's identity files (IDENTITY.md,
SOUL.md, AGENTS.md, USER.md, TOOLS.md, BOOTSTRAP.md) are never shown from another scope.
Each scope has its own document store bound to that user, so no name or id can reach rows
of a user the mount was not given.  The scopes are loaded at mount and hidden from the
root listing, like ``.search`` (a ``SyntheticTree``, ``memfs.vfs.extensions``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memfs.db.calls import DatabaseCalls
from memfs.db.interface import DocumentStore
from memfs.paths import SCOPES_DIR, loadable_path
from memfs.tree import Node, ScopedFile, SyntheticDir, Tree, to_ns
from memfs.vfs.base import log

#: Never shown from another user's scope (IronClaw: primary scope only, exact case).
IDENTITY_FILES = frozenset(
    {"IDENTITY.md", "SOUL.md", "AGENTS.md", "USER.md", "TOOLS.md", "BOOTSTRAP.md"}
)
SCOPE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


class ScopesTree:
    """``.scopes/<user>/``: each read scope's documents, loaded at mount, read lazily."""

    name = SCOPES_DIR

    def __init__(self, stores: Sequence[DocumentStore], calls: DatabaseCalls) -> None:
        for store in stores:
            if not SCOPE_NAME.match(store.scope.user_id):
                raise ValueError(f"invalid read scope {store.scope.user_id!r}")
        self.stores = list(stores)
        self.calls = calls

    async def fill(self, tree: Tree, root: SyntheticDir) -> None:
        now = root.mtime_ns
        for index, store in enumerate(self.stores):
            top = tree.new_synthetic_dir(store.scope.user_id, now)
            tree.attach(root, top)
            shown = 0
            for row in await self.calls(store.load_documents):
                if row.path in IDENTITY_FILES or not loadable_path(row.path):
                    continue
                *dirs, name = row.path.split("/")
                parent: SyntheticDir = top
                for part in dirs:
                    child = parent.children.get(part)
                    if not isinstance(child, SyntheticDir):
                        if child is not None:
                            break  # a file and a directory share a name: keep the first
                        child = tree.new_synthetic_dir(part, now)
                        tree.attach(parent, child)
                    parent = child
                else:
                    if name in parent.children:
                        continue
                    node = tree.new_scoped_file(name, row.size, to_ns(row.updated_at))
                    node.scope_index = index
                    node.source_id = row.id
                    tree.attach(parent, node)
                    shown += 1
            log.info("read scope %r: %d documents, read-only", store.scope.user_id, shown)

    async def make_entry(self, tree: Tree, parent: SyntheticDir, name: str) -> Node | None:
        return None  # everything it shows is made at mount

    async def read(self, node: ScopedFile) -> bytes:
        store = self.stores[node.scope_index]
        assert node.source_id is not None
        found = await self.calls(store.read_content, node.source_id)
        return found.data if found else b""

    def volatile(self, node: Node) -> bool:
        return False

    async def before_listing(self, tree: Tree, directory: SyntheticDir) -> None:
        """Its directories list what they hold: nothing to make first."""

    def documents_changed(self) -> None:
        """Other scopes are read-only snapshots made at mount: nothing follows this one."""
