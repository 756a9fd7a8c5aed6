"""Fixtures for model tests that run on every engine (``tests/engines.py``): legacy and
Reborn on PostgreSQL, and IronClaw's libSQL file (Reborn on SQLite), the model driven
directly over each engine's store (JuiceFS's ``testMeta`` over every engine)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import trio

from memfs.config import Settings
from memfs.db import open_database
from memfs.db.kept_store import KeptStore, legacy_workspace
from memfs.db.reborn.layout import RebornScope
from memfs.db.reborn.store import RebornStore
from memfs.db.scoped import Scope
from memfs.vfs import Filesystem, OtherWriters
from tests.engines import ENGINES_WITH_LIBSQL, Engine


@pytest.fixture(params=ENGINES_WITH_LIBSQL, ids=str)
def engine(request: pytest.FixtureRequest, database_url: str) -> Engine:
    chosen: Engine = request.param
    chosen.prepare(database_url)
    return chosen


def filesystem_of(engine: Engine, database: Any) -> Filesystem:
    """A model mount of the engine's workspace, with memfs's own storage beside it (the
    safety net's copies), as a mount's assembly makes it."""
    if engine.name == "legacy":
        store: Any = database.store(Scope("default"))
        kept: Any = KeptStore(database.pool, legacy_workspace("default", None))
    elif engine.name.startswith("libsql"):  # the file's workspace of user "default"
        settings = Settings(user_id="default")
        settings.given.add("user_id")
        workspace = database.workspace(settings)
        store, kept = workspace.documents, workspace.kept
    else:
        scope = RebornScope("reborn-cli", "default", "reborn-cli-agent")
        store, kept = RebornStore(database.pool, scope), KeptStore(database.pool, scope.prefix)
    return Filesystem(store, uid=1000, gid=1000, kept=kept)


@dataclass
class Solo:
    """One model mount of the engine's workspace, and how to load another (what the
    database holds, read back as a fresh mount shows it)."""

    engine: Engine
    fs: Filesystem
    database: Any

    async def fresh(self) -> Filesystem:
        other = filesystem_of(self.engine, self.database)
        await other.load()
        return other


@pytest.fixture
async def solo(engine: Engine, database_url: str) -> AsyncIterator[Solo]:
    """One model mount of the engine's workspace (changes sent at once, no background
    sender: each call's rows are there when it returns)."""
    database = open_database(Settings(database_url=engine.mount_url(database_url)))
    try:
        fs = filesystem_of(engine, database)
        await fs.load()
        yield Solo(engine, fs, database)
    finally:
        database.close()


@pytest.fixture
async def solo_sending(solo: Solo) -> AsyncIterator[Solo]:
    """``solo`` with its background sender of deferred changes running, as in a mount."""
    async with trio.open_nursery() as nursery:
        await nursery.start(solo.fs.send_changes)
        yield solo
        nursery.cancel_scope.cancel()


@pytest.fixture
async def two(engine: Engine, database_url: str) -> AsyncIterator[tuple[Filesystem, Filesystem]]:
    """Two mounts of one workspace (two models, two pools), each sending its deferred
    changes in the background and reloading when one was not made."""
    url = engine.mount_url(database_url)
    databases = [open_database(Settings(database_url=url)) for _ in range(2)]
    mounts = [filesystem_of(engine, db) for db in databases]
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
