"""Fixtures for tests that run against every storage engine (``tests/engines.py``).

A test runs on the two PostgreSQL layouts; a module (or test) marked ``libsql_too`` runs on
IronClaw's libSQL file as well; a test parametrizing ``engine`` itself chooses its own.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.engines import ENGINES, ENGINES_WITH_LIBSQL, Engine
from tests.mounting import Mount


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    chosen_here = any(
        "engine" in str(mark.args[0]) for mark in metafunc.definition.iter_markers("parametrize")
    )
    if "engine" in metafunc.fixturenames and not chosen_here:
        libsql = metafunc.definition.get_closest_marker("libsql_too") is not None
        engines = ENGINES_WITH_LIBSQL if libsql else ENGINES
        metafunc.parametrize("engine", engines, ids=str, indirect=True)


@pytest.fixture
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
