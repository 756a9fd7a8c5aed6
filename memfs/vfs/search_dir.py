"""``.search/``: a read-only synthetic directory whose subdirectories are search queries.

``.search`` sits at the mount root but is left out of listings, and it lists only its
README, so ``find``, ``grep -r``, ``rsync`` and editors' watchers never run searches.
Looking up any other name under it runs one search (unless the name is a probe such as
``.git`` or ``HEAD``) and makes a query directory of ranked result files with exact sizes
and stable mtimes.  The results are kept ``search_ttl`` seconds, so ``ls`` then ``cat``
see the same files.
"""

from __future__ import annotations

import errno

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
from memfs.search.engine import SearchEngine
from memfs.tree import FileNode, Node, SyntheticDir
from memfs.vfs.base import log
from memfs.vfs.namespace import NamespaceMixin

#: How long results are kept when re-chunking had not caught up.
INCOMPLETE_TTL = 2.0


class SearchMixin(NamespaceMixin):
    """Adds ``.search`` to the namespace when a search engine is attached."""

    search: SearchEngine | None = None
    search_root: SyntheticDir | None = None
    search_ttl: float = 30.0
    #: A search's whole budget: waiting for this mount's re-chunking, embedding the query,
    #: the database legs.  Past it the lookup fails with ETIMEDOUT and a log line.
    search_deadline: float = 10.0

    def attach_search(
        self, engine: SearchEngine, ttl: float = 30.0, deadline: float = 10.0
    ) -> None:
        self.search = engine
        self.search_ttl = ttl
        self.search_deadline = deadline
        self.queries: dict[str, tuple[float, SyntheticDir]] = {}

    async def load(self) -> None:
        await super().load()
        if self.search is not None:
            now = self.clock()
            root = self.tree.new_synthetic_dir(SEARCH_DIR, now)
            self.tree.attach(self.tree.root, root)
            readme = self.tree.new_synthetic_file("README.md", README.encode(), now)
            self.tree.attach(root, readme)
            self.unlisted.add(root.ino)
            self.search_root = root

    async def lookup(self, parent_ino: int, name: str) -> Node:
        root = self.search_root
        if root is not None and parent_ino == root.ino and name not in root.children:
            if name in (".", ".."):
                return self._lookup_local(parent_ino, name)
            node = await self._query_dir(name)
            node.lookups += 1
            return node
        return self._lookup_local(parent_ino, name)

    async def _query_dir(self, name: str) -> SyntheticDir:
        assert self.search is not None and self.search_root is not None
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
        complete = True
        with trio.move_on_after(self.search_deadline) as deadline:
            if self.reindexer is not None:  # find what this mount just saved
                complete = await self.reindexer.settled(timeout=self.search_deadline / 3)
            outcome = await self.search.search(spec.text, limit=spec.limit, mode=spec.mode)
        if deadline.cancelled_caught:
            log.error("search %r gave no answer within %.1fs", spec.text, self.search_deadline)
            raise FsError(errno.ETIMEDOUT, f"search {spec.text!r} timed out")
        cached = self.queries.get(name)  # another lookup may have finished meanwhile
        if cached is not None and cached[0] > moment:
            return cached[1]
        now = self.clock()
        query_dir = self.tree.new_synthetic_dir(name, now)
        query_dir.parent = self.search_root  # reachable by lookup only, never listed
        width = max(2, len(str(len(outcome.results))))
        for index, result in enumerate(outcome.results, 1):
            source = self.tree.docs.get(result.document_id)
            mtime = source.mtime_ns if isinstance(source, FileNode) else now
            data = render_result(outcome, index, result)
            node = self.tree.new_synthetic_file(result_name(index, width, result.path), data, mtime)
            self.tree.attach(query_dir, node)
        self._expire_queries(moment)
        # Results found while this mount's saves still wait to be re-chunked may miss them:
        # kept for a moment only (``ls`` then ``cat``), not for the whole TTL.
        ttl = self.search_ttl if complete else min(self.search_ttl, INCOMPLETE_TTL)
        self.queries[name] = (moment + ttl, query_dir)
        log.info(
            "search %r: %d results (%s)%s",
            spec.text,
            len(outcome.results),
            outcome.describe(),
            "" if complete else "; re-chunking still under way, not kept",
        )
        return query_dir

    def is_search_query(self, node: Node) -> bool:
        """A query directory: the kernel must not cache its name (the daemon decides how
        long results live, and an incomplete result must not stick)."""
        return self.search_root is not None and node.parent is self.search_root

    def _expire_queries(self, moment: float) -> None:
        for name, (expires, query_dir) in list(self.queries.items()):
            if expires <= moment:
                del self.queries[name]
                for child in list(query_dir.children.values()):
                    self.tree.detach(child)
                self.tree.detach(query_dir)
