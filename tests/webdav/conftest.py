"""The WebDAV tests' fixtures: each test on every engine, with a server of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engines import ENGINES_WITH_LIBSQL, Engine
from tests.webdav.serving import Server


@pytest.fixture(params=ENGINES_WITH_LIBSQL, ids=str)
def engine(request: pytest.FixtureRequest) -> Engine:
    found: Engine = request.param
    return found


@pytest.fixture
def url(engine: Engine, database_url: str) -> str:
    engine.prepare(database_url)
    return engine.mount_url(database_url)


@pytest.fixture
def dav(url: str, tmp_path: Path) -> Iterator[Server]:
    server = Server(url, tmp_path / "one")
    yield server
    assert server.stop() == 0, server.log.read_text()
