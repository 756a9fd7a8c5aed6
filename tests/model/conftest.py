"""Fixtures for model tests that run on both layouts (``tests/engines.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from memfs.config import Settings
from memfs.db import open_database
from memfs.db.reborn.layout import RebornScope
from memfs.db.reborn.store import RebornStore
from memfs.db.scoped import Scope
from memfs.vfs import Filesystem, OtherWriters
from tests.engines import ENGINES, Engine


@pytest.fixture(params=ENGINES, ids=str)
def engine(request: pytest.FixtureRequest, database_url: str) -> Engine:
    chosen: Engine = request.param
    chosen.prepare(database_url)
    return chosen


def _filesystem(engine: Engine, database: Any) -> Filesystem:
    if engine.name == "legacy":
        store: Any = database.store(Scope("default"))
    else:
        store = RebornStore(database.pool, RebornScope("reborn-cli", "default", "reborn-cli-agent"))
    return Filesystem(store, uid=1000, gid=1000)


@pytest.fixture
async def two(engine: Engine, database_url: str) -> AsyncIterator[tuple[Filesystem, Filesystem]]:
    """Two mounts of one workspace (two models, two pools), each sending its deferred
    changes in the background and reloading when one was not made."""
    databases = [open_database(Settings(database_url=database_url)) for _ in range(2)]
    mounts = [_filesystem(engine, db) for db in databases]
    try:
        async with trio.open_nursery() as nursery:
            for fs in mounts:
                await fs.load()
                await nursery.start(fs.send_changes)
                nursery.start_soon(OtherWriters(fs).resync_when_diverged)
            yield mounts[0], mounts[1]
            nursery.cancel_scope.cancel()
    finally:
        for db in databases:
            db.close()


async def settle(fs: Filesystem) -> None:
    with trio.fail_after(10):
        await fs.flush_changes()
        await trio.sleep(0.1)
