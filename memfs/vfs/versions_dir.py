"""``.versions/``: the versions IronClaw keeps of each document, as read-only files.

``.versions/<document path>/`` holds one file per kept version, named ``<number>_<UTC
time>_<who><ext>`` (zero-padded, so ``ls`` sorts them oldest first), the copies of saves a
merge changed, ``as-saved_<id>_<UTC time><ext>`` (memfs's own storage:
``memfs.vfs.safety_net``), and ``current<ext>``, the document as it is now: ``diff
.versions/MEMORY.md/0003_… MEMORY.md`` compares, ``cp .versions/MEMORY.md/0003_… MEMORY.md``
restores (an ordinary save, so the content it replaces is kept as a version in turn).
``.versions/<folder>/`` lists the folder's documents and folders. Like ``.search`` it is
left out of the root listing, and lists only its README, so ``find``, ``grep -r`` and sync
tools never walk into it.

Every directory under it is decided anew at each lookup (the kernel is told not to cache
those names) and rebuilt when what it shows changed: a document's versions are read again
when the document's version token moved (a save here, or another writer's seen by the
change feed), so a new version appears as soon as the change does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC
from pathlib import PurePosixPath

from memfs.db.calls import RunDb
from memfs.db.capabilities import KeptHistory, SaverCopy
from memfs.db.interface import DocumentStore, VersionInfo, VersionStore
from memfs.paths import VERSIONS_DIR, join
from memfs.tree import DirNode, FileNode, Node, ScopedFile, SyntheticDir, Tree, to_ns

README = """\
# .versions/

The versions IronClaw keeps of each document, one read-only file per version:

    ls -l .versions/MEMORY.md/
    diff .versions/MEMORY.md/0002_2026-03-03T091522Z_default.md MEMORY.md
    cp .versions/MEMORY.md/0002_2026-03-03T091522Z_default.md MEMORY.md   # restore

Names are <version>_<UTC time>_<who wrote it>, oldest first; current.md is the document as
it is now. A restore is an ordinary save: the content it replaces becomes a version too.

as-saved_<n>_<UTC time> files are saves exactly as their writer wrote them, kept because
memfs merged them with another writer's change (the agent appended while you edited): if a
merge ever got it wrong, `cp .versions/MEMORY.md/as-saved_0007_… MEMORY.md` puts your own
text back (or `memfs restore MEMORY.md as-saved_0007`). They are kept as long as deleted
documents are (MEMFS_KEEP_DELETED_DAYS or -o keep_deleted_days=N, 30 days by default).
.versions/<folder>/ lists that folder's documents. A deleted document's versions go with
it (IronClaw deletes them together), so it is not shown here.
"""

NO_VERSIONS = """
This database keeps no versions: its memory_document_versions table does not exist
(IronClaw before v0.25 had none), so there is nothing to show here.
"""

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_REBORN_WHO = re.compile(r"user:([^:]+)(?::agent:([^:]+))?")


def _who(changed_by: str | None) -> str:
    """A short, file-name-safe writer: the user (and agent) of a Reborn ``changed_by``."""
    text = changed_by or "unknown"
    reborn = _REBORN_WHO.search(text)
    if reborn is not None:
        text = ".".join(part for part in reborn.groups() if part)
    return _UNSAFE.sub("-", text).strip("-")[:40] or "unknown"


def _extension(name: str) -> str:
    suffix = PurePosixPath(name).suffix
    return suffix if 1 < len(suffix) <= 10 else ""


def version_name(version: VersionInfo, width: int, extension: str) -> str:
    when = version.created_at.astimezone(UTC).strftime("%Y-%m-%dT%H%M%SZ")
    return f"{version.number:0{width}d}_{when}_{_who(version.changed_by)}{extension}"


def saver_copy_name(copy: SaverCopy, extension: str) -> str:
    """``as-saved_<id>_<when><ext>``: a save exactly as its writer wrote it, kept because
    a merge changed what was stored (``memfs.vfs.safety_net``)."""
    when = copy.kept_at.astimezone(UTC).strftime("%Y-%m-%dT%H%M%SZ")
    return f"{AS_SAVED}{copy.id:04d}_{when}{extension}"


#: The prefix of a kept copy's name (``memfs restore PATH as-saved_…`` takes the name).
AS_SAVED = "as-saved_"


@dataclass(frozen=True)
class _Shown:
    """A directory made under ``.versions``, and what it was made from."""

    node: SyntheticDir
    key: object


class VersionsTree:
    """``.versions``: each document's kept versions, read when first looked up."""

    name = VERSIONS_DIR

    def __init__(
        self,
        versions: VersionStore,
        documents: DocumentStore,
        calls: RunDb,
        kept: KeptHistory | None = None,
    ) -> None:
        self.versions = versions
        #: The copies of saves as written that a merge changed (``as-saved_*``).
        self.kept = kept
        self.documents = documents
        self.calls = calls
        self.root: SyntheticDir | None = None
        #: Workspace path of every directory shown (a folder's, or a document's).
        self.paths: dict[int, str] = {}
        self.shown: dict[str, _Shown] = {}
        #: What each version file holds: (document path, version number; 0: current;
        #: below 0: the kept copy of a save as written, by its id negated).
        self.files: dict[int, tuple[str, int]] = {}

    async def fill(self, tree: Tree, root: SyntheticDir) -> None:
        text = README if self.versions.available else README + NO_VERSIONS
        tree.attach(root, tree.new_synthetic_file("README.md", text.encode(), root.mtime_ns))
        self.root = root
        self.paths[root.ino] = ""

    def volatile(self, node: Node) -> bool:
        """Every directory below the root: decided anew at each lookup."""
        return isinstance(node, SyntheticDir) and node is not self.root

    async def before_listing(self, tree: Tree, directory: SyntheticDir) -> None:
        """Its directories list what they hold: nothing to make first."""

    def documents_changed(self) -> None:
        """Nothing kept: each lookup reads the versions anew."""

    async def make_entry(self, tree: Tree, parent: SyntheticDir, name: str) -> Node | None:
        base = self.paths.get(parent.ino)
        if base is None or not self.versions.available:
            return None  # inside a document's directory: its files are all there
        path = join(base, name)
        source = tree.resolve(path)
        if isinstance(source, FileNode) and source.doc_id is not None and not source.scratch:
            key: object = (source.doc_id, source.updated_at, source.size)
        elif isinstance(source, DirNode) and not isinstance(source, SyntheticDir) and path:
            key = tuple(sorted(self._listed(source)))
        else:
            return None
        shown = self.shown.get(path)
        if shown is not None and shown.key == key and shown.node.ino in tree.inodes:
            return shown.node
        node = tree.new_synthetic_dir(name, source.mtime_ns)
        if isinstance(source, FileNode):
            await self._fill_document(tree, node, path, source)
        else:
            for child in sorted(self._listed(source)):
                placeholder = tree.new_synthetic_dir(child, source.mtime_ns)
                tree.attach(node, placeholder)
                self.paths[placeholder.ino] = join(path, child)
        self._replace(tree, parent, name, node)
        self.paths[node.ino] = path
        self.shown[path] = _Shown(node, key)
        return node

    async def read(self, node: ScopedFile) -> bytes:
        path, number = self.files.get(node.ino, ("", -1))
        if number == 0 and node.source_id is not None:
            found = await self.calls(self.documents.read_content, node.source_id)
            return found.data if found is not None else b""
        if number > 0:
            data = await self.calls(self.versions.version_content, path, number)
            return data if data is not None else b""
        if number < 0 and self.kept is not None:
            data = await self.calls(self.kept.saver_copy, -number)
            return data if data is not None else b""
        return b""

    # -- building ------------------------------------------------------------------------

    @staticmethod
    def _listed(folder: DirNode) -> list[str]:
        """The names a folder's mirror shows: its documents and folders."""
        return [
            name
            for name, child in folder.children.items()
            if not child.scratch
            and not isinstance(child, SyntheticDir)
            and (isinstance(child, DirNode) or getattr(child, "doc_id", None) is not None)
        ]

    async def _fill_document(
        self, tree: Tree, node: SyntheticDir, path: str, source: FileNode
    ) -> None:
        kept = await self.calls(self.versions.versions, path)
        extension = _extension(source.name)
        width = max(4, len(str(kept[-1].number)) if kept else 4)
        for version in kept:
            file = tree.new_scoped_file(
                version_name(version, width, extension), version.size, to_ns(version.created_at)
            )
            tree.attach(node, file)
            self.files[file.ino] = (path, version.number)
        copies = await self.calls(self.kept.saver_copies, path) if self.kept is not None else []
        for copy in copies:
            file = tree.new_scoped_file(
                saver_copy_name(copy, extension), copy.size, to_ns(copy.kept_at)
            )
            tree.attach(node, file)
            self.files[file.ino] = (path, -copy.id)
        current = tree.new_scoped_file(f"current{extension}", source.size, source.mtime_ns)
        current.source_id = source.doc_id
        tree.attach(node, current)
        self.files[current.ino] = (path, 0)

    def _replace(self, tree: Tree, parent: SyntheticDir, name: str, node: SyntheticDir) -> None:
        """Put ``node`` where an older one stood.  Under the root nothing is attached
        (reachable by lookup only, never listed, as ``.search``'s queries)."""
        old = parent.children.get(name)
        if isinstance(old, SyntheticDir):
            self._drop(tree, old)
        previous = self.shown.get(join(self.paths.get(parent.ino, ""), name))
        if previous is not None and previous.node is not old:
            self._drop(tree, previous.node)
        if parent is self.root:
            node.parent = parent
        else:
            tree.attach(parent, node)

    def _drop(self, tree: Tree, node: SyntheticDir) -> None:
        for child in list(node.children.values()):
            if isinstance(child, SyntheticDir):
                self._drop(tree, child)
            else:
                self.files.pop(child.ino, None)
                tree.detach(child)
        self.paths.pop(node.ino, None)
        tree.detach(node)
