"""Database round trips per WebDAV request, counted through a delay proxy: a PUT is one,
as a save on the mount is, and a PROPFIND none (the tree in memory answers it).

The server's every connection (its requests', its reindex worker's, its change feed's)
goes through the proxy, so each PUT is counted alone, from its sending to its answer,
in a moment with nothing else under way (``quiet``): the worker that re-chunks the saved
document can start before the answer is read, so a PUT's count is the median of several.
Reborn's save is two round trips, as on the mount (``tests/model/test_round_trips.py``:
its reads, then its writes with the commit), legacy's one.  A PUT
that came to need a second round trip, or a PROPFIND that came to read a row, fails.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.engines import ENGINES, Engine
from tests.netproxy import DelayProxy
from tests.webdav.serving import Server, propfind

#: The proxy's delay each way (see ``tests/model/test_round_trips.py``: long enough that
#: a busy machine's stall mid-pipeline is not counted as a second round trip).
DELAY = 0.025
#: Requests per kind.
REQUESTS = 8


@pytest.fixture(params=ENGINES, ids=str)
def far_server(
    request: pytest.FixtureRequest, pg_server: Any, database_url: str, tmp_path: Path
) -> Iterator[tuple[Server, DelayProxy, Engine]]:
    engine: Engine = request.param
    engine.prepare(database_url)
    socket_dir = Path(pg_server.get_uri().split("host=")[-1].split("&")[0])
    proxy = DelayProxy(socket_dir / ".s.PGSQL.5432", delay=DELAY)
    name = database_url.split("?", maxsplit=1)[0].rsplit("/", 1)[1]
    server = Server(proxy.url(name), tmp_path / "far")
    try:
        yield server, proxy, engine
    finally:
        try:
            assert server.stop() == 0, server.log.read_text()
        finally:
            proxy.close()


def _still(proxy: DelayProxy, seconds: float, timeout: float) -> bool:
    """Wait until no round trip has been made for ``seconds``; False if that did not
    happen within ``timeout``."""
    deadline = time.monotonic() + timeout
    seen, since = proxy.round_trips, time.monotonic()
    while time.monotonic() < deadline:
        if proxy.round_trips != seen:
            seen, since = proxy.round_trips, time.monotonic()
        elif time.monotonic() - since >= seconds:
            return True
        time.sleep(0.02)
    return False


def quiet(proxy: DelayProxy) -> None:
    """A moment with nothing else under way: the background (a re-chunk) done, and on
    the Reborn layout, which has no trigger, its poll (every second) just made, so the
    next one is a second away; then the counter is reset."""
    assert _still(proxy, 1.0, 30), "the server never went quiet"
    start = proxy.round_trips
    deadline = time.monotonic() + 1.5
    while proxy.round_trips == start and time.monotonic() < deadline:
        time.sleep(0.01)  # the poll's next look (none with the trigger: 1.5 s)
    _still(proxy, 0.15, 1.0)
    proxy.reset()


def test_a_put_is_a_save_and_a_propfind_no_round_trip(
    far_server: tuple[Server, DelayProxy, Engine],
) -> None:
    dav, proxy, engine = far_server
    assert dav.http.request("MKCOL", "/notes").status_code == 201
    for n in range(REQUESTS):
        assert dav.http.put(f"/notes/n{n}.md", content=b"first\n").status_code == 201
    puts = []
    for n in range(REQUESTS):
        quiet(proxy)
        answer = dav.http.put(f"/notes/n{n}.md", content=f"second {n}\n".encode())
        puts.append(proxy.round_trips)
        assert answer.status_code == 204, answer.text
    quiet(proxy)
    for _ in range(REQUESTS):
        assert propfind(dav, "/notes/", "1").status_code == 207
        assert propfind(dav, "/notes/n0.md", "0").status_code == 207
    propfinds = proxy.round_trips
    saves = 1 if engine.name == "legacy" else 2
    assert sorted(puts)[REQUESTS // 2] == saves, f"round trips of each PUT: {puts}"
    assert propfinds <= 1, f"{propfinds} round trips for {2 * REQUESTS} PROPFINDs"
