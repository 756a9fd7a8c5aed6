"""A save that began while the server was down goes through once it is back.

Found by the embedded-server restart test on a loaded machine (CI, 1 run in 1; 4 of 4 with two
busy loops beside it): the server took 6.5 s to come back, and a save begun while it was down
still answered EIO after its 10 s bound, 3.5 s after the server was up. psycopg_pool's
reconnection attempts double their wait after each failure (1, 2, 4, 8 s...), so the pool's
next attempt came after the save had given up. The pool now starts a fresh chain of attempts
every few seconds (``memfs.db.deadline.RECONNECT_CHAIN_SECONDS``): never more than about a
second between tries.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import trio

from memfs.db import Database, Scope
from memfs.tree import ROOT_INODE
from memfs.vfs import Filesystem
from tests.conftest import behind_proxy
from tests.model.test_round_trips import write_file
from tests.netproxy import DelayProxy


@pytest.fixture
def one_connection(pg_server: Any, database_url: str) -> Iterator[tuple[Database, DelayProxy]]:
    """The test's database behind a proxy, through a pool of one connection (so that only
    the pool's own reconnection attempts, never a second connection grown for a waiting
    call, can reach the server)."""
    with behind_proxy(pg_server, database_url, delay=0.0, pool_size=1) as found:
        yield found


async def test_a_save_begun_during_an_outage_lands_soon_after_the_server_is_back(
    one_connection: tuple[Database, DelayProxy], sql_conn: psycopg.Connection[Any]
) -> None:
    db, proxy = one_connection
    fs = Filesystem(db.store(Scope("default")), uid=1000, gid=1000)
    await fs.load()
    proxy.refuse()  # the server goes down: the pool finds its connection broken
    with pytest.raises(psycopg.OperationalError), db.pool.connection() as conn:
        conn.execute("SELECT 1")
    began = time.monotonic()
    # With a doubling backoff the pool's attempts come at about 0, 1, 3, 7 and 15 s (each
    # within 10 %): a save begun at 3.5 s waits until 13.5 s, and the server back at
    # 7.8 s would see no attempt in time.
    await trio.sleep(3.5)
    saved: list[float] = []

    async def save() -> None:
        await write_file(fs, ROOT_INODE, "during.md", b"written while the server was down\n")
        saved.append(time.monotonic() - began)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(save)
        await trio.sleep(7.8 - 3.5)
        proxy.accept_again()
        back = time.monotonic() - began
    assert saved, "the save did not return"
    assert saved[0] - back < 2.5, f"saved {saved[0] - back:.1f} s after the server was back"
    row = sql_conn.execute(
        "SELECT content FROM memory_documents WHERE path = 'during.md'"
    ).fetchone()
    assert row == ("written while the server was down\n",)
