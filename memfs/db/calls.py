"""Running blocking store calls from trio: worker threads, a deadline, a circuit breaker.

Every FUSE request that touches the database goes through ``DatabaseCalls``, which is what
bounds its wait:

* each call runs in a worker thread (at most ``concurrency`` at once) and must finish within
  ``deadline`` seconds, or its connections are cut (``deadline.CallGuard``) and it fails
  with EIO;
* a call that ran out of time opens the breaker: while it is open calls fail at once with
  EIO instead of each waiting out its own deadline, and once a second the next call first
  probes the server with a short ``SELECT 1``; when the probe answers the breaker closes and
  the mount carries on by itself.

So a request waits at most about twice the deadline (its own call, plus a lock held by
another request's call), whatever the server does.  A call that lost its connection (a
server restart) is retried once on a fresh one: every store call is one transaction that
either committed or not.  Server-side timeouts (statement, lock) are not retried.

A statement the server refuses is not an outage: the call fails with an errno that says
what was refused (``refusal_errno``) and the breaker stays closed.  A call whose
transaction carried deferred changes that were refused is made once more without them
(``db.deferred``), so another file's refused change never fails this one.  No database
error reaches the FUSE layer as anything but an ``FsError``.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
import trio
from psycopg_pool import PoolTimeout

from memfs.db.deadline import CallGuard
from memfs.db.deferred import ChangesRefused
from memfs.errors import DatabaseUnavailable, FsError
from memfs.stats import MountStats

log = logging.getLogger("memfs.db")

T = TypeVar("T")

#: How the model's collaborators run a store call (``DatabaseCalls`` or ``with_deadline``).
RunDb = Callable[..., Awaitable[Any]]

#: How long a probe of a server that stopped answering may take.
PROBE_DEADLINE = 2.0
#: How often a call may probe while the breaker is open.
PROBE_INTERVAL = 1.0


class DatabaseCalls:
    """Runs store calls in threads with a deadline; shared by every part of one mount."""

    def __init__(
        self,
        *,
        concurrency: int = 4,
        deadline: float = 12.0,
        probe: Callable[[], object] | None = None,
        reconnect: Callable[[], object] | None = None,
        stats: MountStats | None = None,
    ) -> None:
        self.limiter = trio.CapacityLimiter(concurrency)
        #: Each call's duration and outcome (``memfs stats``).
        self.stats = stats
        self.deadline = deadline
        self._probe = probe
        #: Drops the pool's dead connections (a restarted server left them all dead), so
        #: the one retry after a lost connection gets a live one.
        self._reconnect = reconnect
        self._clock: Callable[[], float] = time.monotonic
        #: When the server last failed to answer in time (None: it answers).
        self.unresponsive_since: float | None = None
        self._next_probe = 0.0

    async def __call__(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await self._call(functools.partial(fn, *args, **kwargs), fn, self.deadline)

    def with_deadline(self, seconds: float) -> RunDb:
        """The same calls (threads, breaker) with another deadline: for background work
        such as re-chunking a huge document, which no FUSE request waits on directly (a
        request that needs its row lock gives up after the lock timeout)."""

        async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
            return await self._call(functools.partial(fn, *args, **kwargs), fn, seconds)

        return run

    async def _call(self, call: Callable[[], T], fn: object, deadline: float) -> T:
        name = getattr(fn, "__name__", "query")
        await self._check_breaker(name)
        for attempt in (1, 2, 3):
            try:
                return await self._run(call, name, deadline)
            except ChangesRefused as exc:
                log.warning("%s carried deferred changes the database refused (%s); "
                            "made again without them", name, exc)  # fmt: skip
                continue
            except (psycopg.Error, PoolTimeout) as exc:
                if not self._again(exc, name, attempt):
                    raise _as_fs_error(exc, name) from exc
                if self._reconnect is not None and _connection_lost(exc):
                    with contextlib.suppress(Exception):
                        await self._run(self._reconnect, "pool check", PROBE_DEADLINE)
        raise DatabaseUnavailable(f"{name}: made three times without an answer")

    @staticmethod
    def _again(exc: Exception, name: str, attempt: int) -> bool:
        """Whether a failed call is made again: a deadlock or serialization failure (the
        transaction rolled back as a whole; a pipeline's error may come as a plain class),
        up to three times; a lost connection, once."""
        if isinstance(exc, psycopg.Error) and _rolled_back(exc):
            if attempt < 3:
                log.info("%s rolled back (%s); made again", name, _one_line(exc))
                return True
            return False
        if isinstance(exc, psycopg.errors.QueryCanceled | psycopg.errors.LockNotAvailable):
            return False
        lost = isinstance(exc, psycopg.OperationalError | PoolTimeout) and _connection_lost(exc)
        if lost and attempt == 1:
            log.warning("lost the database connection during %s; retrying once", name)
            return True
        return False

    async def _run(self, call: Callable[[], T], name: str, deadline: float) -> T:
        if self.stats is None:
            return await self._run_guarded(call, name, deadline)
        started, outcome = self._clock(), "error"
        try:
            result = await self._run_guarded(call, name, deadline)
            outcome = "ok"
            return result
        except DatabaseUnavailable:
            outcome = "timeout"
            raise
        finally:
            self.stats.database_call(self._clock() - started, outcome)

    async def _run_guarded(self, call: Callable[[], T], name: str, deadline: float) -> T:
        guard = CallGuard()
        # Shielded: a call is never abandoned halfway because its caller was cancelled (the
        # mount stopping); it finishes, or its own deadline cuts it off.
        with trio.CancelScope(shield=True), trio.move_on_after(deadline) as scope:
            return await trio.to_thread.run_sync(
                guard.run, call, limiter=self.limiter, abandon_on_cancel=True
            )
        assert scope.cancelled_caught
        guard.abort()
        if self.unresponsive_since is None:
            self.unresponsive_since = self._clock()
            log.error(
                "the database did not answer %s within %.1fs; failing database calls with EIO "
                "until it answers again",
                name,
                deadline,
            )
        self._next_probe = self._clock() + PROBE_INTERVAL
        raise DatabaseUnavailable(f"the database did not answer {name} within {deadline:.1f}s")

    async def _check_breaker(self, name: str) -> None:
        """Fail fast while the server is not answering; probe it now and then."""
        since = self.unresponsive_since
        if since is None:
            return
        now = self._clock()
        if now < self._next_probe or self._probe is None:
            raise DatabaseUnavailable(
                f"{name}: the database has not answered for {now - since:.0f}s"
            )
        self._next_probe = now + PROBE_INTERVAL
        try:
            await self._run(self._probe, "probe", min(PROBE_DEADLINE, self.deadline))
        except (psycopg.Error, PoolTimeout) as exc:
            raise DatabaseUnavailable(f"{name}: the database is still unavailable") from exc
        log.warning("the database answers again after %.0fs", self._clock() - since)
        self.unresponsive_since = None


#: errno of a statement the server refused, by SQLSTATE (exact) or class (two characters).
_REFUSALS = {
    "23": errno.EEXIST,  # integrity: a unique index (another writer's row at the path)
    "54": errno.ENAMETOOLONG,  # program limit: a key too long for an index
    "22": errno.EINVAL,  # data exception
    "25006": errno.EROFS,  # read-only transaction
    "42501": errno.EACCES,  # insufficient privilege
}


def refusal_errno(exc: psycopg.Error) -> int:
    """The errno a refused statement fails its operation with (EIO if none fits)."""
    state = exc.sqlstate or ""
    return _REFUSALS.get(state) or _REFUSALS.get(state[:2]) or errno.EIO


def _as_fs_error(exc: Exception, name: str) -> FsError:
    """What a failed call answers: EIO for an outage (a timeout, a lost server), the
    refusal's errno for a statement the server refused (``refusal_errno``)."""
    if isinstance(exc, psycopg.errors.QueryCanceled | psycopg.errors.LockNotAvailable):
        return DatabaseUnavailable(f"database timed out during {name}: {_one_line(exc)}")
    if isinstance(exc, psycopg.Error) and _rolled_back(exc):
        return DatabaseUnavailable(f"{name} kept rolling back: {_one_line(exc)}")
    if isinstance(exc, psycopg.OperationalError | PoolTimeout):
        return DatabaseUnavailable(f"database unavailable during {name}: {_one_line(exc)}")
    assert isinstance(exc, psycopg.Error)
    code = refusal_errno(exc)
    return FsError(code, f"the database refused {name}: {_one_line(exc)}")


def _rolled_back(exc: psycopg.Error) -> bool:
    """A deadlock or a serialization failure (SQLSTATE class 40): worth making again."""
    return (exc.sqlstate or "").startswith("40")


def _connection_lost(exc: Exception) -> bool:
    """A lost connection (worth one retry on a fresh one), not the server refusing the
    statement (a full disk, too many connections: the same again would fail again)."""
    if isinstance(exc, PoolTimeout):
        return False
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
