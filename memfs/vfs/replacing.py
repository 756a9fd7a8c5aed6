"""A name replaced: the database side of a file or folder a rename or an editor's save
puts something else in the place of.

A document renamed over another is IronClaw's write of the target's path with the
source's content and its delete of the source, in one transaction (the target keeps its
identity and history); a renamed-away original whose name goes with no new file is the
user's delete of it.  Both ``namespace.Names`` (a rename) and ``saves.SavePatterns`` (a
temporary renamed into place, an original renamed back over another) make them here.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from memfs.db.interface import CommitResult, FileAttrs, Replacement, SaveOptions
from memfs.tree import DirNode, FileNode, Node
from memfs.vfs.base import log
from memfs.vfs.roles import (
    Caching,
    Clocked,
    Describing,
    SaverTables,
    Stateful,
    StoreAccess,
    Telling,
)


class ReplaceLookups(
    Stateful, StoreAccess, Caching, SaverTables, Clocked, Describing, Telling, Protocol
):
    """What replacements ask of the lookups: the store, the mount's state and caches,
    the editors' saves, the clock, names for log lines, what a commit tells, and whether
    the reindexer re-chunks."""

    def reindex_deferred(self) -> bool: ...


class Replacements:
    """Rows replaced by a rename: the target's, or a renamed-away original's."""

    def __init__(self, lookups: ReplaceLookups) -> None:
        #: The store and its database access, the caches, the clock, and what a commit
        #: tells (``ReplaceLookups``).
        self.lookups = lookups
        self.state = lookups.state

    async def replace_target(self, target: Node | None) -> None:
        """The database side of a name being replaced by a rename."""
        if isinstance(target, FileNode):
            if not target.scratch and target.doc_id is not None:
                await self.lookups.db.run_db(
                    self.lookups.store.delete_document, target.doc_id, [], target.updated_at
                )
                self.lookups.cache.drop(target.doc_id)
            else:
                await self.delete_abandoned_origin(target)
        elif isinstance(target, DirNode) and target.explicit and not target.scratch:
            await self.lookups.db.run_db(
                self.lookups.store.delete_directory, self.state.tree.path_of(target), []
            )

    async def delete_abandoned_origin(self, node: Node) -> None:
        """A renamed-away original whose name goes with no new file: the user deleted it."""
        if not isinstance(node, FileNode) or node.origin_doc_id is None or node.extra_links:
            return
        shown = self.state.tree.docs.get(node.origin_doc_id)
        if shown is not None and shown is not node and shown.parent is not None:
            # Another writer's change brought the row back into the tree (the agent wrote
            # it mid-save): it is a live document again, not an abandoned original.
            log.info(
                "%s: the renamed-away original is shown again as %s; keeping it",
                self.lookups.describe_node(node), self.lookups.describe_node(shown),
            )  # fmt: skip
            self.lookups.saves.release(node)
            return
        log.warning(
            "%s was the renamed-away original of a document and no new file took its "
            "place: deleting the document",
            self.lookups.describe_node(node),
        )
        # Only as this mount showed it: another writer's save into the waiting row, not
        # seen here yet, keeps it (the change feed or the next poll shows it again).
        deleted = await self.lookups.db.run_db(
            self.lookups.store.delete_document, node.origin_doc_id, [], node.updated_at
        )
        if not deleted:
            log.warning(
                "%s: the document changed in the database after this mount last showed it; "
                "it is kept", self.lookups.describe_node(node),
            )  # fmt: skip
        self.lookups.cache.drop(node.origin_doc_id)
        self.lookups.saves.release(node)

    async def replace_document(
        self,
        source: FileNode,
        over: Replacement,
        how: SaveOptions,
        merged_text: str | None = None,
    ) -> CommitResult | None:
        """``rename`` of a document over another: IronClaw's write of the target path with
        the source's content, then its delete of the source, in one transaction.  The target
        keeps its identity and history; the file now stands for the target's row.
        ``how.expected`` is the target's version this mount last showed: if another writer
        changed it since, that change is kept (as for any save) and logged.  Content given,
        ``over.source_at`` is the source row's version it stands for (a renamed-away
        original's, as this mount last showed it): the row is deleted only at that version,
        so another writer's change to it meanwhile is kept.  Content None, the stored content
        moves, read under the row's lock.  ``merged_text``: the content is a merge with
        another writer's change, not the source's bytes (the caches then hold the merge).
        ``how.merge``: a target changed since ``how.expected`` is merged under the row lock
        (``memfs.vfs.merging``; ``CommitResult.merged`` is then the text stored).  The
        attributes are the source file's."""
        source_id, replaced, new_path = over.source_id, over.target_id, over.path
        text, source_at = over.content, over.source_at
        if text is None and source.doc_id == source_id:
            cached = self.lookups.cache.get(source_id, source.updated_at)  # spares a round trip
            if cached is not None:
                text, source_at = cached.decode("utf-8"), source.updated_at
        attrs = FileAttrs(source.custom_mode, source.client_mtime_ns or source.mtime_ns)
        over = dataclasses.replace(over, content=text, attrs=attrs, source_at=source_at)
        how = dataclasses.replace(how, index_now=not self.lookups.reindex_deferred())
        result = await self.lookups.db.run_db(self.lookups.store.replace_document, over, how)
        self.lookups.request_reindex(replaced)
        self.lookups.cache.drop(replaced)
        if result is None:
            log.warning(
                "%s vanished from the database during rename", self.lookups.describe_node(source)
            )
            return None
        self.lookups.count_commit(result)
        if result.merged is not None:
            merged_text = result.merged
        if result.conflict:
            log.warning(
                "%r changed in the database after this mount last showed it; the other "
                "change is kept as %s and the renamed file is the current content",
                new_path,
                result.conflict,
            )
        data = self.lookups.cache.get(source_id, source.updated_at) if source.doc_id else None
        if merged_text is not None:
            data = merged_text.encode("utf-8")  # the row is the merge, not the source's bytes
        self.lookups.cache.drop(source_id)
        kernel_current = merged_text is None and source.kernel_version == source.updated_at
        self.state.tree.bind_document(source, result.doc_id)
        source.updated_at = result.updated_at
        if data is not None:
            self.lookups.cache.put(result.doc_id, result.updated_at, data)
        if kernel_current:
            source.kernel_version = result.updated_at
        source.client_mtime_ns = source.mtime_ns
        source.ctime_ns = self.lookups.clock()
        if not self.lookups.reindex_deferred() and result.changed:
            self.lookups.announce(result.doc_id)
        log.debug(
            "%r replaced by a rename: its row %s keeps its identity%s; the source row %s is "
            "deleted",
            new_path, result.doc_id, ", previous content versioned" if result.versioned else "",
            source_id,
        )  # fmt: skip
        return result
