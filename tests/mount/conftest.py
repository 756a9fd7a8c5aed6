"""Fixtures for tests that run against both storage engines (``tests/engines.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engines import ENGINES, Engine
from tests.mounting import Mount


@pytest.fixture(params=ENGINES, ids=str)
def engine(request: pytest.FixtureRequest, database_url: str) -> Engine:
    """The test runs once per storage engine, on a database prepared for it."""
    chosen: Engine = request.param
    chosen.prepare(database_url)
    return chosen


@pytest.fixture
def engine_mount(engine: Engine, database_url: str, mount_factory: Any) -> Mount:
    """A mount of user 'default' on the engine's database."""
    mount: Mount = mount_factory(engine.mount_url(database_url))
    return mount
