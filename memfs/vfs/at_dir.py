"""``.at/<time>/``: the whole workspace as it was at a past moment, read-only.

``<time>`` is ISO 8601: a date (``2026-11-27``, its midnight) or a date and time
(``2026-11-27T14:05``, ``2026-11-27T14:05:09.5+01:00``), UTC unless an offset is given.
``ls .at/`` lists a few useful moments (an hour ago, today's and yesterday's midnight, a
week ago, and a second before each of the last deletions); any other is reached by name.

What each document held then comes from what IronClaw keeps: a save keeps the content it
replaces as a version stamped with the save's time, so a document's content at ``t`` is
its first version kept after ``t``, or its current content if none was.  Documents
created after ``t`` are left out; documents deleted since are taken from memfs's kept
deletions (``memfs undelete``) with their versions.  Each is placed where it was at ``t``
by the moves memfs records (``KeptHistory.moves``); before that record begins (the first
mount of memfs 0.33's schema), at today's path.  IronClaw keeps no version of an empty
content: memfs notes when a document it fills was empty (``KeptHistory.empty_spells``),
and the document is empty at a moment in such a spell.  What cannot be shown: a content
IronClaw kept no version of (``skip_versioning``, a save that left a content the newest
version already held, an empty content another writer filled by SQL), documents deleted
before memfs kept deletions, or past the retention.

The moment's tree is made when first listed or looked into (a few queries, whatever the
workspace's size, and one more per deleted document shown), made again when documents
changed since, and each file's bytes are read when it is opened.  Like ``.search``,
``.at`` is left out of the root listing: ``find`` and ``grep -r`` never walk into it.
"""

from __future__ import annotations

import errno
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple
from uuid import UUID

from memfs.db.calls import RunDb
from memfs.db.capabilities import Deletion, EmptySpell, KeptDocument, KeptHistory, Move
from memfs.db.interface import AsOf, DocumentStore, PastVersion, VersionStore
from memfs.errors import FsError
from memfs.paths import AT_DIR
from memfs.tree import DirNode, FileNode, Node, ScopedFile, SyntheticDir, Tree, to_ns

#: Moments whose tree is kept made (the least recently used goes).
KEPT_MOMENTS = 6
#: Deletions a second before which ``ls .at/`` offers a moment.
LISTED_DELETIONS = 3


def parse_moment(name: str) -> datetime | None:
    """The moment a name under ``.at`` means (None: not a date or date-time)."""
    text = name.strip()
    if not text or not text[0].isdigit():
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def moment_name(moment: datetime) -> str:
    """How ``ls .at/`` names a moment (whole seconds, UTC)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def path_then(path: str, moves: Sequence[Move]) -> str:
    """Where ``path`` was before ``moves`` (oldest first) were made."""
    for move in reversed(moves):
        if path == move.new_path:
            path = move.old_path
        elif move.folder and path.startswith(move.new_path + "/"):
            path = move.old_path + path[len(move.new_path) :]
    return path


def first_after(versions: Sequence[PastVersion], moment: datetime) -> PastVersion | None:
    """The content a document had at ``moment``, if a save replaced it since."""
    later = [v for v in versions if v.created_at > moment]
    return min(later, key=lambda v: v.number) if later else None


@dataclass(frozen=True)
class _Source:
    """Where a file under ``.at/<t>/`` reads its bytes: a live document (by id; its
    content or the first version kept after ``t``), or a kept deletion."""

    moment: datetime
    doc_id: UUID | None = None
    deletion: int | None = None
    #: The document was empty then (``EmptySpell``).
    empty: bool = False


class _Shown(NamedTuple):
    """A file of a moment's tree: its size then, its mtime, where its bytes come from."""

    size: int
    mtime_ns: int
    source: _Source


@dataclass
class _Made:
    node: SyntheticDir
    moment: datetime
    generation: int
    built: bool = False


class AtTree:
    """``.at``: one directory per moment, made on demand."""

    name = AT_DIR

    def __init__(
        self,
        documents: DocumentStore,
        versions: VersionStore,
        kept: KeptHistory | None,
        calls: RunDb,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.documents = documents
        self.versions = versions
        self.kept = kept
        self.calls = calls
        self.clock = clock
        self.root: SyntheticDir | None = None
        self.tree: Tree | None = None
        #: Moments made, by name (most recently used last).
        self.made: OrderedDict[str, _Made] = OrderedDict()
        #: Moment directories, by inode.
        self.moments: dict[int, _Made] = {}
        self.files: dict[int, _Source] = {}
        #: Moves by this mount or others make trees made before stale.
        self.generation = 0
        self._kept_documents: dict[int, KeptDocument | None] = {}

    async def fill(self, tree: Tree, root: SyntheticDir) -> None:
        self.root, self.tree = root, tree

    def volatile(self, node: Node) -> bool:
        return isinstance(node, SyntheticDir) and node.ino in self.moments

    def documents_changed(self) -> None:
        self.generation += 1
        self._kept_documents.clear()

    # -- moments ---------------------------------------------------------------------

    async def before_listing(self, tree: Tree, directory: SyntheticDir) -> None:
        if directory is self.root:
            await self._list_moments(tree, directory)
            return
        made = self.moments.get(directory.ino)
        if made is not None:
            await self._build(tree, made)

    async def _list_moments(self, tree: Tree, root: SyntheticDir) -> None:
        now = datetime.fromtimestamp(self.clock(), UTC).replace(second=0, microsecond=0)
        midnight = now.replace(hour=0, minute=0)
        wanted = {now - timedelta(hours=1), midnight, midnight - timedelta(days=1),
                  now - timedelta(days=7)}  # fmt: skip
        if self.kept is not None:
            deletions: list[Deletion] = await self.calls(self.kept.deletions)
            for deletion in deletions[-LISTED_DELETIONS:]:
                wanted.add(deletion.deleted_at.replace(microsecond=0) - timedelta(seconds=1))
        names = {moment_name(m): m for m in wanted}
        for name, child in list(root.children.items()):
            if name not in names and isinstance(child, SyntheticDir):
                self._drop(tree, name)
        for name, moment in sorted(names.items()):
            if name not in root.children:
                made = self._moment(tree, name, moment)
                tree.attach(root, made.node)

    def _moment(self, tree: Tree, name: str, moment: datetime) -> _Made:
        made = self.made.get(name)
        if made is not None and made.node.ino in tree.inodes:
            self.made.move_to_end(name)
            return made
        node = tree.new_synthetic_dir(name, to_ns(moment))
        made = _Made(node, moment, self.generation)
        self.made[name] = made
        self.moments[node.ino] = made
        while len(self.made) > KEPT_MOMENTS:
            oldest = next(iter(self.made))
            self._drop(tree, oldest)
        return made

    async def make_entry(self, tree: Tree, parent: SyntheticDir, name: str) -> Node | None:
        if parent is self.root:
            moment = parse_moment(name)
            if moment is None or moment > datetime.fromtimestamp(self.clock(), UTC):
                return None  # not a moment, or one still to come (ENOENT: no past there)
            made = self._moment(tree, name, moment)
            if made.node.parent is None:
                made.node.parent = parent  # reachable by lookup only, unless listed
            return made.node
        top = self._moment_of(parent)
        if top is None:
            return None
        await self._build(tree, top)
        return parent.children.get(name) if parent.ino in tree.inodes else None

    def _moment_of(self, node: Node) -> _Made | None:
        current: Node | None = node
        while current is not None and current.parent is not self.root:
            current = current.parent
        return self.moments.get(current.ino) if current is not None else None

    def _drop(self, tree: Tree, name: str) -> None:
        made = self.made.pop(name, None)
        if made is None:
            return
        self._clear(tree, made.node)
        self.moments.pop(made.node.ino, None)
        tree.detach(made.node)

    def _clear(self, tree: Tree, directory: DirNode) -> None:
        for child in list(directory.children.values()):
            if isinstance(child, DirNode):
                self._clear(tree, child)
            self.files.pop(child.ino, None)
            tree.detach(child)

    # -- the tree of one moment ------------------------------------------------------

    async def _build(self, tree: Tree, made: _Made) -> None:
        if made.built and made.generation == self.generation:
            return
        generation = self.generation
        moment = made.moment
        as_of: AsOf = await self.calls(self.versions.as_of, moment)
        moves: list[Move] = await self.calls(self.kept.moves, moment) if self.kept else []
        deletions: list[Deletion] = (
            await self.calls(self.kept.deletions) if self.kept is not None else []
        )
        spells: list[EmptySpell] = (
            await self.calls(self.kept.empty_spells, moment) if self.kept is not None else []
        )
        placed = self._live_files(tree, moment, as_of, moves)
        for deletion in deletions:
            gone = await self._deleted_file(deletion, moment, moves)
            if gone is not None:
                placed.setdefault(gone[0], gone[1])
        for spell in spells:  # IronClaw keeps no version of an empty content
            then = path_then(spell.path, [m for m in moves if m.moved_at < spell.filled_at])
            placed[then] = _Shown(0, to_ns(moment), _Source(moment, empty=True))
        self._clear(tree, made.node)
        for path in sorted(placed):
            self._place(tree, made.node, path, placed[path])
        made.built, made.generation = True, generation

    @staticmethod
    def _live_files(
        tree: Tree, moment: datetime, as_of: AsOf, moves: Sequence[Move]
    ) -> dict[str, _Shown]:
        """The documents in the tree that existed at ``moment``, by their path then."""
        placed: dict[str, _Shown] = {}
        for node in list(tree.docs.values()):
            if node.parent is None or node.scratch or node.doc_id is None:
                continue
            now_path = tree.path_of(node)
            if now_path in as_of.born_after:
                continue
            version = as_of.earliest.get(now_path)
            shown = (
                _Shown(version.size, to_ns(moment), _Source(moment, doc_id=node.doc_id))
                if version is not None
                else _Shown(node.size, node.mtime_ns, _Source(moment, doc_id=node.doc_id))
            )
            placed.setdefault(path_then(now_path, moves), shown)
        return placed

    async def _deleted_file(
        self, deletion: Deletion, moment: datetime, moves: Sequence[Move]
    ) -> tuple[str, _Shown] | None:
        """A kept deleted document, if it existed at ``moment``, with its path then."""
        if deletion.deleted_at <= moment:
            return None
        if deletion.created_at is not None and deletion.created_at > moment:
            return None
        document = await self._kept_document(deletion.id)
        if document is None:
            return None
        past = first_after(document.versions, moment)
        size = len((past.content if past else document.content).encode("utf-8"))
        before = [m for m in moves if m.moved_at < deletion.deleted_at]
        shown = _Shown(size, to_ns(moment), _Source(moment, deletion=deletion.id))
        return path_then(deletion.path, before), shown

    def _place(self, tree: Tree, top: SyntheticDir, path: str, shown: _Shown) -> None:
        *folders, name = path.split("/")
        directory: DirNode = top
        for folder in folders:
            child = directory.children.get(folder)
            if child is None:
                child = tree.new_synthetic_dir(folder, top.mtime_ns)
                tree.attach(directory, child)
            if not isinstance(child, SyntheticDir):
                return  # a file and a folder at one name then: the folder's way is kept
            directory = child
        if name in directory.children:
            return
        file = tree.new_scoped_file(name, shown.size, shown.mtime_ns)
        tree.attach(directory, file)
        self.files[file.ino] = shown.source

    async def _kept_document(self, deletion: int) -> KeptDocument | None:
        if deletion not in self._kept_documents and self.kept is not None:
            self._kept_documents[deletion] = await self.calls(self.kept.kept_document, deletion)
        return self._kept_documents.get(deletion)

    async def read(self, node: ScopedFile) -> bytes:
        source = self.files.get(node.ino)
        if source is None or source.empty:
            return b""
        if source.deletion is not None:
            document = await self._kept_document(source.deletion)
            if document is None:
                return b""
            past = first_after(document.versions, source.moment)
            return (past.content if past else document.content).encode("utf-8")
        return await self._live(source)

    async def _live(self, source: _Source) -> bytes:
        """A live document's content at the moment, looked up anew at each open: a save
        since keeps the content it replaced as a version."""
        tree = self.tree
        node = tree.docs.get(source.doc_id) if tree is not None and source.doc_id else None
        if tree is None or not isinstance(node, FileNode) or node.parent is None:
            # Deleted or replaced since the moment's tree was made: the kernel looks the
            # name up again, in the tree made anew (where a deletion is a kept one).
            self.generation += 1
            raise FsError(errno.ESTALE, "the document changed since this tree was made")
        path = tree.path_of(node)
        kept = await self.calls(self.versions.versions, path)
        later = [v for v in kept if v.created_at > source.moment]
        if later:
            first = min(later, key=lambda v: v.number)
            data = await self.calls(self.versions.version_content, path, first.number)
            if data is not None:
                return bytes(data)
        found = await self.calls(self.documents.read_content, node.doc_id)
        return bytes(found.data) if found is not None else b""
