"""Real editors and sync tools on a real mount; afterwards SQL shows exactly the expected rows.

Every test runs against both storage engines (IronClaw's legacy ``memory_documents`` and its
Reborn ``root_filesystem_entries``, ``tests/engines.py``) and checks: the expected paths and
contents, that each document's identity survived the save, how many statements the save ran
on the document rows, and that no scratch name (swap file, backup, temporary) reached the
database or its chunks.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memfs.scratch import Kind, ScratchRules
from tests.conftest import StatementLog
from tests.engines import Engine
from tests.mounting import Mount
from tests.savers import client_env

pytestmark = [pytest.mark.mount, pytest.mark.libsql_too]


def needs(*programs: str) -> None:
    missing = [p for p in programs if shutil.which(p) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (scripts/setup-tests installs them)")


@pytest.fixture
def mounted(engine_mount: Mount) -> Mount:
    """Each real-client test runs against both storage engines (``engine``)."""
    return engine_mount


@pytest.fixture
def statements(engine: Engine, sql_conn: psycopg.Connection[Any]) -> StatementLog:
    return engine.statement_log(sql_conn)


def assert_no_scratch(engine: Engine, conn: psycopg.Connection[Any]) -> None:
    rules = ScratchRules()
    for path in engine.rows(conn):
        for segment in path.split("/"):
            assert rules.classify(segment) is Kind.DOCUMENT, f"scratch name stored: {path}"
    assert engine.chunks_containing(conn, "b0VIM", "unison.tmp") == 0


@pytest.fixture
def env(work_dir: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    # Letters only in $HOME: vim expands "~/" in its 'backupdir' as a pattern, and a test id
    # such as "[legacy-auto]" is a bad character range there (vim stops at a prompt).
    name = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name)[:40]
    return client_env(work_dir / f"home-{name}-{time.monotonic_ns()}")


def seed(
    engine: Engine, mounted: Mount, conn: psycopg.Connection[Any], name: str, text: str
) -> Any:
    (mounted.path() / name).write_text(text)
    return engine.rows(conn)[name][0]


@pytest.mark.parametrize("backupcopy", ["auto", "yes", "no"])
def test_vim_saves(
    engine: Engine,
    mounted: Mount,
    sql_conn: psycopg.Connection[Any],
    statements: StatementLog,
    env: dict[str, str],
    backupcopy: str,
) -> None:
    needs("vim")
    doc_id = seed(engine, mounted, sql_conn, "MEMORY.md", "# Memory\n")
    statements.take()
    mounted.run(
        "vim", "--clean", "-c", f"set backupcopy={backupcopy}",
        "-c", "normal! Goappended by vim", "-c", "wq", "MEMORY.md",
        env=env,
    )  # fmt: skip
    assert statements.take() == ["UPDATE"]
    assert engine.rows(sql_conn) == {"MEMORY.md": (doc_id, "# Memory\nappended by vim\n")}
    assert_no_scratch(engine, sql_conn)
    assert sorted(os.listdir(mounted.path())) == ["MEMORY.md"]


def test_neovim_save(
    engine: Engine,
    mounted: Mount,
    sql_conn: psycopg.Connection[Any],
    statements: StatementLog,
    env: dict[str, str],
) -> None:
    needs("nvim")
    doc_id = seed(engine, mounted, sql_conn, "notes.md", "one\n")
    statements.take()
    mounted.run(
        "nvim", "--clean", "--headless", "-c", "normal! Gotwo", "-c", "wq", "notes.md", env=env
    )
    assert statements.take() == ["UPDATE"]
    assert engine.rows(sql_conn) == {"notes.md": (doc_id, "one\ntwo\n")}
    assert_no_scratch(engine, sql_conn)


def test_emacs_batch_save(
    engine: Engine,
    mounted: Mount,
    sql_conn: psycopg.Connection[Any],
    statements: StatementLog,
    env: dict[str, str],
) -> None:
    needs("emacs")
    doc_id = seed(engine, mounted, sql_conn, "em.md", "emacs\n")
    statements.take()
    mounted.run(
        "emacs", "--batch", "em.md", "--eval",
        '(progn (goto-char (point-max)) (insert "saved by emacs\\n") (save-buffer))',
        env=env,
    )  # fmt: skip
    assert statements.take() == ["UPDATE"]
    assert engine.rows(sql_conn) == {"em.md": (doc_id, "emacs\nsaved by emacs\n")}
    assert_no_scratch(engine, sql_conn)
    # Emacs keeps its backup; it lives only in the daemon.
    assert (mounted.path() / "em.md~").read_text() == "emacs\n"


def test_nano_save_through_tmux(
    engine: Engine,
    mounted: Mount,
    sql_conn: psycopg.Connection[Any],
    statements: StatementLog,
    env: dict[str, str],
) -> None:
    needs("nano", "tmux")
    doc_id = seed(engine, mounted, sql_conn, "na.md", "nano\n")
    statements.take()
    session = f"memfs-nano-{os.getpid()}"
    tmux = ["tmux", "-L", session]
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", session, "-x", "100", "-y", "30",
         f"cd {mounted.path()} && nano na.md"],
        env=env, check=True, timeout=30,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while (mounted.path() / ".na.md.swp").exists() is False and time.monotonic() < deadline:
            time.sleep(0.05)  # nano holds its lock file while editing
        assert (mounted.path() / ".na.md.swp").exists()
        # End of file, then type; nano adds the final newline itself when saving.
        subprocess.run([*tmux, "send-keys", "-t", session, "M-/", "typed in nano"],
                       check=True, timeout=30)  # fmt: skip
        subprocess.run([*tmux, "send-keys", "-t", session, "C-o"], check=True, timeout=30)
        time.sleep(0.3)
        subprocess.run([*tmux, "send-keys", "-t", session, "Enter"], check=True, timeout=30)
        deadline = time.monotonic() + 20
        while engine.rows(sql_conn)["na.md"][1] == "nano\n" and time.monotonic() < deadline:
            time.sleep(0.05)
        subprocess.run([*tmux, "send-keys", "-t", session, "C-x"], check=True, timeout=30)
        deadline = time.monotonic() + 20
        while (mounted.path() / ".na.md.swp").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, timeout=30)
    assert statements.take() == ["UPDATE"]
    assert engine.rows(sql_conn) == {"na.md": (doc_id, "nano\ntyped in nano\n")}
    assert_no_scratch(engine, sql_conn)
    assert not (mounted.path() / ".na.md.swp").exists()


def test_vscode_style_saves_from_node(
    engine: Engine, mounted: Mount, sql_conn: psycopg.Connection[Any], statements: StatementLog
) -> None:
    needs("node")
    doc_id = seed(engine, mounted, sql_conn, "settings.md", "v0\n")
    statements.take()
    script = textwrap.dedent(
        """
        const fs = require("fs");
        const target = "settings.md";
        fs.writeFileSync(target, "v1 in place\\n");            // 'w': O_TRUNC, write, close
        const fd = fs.openSync(target + ".vsctmp", "w");       // atomic save: temp...
        fs.writeSync(fd, "v2 atomic\\n");
        fs.fdatasyncSync(fd);
        fs.closeSync(fd);
        fs.renameSync(target + ".vsctmp", target);             // ...renamed over the target
        """
    )
    mounted.run("node", "-e", script)
    assert statements.take() == ["UPDATE", "UPDATE"]
    assert engine.rows(sql_conn) == {"settings.md": (doc_id, "v2 atomic\n")}
    assert_no_scratch(engine, sql_conn)


def make_source(root: Path) -> dict[str, str]:
    files = {
        "MEMORY.md": "memory\n",
        "daily/2026-03-03.md": "[09:00:00] log\n",
        "projects/alpha/notes.md": "alpha ✓\n",
        ".config": "",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
        os.utime(root / rel, ns=(1_700_000_000_123_456_789,) * 2)
    return files


def transferred(rsync_stats: str) -> int:
    for line in rsync_stats.splitlines():
        if line.startswith("Number of regular files transferred:"):
            return int(line.split(":")[1].replace(",", ""))
    raise AssertionError(f"no transfer count in {rsync_stats!r}")


def test_rsync_archive_twice_inplace_and_delete(
    engine: Engine,
    mounted: Mount,
    sql_conn: psycopg.Connection[Any],
    statements: StatementLog,
    work_dir: Path,
) -> None:
    needs("rsync")
    src = work_dir / "rsync-src"
    files = make_source(src)
    dst = f"{mounted.path()}/"
    first = mounted.run("rsync", "-a", "--stats", f"{src}/", dst).stdout.decode()
    assert transferred(first) == len(files)
    assert {p: c for p, (_, c) in engine.rows(sql_conn).items()} == files
    ids = {p: i for p, (i, _) in engine.rows(sql_conn).items()}
    statements.take()
    second = mounted.run("rsync", "-a", "--stats", f"{src}/", dst).stdout.decode()
    assert transferred(second) == 0
    assert statements.take() == []
    # A changed file: rsync writes .MEMORY.md.XXXXXX and renames it over: same row.
    (src / "MEMORY.md").write_text("memory, changed\n")
    mounted.run("rsync", "-a", f"{src}/", dst)
    assert statements.take() == ["UPDATE"]
    assert engine.rows(sql_conn)["MEMORY.md"] == (ids["MEMORY.md"], "memory, changed\n")
    # --inplace writes into the existing file.
    (src / "daily/2026-03-03.md").write_text("[09:00:00] log\n[10:00:00] more\n")
    mounted.run("rsync", "-a", "--inplace", f"{src}/", dst)
    assert engine.rows(sql_conn)["daily/2026-03-03.md"] == (
        ids["daily/2026-03-03.md"],
        "[09:00:00] log\n[10:00:00] more\n",
    )
    # --delete removes what the source no longer has.
    (src / "projects/alpha/notes.md").unlink()
    mounted.run("rsync", "-a", "--delete", f"{src}/", dst)
    mounted.barrier()  # the removal rides on the next transaction (or the sender's, soon)
    assert "projects/alpha/notes.md" not in engine.rows(sql_conn)
    assert set(engine.rows(sql_conn)) == {"MEMORY.md", "daily/2026-03-03.md", ".config"}
    assert_no_scratch(engine, sql_conn)


def test_rclone_sync_twice(
    engine: Engine, mounted: Mount, sql_conn: psycopg.Connection[Any], statements: StatementLog,
    work_dir: Path, env: dict[str, str],
) -> None:  # fmt: skip
    needs("rclone")
    src = work_dir / "rclone-src"
    files = make_source(src)
    rclone = ["rclone", "--config", "/dev/null", "sync", "-v", str(src), str(mounted.path())]
    mounted.run(*rclone, env=env)
    assert {p: c for p, (_, c) in engine.rows(sql_conn).items()} == files
    statements.take()
    second = mounted.run(*rclone, env=env).stderr.decode()
    assert "Copied" not in second, second
    assert statements.take() == []
    assert_no_scratch(engine, sql_conn)


def test_unison_twice(
    engine: Engine, mounted: Mount, sql_conn: psycopg.Connection[Any], statements: StatementLog,
    work_dir: Path, env: dict[str, str],
) -> None:  # fmt: skip
    needs("unison")
    src = work_dir / "unison-src"
    files = make_source(src)
    unison = ["unison", str(src), str(mounted.path()), "-batch", "-auto", "-times", "-ui", "text"]
    first = mounted.run(*unison, env=env, check=False)
    assert first.returncode == 0, first.stdout.decode() + first.stderr.decode()
    assert {p: c for p, (_, c) in engine.rows(sql_conn).items()} == files
    statements.take()
    second = mounted.run(*unison, env=env, check=False)
    output = second.stdout.decode() + second.stderr.decode()
    assert second.returncode == 0, output
    assert "Nothing to do" in output, output
    assert statements.take() == []
    assert_no_scratch(engine, sql_conn)


def test_git_fails_cleanly_and_creates_no_rows(
    engine: Engine, mounted: Mount, sql_conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    needs("git")
    (mounted.path() / "notes.md").write_text("n\n")
    before = engine.rows(sql_conn)
    init = mounted.run("git", "init", env=env, check=False)
    assert init.returncode != 0
    assert b"Operation not permitted" in init.stderr
    add = mounted.run("git", "add", "notes.md", env=env, check=False)
    assert add.returncode != 0
    assert engine.rows(sql_conn) == before
    assert "'.git' is refused" in mounted.log()


def test_sed_tar_cp_keep_identity(
    engine: Engine,
    mounted: Mount,
    sql_conn: psycopg.Connection[Any],
    statements: StatementLog,
    work_dir: Path,
) -> None:
    doc_id = seed(engine, mounted, sql_conn, "s.md", "deploy on Friday\n")
    statements.take()
    mounted.run("sed", "-i", "s/Friday/Monday/", "s.md")
    assert statements.take() == ["UPDATE"]
    assert engine.rows(sql_conn)["s.md"] == (doc_id, "deploy on Monday\n")
    src = work_dir / "tar-src"
    files = make_source(src)
    archive = work_dir / "src.tar"
    subprocess.run(["tar", "cf", str(archive), "-C", str(src), "."], check=True, timeout=60)
    mounted.run("mkdir", "untarred")
    mounted.run("tar", "xf", str(archive), "-C", "untarred")
    mounted.run("cp", "-a", f"{src}/.", "copied")
    # An empty new file is committed at release, which the kernel sends after close()
    # has returned (SEMANTICS: "bash's pre-write flush"): give `.config` that moment.
    expected = [f"{prefix}/{rel}" for prefix in ("untarred", "copied") for rel in files]
    deadline = time.monotonic() + 5
    while not all(path in engine.rows(sql_conn) for path in expected):
        assert time.monotonic() < deadline, "cp -a's files did not all reach the database"
        time.sleep(0.01)
    # tar's format keeps whole seconds; cp -a keeps nanoseconds.
    for prefix, mtime in (
        ("untarred", 1_700_000_000 * 10**9),
        ("copied", 1_700_000_000_123_456_789),
    ):
        for rel, text in files.items():
            assert engine.rows(sql_conn)[f"{prefix}/{rel}"][1] == text
            assert (mounted.path() / prefix / rel).stat().st_mtime_ns == mtime
    assert_no_scratch(engine, sql_conn)


def test_concurrent_appenders_lose_no_lines(
    engine: Engine, mounted: Mount, sql_conn: psycopg.Connection[Any]
) -> None:
    target = mounted.path() / "log.md"
    target.write_text("")
    writer = textwrap.dedent(
        """
        import os, sys
        fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
        for i in range(300):
            os.write(fd, f"{sys.argv[2]} {i}\\n".encode())
        os.close(fd)
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", writer, str(target), tag]) for tag in ("a", "b")
    ]
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    lines = engine.rows(sql_conn)["log.md"][1].splitlines()
    assert len(lines) == 600
    assert sorted(lines) == sorted(f"{t} {i}" for t in "ab" for i in range(300))
    # Two descriptors of one file share one buffer.
    with open(target, "a") as one, open(target) as two:
        one.write("shared\n")
        one.flush()
        assert two.read().endswith("shared\n")


def test_real_dotfile_matching_rsync_pattern_is_promoted(
    engine: Engine, mounted: Mount, sql_conn: psycopg.Connection[Any]
) -> None:
    """`.github.action` looks like an rsync temporary; closed and left alone, it is saved."""
    (mounted.path() / ".github.action").write_text("name: ci\n")
    assert ".github.action" not in engine.rows(sql_conn)
    deadline = time.monotonic() + 15
    while ".github.action" not in engine.rows(sql_conn) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert engine.rows(sql_conn)[".github.action"][1] == "name: ci\n"
    while "saved as a document" not in mounted.log():  # logged just after the commit
        assert time.monotonic() < deadline, "promotion was not logged"
        time.sleep(0.05)
