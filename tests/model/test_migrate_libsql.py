"""``memfs migrate`` between IronClaw's libSQL file and PostgreSQL, both ways (issue 31's
way up): a workspace with versions and metadata copied from a file to PostgreSQL and back
into a fresh file is the same — contents and version bodies byte for byte, metadata equal
as values, times equal to the millisecond.  ``MEMFS_MIGRATE_DOCS`` sizes it (60 in CI;
the closing note's run used 1,000)."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from memfs.db.interface import FileAttrs
from memfs.db.reborn.layout import RebornScope
from memfs.db.reborn.libsql.rows import SqliteRows, open_file
from memfs.db.reborn.store import RebornStore
from memfs.db.records import Write
from tests.ironclaw_libsql import legacy_ironclaw_db, legacy_write, reborn_local_dev
from tests.model.test_reborn_store import reborn_schema

DOCS = int(os.environ.get("MEMFS_MIGRATE_DOCS", "60"))
S = "/memory/tenants/reborn-cli/users/reborn-cli/agents/reborn-cli-agent/projects/_none"


def _workspace(db: Path, seed: int) -> None:
    """``DOCS`` documents in folders, each saved 1-4 times (0-3 versions), a few with a
    metadata sidecar, written through the store as a mount writes them."""
    rng = random.Random(seed)
    opened = open_file(db)
    store = RebornStore(opened, RebornScope(), rows=SqliteRows(opened))
    try:
        for n in range(DOCS):
            path = f"f{n % 7}/sub{n % 3}/doc{n}.md"
            for save in range(rng.randint(1, 4)):
                lines = range(rng.randint(1, 30))
                text = "".join(f"line {save}.{i} of {n}, ünïcode ✓\n" for i in lines)
                store.commit_document(Write(None, path, text), FileAttrs())
        for n in range(0, DOCS, 10):  # metadata sidecars, as IronClaw writes them
            with sqlite3.connect(db) as conn:
                conn.execute(
                    "INSERT INTO root_filesystem_entries (path, contents, content_type, kind, "
                    "indexed, version) VALUES (?, ?, 'application/octet-stream', NULL, '{}', 1)",
                    (
                        f"{S}/f{n % 7}/sub{n % 3}/doc{n}.md.meta",
                        json.dumps({"tags": ["x", n], "note": "é"}).encode(),
                    ),
                )
    finally:
        opened.close()


def _snapshot(db: Path) -> dict[str, Any]:
    """What must survive: per document its contents, metadata as a value, times to the
    millisecond, and each version's body bytes and time."""
    found: dict[str, Any] = {}
    with sqlite3.connect(db) as conn:
        for path, contents, kind, created, updated in conn.execute(
            "SELECT path, contents, kind, created_at, updated_at FROM root_filesystem_entries "
            "WHERE path LIKE '/memory/%' ORDER BY path"
        ):
            relative = path.removeprefix(S + "/")
            if kind == "memory_document":
                found[relative] = (bytes(contents), created, updated)
            elif kind == "memory_document_version":
                found[relative] = (bytes(contents), created)
            elif relative.endswith(".meta"):
                found[relative] = json.loads(bytes(contents))
    return found


def _migrate(source: str, target: str, work: Path) -> dict[str, Any]:
    env = dict(os.environ, HOME=str(work / "home"), XDG_DATA_HOME=str(work / "data"),
               XDG_STATE_HOME=str(work / "state"))  # fmt: skip
    env.pop("MEMFS_DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "memfs", "migrate", "--database-url", source,
         "--to-database-url", target, "--json"],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_a_libsql_workspace_goes_to_postgresql_and_back_the_same(
    tmp_path: Path, database_url: str
) -> None:
    source = reborn_local_dev(tmp_path / "source" / "reborn-local-dev.db")
    _workspace(source, seed=31)
    before = _snapshot(source)
    reborn_schema(database_url)  # a PostgreSQL IronClaw >= 1.1 has started on
    up = _migrate(f"sqlite:{source}", database_url, tmp_path)
    assert up["counts"]["documents_copied"] == DOCS
    versions = sum(1 for p in before if ".versions/" in p)
    assert up["counts"]["versions_copied"] == versions
    back = reborn_local_dev(tmp_path / "back" / "reborn-local-dev.db")
    down = _migrate(database_url, f"sqlite:{back}", tmp_path)
    assert down["counts"]["documents_copied"] == DOCS
    after = _snapshot(back)
    print(f"migrate of {DOCS} documents: up {up['counts']}, down {down['counts']}, "
          f"{len(before)} rows compared")  # fmt: skip
    assert after == before
    again = _migrate(database_url, f"sqlite:{back}", tmp_path)  # a re-run copies nothing
    assert again["counts"].get("already_there") == DOCS
    assert again["counts"].get("documents_copied", 0) == 0


def test_the_legacy_file_goes_up_to_reborn_with_its_versions(tmp_path: Path) -> None:
    """IronClaw <= v1.0's ``ironclaw.db`` (legacy rows, read only here) to a Reborn file memfs
    writes: every document with its versions, in the Reborn rows (the target's scope)."""
    legacy = legacy_ironclaw_db(tmp_path / "legacy" / "ironclaw.db")
    legacy_write(legacy, "MEMORY.md", "The user likes green tea.\n")
    for text in ("one\n", "one\ntwo\n", "one\ntwo\nthree\n"):
        legacy_write(legacy, "notes/a.md", text)
    legacy_write(legacy, "theirs.md", "another user's\n", user="someone-else")
    target = reborn_local_dev(tmp_path / "up" / "reborn-local-dev.db")
    report = _migrate(f"sqlite:{legacy}", f"sqlite:{target}", tmp_path)
    assert report["counts"]["documents_copied"] == 2
    assert report["counts"]["versions_copied"] == 2
    opened = open_file(target)
    try:
        store = RebornStore(opened, RebornScope(), rows=SqliteRows(opened))
        rows = {row.path: row for row in store.load_documents()}
        assert sorted(rows) == ["MEMORY.md", "notes/a.md"]
        contents = store.read_contents([rows["notes/a.md"].id])
        assert contents[rows["notes/a.md"].id].data == b"one\ntwo\nthree\n"
    finally:
        opened.close()
    bodies = [
        json.loads(bytes(body))["content"]
        for (body,) in sqlite3.connect(target).execute(
            "SELECT contents FROM root_filesystem_entries WHERE path LIKE '%notes/a.md.versions/%' "
            "ORDER BY path"
        )
    ]
    assert bodies == ["one\n", "one\ntwo\n"]


def test_paths_too_long_for_postgresql_are_found_before_anything_is_copied(
    tmp_path: Path,
) -> None:
    """IronClaw's libSQL file takes paths of any length; IronClaw's index on PostgreSQL
    does not.  A workspace holding one is refused in one line naming it, before a single
    document is copied (a libSQL target holds to the same limit: the way up stays open)."""
    legacy = legacy_ironclaw_db(tmp_path / "legacy" / "ironclaw.db")
    legacy_write(legacy, "MEMORY.md", "The user likes green tea.\n")
    deep = "/".join(f"{n:02d}" + "d" * 250 for n in range(11)) + "/x.md"
    legacy_write(legacy, deep, "deep\n")
    target = reborn_local_dev(tmp_path / "up" / "reborn-local-dev.db")
    env = dict(os.environ, HOME=str(tmp_path / "home"))
    env.pop("MEMFS_DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "memfs", "migrate", "--database-url", f"sqlite:{legacy}",
         "--to-database-url", f"sqlite:{target}"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "1 document path(s) are longer" in lines[0], done.stderr
    assert "'00ddd" in lines[0] and "nothing was copied" in lines[0]
    with sqlite3.connect(target) as conn:
        copied = conn.execute("SELECT count(*) FROM root_filesystem_entries "
                              "WHERE path LIKE '/memory/%'").fetchone()  # fmt: skip
    assert copied == (0,)
