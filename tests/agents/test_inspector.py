"""One conversation through a host that is not the SDK memfs is built on: the MCP
Inspector's headless CLI (``scripts/setup-tests`` installs it), on a Reborn libSQL file and
on the legacy PostgreSQL layout, each call a fresh ``memfs serve mcp`` it starts over stdio."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.engines import ENGINES, LIBSQL, Engine
from tests.mounting import memfs_env

INSPECTOR = Path(__file__).parents[2] / ".venv/inspector/node_modules/.bin/mcp-inspector"


@pytest.fixture(params=[LIBSQL, ENGINES[0]], ids=str)
def url(request: pytest.FixtureRequest, database_url: str) -> str:
    engine: Engine = request.param
    engine.prepare(database_url)
    return engine.mount_url(database_url)


def inspect(url: str, runtime: Path, *request: str, exit_code: int = 0) -> Any:
    """The Inspector's answer (JSON) to one request of a server it starts (it exits 5
    when a tool answered an error)."""
    if not INSPECTOR.exists():
        pytest.skip("the MCP Inspector is not installed: run scripts/setup-tests")
    server = [sys.executable, "-m", "memfs", "serve", "mcp", "--database-url", url]
    done = subprocess.run(
        [str(INSPECTOR), "--cli", *server, *request], env=memfs_env(runtime), check=False,
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == exit_code, f"{request}: {done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return json.loads(done.stdout)


def test_a_conversation_through_the_inspector(url: str, tmp_path: Path) -> None:
    tools = inspect(url, tmp_path, "--method", "tools/list")
    assert sorted(t["name"] for t in tools["tools"]) == [
        "memory_read", "memory_search", "memory_tree", "memory_write",
    ]  # fmt: skip
    wrote = inspect(url, tmp_path, "--method", "tools/call", "--tool-name", "memory_write",
                    "--tool-arg", "target=notes/tea.md", "content=Prefers green tea")  # fmt: skip
    assert wrote["isError"] is False and wrote["structuredContent"]["status"] == "written"
    read = inspect(url, tmp_path, "--method", "tools/call", "--tool-name", "memory_read",
                   "--tool-arg", "path=notes/tea.md")  # fmt: skip
    assert read["structuredContent"]["content"].startswith("Prefers green tea")
    found = inspect(url, tmp_path, "--method", "tools/call", "--tool-name", "memory_search",
                    "--tool-arg", "query=green tea")  # fmt: skip
    assert found["structuredContent"]["results"][0]["path"] == "notes/tea.md"
    listed = inspect(url, tmp_path, "--method", "resources/list")
    assert [r["uri"] for r in listed["resources"]] == ["memory://notes/tea.md"]
    resource = inspect(url, tmp_path, "--method", "resources/read", "--uri",
                       "memory://notes/tea.md")  # fmt: skip
    assert resource["contents"][0]["text"].startswith("Prefers green tea")
    bad = inspect(url, tmp_path, "--method", "tools/call", "--tool-name", "memory_write",
                  "--tool-arg", "target=/etc/passwd", "content=x", exit_code=5)  # fmt: skip
    assert bad["isError"] is True and "filesystem path" in bad["content"][0]["text"]
