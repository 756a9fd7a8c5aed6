"""``memfs sync``: a plain directory and the workspace, kept in step both ways."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from memfs.config import Settings
from memfs.db import Database, Scope, open_database
from memfs.sync import STATE_FILE, DirectorySync
from tests.engines import Engine
from tests.model.conftest import filesystem_of
from tests.mounting import memfs_env

Completed = subprocess.CompletedProcess[str]


def rows(conn: psycopg.Connection[Any]) -> dict[str, tuple[Any, str]]:
    return {
        r[0]: (r[1], r[2]) for r in conn.execute("SELECT path, id, content FROM memory_documents")
    }


def files(root: Path) -> set[str]:
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and not p.name.startswith(STATE_FILE)
    }


def continuous_sync(work_dir: Path, root: Path, url: str) -> subprocess.Popen[str]:
    """``memfs sync DIR`` watching both sides (stopped by the caller with SIGTERM)."""
    return subprocess.Popen(
        [sys.executable, "-m", "memfs", "sync", str(root), "--database-url", url],
        env=memfs_env(work_dir / "runtime"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip


def test_one_pass_each_way_deletes_renames_and_conflicts(
    database: Database, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    root = work_dir / "sync-dir"
    (root / "daily").mkdir(parents=True)
    (root / "MEMORY.md").write_text("local memory\n")
    (root / "daily/2026-03-03.md").write_text("local log\n")
    (root / "MEMORY.md~").write_text("editor backup")  # scratch: never synced
    (root / "photo.png").write_bytes(b"\x89PNG\x00")  # binary: skipped and reported
    sql_conn.execute(
        "INSERT INTO memory_documents (user_id, path, content) VALUES "
        "('default', 'agent.md', 'written by the agent\n')"
    )
    syncer = DirectorySync(database.store(Scope("default")), root)
    first = syncer.run_once()
    assert sorted(first.pushed) == ["MEMORY.md", "daily/2026-03-03.md"]
    assert first.pulled == ["agent.md"] and any("photo.png" in s for s in first.skipped)
    assert {p: c for p, (_, c) in rows(sql_conn).items()} == {
        "MEMORY.md": "local memory\n",
        "daily/2026-03-03.md": "local log\n",
        "agent.md": "written by the agent\n",
    }
    assert (root / "agent.md").read_text() == "written by the agent\n"
    assert syncer.run_once().counts() == {"skipped": 1}  # nothing left to do
    ids = {p: i for p, (i, _) in rows(sql_conn).items()}

    # Changes on one side only travel to the other.
    (root / "MEMORY.md").write_text("local memory, edited\n")
    sql_conn.execute(
        "UPDATE memory_documents SET content = 'agent, edited\n' WHERE path = 'agent.md'"
    )
    report = syncer.run_once()
    assert report.pushed == ["MEMORY.md"] and report.pulled == ["agent.md"]
    assert rows(sql_conn)["MEMORY.md"] == (ids["MEMORY.md"], "local memory, edited\n")
    assert (root / "agent.md").read_text() == "agent, edited\n"

    # Renames keep the row's identity, in both directions.
    os.rename(root / "MEMORY.md", root / "NOTES.md")
    sql_conn.execute(
        "UPDATE memory_documents SET path = 'logs/03.md' WHERE path = 'daily/2026-03-03.md'"
    )
    report = syncer.run_once()
    assert len(report.renamed) == 2
    assert rows(sql_conn)["NOTES.md"][0] == ids["MEMORY.md"]
    assert (root / "logs/03.md").read_text() == "local log\n"
    assert not (root / "daily/2026-03-03.md").exists()

    # Deletes travel too.
    (root / "NOTES.md").unlink()
    sql_conn.execute("DELETE FROM memory_documents WHERE path = 'agent.md'")
    report = syncer.run_once()
    assert report.deleted_remote == ["NOTES.md"] and report.deleted_local == ["agent.md"]
    assert set(rows(sql_conn)) == {"logs/03.md"} and files(root) == {
        "logs/03.md", "MEMORY.md~", "photo.png",
    }  # fmt: skip

    # Changed on both sides: the local file wins, the database's version is kept.
    (root / "logs/03.md").write_text("edited locally\n")
    sql_conn.execute("UPDATE memory_documents SET content = 'edited by the agent\n'")
    report = syncer.run_once()
    assert report.conflicts == ["logs/03.md"]
    assert rows(sql_conn)["logs/03.md"][1] == "edited locally\n"
    kept = [r[0] for r in sql_conn.execute("SELECT content FROM memory_document_versions")]
    assert "edited by the agent\n" in kept


def test_continuous_sync_follows_both_sides(
    database: Database, database_url: str, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    root = work_dir / "live-sync"
    root.mkdir()
    proc = continuous_sync(work_dir, root, database_url)
    try:
        deadline = time.monotonic() + 30
        while not (root / STATE_FILE).exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # the first pass has run
        (root / "local.md").write_text("from the directory\n")
        sql_conn.execute(
            "INSERT INTO memory_documents (user_id, path, content) VALUES "
            "('default', 'remote.md', 'from the database\n')"
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            done_remote = rows(sql_conn).get("local.md", (None, ""))[1] == "from the directory\n"
            if done_remote and (root / "remote.md").exists():
                break
            time.sleep(0.1)
        assert rows(sql_conn)["local.md"][1] == "from the directory\n"
        assert (root / "remote.md").read_text() == "from the database\n"
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, output


def sync_once(work_dir: Path, root: Path, url: str, *extra: str) -> Completed:
    return subprocess.run(
        [sys.executable, "-m", "memfs", "sync", str(root), "--once", "--database-url", url,
         *extra],
        env=memfs_env(work_dir / "runtime"), capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip


def test_a_folder_synced_with_one_workspace_is_refused_for_another(
    database: Database, database_url: str, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    """The first day's data loss: ``memfs sync DIR`` with another user id (or database)
    took the state of the last pass for this one's and deleted every file synced before."""
    root = work_dir / "notes"
    root.mkdir()
    (root / "draft.md").write_text("mine\n")
    first = sync_once(work_dir, root, database_url, "--user-id", "alice")
    assert first.returncode == 0, first.stderr
    (root / "later.md").write_text("written since\n")

    other_user = sync_once(work_dir, root, database_url, "--user-id", "bob")
    assert other_user.returncode == 2, other_user.stderr
    assert other_user.stderr.count("\n") == 1 and "Traceback" not in other_user.stderr
    assert "was last synced with another database or workspace" in other_user.stderr
    assert "'bob'" in other_user.stderr
    assert (root / "draft.md").read_text() == "mine\n" and (root / "later.md").exists()
    assert [r[0] for r in sql_conn.execute("SELECT user_id FROM memory_documents")] == ["alice"]

    name = database_url.split("?", maxsplit=1)[0].rsplit("/", 1)[1]
    other_database = database_url.replace(f"/{name}", "/postgres", 1)
    elsewhere = sync_once(work_dir, root, other_database, "--user-id", "alice")
    assert elsewhere.returncode == 2 and "database (OID)" in elsewhere.stderr, elsewhere.stderr

    # Another URL for the same database (a parameter more) is the same database.
    alias = database_url + ("&" if "?" in database_url else "?") + "application_name=alias"
    again = sync_once(work_dir, root, alias, "--user-id", "alice")
    assert again.returncode == 0, again.stderr
    assert {r[0] for r in sql_conn.execute("SELECT path FROM memory_documents")} == {
        "draft.md", "later.md",
    }  # fmt: skip


def test_two_syncs_of_one_folder_do_not_run_at_once(
    database: Database, database_url: str, work_dir: Path
) -> None:
    root = work_dir / "shared"
    root.mkdir()
    proc = continuous_sync(work_dir, root, database_url)
    try:
        deadline = time.monotonic() + 30
        while not (root / STATE_FILE).exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        second = sync_once(work_dir, root, database_url)
        assert second.returncode == 2, second.stderr
        assert f"another memfs sync of {root} is running (pid {proc.pid})" in second.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert sync_once(work_dir, root, database_url).returncode == 0  # free again


def test_sync_reads_only_what_the_mount_would_keep_and_deletes_nothing_it_passed_over(
    database: Database, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    """A FIFO blocked the pass forever and ``.git`` internals became memory; a file that
    turned unreadable (binary) counted as deleted, so its row was deleted."""
    root = work_dir / "vault"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    (root / ".obsidian").mkdir()
    (root / ".obsidian" / "app.json").write_text("{}\n")
    (root / "notes.md").write_text("notes\n")
    os.mkfifo(root / "pipe.md")
    syncer = DirectorySync(database.store(Scope("default")), root)
    first = syncer.run_once()
    assert first.pushed == ["notes.md"]
    assert {s.split(" ")[0] for s in first.skipped} == {".git/", ".obsidian/", "pipe.md"}
    assert set(rows(sql_conn)) == {"notes.md"}
    (root / "notes.md").write_bytes(b"now binary \x00\x01")
    second = syncer.run_once()
    assert "notes.md (not UTF-8 text)" in second.skipped and not second.deleted_remote
    assert rows(sql_conn)["notes.md"][1] == "notes\n"
    (root / "notes.md").write_text("text again\n")
    assert syncer.run_once().pushed == ["notes.md"]  # its state was kept meanwhile


def test_a_name_of_255_bytes_syncs(
    database: Database, database_url: str, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    """The pull's temporary file was named after the file: a name the mount accepted (255
    bytes) made every later sync crash with 'File name too long'."""
    name = "é" * 125 + "xy.md"  # 255 bytes in UTF-8
    assert len(name.encode()) == 255
    sql_conn.execute("INSERT INTO memory_documents (user_id, path, content) VALUES "
                     "('default', %s, 'long\n')", (name,))  # fmt: skip
    root = work_dir / "long-names"
    done = sync_once(work_dir, root, database_url)
    assert done.returncode == 0, done.stderr
    assert (root / name).read_text() == "long\n"
    assert sorted(p.name for p in root.iterdir()) == sorted(
        [name, STATE_FILE, STATE_FILE + ".lock"]
    )


def test_a_pass_that_fails_midway_keeps_what_it_did(
    database: Database, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    """A pass pulls the agent's change to ``a.md``, then the database refuses the push of
    ``b.md``.  The next pass must know ``a.md`` was pulled: without it, the local copy
    looked edited, the database's newer content looked like a conflict, and the copy won,
    pushing every line another writer added since into a version (the Reborn soak: 34
    lines of the shared file, after a pass that exited 3)."""
    root = work_dir / "sync-midway"
    root.mkdir()
    (root / "a.md").write_text("one\n")
    syncer = DirectorySync(database.store(Scope("default")), root)
    syncer.run_once()
    sql_conn.execute("UPDATE memory_documents SET content = content || 'agent\n'")
    (root / "b.md").write_text("refused\n")
    sql_conn.execute(
        "CREATE FUNCTION refuse_b() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.path = 'b.md' THEN RAISE EXCEPTION 'refused by the test'; END IF; "
        "RETURN NEW; END $$; CREATE TRIGGER refuse_b BEFORE INSERT ON memory_documents "
        "FOR EACH ROW EXECUTE FUNCTION refuse_b()"
    )
    try:
        syncer.run_once()
        raise AssertionError("the refused push was expected to end the pass")
    except psycopg.Error:
        pass
    assert (root / "a.md").read_text() == "one\nagent\n", "pulled before the failure"
    sql_conn.execute("DROP TRIGGER refuse_b ON memory_documents")
    sql_conn.execute("UPDATE memory_documents SET content = content || 'agent 2\n'")
    after = syncer.run_once()
    assert after.conflicts == []
    assert rows(sql_conn)["a.md"][1] == "one\nagent\nagent 2\n"
    assert (root / "a.md").read_text() == "one\nagent\nagent 2\n"
    assert rows(sql_conn)["b.md"][1] == "refused\n"


def test_one_pass_each_way_on_every_engine(
    engine: Engine, database_url: str, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    """The passes above on all four engines (the agent's side as each engine's IronClaw
    writes it): pushed and pulled, edits each way, a local rename keeping the row, deletes
    each way, and a change on both sides (the local file wins, the database's content is
    kept as a version)."""
    root = work_dir / f"sync-{engine}"
    (root / "daily").mkdir(parents=True)
    (root / "MEMORY.md").write_text("local memory\n")
    (root / "daily/03.md").write_text("local log\n")
    (root / "MEMORY.md~").write_text("editor backup")  # scratch: never synced
    url = engine.mount_url(database_url)
    engine.agent_writes(sql_conn, url, {"agent.md": "written by the agent\n"})
    database = open_database(Settings(database_url=url))
    try:
        syncer = DirectorySync(filesystem_of(engine, database).store, root)
        first = syncer.run_once()
        assert sorted(first.pushed) == ["MEMORY.md", "daily/03.md"]
        assert first.pulled == ["agent.md"]
        assert engine.contents(sql_conn) == {
            "MEMORY.md": "local memory\n", "daily/03.md": "local log\n",
            "agent.md": "written by the agent\n",
        }  # fmt: skip
        assert (root / "agent.md").read_text() == "written by the agent\n"
        assert syncer.run_once().counts() == {}, "nothing left to do"
        memory = engine.rows(sql_conn)["MEMORY.md"][0]

        (root / "MEMORY.md").write_text("local memory, edited\n")
        engine.agent_overwrites(sql_conn, "agent.md", "agent, edited\n")
        report = syncer.run_once()
        assert report.pushed == ["MEMORY.md"] and report.pulled == ["agent.md"]
        assert (root / "agent.md").read_text() == "agent, edited\n"

        os.rename(root / "MEMORY.md", root / "NOTES.md")
        report = syncer.run_once()
        assert len(report.renamed) == 1
        assert engine.rows(sql_conn)["NOTES.md"] == (memory, "local memory, edited\n")

        (root / "NOTES.md").unlink()
        engine.agent_deletes(sql_conn, "agent.md")
        report = syncer.run_once()
        assert report.deleted_remote == ["NOTES.md"] and report.deleted_local == ["agent.md"]
        assert set(engine.contents(sql_conn)) == {"daily/03.md"}
        assert files(root) == {"daily/03.md", "MEMORY.md~"}

        (root / "daily/03.md").write_text("edited locally\n")
        engine.agent_overwrites(sql_conn, "daily/03.md", "edited by the agent\n")
        report = syncer.run_once()
        assert report.conflicts == ["daily/03.md"]
        assert engine.contents(sql_conn)["daily/03.md"] == "edited locally\n"
        assert "edited by the agent\n" in engine.versions(sql_conn, "daily/03.md")
    finally:
        database.close()
