"""The contract suite's workspaces: each test runs on all four engines (legacy and Reborn on
PostgreSQL, IronClaw's two libSQL layouts), on the workspace a mount assembles
(``memfs.assembly.assemble``, every synthetic tree and root file in it), addressed by
path (``memfs.vfs.by_path``: the layer the front doors call).  What the database holds is
read back through a second, freshly loaded workspace, never through one engine's SQL."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from memfs.assembly import MountParts, assemble
from memfs.config import Settings
from memfs.db import Database
from memfs.kernel import RecordingNotifier
from memfs.recovery import RecoveryArea
from memfs.serving import open_served
from memfs.vfs.by_path import PathOperations
from tests.engines import ENGINES_WITH_LIBSQL, Engine


@pytest.fixture(params=ENGINES_WITH_LIBSQL, ids=str)
def engine(request: pytest.FixtureRequest, database_url: str) -> Engine:
    chosen: Engine = request.param
    chosen.prepare(database_url)
    return chosen


@dataclass
class Workspace:
    """One engine's workspace, as a mount assembles it."""

    engine: Engine
    url: str
    parts: MountParts
    ops: PathOperations
    root: Path

    @property
    def fs(self) -> Any:
        return self.parts.fs

    @contextlib.asynccontextmanager
    async def fresh(self) -> AsyncIterator[PathOperations]:
        """A second workspace over the same database, loaded now: what is stored."""
        with opened(self.url, self.root / "fresh") as (_, parts):
            await parts.fs.load()
            yield PathOperations(parts.fs)

    @contextlib.asynccontextmanager
    async def read_only(self) -> AsyncIterator[PathOperations]:
        """A read-only workspace over the same database, loaded now."""
        with opened(self.url, self.root / "ro", read_only=True) as (_, parts):
            await parts.fs.load()
            yield PathOperations(parts.fs)

    async def stored(self, path: str) -> bytes:
        async with self.fresh() as other:
            return await other.read(path)

    async def stored_names(self, path: str = "") -> list[str]:
        async with self.fresh() as other:
            return [entry.name for entry in await other.list(path)]

    async def apply_others(self) -> None:
        """Take in what other writers changed (as a mount's poll or change feed does)."""
        with trio.fail_after(30):
            await self.parts.writers.resync()


@contextlib.contextmanager
def opened(url: str, root: Path, **given: Any) -> Iterator[tuple[Database, MountParts]]:
    settings = Settings(database_url=url, runtime_dir=root / "run", user_id="default", **given)
    settings.given.add("user_id")  # the user the engines' agent helpers write as
    served = open_served(settings)
    try:
        parts = assemble(
            settings, served, kernel=RecordingNotifier(), recovery=RecoveryArea(root / "recovery")
        )
        yield served.database, parts
    finally:
        served.database.close()


@pytest.fixture
async def ws(engine: Engine, database_url: str, tmp_path: Path) -> AsyncIterator[Workspace]:
    url = engine.mount_url(database_url)
    with opened(url, tmp_path / "ws") as (_, parts):
        await parts.fs.load()
        yield Workspace(engine, url, parts, PathOperations(parts.fs), tmp_path)
