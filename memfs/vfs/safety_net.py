"""The safety net under the merge rule: a writer's bytes exactly as saved, kept in memfs's
own storage whenever the content stored is not them.

A merge (``memfs.merge``) chooses between two writers; a fault in its rule, or a base
chosen wrongly, would write a content that lacks a line the saver typed.  So whenever a
save is stored as anything but its own bytes, those bytes are kept (before the write when
the merge was made on a row read first, right after it when the engine merged under the
row lock: in both, before the save is acknowledged to its writer) (``KeptHistory``: memfs's
own table on PostgreSQL, memfs's own file beside IronClaw's libSQL file; never a row of
IronClaw's) for as long as deletions are kept, and listed as
``.versions/<file>/as-saved_<n>_<when>``: a bad merge costs a ``cp``, not the words.
"""

from __future__ import annotations

import logging

from memfs.db.calls import RunDb
from memfs.db.capabilities import KeptHistory
from memfs.errors import FsError

log = logging.getLogger("memfs.vfs")


class SafetyNet:
    """Keeps a save's own bytes where the stored content differs from them."""

    def __init__(self, kept: KeptHistory | None, run_db: RunDb) -> None:
        #: Where the copies go (None: a store without memfs's own tables: none kept).
        self.kept = kept
        self.run_db = run_db
        #: Copies kept by this mount (for ``memfs stats`` and the tests).
        self.copies = 0

    async def keep(self, path: str, ours: str, stored: str, reason: str) -> None:
        """``ours`` (what the writer saved at ``path``) is, or is about to be, stored as
        ``stored``: keep ``ours`` unless they are the same.  A copy that cannot be kept
        is logged and the save goes on (it is the merge's input, not the save)."""
        if ours == stored or self.kept is None:
            return
        try:
            await self.run_db(self.kept.keep_saver_copy, path, ours.encode("utf-8"), reason)
        except FsError as exc:
            log.error("%r: the copy of this save as written could not be kept (%s); the "
                      "merged content is saved", path, exc.reason)  # fmt: skip
            return
        self.copies += 1
        log.info("%r: this save as written is kept (.versions/%s/as-saved_*): %s",
                 path, path, reason)  # fmt: skip
