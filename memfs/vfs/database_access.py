"""The model's way into the database: bounded calls in worker threads, and the background
sender of the namespace changes left to ride on the next transaction (``db.deferred``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar
from uuid import UUID

import trio

from memfs.db.calls import DatabaseCalls
from memfs.db.deferred import Change, Moved, describe
from memfs.db.interface import DocumentStore
from memfs.errors import FsError

log = logging.getLogger("memfs.vfs")

T = TypeVar("T")

#: The bound of a read of the whole workspace no request waits on (``run_db_scan``).
SCAN_DEADLINE = 120.0


class DatabaseAccess:
    """Every database call of the model, and the deferred changes' sender."""

    def __init__(
        self,
        store: DocumentStore,
        calls: DatabaseCalls,
        on_moved: Callable[[dict[UUID, Moved]], None],
    ) -> None:
        self.store = store
        #: Worker threads, a deadline, a breaker.
        self.calls = calls
        #: Told the new row versions of the documents a sent directory rename moved.
        self._on_moved = on_moved
        #: Set when a namespace change is left for the background sender (``send_changes``,
        #: ``db.deferred``); without one running, each change is sent at once.
        self._changes_waiting = trio.Event()
        self._sending_changes = False
        #: Set when the database no longer matches the tree (a deferred change was skipped
        #: or refused): ``OtherWriters.resync_when_diverged`` reloads it.
        self._diverged = trio.Event()

    async def run_db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking store call in a worker thread, bounded (see ``db.calls``).

        A directory rename not sent yet (or not taken in) is settled first: every call of
        the mount then sees the moved rows at their new paths and versions."""
        return await self._run_db(self.calls, fn, *args, **kwargs)

    async def run_db_scan(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``run_db`` for a read of the whole workspace no request waits on (a poll's
        look at every document): bounded by ``SCAN_DEADLINE``, not the requests' bound.
        At 100,000 documents in IronClaw's libSQL file such a read is over a second of
        Python in the daemon, and many times that while requests keep its threads busy:
        it must not count as a database that stopped answering (EIO for every request)."""
        return await self._run_db(self.calls.with_deadline(SCAN_DEADLINE), fn, *args, **kwargs)

    async def _run_db(self, run: Any, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self.store.moving():
            await self.flush_changes()
        try:
            return await run(fn, *args, **kwargs)  # type: ignore[no-any-return]
        finally:
            self._adopt_skipped()
            if self._sending_changes and self.store.changes_waiting():
                self._changes_waiting.set()  # e.g. a refused batch put back: send it

    def diverge(self) -> None:
        """Tell ``until_diverged`` the tree no longer matches the database."""
        self._diverged.set()

    async def until_diverged(self) -> None:
        """Wait until the tree no longer matches the database (a deferred change was not
        made), then reset: the next divergence wakes the next wait."""
        await self._diverged.wait()
        self._diverged = trio.Event()

    async def flush_changes(self) -> None:
        """Send the deferred changes now, wait for any already on their way, and take in
        what directory moves answered (a barrier: ``fsyncdir``, unmount)."""
        await self.calls(self.store.flush_changes)
        self._adopt_moves()

    def deferring(self) -> bool:
        """Whether namespace changes may ride on the next transaction (``db.deferred``):
        only with the background sender running (a model driven directly sends each
        change now) and while the database answers (so a failure reaches the caller)."""
        return self._sending_changes and self.calls.unresponsive_since is None

    def defer(self, *changes: Change) -> None:
        self.store.defer(*changes)
        self._changes_waiting.set()

    async def send_changes(
        self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Background task: send deferred changes as soon as they wait, one batch at a time
        (those that pile up during a round trip go together in the next)."""
        self._sending_changes = True
        task_status.started()
        try:
            while True:
                await self._changes_waiting.wait()
                self._changes_waiting = trio.Event()
                try:
                    await self.flush_changes()
                except FsError as exc:
                    log.warning(
                        "sending removals and moves failed (%s); retrying in 1s", exc.reason
                    )
                    await trio.sleep(1.0)
                    self._changes_waiting.set()
        finally:
            self._sending_changes = False

    def _adopt_moves(self) -> None:
        """Documents moved by a sent directory rename: their rows' new versions; and the
        deferred changes the database did not make (the tree is reloaded)."""
        self._on_moved(self.store.take_moved())
        self._adopt_skipped()

    def _adopt_skipped(self) -> None:
        skipped = self.store.take_skipped()
        for change, reason in skipped:
            log.warning("the %s was not made: %s; showing the database's state again",
                        describe(change), reason)  # fmt: skip
        if skipped:
            self.diverge()
