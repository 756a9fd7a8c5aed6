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

import contextlib
import os
import shutil
import signal
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

pytestmark = [pytest.mark.mount, pytest.mark.libsql_too]


def eventually(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def assert_both_kept(engine: Engine, conn: psycopg.Connection[Any], mount: Mount) -> None:
    """The person's fix of line 1 and the agent's fact, both in the document, merged."""
    assert engine.contents(conn)["MEMORY.md"] == "# Memory\n- prefers tea\n- deploys on Fridays\n"
    assert "merged with another writer's change" in mount.log()


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


def edit_in_tmux(
    engine: Engine, mount: Mount, work_dir: Path, program: str, command: str, slug: str
) -> tuple[Path, Tmux]:
    """``MEMORY.md`` with a typo in line 1, open in ``command`` (run in the mount) in a tmux
    session named by the engine and ``slug``."""
    if shutil.which(program) is None or shutil.which("tmux") is None:
        pytest.skip(f"needs {program} and tmux (scripts/setup-tests installs them)")
    target = mount.path("MEMORY.md")
    target.write_text("# Memroy\n- prefers tea\n")
    tmux = Tmux(f"memfs-merge-{engine}-{slug}", f"cd {mount.path()} && {command}",
                client_env(work_dir / f"home-{slug}"))  # fmt: skip
    return target, tmux


@pytest.mark.timeout(180)
@pytest.mark.parametrize("backupcopy", ["yes", "no"])
def test_vim_fixing_a_typo_while_the_agent_appends_keeps_the_agents_fact(
    engine: Engine, engine_mount: Mount, sql_conn: psycopg.Connection[Any], work_dir: Path,
    backupcopy: str,
) -> None:  # fmt: skip
    command = f"vim --clean -c 'set backupcopy={backupcopy}' MEMORY.md"
    target, vim = edit_in_tmux(engine, engine_mount, work_dir, "vim", command, backupcopy)
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
    assert_both_kept(engine, sql_conn, engine_mount)
    eventually(lambda: "# Memory" in target.read_text(), "the mount to show the merge")
    assert target.read_text() == "# Memory\n- prefers tea\n- deploys on Fridays\n"


#: Each editor's keys: fix line 1, answering its "changed on disk" questions as a person
#: who wants their fix written would.
EDITORS = {
    "emacs": "emacs -nw -Q MEMORY.md",  # renames the original to MEMORY.md~ on its first save
    "nano": "nano MEMORY.md",  # writes in place (O_TRUNC)
}
ANSWERS = {
    "really edit the buffer?": ["y"],  # emacs, at the first change
    "Save anyway? (yes or no)": ["yes", "Enter"],  # emacs, at the save
    "continue saving?": ["y"],  # nano, at the save
}


@pytest.mark.timeout(180)
@pytest.mark.parametrize("editor", sorted(EDITORS))
def test_emacs_and_nano_fixing_a_typo_while_the_agent_appends_keep_the_agents_fact(
    engine: Engine, engine_mount: Mount, sql_conn: psycopg.Connection[Any], work_dir: Path,
    editor: str,
) -> None:  # fmt: skip
    target, tmux = edit_in_tmux(engine, engine_mount, work_dir, editor, EDITORS[editor], editor)

    def answer() -> None:
        screen = tmux.screen()
        for question, keys in ANSWERS.items():
            if question in screen:
                tmux.keys(*keys)
                time.sleep(0.3)

    try:
        eventually(lambda: "prefers tea" in tmux.screen(), f"{editor} to show the file")
        assert engine.agent_appends(sql_conn, "MEMORY.md", "- deploys on Fridays\n")
        eventually(lambda: "Fridays" in target.read_text(), "the mount to show the agent's fact")
        time.sleep(1.1)  # editors compare modification times to the second
        if editor == "emacs":
            tmux.keys("M-<", "C-k")
            time.sleep(0.5)
            answer()
            tmux.keys("# Memory")
            time.sleep(0.3)
            tmux.keys("C-x", "C-s")
        else:
            tmux.keys("C-k", "# Memory", "Enter")
            time.sleep(0.3)
            tmux.keys("C-o")
            time.sleep(0.3)
            tmux.keys("Enter")

        def written() -> bool:
            answer()
            return engine.contents(sql_conn).get("MEMORY.md", "").startswith("# Memory")

        eventually(written, f"{editor}'s write")
    finally:
        tmux.close()
    assert_both_kept(engine, sql_conn, engine_mount)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("program", ["sed -i", "VS Code's save"])
def test_a_program_that_read_the_file_before_the_agent_appended_keeps_both(
    engine: Engine, engine_mount: Mount, sql_conn: psycopg.Connection[Any], work_dir: Path,
    program: str,
) -> None:  # fmt: skip
    """``sed -i`` (reads, writes a temporary, renames it over the file) and VS Code's save
    on Linux (node reads the file when it opens and writes it in place, ``'w'``, when it is
    saved, each on whichever of libuv's pool threads is free: here the write comes from
    another thread for certain), each held between its read and its write while the agent
    appends.  FUSE names the calling thread; the base is kept per process."""
    if program == "VS Code's save" and shutil.which("node") is None:
        pytest.skip("needs node (scripts/setup-tests installs it)")
    target = engine_mount.path("MEMORY.md")
    target.write_text("# Memroy\n- prefers tea\n")
    slug = f"{engine}-{program.split(maxsplit=1)[0].strip('-')}"
    ready, go = work_dir / f"ready-{slug}", work_dir / f"go-{slug}"
    wait = f"touch {ready}; while [ ! -e {go} ]; do sleep 0.05; done"
    if program == "sed -i":  # ``1e``: run a command (here: wait) once line 1 was read
        command = ["sed", "-i", "-e", f"1e sh -c '{wait}'", "-e", "1s/Memroy/Memory/",
                   "MEMORY.md"]  # fmt: skip
    else:
        script = (  # the read on the main thread, the write from a worker thread
            "const fs = require('fs');"
            "const {execSync} = require('child_process');"
            "const {Worker} = require('worker_threads');"
            "const text = fs.readFileSync('MEMORY.md', 'utf8');"
            f"execSync({wait!r});"
            "new Worker(`require('fs').writeFileSync('MEMORY.md', "
            "  require('worker_threads').workerData, {flag: 'w'})`, "
            "  {eval: true, workerData: text.replace('Memroy', 'Memory')});"
        )
        command = ["node", "-e", script]
    saver = subprocess.Popen(command, cwd=engine_mount.path(), stderr=subprocess.PIPE,
                             start_new_session=True)  # fmt: skip
    try:
        eventually(ready.exists, f"{program} to read the file")
        assert engine.agent_appends(sql_conn, "MEMORY.md", "- deploys on Fridays\n")
        eventually(lambda: "Fridays" in target.read_text(), "the mount to show the agent's fact")
        go.touch()
        _, err = saver.communicate(timeout=30)
        assert saver.returncode == 0, err
    finally:
        with contextlib.suppress(ProcessLookupError):  # its waiting shell too
            os.killpg(saver.pid, signal.SIGKILL)
        saver.wait(timeout=30)
    assert_both_kept(engine, sql_conn, engine_mount)


@pytest.mark.timeout(180)
def test_rsync_over_a_file_the_agent_appended_to_keeps_both(
    engine: Engine, engine_mount: Mount, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    """``rsync --checksum`` of a fixed copy over the document: its receiver reads the file
    it replaces, writes ``.MEMORY.md.XXXXXX`` and renames it a few seconds later
    (``--bwlimit``), after the agent appended: the base is what the receiver read."""
    if shutil.which("rsync") is None:
        pytest.skip("needs rsync (scripts/setup-tests installs it)")
    facts = "".join(f"- fact {n} about the person and what they prefer\n" for n in range(100))
    target = engine_mount.path("MEMORY.md")
    target.write_text("# Memroy\n" + facts)
    source = work_dir / f"rsync-source-{engine}" / "MEMORY.md"
    source.parent.mkdir(parents=True)
    source.write_text("# Memory\n" + facts)  # 5 KiB: about 2.5 s at 2 KiB/s
    saver = subprocess.Popen(["rsync", "--checksum", "--bwlimit=2", str(source), "MEMORY.md"],
                             cwd=engine_mount.path(), stderr=subprocess.PIPE)  # fmt: skip
    try:
        time.sleep(0.5)  # its generator has checksummed the file (milliseconds)
        assert engine.agent_appends(sql_conn, "MEMORY.md", "- deploys on Fridays\n")
        eventually(lambda: "Fridays" in target.read_text(), "the mount to show the agent's fact")
        assert saver.poll() is None, "rsync finished before the agent's change: no race"
        _, err = saver.communicate(timeout=60)
        assert saver.returncode == 0, err
    finally:
        saver.kill()
    assert engine.contents(sql_conn)["MEMORY.md"] == "# Memory\n" + facts + "- deploys on Fridays\n"
    assert "merged with another writer's change" in engine_mount.log()


def test_emacs_saving_a_new_file_the_agent_made_meanwhile_keeps_the_agents_note(
    engine: Engine, engine_mount: Mount, sql_conn: psycopg.Connection[Any], database_url: str,
    work_dir: Path,
) -> None:  # fmt: skip
    """emacs visits notes.md, which is not there yet; the agent writes it; emacs saves its
    buffer (it reads the file again to compare it with the buffer, and writes over it):
    the agent's note and the person's both stay (the history checker's Reborn seed 12 lost
    the agent's line into a version this way)."""
    if shutil.which("emacs") is None:
        pytest.skip("needs emacs (scripts/setup-tests installs it)")
    signals = work_dir / f"emacs-{engine}"
    signals.mkdir()
    visited, go = signals / "visited", signals / "go"
    lisp = (
        '(progn (load "userlock" nil t) (defun ask-user-about-supersession-threat (_f) nil)'
        " (fset 'yes-or-no-p (lambda (&rest _) t))"
        f' (insert "mine\\n") (write-region "" nil "{visited}")'
        f' (while (not (file-exists-p "{go}")) (sleep-for 0.05)) (save-buffer))'
    )
    env = client_env(work_dir / f"emacs-home-{engine}")
    editor = subprocess.Popen(["emacs", "--batch", "notes.md", "--eval", lisp],
                              cwd=engine_mount.path(), env=env, stderr=subprocess.PIPE)  # fmt: skip
    try:
        eventually(visited.exists, "emacs to visit notes.md")
        assert not engine_mount.path("notes.md").exists()
        engine.agent_writes(sql_conn, database_url, {"notes.md": "agent's note\n"})
        eventually(engine_mount.path("notes.md").exists, "the mount to show the agent's file")
        go.touch()
        _, err = editor.communicate(timeout=60)
        assert editor.returncode == 0, err
    finally:
        editor.kill()
    assert engine.contents(sql_conn)["notes.md"] == "agent's note\nmine\n"
    assert "merged with another writer's change" in engine_mount.log()
