"""Directory listings: the snapshot each open directory is read from, and which listings
the kernel may keep (``cache_readdir``, ``keep_cache``)."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from typing import Protocol

from memfs.errors import FsError
from memfs.kernel import KernelNotifier
from memfs.tree import DirNode, FileNode, Node, SyntheticDir
from memfs.vfs.extensions import SyntheticTree
from memfs.vfs.state import DirHandle, MountState


class ListingLookups(Protocol):
    """What listings ask of the lookups: the synthetic trees at the root, and the names
    another writer displaced, taken out before a listing."""

    synthetic_roots: dict[int, SyntheticTree]

    def extension_of(self, node: Node) -> SyntheticTree | None: ...

    def drop_displaced(self, node: Node) -> bool: ...


class Listings:
    """opendir, readdir and releasedir over the tree."""

    def __init__(self, lookups: ListingLookups, state: MountState, kernel: KernelNotifier) -> None:
        #: The synthetic trees at the root, and displaced names taken out before a listing.
        self.lookups = lookups
        self.state = state
        self.kernel = kernel

    async def prepare_listing(self, ino: int) -> None:
        """A synthetic directory about to be listed is made first (``.recent``, ``.at``)."""
        directory = self.state.tree.get_dir(ino)
        if isinstance(directory, SyntheticDir):
            extension = self.lookups.extension_of(directory)
            if extension is not None:
                await extension.before_listing(self.state.tree, directory)

    def opendir(self, ino: int, *, kernel_caches: bool = False) -> int:
        """A handle on directory ``ino``; the snapshot is taken by ``readdir`` at offset 0.

        ``kernel_caches``: the kernel can keep listings across opens (``cache_readdir``);
        it is let do so for the folders of the workspace, whose every change the tree
        reports (``_listing_changed``), not for synthetic ones made anew at each listing.
        """
        directory = self.state.tree.get_dir(ino)
        fh = self.state.new_fh()
        if not kernel_caches or isinstance(directory, SyntheticDir):
            self.state.dir_handles[fh] = DirHandle(ino, None)
            return fh
        entries = self._listing(directory)
        kept = ino in self.state.kernel_listings
        self.state.dir_handles[fh] = DirHandle(ino, entries, directory.generation, kept)
        self.state.kernel_listings.add(ino)
        return fh

    def _listing(self, directory: DirNode) -> list[tuple[str, Node]]:
        """The folder's listing as the kernel may hold it: taken again only after its names
        changed (each such change drops the kernel's copy too)."""
        kept = self.state.listings.get(directory.ino)
        if kept is not None and kept[0] == directory.generation:
            return kept[1]
        entries = self._snapshot(directory.ino)  # may take displaced names out first
        self.state.listings[directory.ino] = (directory.generation, entries)
        return entries

    def listing_cached(self, fh: int) -> bool:
        """Whether the kernel may keep what handle ``fh`` lists after it is closed."""
        handle = self.state.dir_handles.get(fh)
        return handle is not None and handle.cached_from is not None

    def listing_kept(self, fh: int) -> bool:
        """Whether the kernel may serve handle ``fh`` the listing it already holds."""
        handle = self.state.dir_handles.get(fh)
        return handle is not None and handle.kept

    def _snapshot(self, ino: int) -> list[tuple[str, Node]]:
        directory = self.state.tree.get_dir(ino)
        for child in [c for c in directory.children.values() if isinstance(c, FileNode)]:
            self.lookups.drop_displaced(child)
        listed = [
            item
            for item in directory.children.items()
            if item[1].ino not in self.lookups.synthetic_roots
        ]
        return sorted(listed, key=lambda item: item[0])

    def readdir(self, fh: int, start: int) -> Iterator[tuple[int, str, Node]]:
        """Entries from position ``start`` of the handle's snapshot: (next_id, name, node).

        Positions 0 and 1 are ``.`` and ``..``.  The snapshot is taken at offset 0 (at
        ``opendir`` for a listing the kernel may cache, see ``DirHandle``), so a listing
        never skips or repeats an entry while the directory changes.  Entries removed since
        the snapshot are left out.  Lazy: the kernel reads a big directory in many small
        batches, each starting where the last stopped, so each batch costs what it returns,
        not the directory's size.
        """
        handle = self.state.dir_handles.get(fh)
        if handle is None:
            raise FsError(errno.EBADF)
        directory = self.state.tree.get_dir(handle.ino)
        if handle.cached_from is not None:
            if start == 0:  # a rewind: the listing as the kernel will cache it now
                handle.entries = self._listing(directory)
        elif start == 0 or handle.entries is None:
            handle.entries = self._snapshot(handle.ino)
        assert handle.entries is not None
        return self._entries_from(directory, handle.entries, start)

    @staticmethod
    def _entries_from(
        directory: DirNode, entries: list[tuple[str, Node]], start: int
    ) -> Iterator[tuple[int, str, Node]]:
        if start <= 0:
            yield 1, ".", directory
        if start <= 1:
            yield 2, "..", directory.parent or directory
        children = directory.children
        for index in range(max(start, 2), len(entries) + 2):
            name, node = entries[index - 2]
            if children.get(name) is node:
                yield index + 1, name, node

    def releasedir(self, fh: int) -> None:
        """A listing the kernel cached from a snapshot older than the directory goes: a
        change made while the kernel was reading it was told to drop a cache it then
        refilled from the older snapshot."""
        handle = self.state.dir_handles.pop(fh, None)
        if handle is None or handle.cached_from is None:
            return
        directory = self.state.tree.inodes.get(handle.ino)
        if isinstance(directory, DirNode) and directory.generation != handle.cached_from:
            self.state.kernel_listings.discard(handle.ino)
            self.kernel.inode(handle.ino)
