"""Private by default: a password on the command line leaves ``ps`` (and the command says
to give it elsewhere); ``import`` never follows a symlink out of the tree, nor blocks on a
FIFO; ``recover`` passes over a crafted manifest entry or a planted symlink and restores
the rest.  (Modes of the state folders: ``test_nothing_lost.py``.)"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memfs.config import Settings
from memfs.private import PASSWORD_WARNING
from tests.mount.test_cli import run

pytestmark = pytest.mark.mount


def with_password(url: str, password: str) -> str:
    """The embedded server's URL (trust authentication) with a password in it."""
    assert "://postgres:@" in url or "://postgres@" in url, url
    return url.replace("://postgres:@", f"://postgres:{password}@").replace(
        "://postgres@", f"://postgres:{password}@"
    )


def test_a_password_on_the_command_line_leaves_the_process_title(
    database_url: str, work_dir: Path, tmp_path: Path
) -> None:
    url = with_password(database_url, "hunter2-secret")
    mountpoint = tmp_path / "mnt"
    mounted = run(work_dir, "mount", "--database-url", url, str(mountpoint))
    assert mounted.returncode == 0, mounted.stderr
    try:
        assert PASSWORD_WARNING in mounted.stderr
        pidfiles = list((work_dir / "runtime" / "memfs").glob("*.pid"))
        pids = [int(p.read_text().split()[0]) for p in pidfiles
                if str(mountpoint) in p.read_text()]  # fmt: skip
        assert len(pids) == 1, pidfiles
        cmdline = Path(f"/proc/{pids[0]}/cmdline").read_bytes()
        assert b"hunter2-secret" not in cmdline and b"mnt" in cmdline, cmdline
        assert b"***" in cmdline
    finally:
        assert run(work_dir, "umount", str(mountpoint)).returncode == 0
    quiet = run(work_dir, "status", "--database-url", database_url)
    assert PASSWORD_WARNING not in quiet.stderr  # no password given: no warning


def test_import_follows_no_symlink_out_of_the_tree_and_skips_a_fifo(
    database_url: str, work_dir: Path, tmp_path: Path, sql_conn: psycopg.Connection[Any]
) -> None:
    source = tmp_path / "tree"
    (source / "sub").mkdir(parents=True)
    (source / "notes.md").write_text("notes\n")
    (source / "passwd.md").symlink_to("/etc/passwd")
    (source / "sub" / "up.md").symlink_to(tmp_path / "outside.md")
    (tmp_path / "outside.md").write_text("private, not in the tree\n")
    (source / "alias.md").symlink_to(source / "notes.md")  # inside the tree: followed
    os.mkfifo(source / "pipe.md")
    result = run(work_dir, "import", str(source), "--database-url", database_url, "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["counts"]["skipped_symlink_out"] == 2
    assert report["counts"]["created"] == 2
    rows = dict(sql_conn.execute("SELECT path, content FROM memory_documents").fetchall())
    assert rows == {"notes.md": "notes\n", "alias.md": "notes\n"}
    problems = "\n".join(report["problems"])
    assert "passwd.md: a symlink out of the tree to /etc/passwd" in problems
    assert {"skipped": "pipe.md", "why": "a FIFO, not a file"} in report["items"]


def test_recover_passes_over_a_crafted_entry_and_a_symlink_and_restores_the_rest(
    database_url: str, work_dir: Path, sql_conn: psycopg.Connection[Any]
) -> None:
    run(work_dir, "init", "--database-url", database_url)
    env = {"XDG_STATE_HOME": str(work_dir / "runtime" / "state")}
    area = Settings(database_url=database_url, user_id="default").recovery_dir
    run_dir = work_dir / "runtime" / "state" / "memfs" / "recovery" / area.name / "20260101-1"
    (run_dir / "files").mkdir(parents=True)
    (run_dir / "files" / "good.md").write_text("kept words\n")
    (run_dir / "files" / "link.md").symlink_to("/etc/hostname")
    files = {
        name: {"kept_at": "2026-01-01T00:00:00+00:00", "size": 1, "reason": "test"}
        for name in ("good.md", "../../../escape.md", "link.md")
    }
    (run_dir / "manifest.json").write_text(json.dumps({"files": files}))
    listed = run(work_dir, "recover", "--database-url", database_url, env=env)
    assert listed.returncode == 0 and "1 kept" in listed.stdout, listed.stdout + listed.stderr
    restored = run(work_dir, "recover", "--restore", "--database-url", database_url, env=env)
    assert "1 restored" in restored.stdout, restored.stdout + restored.stderr
    assert "escape.md" in restored.stderr and "link.md" in restored.stderr
    rows = dict(sql_conn.execute("SELECT path, content FROM memory_documents").fetchall())
    assert rows == {"good.md": "kept words\n"}


def test_import_passes_over_a_repository_tool_folders_and_special_files_and_says_so(
    database_url: str, work_dir: Path, tmp_path: Path, sql_conn: psycopg.Connection[Any]
) -> None:
    """An Obsidian vault kept in git: its notes are memory; ``.git`` (the mount refuses it),
    ``.obsidian`` (a tool folder the mount keeps out of memory), a FIFO (which blocked the
    import forever) and a folder symlink (skipped without a word) are passed over, each
    named with why, and the import still succeeds."""
    source = tmp_path / "vault"
    (source / ".git" / "hooks").mkdir(parents=True)
    (source / ".git" / "hooks" / "commit-msg.sample").write_text("commit message hook\n")
    (source / ".obsidian").mkdir()
    (source / ".obsidian" / "app.json").write_text("{}\n")
    (source / "notes" / ".git").mkdir(parents=True)  # a nested repository too
    (source / "notes" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (source / "notes" / "a.md").write_text("alpha\n")
    (source / "linked").symlink_to(source / "notes")
    os.mkfifo(source / "pipe.md")
    result = run(work_dir, "import", str(source), "--database-url", database_url, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    rows = dict(sql_conn.execute("SELECT path, content FROM memory_documents").fetchall())
    assert rows == {"notes/a.md": "alpha\n"}
    skipped = {item["skipped"]: item["why"] for item in report["items"]}
    assert set(skipped) == {".git/", ".obsidian/", "notes/.git/", "linked/", "pipe.md"}
    assert "git repository" in skipped[".git/"] and "tool" in skipped[".obsidian/"]
    assert report["counts"]["skipped_repository"] == 2 and report["problems"] == []
    plain = run(work_dir, "import", str(source), "--database-url", database_url)
    assert ".obsidian/  a tool's own folder, never memory" in plain.stdout
