"""The contract suite's workspaces: each test runs on all four engines (legacy and Reborn on
PostgreSQL, IronClaw's two libSQL layouts), on the workspace a mount assembles
(``memfs.assembly.assemble``, every synthetic tree and root file in it), through three
fronts: addressed by path (``memfs.vfs.by_path``: the layer the front doors call), as
WebDAV requests to the WebDAV server's application over it, and as system calls on a FUSE
mount of it (``fronts``).  What the
database holds is read back through a second, freshly loaded workspace, never through one
engine's SQL."""

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
from memfs.kernel import FuseNotifier, RecordingNotifier
from memfs.recovery import RecoveryArea
from memfs.serving import open_served
from memfs.vfs.by_path import PathOperations
from tests.contract.fronts import FRONTS, DavOps, fuse_mounted
from tests.engines import ENGINES_WITH_LIBSQL, Engine
from tests.mounting import fuse_available


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
    #: The operations of the front under test (``front``): ``PathOperations``, or the
    #: same calls made as WebDAV requests (``tests.contract.fronts.DavOps``).
    ops: PathOperations
    root: Path
    front: str = "model"
    #: The FUSE front's notifier: what the kernel must have been told before a read.
    kernel: Any = None

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

    async def identity(self, path: str) -> Any:
        """The document row at ``path`` now (its id), as the workspace knows it: what a
        rename keeps and a copy does not, whichever front made them."""
        node = await PathOperations(self.parts.fs).node(path)
        assert node.doc_id is not None, f"{path} has no row"  # type: ignore[attr-defined]
        return node.doc_id  # type: ignore[attr-defined]

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
        if self.kernel is not None:  # the kernel's caches dropped before the next call
            assert await trio.to_thread.run_sync(self.kernel.wait_sent), "invalidations stuck"


@contextlib.contextmanager
def opened(
    url: str, root: Path, kernel: Any = None, **given: Any
) -> Iterator[tuple[Database, MountParts]]:
    settings = Settings(database_url=url, runtime_dir=root / "run", user_id="default", **given)
    settings.given.add("user_id")  # the user the engines' agent helpers write as
    served = open_served(settings)
    try:
        parts = assemble(
            settings, served, kernel=kernel or RecordingNotifier(),
            recovery=RecoveryArea(root / "recovery"),
        )  # fmt: skip
        yield served.database, parts
    finally:
        served.database.close()


@pytest.fixture(params=FRONTS)
def front(request: pytest.FixtureRequest) -> str:
    """The front a test's operations go through: the layer every front calls, or the
    WebDAV server's application over it (``tests.contract.fronts``)."""
    chosen: str = request.param
    return chosen


@pytest.fixture
async def ws(
    engine: Engine, front: str, database_url: str, tmp_path: Path
) -> AsyncIterator[Workspace]:
    url = engine.mount_url(database_url)
    if front == "fuse":
        if not fuse_available():
            pytest.skip("needs /dev/fuse")
        notifier = FuseNotifier()  # other writers' changes reach the kernel's caches
        with opened(url, tmp_path / "ws", kernel=notifier) as (_, parts):
            await parts.fs.load()
            notifier.start()
            try:
                async with fuse_mounted(parts.fs, parts.stats, tmp_path / "mnt") as fuse:
                    yield Workspace(engine, url, parts, fuse, tmp_path, front,  # type: ignore[arg-type]
                                    notifier)  # fmt: skip
            finally:
                notifier.stop()
        return
    with opened(url, tmp_path / "ws") as (_, parts):
        await parts.fs.load()
        if front == "model":
            yield Workspace(engine, url, parts, PathOperations(parts.fs), tmp_path, front)
            return
        dav = DavOps(parts.fs)
        try:
            yield Workspace(engine, url, parts, dav, tmp_path, front)  # type: ignore[arg-type]
        finally:
            dav.close()
