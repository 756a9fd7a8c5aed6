"""Tool folders: top-level folders where tools keep their own state (``.obsidian``,
``.trash``, ``.vscode``, …), kept across mounts but never memory.

Everything in one is scratch to the model (any bytes, never chunked, searched or written
to the agent's tables), and its files and folders are kept in memfs's own schema
(``memfs.tool_files``), for every mount of the workspace: a mount loads them at start and
writes what changed after each operation that can change them (close, fsync, rename,
unlink, mkdir, rmdir, attribute changes) and before unmount, all the differences in one
transaction.  What changed is found by comparing each tool file's signature (inode,
buffer generation, size, mode, mtime) with the one last written, so no operation needs a
rule of its own, whatever pattern a tool saves with.
"""

from __future__ import annotations

import hashlib
import logging
import stat
from datetime import UTC, datetime
from typing import Protocol

import trio

from memfs.db.calls import RunDb
from memfs.db.capabilities import ToolFile, ToolFiles
from memfs.kernel import KernelNotifier
from memfs.paths import conflict_copy
from memfs.scratch import ScratchRules
from memfs.tree import DirNode, FileNode, Node
from memfs.vfs.buffers import ScratchBuffer, ScratchSpill
from memfs.vfs.state import MountState

log = logging.getLogger("memfs.vfs")

#: The largest tool-folder file kept (EFBIG beyond): each is written whole, in memory,
#: in one transaction, so the bound is what one save of one may cost.  Obsidian's and
#: VS Code's own files are a few MB at most.
TOOL_FILE_MAX_BYTES = 32 * 1024 * 1024

Signature = tuple[object, ...]
#: What the table holds for a path: (is a folder, mode, mtime, MD5 of the content).
Digest = tuple[bool, int, int, str]


class ToolHost(Protocol):
    """What of the filesystem model tool folders read and add to: the mount's state
    (its tree, buffers and namespace lock), where scratch content spills, the rules that
    name tool folders, and the kernel's caches."""

    state: MountState
    spill: ScratchSpill
    rules: ScratchRules
    kernel: KernelNotifier

    def drop_if_freed(self, ino: int) -> None:
        """Forget per-inode state once the inode number is released."""


def _touched(
    now: dict[str, tuple[Node, Signature]], looked: dict[str, tuple[Node, Signature]], path: str
) -> bool:
    """Whether ``path`` was made, opened, changed or removed here since ``looked`` was
    taken."""
    before, found = looked.get(path), now.get(path)
    if before is None or found is None:
        return before is not found
    if found[1] != before[1]:
        return True
    node = found[0]
    return isinstance(node, FileNode) and node.open_count > 0


def _digest(is_dir: bool, mode: int, mtime_ns: int, content: bytes) -> Digest:
    return (is_dir, mode, mtime_ns, hashlib.md5(content, usedforsecurity=False).hexdigest())


class ToolFolders:
    """One workspace's tool folders: loaded at mount, written back as they change."""

    def __init__(self, store: ToolFiles, calls: RunDb) -> None:
        self.store = store
        self.calls = calls
        #: What was last written, by path (signatures of the mount's own nodes).
        self.persisted: dict[str, Signature] = {}
        #: What the table holds as far as this mount knows, and its fingerprint then.
        self.remote: dict[str, Digest] = {}
        self.seen: object = None
        #: A file another mount changed was open here: look again once it is closed.
        self.pending = False
        self.lock = trio.Lock()

    # -- what the mount shows --------------------------------------------------------------

    @staticmethod
    def top(fs: ToolHost, node: Node) -> str | None:
        """The tool folder ``node`` lies in (None: it is not in one)."""
        if not node.scratch:  # all of a tool folder is scratch: no walk to the root
            return None
        current: Node | None = node
        while current is not None and current.parent is not fs.state.tree.root:
            current = current.parent
        if current is None or not current.scratch or not isinstance(current, DirNode):
            return None
        return current.name if current.name in fs.rules.tool_folders else None

    def _current(self, fs: ToolHost) -> dict[str, tuple[Node, Signature]]:
        found: dict[str, tuple[Node, Signature]] = {}
        for name in sorted(fs.rules.tool_folders):
            top = fs.state.tree.root.children.get(name)
            if not isinstance(top, DirNode) or not top.scratch:
                continue
            stack: list[tuple[str, Node]] = [(name, top)]
            while stack:
                path, node = stack.pop()
                if isinstance(node, DirNode):
                    found[path] = (node, ("dir", stat.S_IMODE(node.mode)))
                    stack.extend((f"{path}/{n}", c) for n, c in node.children.items())
                elif isinstance(node, FileNode):
                    buffer = fs.state.buffers.get(node.ino)
                    generation = getattr(buffer, "generation", None)
                    size = len(buffer) if isinstance(buffer, ScratchBuffer) else node.size
                    mode = stat.S_IMODE(node.mode)
                    found[path] = (node, ("file", node.ino, generation, size, mode, node.mtime_ns))
        return found

    # -- loading and writing -------------------------------------------------------------

    async def load(self, fs: ToolHost) -> None:
        """Make the kept tool files and folders (each folder before what is in it)."""
        rows = await self.calls(self.store.load)
        shown = 0
        for row in rows:
            parent_path, _, name = row.path.rpartition("/")
            if row.path.split("/")[0] not in fs.rules.tool_folders:
                continue
            parent = fs.state.tree.resolve(parent_path) if parent_path else fs.state.tree.root
            if not isinstance(parent, DirNode) or (
                parent is not fs.state.tree.root and not parent.scratch
            ):
                log.warning("tool file %r has no folder to go in: not shown", row.path)
                continue
            if name in parent.children:
                log.warning("tool file %r: a document holds that name: not shown", row.path)
                continue
            node: Node
            if row.is_dir:
                node = fs.state.tree.new_dir(name, row.mode, row.mtime_ns)
            else:
                node = fs.state.tree.new_file(name, row.mode, row.mtime_ns)
                node.size = len(row.content)
                fs.state.set_buffer(node, ScratchBuffer(fs.spill, row.content))
                shown += 1
            node.scratch = True
            fs.state.tree.attach(parent, node)
        self.persisted = {path: signature for path, (_, signature) in self._current(fs).items()}
        self.remote = {r.path: _digest(r.is_dir, r.mode, r.mtime_ns, r.content) for r in rows}
        self.seen = await self.calls(self.store.fingerprint)
        if rows:
            log.info("tool folders: %d files kept from earlier mounts", shown)

    async def sync(self, fs: ToolHost) -> None:
        """Write every tool file and folder that changed since the last write (one
        transaction), and remove those that went."""
        async with self.lock:
            current = self._current(fs)
            removed = [path for path in self.persisted if path not in current]
            changed = {
                path: (node, signature)
                for path, (node, signature) in current.items()
                if self.persisted.get(path) != signature
            }
            if not removed and not changed:
                return
            upserts = self._files(fs, changed)
            expected = {p: self.remote[p][3] if p in self.remote else None for p in changed}
            expected.update((p, self.remote[p][3] if p in self.remote else None) for p in removed)
            clashes = await self.calls(self.store.apply_checked, upserts, removed, expected)
            if clashes:  # another mount wrote these since this one last looked
                async with fs.state.ns_lock:
                    for path, (theirs, _) in clashes.items():
                        self._keep_theirs(fs, path, theirs)
                current = self._current(fs)
                changed = {
                    path: (node, signature)
                    for path, (node, signature) in current.items()
                    if self.persisted.get(path) != signature
                }
                upserts = self._files(fs, changed)
                # A removal made here stands once theirs is kept beside it: the name goes,
                # their bytes do not (left in the table, the row came back at every look).
                await self.calls(self.store.apply, upserts, [p for p in removed if p in clashes])
            for path in removed:
                del self.persisted[path]
                self.remote.pop(path, None)
            for path, (_, signature) in changed.items():
                self.persisted[path] = signature
            for written in upserts:
                self.remote[written.path] = _digest(
                    written.is_dir, written.mode, written.mtime_ns, written.content
                )
            log.debug("tool folders: %d written, %d removed", len(upserts), len(removed))

    def persisted_all(self, fs: ToolHost) -> bool:
        """Whether everything shown is written (a failed write leaves differences)."""
        current = self._current(fs)
        return current.keys() == self.persisted.keys() and all(
            self.persisted[path] == signature for path, (_, signature) in current.items()
        )

    @staticmethod
    def _files(fs: ToolHost, changed: dict[str, tuple[Node, Signature]]) -> list[ToolFile]:
        found = []
        for path, (node, _) in changed.items():
            content = b""
            if isinstance(node, FileNode):
                buffer = fs.state.buffers.get(node.ino)
                content = buffer.snapshot() if buffer is not None else b""
            found.append(
                ToolFile(path, node.is_dir, content, stat.S_IMODE(node.mode), node.mtime_ns)
            )
        return found

    def _keep_theirs(self, fs: ToolHost, path: str, theirs: ToolFile) -> None:
        """Another mount's content of a file this mount changed too (a compare-and-swap
        found it): kept beside it as ``<name>.conflict-<time><ext>``, then written."""
        target = conflict_copy(path, datetime.now(UTC))
        copy = target.rpartition("/")[2]
        digest = _digest(False, theirs.mode, theirs.mtime_ns, theirs.content)
        self._take(fs, target, digest, theirs.content)
        log.warning("tool file %r changed in another mount too: theirs kept as %r", path, copy)

    # -- other mounts' changes -----------------------------------------------------------

    async def refresh(self, fs: ToolHost) -> int:
        """Take in what other mounts of the workspace changed in the tool folders since
        this mount last looked (one query when nothing did).  A file changed here and not
        written yet, or open, keeps this mount's content (it is written next: the last
        writer wins).  Returns how many paths changed here."""
        fingerprint = await self.calls(self.store.fingerprint)
        if fingerprint == self.seen and not self.pending:
            return 0
        async with self.lock:
            # Looked at before the table is read: what this mount makes, renames or
            # removes while the read is on its way is its own change, not the other
            # mount's (a temporary renamed away then is not taken back in).
            current = self._current(fs)
            digests = await self.calls(self.store.digests)

            busy: set[str] = set()  # open when looked at: looked at again once closed

            def untouched(path: str) -> bool:
                node, signature = current[path]
                if isinstance(node, FileNode) and node.open_count > 0:
                    busy.add(path)
                    return False
                return self.persisted.get(path) == signature

            # A path changed here too (or open) is left: its next write finds the other
            # mount's content by compare-and-swap and keeps it beside (``sync``).
            moved = [p for p, d in digests.items() if self.remote.get(p) != d]
            moved += [p for p in self.remote if p not in digests]
            arrived = [p for p in moved if p in digests and (p not in current or untouched(p))]
            gone = [p for p in moved if p not in digests and p in current and untouched(p)]
            left = [p for p in moved if p not in arrived and p not in gone and p in current]
            wanted = [p for p in arrived if not digests[p][0]]
            contents = await self.calls(self.store.contents, wanted) if wanted else {}
            async with fs.state.ns_lock:
                # Opened or changed here while this waited for the contents: left, as a
                # path open at the look is (its next write keeps theirs beside it).
                now = self._current(fs)
                moved_here = {p for p in arrived + gone if _touched(now, current, p)}
                busy |= moved_here
                left += [p for p in arrived + gone if p in moved_here]
                arrived = [p for p in arrived if p not in moved_here]
                gone = [p for p in gone if p not in moved_here]
                for path in sorted(arrived):
                    self._take(fs, path, digests[path], contents.get(path, b""))
                for path in sorted(gone, reverse=True):  # what is in a folder before it
                    self._drop(fs, path)
            self._remember(fs, digests, arrived, gone, left)
            self.seen = fingerprint
            # A file open at the look, even if closed since (while this waited for the
            # database), is looked at again: no other change may come to say so.
            self.pending = any(p in busy for p in left)
        if arrived or gone:
            log.info("tool folders: %d changed by another mount", len(arrived) + len(gone))
        return len(arrived) + len(gone)

    def _remember(
        self, fs: ToolHost, digests: dict[str, Digest], arrived: list[str], gone: list[str],
        left: list[str],
    ) -> None:  # fmt: skip
        """After ``refresh`` took others' changes in: what the table holds as far as this
        mount knows, and what it last wrote or took."""
        for path, (_, signature) in self._current(fs).items():
            if path in arrived:
                self.persisted[path] = signature
        for path in gone:
            self.persisted.pop(path, None)
        remote = dict(digests)
        for path in left:  # what this mount last knew stays what its writes expect
            if path in self.remote:
                remote[path] = self.remote[path]
            else:
                remote.pop(path, None)
        self.remote = remote

    def _take(self, fs: ToolHost, path: str, digest: Digest, content: bytes) -> None:
        is_dir, mode, mtime_ns, _ = digest
        parent_path, _, name = path.rpartition("/")
        parent = fs.state.tree.resolve(parent_path) if parent_path else fs.state.tree.root
        root = fs.state.tree.root
        if not isinstance(parent, DirNode) or (parent is not root and not parent.scratch):
            return
        node = parent.children.get(name)
        if node is None:
            made: Node = (
                fs.state.tree.new_dir(name, mode, mtime_ns)
                if is_dir
                else fs.state.tree.new_file(name, mode, mtime_ns)
            )
            made.scratch = True
            if isinstance(made, FileNode):
                made.size = len(content)
                fs.state.set_buffer(made, ScratchBuffer(fs.spill, content))
            fs.state.tree.attach(parent, made)
            fs.kernel.entry(parent.ino, name)
        elif isinstance(node, FileNode) and not is_dir and node.scratch:
            fs.state.set_buffer(node, ScratchBuffer(fs.spill, content))
            node.size = len(content)
            node.mode = stat.S_IFREG | mode
            node.mtime_ns = mtime_ns
            fs.kernel.inode(node.ino)

    def _drop(self, fs: ToolHost, path: str) -> None:
        node = fs.state.tree.resolve(path)
        if node is None or node.parent is None or not node.scratch:
            return
        if isinstance(node, DirNode) and node.children:
            return
        parent = node.parent
        fs.state.tree.detach(node)
        fs.drop_if_freed(node.ino)  # its spilled content too, once nothing holds it open
        fs.kernel.entry(parent.ino, node.name)
