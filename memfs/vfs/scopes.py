"""``--read-scope``: other users' workspaces, read-only, under ``.scopes/<user>/``.

As with IronClaw's ``WORKSPACE_READ_SCOPES``, a read scope is another ``user_id`` whose
memory this mount may read but never write; IronClaw's identity files (IDENTITY.md,
SOUL.md, AGENTS.md, USER.md, TOOLS.md, BOOTSTRAP.md) are never shown from another scope.
Each scope has its own ``MetaStore`` bound to that user, so no name or id can reach rows
of a user the mount was not given.  The scopes are loaded at mount and hidden from the
root listing, like ``.search``.
"""

from __future__ import annotations

import re

from memfs.db.store import MetaStore
from memfs.paths import SCOPES_DIR, loadable_path
from memfs.tree import ScopedFile, SyntheticDir, to_ns
from memfs.vfs.base import log
from memfs.vfs.coherence import CoherenceMixin

#: Never shown from another user's scope (IronClaw: primary scope only, exact case).
IDENTITY_FILES = frozenset(
    {"IDENTITY.md", "SOUL.md", "AGENTS.md", "USER.md", "TOOLS.md", "BOOTSTRAP.md"}
)
SCOPE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


class ScopesMixin(CoherenceMixin):
    """Adds ``.scopes/`` when read scopes were given."""

    scope_stores: list[MetaStore] = []  # noqa: RUF012 - replaced per instance

    def add_read_scopes(self, stores: list[MetaStore]) -> None:
        for store in stores:
            if not SCOPE_NAME.match(store.scope.user_id):
                raise ValueError(f"invalid read scope {store.scope.user_id!r}")
        self.scope_stores = stores

    async def load(self) -> None:
        await super().load()
        if not self.scope_stores:
            return
        now = self.clock()
        root = self.tree.new_synthetic_dir(SCOPES_DIR, now)
        self.tree.attach(self.tree.root, root)
        self.unlisted.add(root.ino)
        for index, store in enumerate(self.scope_stores):
            top = self.tree.new_synthetic_dir(store.scope.user_id, now)
            self.tree.attach(root, top)
            shown = 0
            for row in await self._db(store.load_documents):
                if row.path in IDENTITY_FILES or not loadable_path(row.path):
                    continue
                *dirs, name = row.path.split("/")
                parent: SyntheticDir = top
                for part in dirs:
                    child = parent.children.get(part)
                    if not isinstance(child, SyntheticDir):
                        if child is not None:
                            break  # a file and a directory share a name: keep the first
                        child = self.tree.new_synthetic_dir(part, now)
                        self.tree.attach(parent, child)
                    parent = child
                else:
                    if name in parent.children:
                        continue
                    node = self.tree.new_scoped_file(name, row.size, to_ns(row.updated_at))
                    node.scope_index = index
                    node.source_id = row.id
                    self.tree.attach(parent, node)
                    shown += 1
            log.info("read scope %r: %d documents, read-only", store.scope.user_id, shown)

    async def scoped_content(self, node: ScopedFile) -> bytes:
        store = self.scope_stores[node.scope_index]
        assert node.source_id is not None
        row = await self._db(store.read_content, node.source_id)
        return row[0] if row else b""
