"""``.recent/``: the workspace's documents by last change, newest first, read-only.

Each entry is named as ``.search`` names its results (``01-projects∕alpha∕notes.md``: the
rank, then the path with ``/`` as U+2215) and reads as a short header (the path, when the
row last changed, who changed it where the layout keeps it) followed by the content.  The
order is the rows' ``updated_at`` as this mount last saw them (its own saves and other
writers' changes the feed or polling brought), not a file's client-set mtime: ``rsync -a``
and ``touch -d`` do not move a document in it.  The listing is made anew at each
``ls`` (a scan of the tree in memory, no query), the header and content when an entry is
read.  ``.recent`` is left out of the root listing, so ``find`` and ``grep -r`` never walk
into it unless asked.
"""

from __future__ import annotations

import heapq
from datetime import UTC, datetime, timedelta
from uuid import UUID

from memfs.db.calls import RunDb
from memfs.db.interface import DocumentStore, VersionInfo, VersionStore
from memfs.paths import RECENT_DIR
from memfs.search.directory import result_name
from memfs.tree import FileNode, Node, ScopedFile, SyntheticDir, Tree, to_ns

#: How many documents ``.recent`` lists.
RECENT_COUNT = 100
#: A version this close to the row's last change records who made that change.
SAME_SAVE = timedelta(seconds=2)


class RecentTree:
    """``.recent``: the ``RECENT_COUNT`` documents changed last."""

    name = RECENT_DIR

    def __init__(
        self,
        documents: DocumentStore,
        versions: VersionStore,
        calls: RunDb,
        *,
        count: int = RECENT_COUNT,
    ) -> None:
        self.documents = documents
        self.versions = versions
        self.calls = calls
        self.count = count
        self.root: SyntheticDir | None = None
        self.tree: Tree | None = None
        #: The entry shown for each (rank name, document, version), so an unchanged
        #: listing keeps its inode numbers.
        self._entries: dict[tuple[str, UUID, object], ScopedFile] = {}

    async def fill(self, tree: Tree, root: SyntheticDir) -> None:
        self.root, self.tree = root, tree

    def volatile(self, node: Node) -> bool:
        return False

    def documents_changed(self) -> None:
        """Nothing kept to drop: each listing is made anew."""

    async def before_listing(self, tree: Tree, directory: SyntheticDir) -> None:
        if directory is self.root:
            self._rebuild(tree)

    async def make_entry(self, tree: Tree, parent: SyntheticDir, name: str) -> Node | None:
        if parent is not self.root:
            return None
        self._rebuild(tree)  # a name not listed yet: the documents changed since
        return parent.children.get(name)

    def _latest(self, tree: Tree) -> list[FileNode]:
        """The ``count`` documents changed last, newest first, ties by path.  Paths are
        built only for the documents at or above the ``count``-th newest time, not for
        every document at each listing (0.3 s at 100,000)."""
        floor = datetime.min.replace(tzinfo=UTC)

        def changed(node: FileNode) -> datetime:
            return node.updated_at or floor

        shown = [
            node
            for node in tree.docs.values()
            if node.parent is not None and not node.scratch and node.doc_id is not None
        ]
        newest = heapq.nlargest(self.count, shown, key=changed)
        if len(newest) == self.count:
            edge = changed(newest[-1])
            newest = [node for node in shown if changed(node) >= edge]  # ties at the edge too
        return heapq.nlargest(self.count, newest, key=lambda n: (changed(n), tree.path_of(n)))

    def _rebuild(self, tree: Tree) -> None:
        root = self.root
        if root is None:
            return
        latest = self._latest(tree)
        width = max(2, len(str(len(latest))))
        wanted: dict[tuple[str, UUID, object], ScopedFile] = {}
        for rank, node in enumerate(latest, 1):
            assert node.doc_id is not None
            name = result_name(rank, width, tree.path_of(node))
            key = (name, node.doc_id, node.updated_at)
            entry = self._entries.get(key)
            if entry is None or entry.ino not in tree.inodes:
                changed = to_ns(node.updated_at) if node.updated_at else node.mtime_ns
                entry = tree.new_scoped_file(name, node.size, changed)
                entry.source_id = node.doc_id
            wanted[key] = entry
        keep = {id(entry) for entry in wanted.values()}
        for child in list(root.children.values()):
            if id(child) not in keep:
                tree.detach(child)
        for entry in wanted.values():
            if entry.parent is not root:
                tree.attach(root, entry)
        self._entries = wanted

    async def read(self, node: ScopedFile) -> bytes:
        doc_id = node.source_id
        if doc_id is None:
            return b""
        found = await self.calls(self.documents.read_content, doc_id)
        if found is None:
            return b"(deleted since it was listed)\n"
        shown = self._document(node)
        path = shown[0] if shown else "(moved since it was listed)"
        changed_at = shown[1] if shown else None
        who = await self._who(path, changed_at) if shown else None
        header = [
            f"source: {path}",
            f"changed_at: {changed_at.astimezone(UTC).isoformat() if changed_at else 'unknown'}",
            f"changed_by: {who or 'not kept (IronClaw records no writer for this change)'}",
            f"document_id: {doc_id}",
            "---",
        ]
        data: bytes = found.data
        return ("\n".join(header) + "\n").encode("utf-8") + data

    def _document(self, entry: ScopedFile) -> tuple[str, datetime | None] | None:
        """The document's path and last change, if it is still in the tree."""
        tree = self.tree
        node = tree.docs.get(entry.source_id) if tree is not None and entry.source_id else None
        if node is None or node.parent is None:
            return None
        return tree.path_of(node), node.updated_at  # type: ignore[union-attr]

    async def _who(self, path: str, changed_at: datetime | None) -> str | None:
        """Who made the last change: the newest version saved with it (Reborn records the
        writer of each content; legacy IronClaw the one who replaced the content before)."""
        if not self.versions.available or changed_at is None:
            return None
        kept = await self.calls(self.versions.versions, path)
        if not kept:
            return None
        newest: VersionInfo = kept[-1]
        if abs(newest.created_at - changed_at) > SAME_SAVE:
            return None
        return newest.changed_by
