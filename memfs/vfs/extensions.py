"""Synthetic trees: read-only directories the mount shows beside the workspace.

``.search`` (queries as directories), ``.scopes`` (other users' memory) and ``.versions``
(every document's kept versions) are each a
``SyntheticTree``, passed to the filesystem when it is built.  The filesystem makes each
one's directory at the mount root (left out of the root listing, so ``find``, ``grep -r``
and sync tools never walk into it), and sends it the lookups of names it does not hold yet
and the reads of its lazily read files: one dispatch, in ``memfs.vfs.base``.

``.prompt`` (what the agent is told) and ``.status`` / ``.status.json`` (what the mount
holds) are each a ``RootFile``: files at the root, found by lookup and never listed (no
walk of the tree reads them), passed to the filesystem the same way and dispatched in one
place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from memfs.tree import FileNode, Node, ScopedFile, SyntheticDir, SyntheticFile, Tree

if TYPE_CHECKING:
    from memfs.vfs.state import MountState


class MountView(Protocol):
    """What a root file made at open reads of the mount (``.status``: the open files,
    the unsaved ones and where each is kept)."""

    @property
    def state(self) -> MountState: ...

    def describe_node(self, node: FileNode) -> str: ...

    def unkept(self) -> list[str]: ...

    def kept_copy(self, ino: int) -> str | None: ...


class SyntheticTree(Protocol):
    """A read-only tree under ``/<name>`` of the mount."""

    #: Its directory's name at the mount root.
    name: str

    async def fill(self, tree: Tree, root: SyntheticDir) -> None:
        """Make what it shows from the start under ``root`` (at mount)."""

    async def make_entry(self, tree: Tree, parent: SyntheticDir, name: str) -> Node | None:
        """A name under one of its directories that is not there yet, or whose node is
        ``volatile`` (None: no such name, or the node that is there).  May raise
        ``FsError`` with the errno the lookup should fail with."""

    async def read(self, node: ScopedFile) -> bytes:
        """The bytes of one of its lazily read files."""

    def volatile(self, node: Node) -> bool:
        """Whether the kernel must not cache this name (its content is decided anew)."""

    def documents_changed(self) -> None:
        """Documents changed, here or by another writer: drop what was derived from them."""

    async def before_listing(self, tree: Tree, directory: SyntheticDir) -> None:
        """One of its directories is about to be listed (``.recent`` lists anew)."""


class RootFile(Protocol):
    """Read-only files at the mount root, found by lookup, never listed."""

    async def lookup(self, tree: Tree, name: str) -> SyntheticFile | None:
        """Its node for ``name`` (made, or made anew), or None: not one of its names."""

    def shows(self, node: Node) -> bool:
        """Whether ``node`` is one of its files."""

    async def content_at_open(self, node: SyntheticFile, fs: MountView) -> bytes | None:
        """Bytes made for one open alone, served with direct I/O (None: the node's own,
        made at lookup)."""
