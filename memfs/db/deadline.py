"""Client-side deadlines for blocking database calls.

PostgreSQL enforces ``statement_timeout`` itself, which covers slow statements but not a
server that stopped answering (frozen by SIGSTOP, swapped out, a partitioned network with
no RST): the worker thread then waits in ``recv`` for as long as the server is silent, and
the FUSE request behind it sits in D state.  Over TCP the connection's keepalives and
``tcp_user_timeout`` eventually notice; over a Unix socket nothing does.

So each blocking call runs under a ``CallGuard``.  The pool (``WatchedPool``) attaches to
the guard every connection the call checks out; when the caller's deadline passes it calls
``abort``, which shuts the connections' sockets down.  The blocked ``recv`` returns at
once, psycopg raises ``OperationalError``, the transaction is rolled back by the server
when it reads the closed socket, and the pool discards the broken connection.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

T = TypeVar("T")

_local = threading.local()


class CallGuard:
    """The connections one blocking call holds, so another thread can cut them off."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conns: list[psycopg.Connection[Any]] = []
        self.aborted = False

    def run(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in this (worker) thread with the guard watching its connections."""
        _local.guard = self
        try:
            return fn()
        finally:
            _local.guard = None

    def attach(self, conn: psycopg.Connection[Any]) -> None:
        with self._lock:
            self._conns.append(conn)
            if self.aborted:
                _sever(conn)

    def detach(self, conn: psycopg.Connection[Any]) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._conns.remove(conn)

    def abort(self) -> None:
        """Cut off every connection the call holds (now or later)."""
        with self._lock:
            self.aborted = True
            for conn in self._conns:
                _sever(conn)


def _not_a_chain_end(record: logging.LogRecord) -> bool:
    """psycopg_pool warns when a chain of attempts gives up; here that is every 2 s of an
    outage and not news (each failed attempt is logged already)."""
    return not record.getMessage().startswith("reconnection attempt in pool")


logging.getLogger("psycopg.pool").addFilter(_not_a_chain_end)


def _try_again_now(pool: ConnectionPool[Any]) -> None:
    """A chain of attempts gave up (the pool counts one connection less): ``check`` grows
    the pool back at once, starting a new chain from the shortest wait."""
    if not pool.closed:
        pool.check()


def current_guard() -> CallGuard | None:
    guard: CallGuard | None = getattr(_local, "guard", None)
    return guard


def _sever(conn: psycopg.Connection[Any]) -> None:
    """Shut the connection's socket down under libpq's feet (the fd stays libpq's)."""
    try:
        fd = conn.pgconn.socket
    except psycopg.OperationalError:
        return  # already closed
    with contextlib.suppress(OSError):
        dup = socket.socket(fileno=os.dup(fd))
        try:
            dup.shutdown(socket.SHUT_RDWR)
        finally:
            dup.close()


#: How long one chain of psycopg_pool's reconnection attempts runs before a fresh one
#: starts. Its backoff doubles the wait after each failure (1, 2, 4, 8 s...): after a
#: server restart of some seconds, a save that began while it was down would still wait
#: for the next attempt, past its own 10 s bound, though the server was up. Chains of
#: this length keep the gap between attempts at about a second.
RECONNECT_CHAIN_SECONDS = 2.0


class WatchedPool(ConnectionPool[psycopg.Connection[tuple[Any, ...]]]):
    """A pool that tells the running call's guard which connections it hands out, and
    that never waits more than two seconds between tries to reach a server that is down.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("reconnect_timeout", RECONNECT_CHAIN_SECONDS)
        kwargs.setdefault("reconnect_failed", _try_again_now)
        super().__init__(*args, **kwargs)

    def getconn(self, timeout: float | None = None) -> psycopg.Connection[tuple[Any, ...]]:
        conn = super().getconn(timeout)
        guard = current_guard()
        if guard is not None:
            guard.attach(conn)
        return conn

    def putconn(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        guard = current_guard()
        if guard is not None:
            guard.detach(conn)
        super().putconn(conn)
