"""The reindex worker: replaces a document's chunks moments after the mount commits it.

A save through the mount commits the content, and a row in ``memfs.reindex_queue``, in one
transaction, and ``close()`` returns as soon as that is durable.  This worker then re-chunks
the queued documents in batches, each in a transaction of its own, exactly as IronClaw's
write does (update the content, then reindex).  Re-chunking costs more than the commit
(PostgreSQL computes each chunk's ``tsvector``), so taking it off ``close()`` makes saves
about twice as fast, and a burst of saves (``cp -r``, ``rsync``) is re-chunked in a few
large transactions while the copy goes on.

Nothing is lost if the daemon dies in between: the queue is a table, and the next mount
(or ``memfs reindex``) finishes it.  Searches through the mount wait for the worker first
(``settled``), so a search right after a save finds what was saved.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from typing import Any
from uuid import UUID

import trio

from memfs.db.calls import RunDb
from memfs.db.capabilities import ReindexQueue
from memfs.errors import FsError

log = logging.getLogger(__name__)


#: Documents per reindex transaction.
BATCH = 64
#: How soon to look again at queued documents another transaction holds.
RETRY_HELD = 0.05
#: How long the mount's saves must pause before their documents are re-chunked (a search
#: cuts it short)...
DEBOUNCE = float(os.environ.get("MEMFS_REINDEX_DEBOUNCE", "0.2"))
#: ...and how long at most a saved document waits for that pause.
DEBOUNCE_MOST = 2.0


#: After ``settled`` timed out, later calls return at once for this long (seconds).
STALL_BACKOFF = 10.0


class Reindexer:
    """One per mount; ``run`` in the daemon's nursery, ``request`` after each commit."""

    def __init__(
        self,
        store: ReindexQueue,
        run_db: RunDb,
        on_indexed: Callable[[UUID], None],
        batch: int = BATCH,
    ) -> None:
        self.store = store
        self.run_db = run_db
        self.on_indexed = on_indexed
        self.batch = batch
        #: True while ``run`` is active: only then may commits leave chunks to the worker.
        self.running = False
        self.indexed = 0
        self.last_error: str | None = None
        self._wake = trio.Event()
        self._hurry = trio.Event()
        #: Set by every request and hurry: the pause being waited for has not come.
        self._stir = trio.Event()
        self._progress = trio.Event()
        self._stalled_until = float("-inf")
        #: Documents this mount queued and has not seen re-chunked yet.
        self._awaited: set[UUID] = set()

    @property
    def waiting(self) -> int:
        """Documents this mount saved whose chunks are not made yet."""
        return len(self._awaited)

    def request(self, doc_ids: Iterable[UUID] = ()) -> None:
        """A commit queued documents (called right after it committed)."""
        self._awaited.update(doc_ids)
        self._wake.set()
        self._stir.set()

    async def settled(self, timeout: float = 5.0) -> bool:
        """Wait until every document requested so far is re-chunked (False on timeout)."""
        awaited = set(self._awaited)
        if not awaited or not self.running:
            return True
        if trio.current_time() < self._stalled_until:
            return False  # it just timed out: searches queued behind it do not wait again
        self._hurry.set()
        self._stir.set()
        with trio.move_on_after(timeout):
            while self.running and awaited & self._awaited:
                await self._progress.wait()
            return True
        self._stalled_until = trio.current_time() + STALL_BACKOFF
        log.warning("searching before the reindex queue is drained (%s)", self.last_error)
        return False

    async def drain(self) -> int:
        """Re-chunk queued documents until none is left that this mount can take.

        Returns how many are still queued (held by another transaction for now).
        """
        while True:
            asked = set(self._awaited)  # a request made during the call may not be seen by it
            batch = await self.run_db(self.store.reindex_queued, self.batch)
            for doc_id in batch.done:
                self.on_indexed(doc_id)
            self.indexed += len(batch.done)
            self._awaited.difference_update(batch.done)
            if not batch.waiting:
                # Nothing queued: those asked for before the call were deleted meanwhile.
                self._awaited.difference_update(asked)
            self._progress.set()
            self._progress = trio.Event()
            if len(batch.done) < self.batch or not batch.waiting:
                # Less than a full batch: what is left was saved again meanwhile or is
                # held elsewhere; the caller waits before looking again.
                waiting: int = batch.waiting
                return waiting

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Finish what earlier mounts left, then follow this mount's commits."""
        self.running = True
        task_status.started()
        delay = 0.5
        pending = True  # a crashed mount may have left work
        try:
            try:
                dropped = await self.run_db(self.store.drop_orphaned_reindex_entries)
                if dropped:
                    log.info("dropped %d reindex entries of deleted documents", dropped)
            except FsError as exc:
                log.warning("could not tidy the reindex queue: %s", exc)
            while True:
                if not pending:
                    await self._wake.wait()
                # Documents left queued were saved again while being chunked (or another
                # mount holds them): wait as for a new request.
                await self._pause()
                self._wake = trio.Event()
                self._hurry = trio.Event()
                try:
                    waiting = await self.drain()
                except Exception as exc:  # a bug or an unexpected database error must not
                    # end the mount: the queue is a table, the work is retried.
                    self.last_error = str(exc)
                    log.warning(
                        "reindexing failed (%s); the queue is kept, retrying",
                        exc,
                        exc_info=not isinstance(exc, FsError),
                    )
                    await trio.sleep(delay)
                    delay = min(delay * 2, 30.0)
                    pending = True
                    continue
                delay = 0.5
                self.last_error = None
                self._progress.set()
                self._progress = trio.Event()
                pending = waiting > 0
        finally:
            self.running = False
            self._progress.set()

    async def _pause(self) -> None:
        """Wait until the mount's saves pause for ``DEBOUNCE`` (at most ``DEBOUNCE_MOST``)
        or a search hurries: re-chunking is CPU work beside every save (Python's chunker,
        the server's ``tsvector``s), and a document saved again meanwhile was chunked for
        nothing, so a burst of saves is chunked once, after it."""
        latest = trio.current_time() + DEBOUNCE_MOST
        while not self._hurry.is_set():
            self._stir = trio.Event()
            wait = min(DEBOUNCE, latest - trio.current_time())
            if wait <= 0:
                return
            with trio.move_on_after(wait) as quiet:
                await self._stir.wait()
            if quiet.cancelled_caught:
                return

    async def finish(self, timeout: float = 30.0) -> None:
        """At unmount: drain what is queued; what is left waits for the next mount."""
        with trio.move_on_after(timeout):
            try:
                while await self.drain():
                    await trio.sleep(RETRY_HELD)
                return
            except FsError as exc:
                self.last_error = str(exc)
        log.warning(
            "documents are still waiting to be re-chunked (%s); the next mount or "
            "`memfs reindex` does it",
            self.last_error or "timed out",
        )
