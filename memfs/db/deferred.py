"""Deletes that ride on the next transaction: ``rm -rf`` in a handful of round trips.

An ``unlink`` takes the document out of the mount's tree at once (every process on this
mount sees it gone) and leaves the row's delete here.  The next write transaction of the
store, whatever it is, runs the waiting deletes first, in the same round trip; the mount's
flusher sends them on its own right away when nothing else comes.  So a tree of N files in
D folders costs about D round trips to remove instead of N, and other writers see each
delete about one round trip later than they would have.

One batch is in flight at a time: a transaction that starts while another carries deletes
waits for it to end (so a save never races a delete of the same path), then takes what
is pending.  A batch whose transaction failed goes back to the queue (deleting by id is
idempotent, so a batch that did commit but lost its answer is simply deleted again).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from uuid import UUID

import psycopg

#: How long a transaction waits for another's batch before giving up (the other's call
#: has its own deadline, well under this).
WAIT_LIMIT = 60.0


@dataclass
class DeleteBatch:
    """Documents to delete, folders to keep (emptied by those deletes) and folders to
    forget (removed by ``rmdir``).  Sent in that order: a folder emptied and then removed
    in one batch is gone; one removed and made again never shares a batch (the ``mkdir``
    or the save that makes it again is a transaction, which sends the batch first)."""

    doc_ids: list[UUID] = field(default_factory=list)
    keep_dirs: list[str] = field(default_factory=list)
    drop_dirs: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.doc_ids or self.keep_dirs or self.drop_dirs)

    def extend(self, other: DeleteBatch) -> None:
        self.doc_ids.extend(other.doc_ids)
        self.keep_dirs.extend(other.keep_dirs)
        self.drop_dirs.extend(other.drop_dirs)


class DeferredDeletes:
    """The queue of deletes not sent yet, shared by the worker threads of one store."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending = DeleteBatch()
        self._in_flight: DeleteBatch | None = None

    def add(self, doc_id: UUID | None, keep_dirs: list[str], drop_dir: str | None = None) -> None:
        with self._cond:
            if doc_id is not None:
                self._pending.doc_ids.append(doc_id)
            self._pending.keep_dirs.extend(keep_dirs)
            if drop_dir is not None:
                self._pending.drop_dirs.append(drop_dir)

    def pending(self) -> bool:
        """Whether deletes wait to be sent (after any batch in flight has ended)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._in_flight is None, WAIT_LIMIT):
                raise psycopg.errors.QueryCanceled("deletes sent by another call did not end")
            return bool(self._pending)

    def hidden(self) -> set[UUID]:
        """Rows deleted by this mount that the database may still hold."""
        with self._cond:
            ids = set(self._pending.doc_ids)
            if self._in_flight is not None:
                ids.update(self._in_flight.doc_ids)
            return ids

    def directories(self, stored: set[str]) -> set[str]:
        """``stored`` (the kept folders the database holds) as they will be once every
        batch is sent."""
        with self._cond:
            batches = (
                [self._pending] if self._in_flight is None else [self._in_flight, self._pending]
            )
            result = set(stored)
            for batch in batches:
                result.update(batch.keep_dirs)
                result.difference_update(batch.drop_dirs)
            return result

    def take(self) -> DeleteBatch:
        """The pending batch, now in flight (empty if nothing waits); waits first for the
        batch another transaction is carrying."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._in_flight is None, WAIT_LIMIT):
                raise psycopg.errors.QueryCanceled("deletes sent by another call did not end")
            batch, self._pending = self._pending, DeleteBatch()
            if batch:
                self._in_flight = batch
            return batch

    def finish(self, batch: DeleteBatch, *, committed: bool) -> None:
        """End ``batch``'s flight; a batch that did not commit waits for the next one."""
        if not batch:
            return
        with self._cond:
            if not committed:
                batch.extend(self._pending)
                self._pending = batch
            self._in_flight = None
            self._cond.notify_all()
