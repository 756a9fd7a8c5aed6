"""Namespace changes that ride on the next transaction: ``rm -rf`` and ``mv dir`` without a
round trip each.

``unlink``, ``rmdir`` and the rename of a directory change the mount's tree at once (every
process on this mount sees the result) and leave their database side here, in order.  The
next write transaction of the store, whatever it is, runs the waiting changes first, in
the same round trip; the mount's sender sends them on their own right away when nothing
else comes.  So a tree of N files in D folders costs a handful of round trips to remove
instead of N + D, a directory rename returns before PostgreSQL has rewritten the paths of
every document below it, and other writers see each change about one round trip later.

One batch is in flight at a time: a transaction that starts while another carries changes
waits for it to end (so a save never races a delete or a move), then takes what is
pending.  A batch whose transaction failed goes back to the head of the queue (every
change is by id or by path and can run twice).  A directory move's answer (each moved
document's ``updated_at`` before and after) is kept until the mount takes it
(``take_moved``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple
from uuid import UUID

import psycopg

#: How long a transaction waits for another's batch before giving up (the other's call
#: has its own deadline, well under this).
WAIT_LIMIT = 60.0


class Moved(NamedTuple):
    """A moved document's row version before and after the move.  Only a row still at the
    version the mount showed kept the content the mount has cached; another writer may
    have changed it in between."""

    before: datetime
    after: datetime


@dataclass(frozen=True, slots=True)
class Delete:
    """IronClaw's delete of a document (``unlink``)."""

    doc_id: UUID


@dataclass(frozen=True, slots=True)
class KeepDir:
    """A folder memfs keeps (``mkdir``, or one emptied by a removal)."""

    path: str


@dataclass(frozen=True, slots=True)
class DropDir:
    """A kept folder removed (``rmdir``)."""

    path: str


@dataclass(frozen=True, slots=True)
class MoveDir:
    """A directory renamed: every document and kept folder below ``old`` goes to ``new``
    (``replaced``: an empty kept folder the rename takes the place of)."""

    old: str
    new: str
    replaced: str | None = None


Change = Delete | KeepDir | DropDir | MoveDir


@dataclass
class ChangeBatch:
    """Changes in the order they were made."""

    changes: list[Change] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.changes)


def _moves(changes: Sequence[Change]) -> int:
    return sum(isinstance(change, MoveDir) for change in changes)


def _move(path: str, old: str, new: str) -> str:
    if path == old:
        return new
    if path.startswith(old + "/"):
        return new + path[len(old) :]
    return path


class DeferredChanges:
    """The queue of changes not sent yet, shared by the worker threads of one store."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending = ChangeBatch()
        self._in_flight: ChangeBatch | None = None
        self._moved: dict[UUID, Moved] = {}
        #: Directory moves queued or in flight (``moving`` is asked before every call).
        self._unsent_moves = 0

    def add(self, *changes: Change) -> None:
        with self._cond:
            self._pending.changes.extend(changes)
            self._unsent_moves += _moves(changes)

    def _batches(self) -> list[ChangeBatch]:
        return [b for b in (self._in_flight, self._pending) if b is not None]

    def pending(self) -> bool:
        """Whether changes wait to be sent (after any batch in flight has ended)."""
        with self._cond:
            self._wait_idle()
            return bool(self._pending)

    def hidden(self) -> set[UUID]:
        """Rows deleted by this mount that the database may still hold."""
        with self._cond:
            return {c.doc_id for b in self._batches() for c in b.changes if isinstance(c, Delete)}

    def moving(self) -> bool:
        """Whether a directory move is not sent yet, or sent and its answer not taken."""
        with self._cond:
            return self._unsent_moves > 0 or bool(self._moved)

    def directories(self, stored: set[str]) -> set[str]:
        """``stored`` (the kept folders the database holds) as they will be once every
        batch is sent."""
        with self._cond:
            result = set(stored)
            for batch in self._batches():
                for change in batch.changes:
                    if isinstance(change, KeepDir):
                        result.add(change.path)
                    elif isinstance(change, DropDir):
                        result.discard(change.path)
                    elif isinstance(change, MoveDir):
                        if change.replaced is not None:
                            result.discard(change.replaced)
                        result = {_move(p, change.old, change.new) for p in result}
            return result

    def take(self) -> ChangeBatch:
        """The pending batch, now in flight (empty if nothing waits); waits first for the
        batch another transaction is carrying."""
        with self._cond:
            self._wait_idle()
            batch, self._pending = self._pending, ChangeBatch()
            if batch:
                self._in_flight = batch
            return batch

    def finish(
        self, batch: ChangeBatch, *, committed: bool, moved: dict[UUID, Moved] | None = None
    ) -> None:
        """End ``batch``'s flight; a batch that did not commit waits for the next one."""
        if not batch:
            return
        with self._cond:
            if committed:
                self._moved.update(moved or {})
                self._unsent_moves -= _moves(batch.changes)
            else:
                batch.changes.extend(self._pending.changes)
                self._pending = batch
            self._in_flight = None
            self._cond.notify_all()

    def take_moved(self) -> dict[UUID, Moved]:
        """The versions of every document moved by batches sent so far."""
        with self._cond:
            moved, self._moved = self._moved, {}
            return moved

    def _wait_idle(self) -> None:
        if not self._cond.wait_for(lambda: self._in_flight is None, WAIT_LIMIT):
            raise psycopg.errors.QueryCanceled("changes sent by another call did not end")


__all__ = [
    "Change",
    "ChangeBatch",
    "DeferredChanges",
    "Delete",
    "DropDir",
    "KeepDir",
    "MoveDir",
]
