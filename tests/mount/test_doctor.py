"""``memfs doctor``: each problem planted for real, found without changing anything, then
mended by ``--repair`` without losing a row anyone wrote; on every engine."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.engines import Engine, reborn_prefix
from tests.mount.test_cli import run

pytestmark = pytest.mark.mount

#: The workspace the mounts of ``mount_factory`` serve.
USER = ("--user-id", "default")


def doctor(work_dir: Path, url: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    result = run(work_dir, "doctor", "--json", "--database-url", url, *USER, *extra)
    payload = json.loads(result.stdout)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, payload, result.stderr


def statuses(payload: dict[str, Any]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for item in payload["items"]:
        found.setdefault(item["check"], set()).add(item["status"])
    return found


def everything(conn: psycopg.Connection[Any], engine: Engine) -> list[tuple[Any, ...]]:
    """Every row a repair could touch, to prove a check changed nothing."""
    if engine.name == "legacy":
        return conn.execute(
            "SELECT 'doc', id::text, path, md5(content), updated_at::text FROM memory_documents "
            "UNION ALL SELECT 'chunk', document_id::text, chunk_index::text, md5(content), '' "
            "FROM memory_chunks UNION ALL SELECT 'attrs', document_id::text, '', '', '' "
            "FROM memfs.file_attrs UNION ALL SELECT 'index', indexrelid::regclass::text, "
            "indisvalid::text, '', '' FROM pg_index WHERE indrelid = 'memory_documents'::regclass "
            "ORDER BY 1, 2, 3"
        ).fetchall()
    return conn.execute(
        "SELECT path, kind, md5(contents), version FROM root_filesystem_entries ORDER BY path"
    ).fetchall()


def test_doctor_finds_each_planted_problem_changes_nothing_and_repairs_all(
    engine: Engine, database_url: str, mount_factory: Any, work_dir: Path
) -> None:
    tree = work_dir / f"doctor-tree-{engine}"
    (tree / "projects").mkdir(parents=True)
    (tree / "notes.md").write_text("the first note\n")
    (tree / "projects" / "alpha.md").write_text("alpha's plan\n" * 40)
    imported = run(work_dir, "import", str(tree), "--database-url", database_url, *USER)
    assert imported.returncode == 0, imported.stderr
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert engine.contents(conn)["notes.md"] == "the first note\n", imported.stdout

    code, payload, _ = doctor(work_dir, database_url)
    assert code == 0, payload
    assert "problem" not in {s for v in statuses(payload).values() for s in v}, payload

    # A daemon killed outright leaves its pid file behind.
    mount = mount_factory(database_url)
    assert (mount.mountpoint / "notes.md").read_text() == "the first note\n"
    mount.kill()
    with psycopg.connect(database_url, autocommit=True) as conn:
        # Content written by SQL without re-chunking: search shows the old text.
        engine.agent_overwrites(conn, "projects/alpha.md", "alpha, rewritten by SQL\n")
        if engine.name == "legacy":
            # Two rows at one path (IronClaw's unique index does not hold with agent NULL).
            conn.execute(
                "INSERT INTO memory_documents (user_id, agent_id, path, content, metadata) "
                "VALUES ('default', NULL, 'notes.md', 'a second row of notes\n', '{}')"
            )
            conn.execute(
                "INSERT INTO memfs.file_attrs (document_id, mode, set_against) "
                "VALUES (%s, 420, now())",
                (uuid.uuid4(),),
            )
            conn.execute("CREATE INDEX doctor_planted ON memory_documents (path text_pattern_ops)")
            conn.execute(
                "UPDATE pg_index SET indisvalid = false "
                "WHERE indexrelid = 'doctor_planted'::regclass"
            )
        else:
            gone = f"{reborn_prefix('default')}/deleted-by-sql.md.chunks/0"
            conn.execute(
                "INSERT INTO root_filesystem_entries (path, contents, kind, content_type, "
                "indexed, version) VALUES (%s, %s, 'memory_chunk', 'application/json', %s, 1)",
                (gone, b"left behind", Jsonb({"chunk_index": 0})),
            )
        before = everything(conn, engine)

    code, payload, _ = doctor(work_dir, database_url)
    found = statuses(payload)
    assert code == 1
    expected = {"chunks", "pid files", "orphans"}
    if engine.name == "legacy":
        expected |= {"duplicate paths", "indexes"}
    assert {check for check, s in found.items() if "problem" in s} == expected, payload
    text = run(work_dir, "doctor", "--database-url", database_url, *USER)
    assert text.returncode == 1 and "projects/alpha.md" in text.stderr
    assert text.stderr.count("\n") == len(payload["problems"]) == len(expected), text.stderr
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert everything(conn, engine) == before  # read-only

    code, payload, _ = doctor(work_dir, database_url, "--repair")
    assert code == 0, payload
    assert {c for c, s in statuses(payload).items() if "repaired" in s} == expected, payload

    code, payload, _ = doctor(work_dir, database_url)
    assert code == 0, payload
    with psycopg.connect(database_url, autocommit=True) as conn:
        contents = engine.contents(conn)
        assert contents["projects/alpha.md"] == "alpha, rewritten by SQL\n"
        assert any("alpha, rewritten by SQL" in c for c in engine.chunk_texts(conn))
        assert not any("alpha's plan" in c for c in engine.chunk_texts(conn))
        if engine.name == "legacy":
            # Both rows kept, each at a name of its own.
            notes = {p: c for p, c in contents.items() if p.startswith("notes.")}
            assert sorted(notes.values()) == ["a second row of notes\n", "the first note\n"]
            assert len(notes) == 2
