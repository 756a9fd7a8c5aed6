"""``.search/``: a read-only synthetic directory whose subdirectories are search queries.

``.search`` sits at the mount root but is left out of listings (a ``SyntheticTree``,
``memfs.vfs.extensions``), and it lists only its README, so ``find``, ``grep -r``,
``rsync`` and editors' watchers never run searches.
Looking up any other name under it runs one search (unless the name is a probe such as
``.git`` or ``HEAD``) and makes a query directory of ranked result files with exact sizes
and stable mtimes.  The results are kept ``search_ttl`` seconds, so ``ls`` then ``cat``
see the same files.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

import trio

from memfs.errors import FsError
from memfs.paths import SEARCH_DIR
from memfs.search.directory import (
    README,
    QueryError,
    parse_query,
    render_result,
    result_name,
)
from memfs.search.engine import SearchOutcome
from memfs.tree import FileNode, Node, ScopedFile, SyntheticDir, Tree
from memfs.vfs.base import log

#: How long results are kept when re-chunking had not caught up.
INCOMPLETE_TTL = 2.0


class Searcher(Protocol):
    """What answers ``.search`` queries: IronClaw's legacy hybrid search, or Reborn's."""

    async def search(
        self, query: str, *, limit: int | None = None, mode: str = "hybrid"
    ) -> SearchOutcome: ...


class SearchTree:
    """``.search``: each name looked up under it is a query, answered as a directory."""

    name = SEARCH_DIR

    def __init__(
        self,
        engine: Searcher,
        *,
        ttl: float = 30.0,
        deadline: float = 10.0,
        settled: Callable[[float], Awaitable[bool]] | None = None,
    ) -> None:
        self.engine = engine
        self.ttl = ttl
        #: A search's whole budget: waiting for this mount's re-chunking, embedding the
        #: query, the database legs.  Past it the lookup fails with ETIMEDOUT and a log line.
        self.deadline = deadline
        #: Waits (up to a timeout) until this mount's saves are re-chunked; True if they are.
        self.settled = settled
        self.clock: Callable[[], int] = time.time_ns
        self.monotonic: Callable[[], float] = time.monotonic
        self.root: SyntheticDir | None = None
        self.queries: dict[str, tuple[float, SyntheticDir]] = {}
        #: When (``monotonic``) documents last changed: results found within
        #: ``INCOMPLETE_TTL`` of it are kept only that long (another writer's chunks may
        #: follow its document row, and they make no change-feed event).
        self.changed_at = float("-inf")

    async def fill(self, tree: Tree, root: SyntheticDir) -> None:
        tree.attach(root, tree.new_synthetic_file("README.md", README.encode(), self.clock()))
        self.root = root

    async def make_entry(self, tree: Tree, parent: SyntheticDir, name: str) -> Node | None:
        if parent is not self.root:
            return None
        return await self._query_dir(tree, name)

    async def read(self, node: ScopedFile) -> bytes:
        return node.data

    def volatile(self, node: Node) -> bool:
        """A query directory: the kernel must not cache its name (the daemon decides how
        long results live, and an incomplete result must not stick)."""
        return self.root is not None and node.parent is self.root and node.is_dir

    async def _query_dir(self, tree: Tree, name: str) -> SyntheticDir:
        assert self.root is not None
        try:
            spec = parse_query(name)
        except QueryError as exc:
            log.warning("search %r under .search: %s", name, exc)
            raise FsError(errno.EINVAL, f"search {name!r}: {exc}") from None
        if spec is None:
            log.debug("%r under .search looks like a probe, not a query: not searched", name)
            raise FsError(errno.ENOENT)
        moment = self.monotonic()
        cached = self.queries.get(name)
        if cached is not None and cached[0] > moment:
            return cached[1]
        outcome, complete = await self._settled_search(spec.text, spec.limit, spec.mode)
        cached = self.queries.get(name)  # another lookup may have finished meanwhile
        if cached is not None and cached[0] > moment:
            return cached[1]
        now = self.clock()
        query_dir = tree.new_synthetic_dir(name, now)
        query_dir.parent = self.root  # reachable by lookup only, never listed
        width = max(2, len(str(len(outcome.results))))
        for index, result in enumerate(outcome.results, 1):
            source = tree.docs.get(result.document_id)
            mtime = source.mtime_ns if isinstance(source, FileNode) else now
            data = render_result(outcome, index, result)
            tree.attach(
                query_dir,
                tree.new_synthetic_file(result_name(index, width, result.path), data, mtime),
            )
        self._expire_queries(tree, moment)
        # Results found while this mount's saves still wait to be re-chunked may miss them:
        # kept for a moment only (``ls`` then ``cat``), not for the whole TTL.
        recent = moment - self.changed_at < INCOMPLETE_TTL
        ttl = self.ttl if complete and not recent else min(self.ttl, INCOMPLETE_TTL)
        self.queries[name] = (moment + ttl, query_dir)
        log.info(
            "search %r: %d results (%s)%s",
            spec.text,
            len(outcome.results),
            outcome.describe(),
            "" if complete else "; re-chunking still under way, not kept",
        )
        return query_dir

    async def search(
        self, query: str, *, limit: int | None = None, mode: str = "hybrid"
    ) -> SearchOutcome:
        """IronClaw's search, once this workspace's own saves are re-chunked (as its
        write re-chunks before it returns): what a front's search tool asks."""
        outcome, _ = await self._settled_search(query, limit, mode)
        return outcome

    async def _settled_search(
        self, query: str, limit: int | None, mode: str
    ) -> tuple[SearchOutcome, bool]:
        """The outcome, and whether every save of this workspace was re-chunked first;
        ETIMEDOUT past the deadline."""
        complete = True
        with trio.move_on_after(self.deadline) as deadline:
            if self.settled is not None:  # find what this mount just saved
                complete = await self.settled(self.deadline / 3)
            outcome = await self.engine.search(query, limit=limit, mode=mode)
        if deadline.cancelled_caught:
            log.error("search %r gave no answer within %.1fs", query, self.deadline)
            raise FsError(errno.ETIMEDOUT, f"search {query!r} timed out")
        return outcome, complete

    async def before_listing(self, tree: Tree, directory: SyntheticDir) -> None:
        """Its directories list what they hold: nothing to make first."""

    def documents_changed(self) -> None:
        """Results found before a change may rank or show it wrongly: the next lookup of
        each query searches again (the old directories go at the next expiry pass)."""
        self.changed_at = self.monotonic()
        for name, (_, query_dir) in self.queries.items():
            self.queries[name] = (float("-inf"), query_dir)

    def _expire_queries(self, tree: Tree, moment: float) -> None:
        for name, (expires, query_dir) in list(self.queries.items()):
            if expires <= moment:
                del self.queries[name]
                for child in list(query_dir.children.values()):
                    tree.detach(child)
                tree.detach(query_dir)
