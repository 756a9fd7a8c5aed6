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

Every change is conditional on the rows as the mount showed them: a removal deletes a row
only at the version the mount showed (another writer's later write stays), and a folder
move happens only if nothing lies at or below its new name but what the mount replaced
(a row another writer put there stays where it is).  A change whose condition fails is
*skipped*: its rows are left alone, the skip is logged and kept for the mount
(``take_skipped``), which then reloads its tree from the database.

A change the database refuses (a unique index, a key too long for an index, bad data) is
not an outage.  The transaction that carried it fails with ``ChangesRefused`` and the
call is made again without it (``db.calls``); the batch is then *suspect* and is sent one
change per transaction by ``flush_changes``, where a change refused on its own is dropped
(logged, and skipped as above), so it is never retried forever and never fails another
file's save twice.

``DeferringStore`` is the one transaction shell both PostgreSQL engines share: a pipelined
transaction that runs the waiting changes first.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol
from uuid import UUID

import psycopg
from psycopg.pq import TransactionStatus

from memfs.db.records import CommitResult, FileAttrs
from memfs.errors import WriteRefused

log = logging.getLogger(__name__)

#: How long a transaction waits for another's batch before giving up (the other's call
#: has its own deadline, well under this).
WAIT_LIMIT = 60.0
#: Why a folder move in parts was not made (``DeferringStore._move_in_parts``).
NEW_NAME_TAKEN = "another writer's rows are at the new name"


class PartsLog(Protocol):
    """Folder moves and batches of removals begun in parts and not finished, kept durably
    apart from the rows they change (memfs's own file beside IronClaw's libSQL file), so a
    mount that stopped halfway finishes them at its next start."""

    def moves_begun(self, workspace: str) -> list[tuple[str, str]]:
        """(old, new) keys of the moves of ``workspace`` begun and not finished."""
        ...

    def begin_move(self, workspace: str, old: str, new: str) -> None:
        """Note a move before its first transaction (committed durably on return)."""
        ...

    def end_move(self, workspace: str, old: str, new: str) -> None:
        """Forget a move once its last transaction committed."""
        ...

    def removals_begun(self, workspace: str) -> list[tuple[str, str, str | None]]:
        """(key, path, version shown) of the removals (documents by id, folders dropped
        or kept by path) of ``workspace`` whose batch began in parts and did not end."""
        ...

    def begin_removals(self, workspace: str, removals: list[tuple[str, str, str | None]]) -> None:
        """Note a batch's removals before its first part (committed durably on return)."""
        ...

    def end_removals(self, workspace: str, keys: list[str]) -> None:
        """Forget removals once the batch's last part committed."""
        ...


class Moved(NamedTuple):
    """A moved document's row version before and after the move.  Only a row still at the
    version the mount showed kept the content the mount has cached; another writer may
    have changed it in between."""

    before: datetime
    after: datetime


@dataclass(frozen=True, slots=True)
class Delete:
    """IronClaw's delete of a document (``unlink``), made only while the row is at
    ``seen``, the version the mount showed (None: whatever it is)."""

    doc_id: UUID
    seen: datetime | None = None
    #: The path the mount showed, for the log.
    path: str = ""


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


def describe(change: Change) -> str:
    """A change as the log names it."""
    if isinstance(change, Delete):
        return f"removal of {change.path or change.doc_id}"
    if isinstance(change, MoveDir):
        return f"move of folder {change.old!r} to {change.new!r}"
    if isinstance(change, KeepDir):
        return f"folder {change.path!r}"
    return f"removal of folder {change.path!r}"


@dataclass
class ChangeBatch:
    """Changes in the order they were made."""

    changes: list[Change] = field(default_factory=list)
    #: A transaction carrying it was refused: send it one change at a time.
    suspect: bool = False

    def __bool__(self) -> bool:
        return bool(self.changes)


@dataclass
class BatchOutcome:
    """What a sent batch answered: documents moved, changes skipped (with why)."""

    moved: dict[UUID, Moved] = field(default_factory=dict)
    skipped: list[tuple[Change, str]] = field(default_factory=list)


class ChangesRefused(Exception):
    """The database refused a transaction that carried deferred changes; they were put
    back as suspect, and the call should be made again (it will not carry them)."""


#: SQLSTATE classes of a refusal (the same again fails again): data exceptions,
#: integrity constraints, program limits (an index row too large).
REFUSAL_CLASSES = ("22", "23", "54")


def is_refusal(exc: BaseException) -> bool:
    state = getattr(exc, "sqlstate", None) or ""
    return isinstance(exc, psycopg.Error) and state[:2] in REFUSAL_CLASSES


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
        self._skipped: list[tuple[Change, str]] = []
        #: Directory moves queued or in flight (``moving`` is asked before every call).
        self._unsent_moves = 0
        #: One set per read under way (``deletions_during``): the documents whose delete
        #: committed while it ran.
        self._watchers: list[set[UUID]] = []

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

    def waiting(self) -> bool:
        """Whether changes wait to be sent (without waiting for a batch in flight)."""
        with self._cond:
            return bool(self._pending)

    def hidden(self) -> set[UUID]:
        """Rows deleted by this mount that the database may still hold."""
        with self._cond:
            return self._hidden()

    def _hidden(self) -> set[UUID]:
        return {c.doc_id for b in self._batches() for c in b.changes if isinstance(c, Delete)}

    @contextmanager
    def deletions_during(self) -> Iterator[set[UUID]]:
        """For a read of rows: the set, filled when the block ends, of the rows it must not
        show, those this mount deleted that its snapshot may still hold.  That is every
        delete waiting or in flight at its end, and every one that committed while it ran
        (queued before the read's snapshot or not): asked only before or only after, a
        delete the sender committed in between slipped through, and the file came back
        (CI, ``test_feed_races``: a feed event's re-read revived a file just removed)."""
        committed: set[UUID] = set()
        with self._cond:
            self._watchers.append(committed)
        try:
            yield committed
        finally:
            with self._cond:
                # By identity: two reads' sets may be equal, and ``remove`` compares them.
                self._watchers = [w for w in self._watchers if w is not committed]
                committed |= self._hidden()

    def _deleted(self, changes: Sequence[Change], outcome: BatchOutcome | None) -> None:
        """Tell the reads under way which deletes committed (a skipped one left its row)."""
        if not self._watchers:
            return
        skipped = {change for change, _ in outcome.skipped} if outcome else set()
        done = {c.doc_id for c in changes if isinstance(c, Delete) and c not in skipped}
        for watcher in self._watchers:
            watcher.update(done)

    def count(self) -> int:
        """Changes not committed yet: waiting, or in a batch in flight."""
        with self._cond:
            return sum(len(batch.changes) for batch in self._batches())

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

    def take(self, *, suspect_too: bool = False) -> ChangeBatch:
        """The pending batch, now in flight (empty if nothing waits, or if it is suspect
        and the caller is not the one to send it change by change); waits first for the
        batch another transaction is carrying."""
        with self._cond:
            self._wait_idle()
            if self._pending.suspect and not suspect_too:
                return ChangeBatch()
            batch, self._pending = self._pending, ChangeBatch()
            if batch:
                self._in_flight = batch
            return batch

    def finish(
        self,
        batch: ChangeBatch,
        *,
        committed: bool,
        outcome: BatchOutcome | None = None,
        refused: bool = False,
    ) -> None:
        """End ``batch``'s flight; a batch that did not commit waits for the next one
        (``refused``: as suspect)."""
        if not batch:
            return
        with self._cond:
            if committed:
                if outcome is not None:
                    self._moved.update(outcome.moved)
                    self._skipped += outcome.skipped
                self._unsent_moves -= _moves(batch.changes)
                self._deleted(batch.changes, outcome)
            else:
                batch.changes.extend(self._pending.changes)
                batch.suspect = batch.suspect or refused or self._pending.suspect
                self._pending = batch
            self._in_flight = None
            self._cond.notify_all()

    def sent(self, batch: ChangeBatch, outcome: BatchOutcome | None) -> None:
        """Part of the batch in flight committed (``flush_changes`` sends it in parts)."""
        with self._cond:
            if outcome is not None:
                self._moved.update(outcome.moved)
                self._skipped += outcome.skipped
            self._unsent_moves -= _moves(batch.changes)
            self._deleted(batch.changes, outcome)

    def release(self) -> None:
        """End a flight whose parts were accounted for (``sent``, ``drop``, ``finish``)."""
        with self._cond:
            self._in_flight = None
            self._cond.notify_all()

    def drop(self, change: Change, reason: str) -> None:
        """A change the database refused on its own: never sent again."""
        with self._cond:
            self._skipped.append((change, reason))
            self._unsent_moves -= _moves([change])

    def take_skipped(self) -> list[tuple[Change, str]]:
        """Changes skipped or dropped since the last call (the mount reloads its tree)."""
        with self._cond:
            skipped, self._skipped = self._skipped, []
            return skipped

    def take_moved(self) -> dict[UUID, Moved]:
        """The versions of every document moved by batches sent so far."""
        with self._cond:
            moved, self._moved = self._moved, {}
            return moved

    def _wait_idle(self) -> None:
        if not self._cond.wait_for(lambda: self._in_flight is None, WAIT_LIMIT):
            raise psycopg.errors.QueryCanceled("changes sent by another call did not end")


def _outcome(
    deletes: Sequence[tuple[list[Delete], Callable[[], set[UUID]]]],
    moves: Sequence[tuple[MoveDir, Callable[[], tuple[bool, dict[UUID, Moved]]]]],
) -> BatchOutcome:
    """What a committed batch's statements answered: removals and moves whose condition
    failed (skipped, with why), and the moved documents' row versions."""
    outcome = BatchOutcome()
    for removals, left in deletes:
        kept = left()
        outcome.skipped += [
            (c, "another writer changed it after this mount showed it")
            for c in removals if c.doc_id in kept
        ]  # fmt: skip
    for move, answer in moves:
        made, moved = answer()
        if not made:
            outcome.skipped.append((move, "another writer's rows are at the new name"))
        outcome.moved.update(moved)
    return outcome


#: Changes sent together, and whether they are one folder move made in parts.
Part = tuple[list[Change], bool]

#: Resolves a sent batch's answers once its transaction committed.
Resolver = Callable[[], BatchOutcome]


@contextmanager
def pipelined_transaction(pool: Any) -> Iterator[Any]:
    """A pooled PostgreSQL connection in one transaction, BEGIN and COMMIT pipelined with
    the statements (the answers are there once the block has ended); rolled back if the
    block raises."""
    with pool.connection() as conn:
        try:
            with conn.pipeline():
                conn.execute("BEGIN")
                yield conn
                conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(psycopg.Error):
                if conn.info.transaction_status != TransactionStatus.IDLE:
                    conn.execute("ROLLBACK")
            raise


#: How the parts log keys a batch's changes (``DeferringStore._note_removals``).
_DOCUMENT, _DROPPED, _KEPT = "", "folder-dropped:", "folder-kept:"


def _log_entry(change: Change) -> tuple[str, str, str | None] | None:
    """(key, path, version shown) of a change the parts log notes (None: not noted)."""
    if isinstance(change, Delete):
        seen = change.seen.isoformat() if change.seen is not None else None
        return _DOCUMENT + str(change.doc_id), change.path, seen
    if isinstance(change, DropDir):
        return _DROPPED + change.path, change.path, None
    if isinstance(change, KeepDir):
        return _KEPT + change.path, change.path, None
    return None


def _end_removals(log_: PartsLog, workspace: str, part: list[Change]) -> None:
    """Forget a part's noted removals once it committed."""
    done = [entry[0] for entry in map(_log_entry, part) if entry is not None]
    if done:
        log_.end_removals(workspace, done)


class DeferringStore:
    """The transaction shell of a PostgreSQL engine: deferred changes ride on the next
    transaction (see the module docstring).  An engine sets ``pool`` and ``deferred`` and
    provides ``_send_changes`` (and ``_begin`` for statements every transaction starts
    with)."""

    pool: Any
    deferred: DeferredChanges
    #: Whether moves a stopped mount left half made were looked for (``_finish_moves``).
    _moves_checked: bool = False

    def _begin(self, conn: Any) -> None:
        """Statements each write transaction starts with (settings, a tag)."""

    # -- what each engine says of its own statements ---------------------------------------

    def _before_changes(self, conn: Any) -> None:
        """Statements a batch of deferred changes starts with (an origin tag)."""

    def _send_deletes(self, conn: Any, deletes: Sequence[Delete]) -> Callable[[], set[UUID]]:
        """IronClaw's delete of each document (versions and chunks with it), made only while
        its row is at the version the mount showed; the result, called after the commit,
        answers which documents were left because another writer had changed them."""
        raise NotImplementedError

    def _keep_directories(self, conn: Any, paths: Sequence[str]) -> None:
        raise NotImplementedError

    def _drop_directory(self, conn: Any, path: str) -> None:
        raise NotImplementedError

    # -- saves of several documents (import, seed, restore) --------------------------------

    def _send_save(
        self, conn: Any, doc_id: UUID | None, path: str, content: str, attrs: FileAttrs
    ) -> Callable[[], CommitResult]:
        """One document's IronClaw save in the caller's transaction, indexed as IronClaw
        indexes it, based on no version the mount showed; the result, called after the
        commit, answers it."""
        raise NotImplementedError

    def _saved(self, result: CommitResult, path: str, content: str) -> None:
        """What the engine remembers of a committed save (nothing by default)."""

    def commit_documents(
        self,
        items: Sequence[tuple[UUID | None, str, str, FileAttrs]],
        keep_dirs: Sequence[str] = (),
    ) -> list[CommitResult]:
        """``commit_document`` for several documents (and directories to keep), in one
        transaction: all of them or none."""
        with self._transaction() as conn:
            if items:
                self._before_changes(conn)
            answers = [self._send_save(conn, d, p, c, a) for d, p, c, a in items]
            self._keep_directories(conn, keep_dirs)
        results = [answer() for answer in answers]
        for (_, path, content, _), result in zip(items, results, strict=True):
            self._saved(result, path, content)
        return results

    def create_directory(self, path: str) -> None:
        """Keep the empty directory ``path`` (with the changes waiting, one transaction)."""
        with self._transaction() as conn:
            self._keep_directories(conn, [path])

    def delete_directory(self, path: str, keep_dirs: Sequence[str] = ()) -> None:
        """Stop keeping ``path``; keep ``keep_dirs`` (its parents, now empty)."""
        with self._transaction() as conn:
            self._drop_directory(conn, path)
            self._keep_directories(conn, keep_dirs)

    def rename_directory(
        self, old_path: str, new_path: str, replaced_dir: str | None, keep_dirs: Sequence[str] = ()
    ) -> dict[UUID, Moved]:
        """Move every document and kept folder below ``old_path`` to ``new_path``, in one
        transaction (a folder too large for one on an engine that bounds them: in parts);
        each moved document's versions before and after.  Refused (ENOTEMPTY, nothing
        moved) if rows the mount does not show lie at or below ``new_path`` (another
        writer's)."""
        if self._fits_one_transaction(old_path):
            with self._transaction() as conn:
                self._before_changes(conn)
                answer = self._send_move(conn, old_path, new_path, replaced_dir)
                self._keep_directories(conn, keep_dirs)
            made, moved = answer()  # answered at the commit
        else:
            found = self._rename_in_parts(old_path, new_path, replaced_dir, keep_dirs)
            made, moved = found is not None, found or {}
        if not made:
            raise WriteRefused(
                errno.ENOTEMPTY, "memfs's rename",
                f"another writer's documents or folders are at {new_path!r}",
            )  # fmt: skip
        return moved

    def _send_move(
        self, conn: Any, old: str, new: str, replaced: str | None
    ) -> Callable[[], tuple[bool, dict[UUID, Moved]]]:
        """A folder's move, made only if nothing the mount does not show lies at or below
        ``new``; the result, called after the commit, answers whether it was made and each
        moved document's row versions."""
        raise NotImplementedError

    def _send_changes(self, conn: Any, batch: ChangeBatch) -> Resolver:
        """The changes ``unlink``, ``rmdir`` and directory renames left for the next
        transaction, in their order, each conditional on the rows as the mount showed them;
        a run of removals goes together (one statement on engines that can).  Returns what
        resolves their answers once the transaction committed."""
        self._before_changes(conn)
        deletes: list[tuple[list[Delete], Callable[[], set[UUID]]]] = []
        moves: list[tuple[MoveDir, Callable[[], tuple[bool, dict[UUID, Moved]]]]] = []
        for kind, run in itertools.groupby(batch.changes, key=type):
            if kind is Delete:
                removals = [c for c in run if isinstance(c, Delete)]
                deletes.append((removals, self._send_deletes(conn, removals)))
                continue
            for change in run:
                if isinstance(change, KeepDir):
                    self._keep_directories(conn, [change.path])
                elif isinstance(change, DropDir):
                    self._drop_directory(conn, change.path)
                elif isinstance(change, MoveDir):
                    answer = self._send_move(conn, change.old, change.new, change.replaced)
                    moves.append((change, answer))

        return functools.partial(_outcome, deletes, moves)

    def _refused(self, exc: Exception) -> BaseException | None:
        """What to raise instead of a database error the engine understands (None: it)."""
        return None

    def _after_transaction(self, committed: bool) -> None:
        """Work an engine leaves until a transaction has ended and its connection is back
        in the pool (on this thread; nothing if it was rolled back)."""

    #: The errors of the engine's database library.
    _db_error: type[Exception] = psycopg.Error

    def _is_refusal(self, exc: Exception) -> bool:
        """Whether the database refused a change's data (not an outage: ``flush_changes``
        sends the batch again one change at a time)."""
        return is_refusal(exc)

    def _open_transaction(self) -> AbstractContextManager[Any]:
        """A connection in a transaction, committed when the block ends, rolled back if it
        raises (``pipelined_transaction`` on PostgreSQL)."""
        return pipelined_transaction(self.pool)

    @contextmanager
    def _transaction(self, *, batch: ChangeBatch | None = None) -> Iterator[Any]:
        """A pooled connection in one pipelined transaction with no round trip of its own,
        carrying the deferred changes first (``batch``: these, whose flight the caller
        owns, ``flush_changes``).

        BEGIN leaves with the first statements and COMMIT with the last ones, before the
        pipeline's closing Sync, so the transaction costs one round trip plus one for each
        answer its statements wait for (a ``fetchone`` in the middle).  psycopg's own
        ``transaction()`` would add two: a Sync after BEGIN and another after COMMIT.
        Whatever ends the block early (an error, a refused write), the transaction is
        rolled back before the connection goes back to the pool.
        """
        carried = self.deferred.take() if batch is None else batch
        if batch is None and carried and self._part_limit() is not None:
            parts = self._parts(carried.changes, one_by_one=carried.suspect)
            if len(parts) > 1 or parts[0][1]:
                # Too much for one transaction of an engine that locks the database: sent
                # in parts first, this transaction carrying none of it.
                self._send_batch(carried, parts)
                carried = ChangeBatch()
        committed = False
        refused = False
        outcome: BatchOutcome | None = None
        try:
            with self._open_transaction() as conn:
                self._begin(conn)
                resolve = self._send_changes(conn, carried) if carried else None
                yield conn
            outcome = resolve() if resolve is not None else None  # answers of the commit
            committed = True
        except self._db_error as exc:
            if carried and batch is None and self._is_refusal(exc):
                refused = True
                raise ChangesRefused(" ".join(str(exc).split())) from exc
            raise self._refused(exc) or exc from None
        finally:
            if batch is None:
                self.deferred.finish(carried, committed=committed, outcome=outcome,
                                     refused=refused)  # fmt: skip
            elif committed:
                self.deferred.sent(carried, outcome)
            if not committed:
                self._after_transaction(False)
        self._after_transaction(True)

    def defer(self, *changes: Change) -> None:
        """Make ``changes`` with the next transaction, in a round trip shared with whatever
        comes next (``flush_changes`` sends them alone).  Until then the store's reads show
        the workspace as if they were made, except rows of moved documents (the mount takes
        their new versions from ``take_moved`` once sent)."""
        self.deferred.add(*changes)

    def moving(self) -> bool:
        """Whether a directory move is not sent yet, or its answer not taken."""
        return self.deferred.moving()

    def take_moved(self) -> dict[UUID, Moved]:
        """The versions of every document moved by changes sent since the last call."""
        return self.deferred.take_moved()

    def take_skipped(self) -> list[tuple[Change, str]]:
        """Changes whose condition failed or that the database refused, since the last
        call: the mount's tree no longer matches the database."""
        return self.deferred.take_skipped()

    def changes_waiting(self) -> bool:
        """Whether deferred changes wait (a refused batch put back: the sender sends it)."""
        return self.deferred.waiting()

    def changes_queued(self) -> int:
        return self.deferred.count()

    def flush_changes(self) -> bool:
        """Send the deferred changes now (nothing if none wait); False if none did.  A
        batch the database refuses is sent again one change per transaction, where a change
        refused on its own is dropped (logged; ``take_skipped``)."""
        batch = self.deferred.take(suspect_too=True)
        if not batch:
            return False
        self._send_batch(batch)
        return True

    # -- bounded transactions (an engine whose write transaction locks the database) -------

    def _part_limit(self) -> int | None:
        """How many documents one transaction may remove or move (None: any number: a
        PostgreSQL transaction locks only the rows it changes)."""
        return None

    def _delete_weight(self) -> int:
        """What a removal costs against ``_part_limit``, in moved documents."""
        return 1

    def _folder_size(self, path: str) -> int:
        """How many documents lie below ``path`` (asked only where ``_part_limit`` is set)."""
        raise NotImplementedError

    def _move_log(self) -> tuple[PartsLog, str] | None:
        """Where folder moves in parts are noted, and this workspace's key there (None:
        not noted; asked only where ``_part_limit`` is set)."""
        return None

    def _log_key(self, path: str) -> str:
        """A folder's path as the move log keeps it."""
        return path

    def _log_path(self, key: str) -> str:
        """A move log key back as the folder's path."""
        return key

    def _folder_taken(self, conn: Any, move: MoveDir) -> bool:
        """Whether anything the mount does not show (other than ``move.replaced``) lies at
        or below ``move.new`` (in the caller's write transaction)."""
        raise NotImplementedError

    def _move_part(self, conn: Any, move: MoveDir, after: str, limit: int,
                   outcome: BatchOutcome) -> str | None:  # fmt: skip
        """Move up to ``limit`` of the folder's documents whose keys sort after ``after``
        (a document whose new path is taken stays, skipped in ``outcome``); the last key
        moved, or None when none was left (the folder's kept folders are moved then)."""
        raise NotImplementedError

    def _move_in_parts(self, move: MoveDir) -> BatchOutcome:
        """A folder move too large for one transaction, ``_part_limit`` documents per
        transaction, so other writers of a file-locked database never wait long: noted in
        the move log first, so a mount stopped halfway finishes it at its next start
        (``_finish_moves``); meanwhile other readers see the folder partly at the old
        path, partly at the new.  Made only if nothing but ``replaced`` lies at or below
        the new path when it begins (a move the log holds is a continuation: what lies
        there is its own)."""
        noted = self._move_log()
        old_key, new_key = self._log_key(move.old), self._log_key(move.new)
        outcome = BatchOutcome()
        if noted is None or (old_key, new_key) not in noted[0].moves_begun(noted[1]):
            with self._transaction(batch=ChangeBatch()) as conn:
                taken = self._folder_taken(conn, move)
            if taken:
                outcome.skipped.append((move, NEW_NAME_TAKEN))
                return outcome
            if noted is not None:
                noted[0].begin_move(noted[1], old_key, new_key)
        after: str | None = ""
        first, limit = True, self._part_limit() or 1
        while after is not None:
            if not first:
                self._let_others_in()
            with self._transaction(batch=ChangeBatch()) as conn:
                if first and move.replaced is not None:
                    self._drop_directory(conn, move.replaced)
                first = False
                after = self._move_part(conn, move, after, limit, outcome)
        if noted is not None:
            noted[0].end_move(noted[1], old_key, new_key)
        return outcome

    def _finish_moves(self) -> None:
        """Finish the folder moves and removals a mount began in parts and did not end
        (once per store, before its first document list)."""
        noted = self._move_log() if self._part_limit() is not None else None
        if self._moves_checked or noted is None or getattr(self.pool, "read_only", False):
            return
        self._moves_checked = True
        for old_key, new_key in noted[0].moves_begun(noted[1]):
            old, new = self._log_path(old_key), self._log_path(new_key)
            log.warning("finishing the move of folder %r to %r that a mount began and did "
                        "not end", old, new)  # fmt: skip
            try:
                outcome = self._move_in_parts(MoveDir(old, new))
            except self._db_error as exc:
                log.warning("the move of %r to %r is not finished yet (%s); the next start "
                            "tries again", old, new, " ".join(str(exc).split()))  # fmt: skip
                continue
            for _, reason in outcome.skipped:
                log.warning("the move of %r to %r left a document: %s", old, new, reason)
        try:
            self._finish_removals(noted)
        except self._db_error as exc:
            log.warning("the removals a mount began are not finished yet (%s); the next "
                        "start tries again", " ".join(str(exc).split()))  # fmt: skip

    def _rename_in_parts(
        self, old_path: str, new_path: str, replaced_dir: str | None, keep_dirs: Sequence[str]
    ) -> dict[UUID, Moved] | None:
        """``rename_directory`` of a folder too large for one transaction: what waits is
        made first, in its order, then the move in parts; None if the new name was taken."""
        self.flush_changes()
        outcome = self._move_in_parts(MoveDir(old_path, new_path, replaced_dir))
        made = all(reason != NEW_NAME_TAKEN for _, reason in outcome.skipped)
        if keep_dirs:
            with self._transaction() as conn:
                self._keep_directories(conn, keep_dirs)
        return outcome.moved if made else None

    def _let_others_in(self) -> None:
        """A pause between two parts as long as the last transaction took (10-100 ms),
        so writers waiting for the database's lock get it: SQLite's busy handler sleeps up
        to 100 ms between its tries, and a next part begun at once after a commit would
        take the lock again before a sleeping writer woke (measured: IronClaw's heartbeat
        put waited 1.2 s through the parts of one folder move and one ``rm -rf``)."""
        taken = getattr(self.pool, "last_hold", 0.0)
        time.sleep(min(max(taken, 0.01), 0.1))

    def _fits_one_transaction(self, folder: str) -> bool:
        limit = self._part_limit()
        return limit is None or self._folder_size(folder) <= limit

    def _parts(self, changes: Sequence[Change], *, one_by_one: bool) -> list[Part]:
        """``changes`` in the transactions that send them, in order: all in one (or one
        each, ``one_by_one``), unless the engine bounds its transactions (``_part_limit``),
        where a run of changes costs at most the limit (a removal counts one, a folder move
        its documents) and a folder larger than the limit moves by ``_move_in_parts`` (a
        part of its own, marked).  Each folder is counted once here."""
        limit = self._part_limit()
        if limit is None:
            return [([c], False) for c in changes] if one_by_one else [(list(changes), False)]
        parts: list[Part] = []
        current: list[Change] = []
        cost = 0
        for change in changes:
            weight = (self._delete_weight() if isinstance(change, Delete)
                      else self._folder_size(change.old) if isinstance(change, MoveDir)
                      else 0)  # fmt: skip
            if current and (one_by_one or cost + weight > limit):
                parts.append((current, False))
                current, cost = [], 0
            if isinstance(change, MoveDir) and weight > limit:
                parts.append(([change], True))
                continue
            current.append(change)
            cost += weight
        if current:
            parts.append((current, False))
        return parts

    def _send_part(self, changes: list[Change], in_parts: bool) -> None:
        if in_parts:  # one folder move too large for a transaction (``_parts``)
            (move,) = changes
            assert isinstance(move, MoveDir)
            self.deferred.sent(ChangeBatch(changes), self._move_in_parts(move))
            return
        with self._transaction(batch=ChangeBatch(changes)):
            pass

    def _send_batch(self, batch: ChangeBatch, parts: list[Part] | None = None) -> None:
        """Send ``batch`` (in flight, owned by the caller; released here) in its parts
        (``_parts``, unless the caller has them); a part the database refuses is sent again
        one change per transaction, where a change refused on its own is dropped (logged;
        ``take_skipped``)."""
        sent = 0
        if parts is None:
            parts = self._parts(batch.changes, one_by_one=batch.suspect)
        noted = self._note_removals(batch, parts)
        try:
            for index, (part, in_parts) in enumerate(parts):
                if index:
                    self._let_others_in()
                try:
                    self._send_part(part, in_parts)
                except self._db_error as exc:
                    if not self._is_refusal(exc):
                        rest = ChangeBatch(batch.changes[sent:], suspect=batch.suspect)
                        self.deferred.finish(rest, committed=False, refused=batch.suspect)
                        raise
                    self._send_refused_part(batch, sent, part, exc)
                sent += len(part)
                if noted is not None:  # made (or refused for good): a next start skips them
                    _end_removals(noted[0], noted[1], part)
        finally:
            self.deferred.release()

    def _send_refused_part(
        self, batch: ChangeBatch, sent: int, part: list[Change], exc: Exception
    ) -> None:
        """A part the database refused, sent again one change per transaction: a change
        refused on its own is dropped; an outage puts the rest of the batch back."""
        for n, change in enumerate(part if len(part) > 1 else []):
            try:
                self._send_part([change], False)
            except self._db_error as again:
                if not self._is_refusal(again):
                    rest = ChangeBatch(batch.changes[sent + n :], suspect=True)
                    self.deferred.finish(rest, committed=False, refused=True)
                    raise
                self._drop(change, again)
        if len(part) == 1:
            self._drop(part[0], exc)

    def _note_removals(
        self, batch: ChangeBatch, parts: list[Part]
    ) -> tuple[PartsLog, str, list[tuple[str, str, str | None]]] | None:
        """A batch's removals (and the folders it drops or keeps) noted in the parts log
        before its first part, where it goes in more than one, each part's forgotten once
        it committed (``_finish_removals`` makes the rest at the next start if the mount
        stops halfway); None where nothing is noted.  A batch that fails for an outage
        leaves them noted: the mount sends the rest again, and a next start finds those
        already made (each removal is conditional on the version the mount showed)."""
        if len(parts) < 2 or self._part_limit() is None:
            return None
        noted = self._move_log()
        entries = [entry for entry in map(_log_entry, batch.changes) if entry is not None]
        if noted is None or all(key.startswith((_DROPPED, _KEPT)) for key, _, _ in entries):
            return None
        noted[0].begin_removals(noted[1], entries)
        return noted[0], noted[1], entries

    def _resumed_removal(self, doc_id: str, path: str, seen: str | None) -> Delete:
        """A noted removal as the engine makes it (``_finish_removals``)."""
        return Delete(UUID(doc_id), datetime.fromisoformat(seen) if seen else None, path)

    def _resumed(self, key: str, path: str, seen: str | None) -> Change:
        if key.startswith(_DROPPED):
            return DropDir(path)
        if key.startswith(_KEPT):
            return KeepDir(path)
        return self._resumed_removal(key.removeprefix(_DOCUMENT), path, seen)

    def _finish_removals(self, noted: tuple[PartsLog, str]) -> None:
        """Make the removals of a batch a mount began in parts and did not end, each only
        while its row is at the version that mount showed (another writer's change since
        stays), with the folders it dropped or kept, in parts as the batch went."""
        entries = noted[0].removals_begun(noted[1])
        if not entries:
            return
        log.warning("finishing %d removals a mount began in parts and did not end",
                    len(entries))  # fmt: skip
        changes = [self._resumed(*entry) for entry in entries]
        for index, (part, _) in enumerate(self._parts(changes, one_by_one=False)):
            if index:
                self._let_others_in()
            with self._transaction(batch=ChangeBatch()) as conn:  # not the mount's own
                resolve = self._send_changes(conn, ChangeBatch(part))
            for change, reason in resolve().skipped:  # answered once it committed
                log.warning("the %s was not finished: %s", describe(change), reason)
            _end_removals(noted[0], noted[1], part)

    def _drop(self, change: Change, exc: Exception) -> None:
        reason = " ".join(str(exc).split())
        log.warning("the database refused the %s (%s): not made; the mount shows "
                    "the database again", describe(change), reason)  # fmt: skip
        self.deferred.drop(change, reason)


__all__ = [
    "NEW_NAME_TAKEN",
    "BatchOutcome",
    "Change",
    "ChangeBatch",
    "ChangesRefused",
    "DeferredChanges",
    "DeferringStore",
    "Delete",
    "DropDir",
    "KeepDir",
    "MoveDir",
    "PartsLog",
    "pipelined_transaction",
]
