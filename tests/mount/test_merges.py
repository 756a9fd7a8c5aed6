"""A person edits in vim while the agent appends, and both edits stay (issue 32).

vim runs in tmux on a real mount: it reads ``MEMORY.md`` once, the agent appends a fact by
SQL (as IronClaw does on the layout), the mount shows it, and the person fixes a typo in
line 1 and writes (vim warns that the file changed since reading; the person writes
anyway).  Before the merge the agent's fact was only in a version row; now the document
holds both.  ``backupcopy=yes`` writes in place from an empty file (``O_TRUNC``),
``backupcopy=no`` renames the original away and writes a new file: in both the base is what
the vim process read.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.engines import Engine
from tests.mounting import Mount
from tests.savers import client_env

pytestmark = pytest.mark.mount


def eventually(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class Tmux:
    """One program in a detached tmux session on its own server."""

    def __init__(self, name: str, command: str, env: dict[str, str]) -> None:
        self.base = ["tmux", "-L", name]
        subprocess.run([*self.base, "new-session", "-d", "-s", name, "-x", "120", "-y", "30",
                        command], env=env, check=True, timeout=30)  # fmt: skip
        self.name = name

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.base, "send-keys", "-t", self.name, *keys], check=True, timeout=30)

    def screen(self) -> str:
        done = subprocess.run([*self.base, "capture-pane", "-p", "-t", self.name],
                              capture_output=True, text=True, check=False, timeout=30)  # fmt: skip
        return done.stdout

    def close(self) -> None:
        subprocess.run([*self.base, "kill-server"], check=False, timeout=30, capture_output=True)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("backupcopy", ["yes", "no"])
def test_vim_fixing_a_typo_while_the_agent_appends_keeps_the_agents_fact(
    engine: Engine, engine_mount: Mount, sql_conn: psycopg.Connection[Any], work_dir: Path,
    backupcopy: str,
) -> None:  # fmt: skip
    if shutil.which("vim") is None or shutil.which("tmux") is None:
        pytest.skip("needs vim and tmux (scripts/setup-tests installs them)")
    target = engine_mount.path("MEMORY.md")
    target.write_text("# Memroy\n- prefers tea\n")
    env = client_env(work_dir / f"home-{backupcopy}")
    vim = Tmux(f"memfs-merge-{engine}-{backupcopy}",
               f"cd {engine_mount.path()} && vim --clean -c 'set backupcopy={backupcopy}' "
               "MEMORY.md", env)  # fmt: skip
    try:
        eventually(lambda: "prefers tea" in vim.screen(), "vim to show the file")
        assert engine.agent_appends(sql_conn, "MEMORY.md", "- deploys on Fridays\n")
        eventually(lambda: "Fridays" in target.read_text(), "the mount to show the agent's fact")
        vim.keys(":1s/Memroy/Memory/", "Enter")  # the typo in line 1
        time.sleep(0.3)
        vim.keys(":w", "Enter")

        def written() -> bool:
            if "(y/n)" in vim.screen():  # "changed since reading it": write anyway
                vim.keys("y")
                time.sleep(0.3)
                vim.keys("Enter")
            return engine.contents(sql_conn).get("MEMORY.md", "").startswith("# Memory")

        eventually(written, "vim's write")
        vim.keys(":q!", "Enter")
    finally:
        vim.close()
    assert engine.contents(sql_conn)["MEMORY.md"] == (
        "# Memory\n- prefers tea\n- deploys on Fridays\n"
    )
    assert "merged with another writer's change" in engine_mount.log()
    eventually(lambda: "# Memory" in target.read_text(), "the mount to show the merge")
    assert target.read_text() == "# Memory\n- prefers tea\n- deploys on Fridays\n"
