"""A mount of IronClaw's libSQL file (``reborn-local-dev.db``, built as IronClaw builds it):
real programs save, the rows are IronClaw's (storage classes, JSON text, versions,
chunks), the agent's puts show, and a running IronClaw's writer beside the mount never
fails (its busy timeout is 5 s: memfs's write transactions are short)."""

from __future__ import annotations

import errno
import json
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.ironclaw_libsql import (
    legacy_ironclaw_db,
    legacy_vector_index,
    legacy_write,
    legacy_write_by_libsql,
    libsql_statements,
    reborn_local_dev,
)

pytestmark = pytest.mark.mount

#: The scope a mount of user 'default' shows (IronClaw's tenant and agent).
S = "/memory/tenants/reborn-cli/users/default/agents/reborn-cli-agent/projects/_none"
K = '{"agent_id":"reborn-cli-agent","tenant_id":"reborn-cli","user_id":"default"}'


def eventually(check: Callable[[], bool], what: str, timeout: float = 10.0) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, f"timed out waiting for {what}"
        time.sleep(0.02)
    return time.monotonic() - started


def memory_rows(db: Path) -> dict[str, tuple[Any, ...]]:
    """path (relative) -> (contents, kind, indexed, version), every storage class checked."""
    found = {}
    with sqlite3.connect(db) as conn:
        for path, contents, kind, indexed, version, classes in conn.execute(
            "SELECT path, contents, kind, indexed, version, typeof(contents) || typeof(indexed) "
            "|| typeof(version) || typeof(is_dir) || typeof(content_type) FROM "
            "root_filesystem_entries WHERE path LIKE '/memory/%' ORDER BY path"
        ):
            assert classes == "blobtextintegerintegertext", (path, classes)
            found[path.removeprefix(S + "/")] = (bytes(contents), kind, indexed, version)
    return found


def put(db: Path, relative: str, text: str) -> None:
    """IronClaw's put of a document: compare-and-swap on version, in BEGIN IMMEDIATE."""
    conn = sqlite3.connect(db, isolation_level=None, timeout=5.0)
    try:
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute(
            "SELECT version FROM root_filesystem_entries WHERE path = ?", (f"{S}/{relative}",)
        ).fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO root_filesystem_entries (path, contents, content_type, kind, "
                "indexed, version, updated_at) VALUES (?, ?, 'application/json', "
                "'memory_document', ?, 1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
                (f"{S}/{relative}", text.encode(), K),
            )
        else:
            conn.execute(
                "UPDATE root_filesystem_entries SET contents = ?, version = version + 1, "
                "updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE path = ? "
                "AND version = ?",
                (text.encode(), f"{S}/{relative}", row[0]),
            )
        conn.execute("COMMIT")
    finally:
        conn.close()


@pytest.fixture
def db(work_dir: Path) -> Path:
    return reborn_local_dev(work_dir / f"ironclaw-{uuid.uuid4().hex[:8]}" / "reborn-local-dev.db")


def test_real_programs_on_a_libsql_mount_leave_ironclaws_rows(db: Path, mount_factory: Any) -> None:
    mount = mount_factory(f"sqlite:{db}")
    assert "IronClaw's libSQL file" in mount.log()
    mount.path("notes.md").write_text("first\n")
    if shutil.which("vim"):
        mount.run("vim", "--clean", "-c", "normal! Gosecond", "-c", "wq", "notes.md")
    else:
        mount.path("notes.md").write_text("first\nsecond\n")
    mount.run("sed", "-i", "s/first/one/", "notes.md")
    mount.path("d").mkdir()
    mount.path("d/tea.md").write_text("The user likes green tea.\n")
    mount.run("mv", "d", "e")
    mount.barrier()  # the folder move reached the file
    assert mount.path("notes.md").read_text() == "one\nsecond\n"
    rows = memory_rows(db)
    assert rows["notes.md"][0] == b"one\nsecond\n"
    assert rows["notes.md"][2] == K
    assert rows["e/tea.md"][0] == b"The user likes green tea.\n"
    assert '"doc_relative_path":"e/tea.md"' in rows["e/tea.md.chunks/0"][2]
    versions = sorted(p for p in rows if p.startswith("notes.md.versions/"))
    assert len(versions) == 2, versions  # first, then first + second
    assert "d/tea.md" not in rows
    assert (db.parent / (db.name + ".memfs")).stat().st_mode & 0o777 == 0o600
    hits = [p.name for p in mount.path(".search/green tea").iterdir()]
    assert hits == ["01-e∕tea.md"]
    mount.run("rm", "-rf", "e")
    mount.barrier()
    assert not any(p.startswith("e/") for p in memory_rows(db))


def test_status_says_ironclaw_holds_the_write_lock_and_since_when(
    db: Path, mount_factory: Any
) -> None:
    """Issue 55 item 2: while IronClaw holds its file's write lock, a save waits for it
    (IronClaw's writers wait 5 s, memfs's 15 s) and ``.status`` says who holds what since
    when, not "not answering for 0s"; once let go the save lands and the line is gone."""
    from tests.mount.test_first_hour import _hold_write_lock

    mount = mount_factory(f"sqlite:{db}")
    (mount.path("held.md")).write_text("before\n")
    holder = _hold_write_lock(db, 6.0)
    saver = threading.Thread(target=lambda: mount.path("held.md").write_text("waited\n"))
    seen: list[str] = []
    try:
        since = time.strftime("%H:%M")
        saver.start()

        def says_held() -> bool:
            seen.append(mount.path(".status").read_text())
            return "write lock" in seen[-1]

        eventually(says_held, ".status naming the held lock", timeout=5.0)
    finally:
        saver.join(timeout=30)
        holder.wait(timeout=30)
    line = next(x for x in seen[-1].splitlines() if "write lock" in x)
    assert "holds the file's write lock since" in line and since in line, line
    assert "not answering for 0s" not in seen[-1]
    assert memory_rows(db)["held.md"][0] == b"waited\n"
    status = mount.path(".status").read_text()
    assert "write lock" not in status
    watching = next(x for x in status.splitlines() if x.startswith("other writers:"))
    assert f"a watch on {db.name} and its -wal" in watching, watching  # what really runs


@pytest.mark.parametrize("layout", ["reborn", "legacy"])
def test_a_file_its_owner_made_read_only_mounts_read_only_and_every_write_command_refuses(
    layout: str, work_dir: Path, mount_factory: Any
) -> None:
    """Issue 55 item 3: as root, SQLite writes a file of mode 0444 all the same; the mode is
    its owner's word.  The mount says read-only and refuses writes with EROFS, and each
    command that writes refuses in one line, the file byte for byte as it was."""
    folder = work_dir / f"ironclaw-{uuid.uuid4().hex[:8]}"
    if layout == "reborn":
        db = reborn_local_dev(folder / "reborn-local-dev.db")
        put(db, "notes.md", "kept as it is\n")
    else:
        db = legacy_ironclaw_db(folder / "ironclaw.db")
        legacy_write(db, "notes.md", "kept as it is\n")
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.chmod(0o444)
    before = db.read_bytes()
    mount = mount_factory(f"sqlite:{db}")
    assert f"{db} is read-only (mode 0444, its owner's choice)" in mount.log()
    assert mount.path("notes.md").read_text() == "kept as it is\n"
    with pytest.raises(OSError) as refused:
        mount.path("notes.md").write_text("changed\n")
    assert refused.value.errno == errno.EROFS
    with pytest.raises(OSError) as refused:
        mount.path("new.md").write_text("new\n")
    assert refused.value.errno == errno.EROFS
    assert mount.umount() == 0
    source = folder / "to-import"
    source.mkdir()
    (source / "imported.md").write_text("imported\n")
    url = ["--database-url", f"sqlite:{db}"]
    for command in (
        ["import", str(source)],
        ["restore", "notes.md", "1"],
        ["undelete", "gone.md"],
        ["log", "a line"],
        ["reindex"],
        ["doctor", "--repair"],
    ):
        done = subprocess.run([sys.executable, "-m", "memfs", *command, *url],
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        assert done.returncode != 0 and done.stderr.count("\n") == 1, (command, done.stderr)
        assert "internal error" not in done.stderr and "Traceback" not in done.stderr
        assert f"{db} is read-only" in done.stderr, (command, done.stderr)
    assert db.read_bytes() == before


def test_the_agents_put_shows_on_the_mount_within_a_second_or_two(
    db: Path, mount_factory: Any
) -> None:
    mount = mount_factory(f"sqlite:{db}")
    put(db, "MEMORY.md", "The agent's fact.\n")
    waited = eventually(lambda: mount.path("MEMORY.md").exists(), "the agent's new document")
    assert mount.path("MEMORY.md").read_text() == "The agent's fact.\n"
    assert waited < 3.0
    put(db, "MEMORY.md", "The agent's fact.\nAnother.\n")
    eventually(lambda: "Another" in mount.path("MEMORY.md").read_text(), "the agent's update")


WRITER = textwrap.dedent("""
    import sqlite3, sys, time
    db, scope, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    keys = '{"agent_id":"reborn-cli-agent","tenant_id":"reborn-cli","user_id":"default"}'
    conn = sqlite3.connect(db, isolation_level=None, timeout=5.0)  # IronClaw's busy timeout
    failures = puts = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            conn.execute("BEGIN IMMEDIATE")
            path = f"{scope}/agent/{puts % 20}.md"
            conn.execute(
                "INSERT INTO root_filesystem_entries (path, contents, content_type, kind, "
                "indexed, version, updated_at) VALUES (?, ?, 'application/json', "
                "'memory_document', ?, 1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) "
                "ON CONFLICT (path) DO UPDATE SET contents = excluded.contents, "
                "version = version + 1, updated_at = excluded.updated_at",
                (path, f"put {puts}\\n".encode(), keys))
            conn.execute("INSERT OR REPLACE INTO root_filesystem_sequences (path, next_seq) "
                         "VALUES ('/heartbeat', ?)", (puts + 1,))
            conn.execute("COMMIT")
            puts += 1
        except sqlite3.OperationalError as exc:
            failures += 1
            print("failed:", exc, file=sys.stderr, flush=True)
            try:
                conn.execute("ROLLBACK")
            except sqlite3.OperationalError:
                pass
        time.sleep(0.02)
    print(puts, failures)
""")


def test_a_running_ironclaw_writer_never_fails_beside_the_mount(
    db: Path, mount_factory: Any
) -> None:
    """IronClaw's puts and heartbeats every 20 ms for 8 s, at its 5 s busy timeout, while
    the mount saves 60 documents and moves folders: no put of either side fails."""
    mount = mount_factory(f"sqlite:{db}")
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), S, "8"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for n in range(60):
            folder = mount.path(f"f{n % 3}")
            folder.mkdir(exist_ok=True)
            (folder / f"{n}.md").write_text(f"note {n}\n" * 50)
            if n % 20 == 19:
                mount.run("mv", f"f{n % 3}", f"moved{n}")
        mount.barrier()
        out, err = writer.communicate(timeout=60)
    finally:
        writer.kill()
    puts, failures = (int(x) for x in out.split())
    assert failures == 0, err
    assert puts > 100
    rows = memory_rows(db)
    assert sum(1 for p in rows if p.startswith("agent/") and ".chunks" not in p) == 20
    assert sum(1 for p in rows if p.endswith(".md") and "/" in p
               and not p.startswith("agent/")) == 60  # fmt: skip


LEGACY_WRITER = textwrap.dedent("""
    import random, struct, sys, time, uuid, libsql
    db, seconds = sys.argv[1], float(sys.argv[2])
    conn = libsql.connect(db, isolation_level=None, timeout=5.0)  # IronClaw's busy timeout
    conn.execute("PRAGMA foreign_keys = ON")
    rng = random.Random(3)
    failures = puts = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            conn.execute("BEGIN IMMEDIATE")
            path = f"agent/{puts % 20}.md"
            row = conn.execute("SELECT id FROM memory_documents WHERE user_id = 'default' "
                               "AND agent_id IS NULL AND path = ?", (path,)).fetchone()
            doc = row[0] if row else str(uuid.uuid4())
            if row is None:
                conn.execute("INSERT INTO memory_documents (id, user_id, agent_id, path, "
                             "content, metadata) VALUES (?, 'default', NULL, ?, '', '{}')",
                             (doc, path))
            text = f"put {puts}\\n"
            conn.execute("UPDATE memory_documents SET content = ?, updated_at = "
                         "strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?", (text, doc))
            conn.execute("DELETE FROM memory_chunks WHERE document_id = ?", (doc,))
            vector = struct.pack("<4f", *(rng.random() for _ in range(4)))
            conn.execute("INSERT INTO memory_chunks (id, document_id, chunk_index, content, "
                         "embedding) VALUES (?, ?, 0, ?, ?)", (str(uuid.uuid4()), doc, text,
                         vector))
            conn.execute("INSERT OR REPLACE INTO settings (user_id, key, value) "
                         "VALUES ('default', 'heartbeat', ?)", (str(puts),))
            conn.execute("COMMIT")
            puts += 1
        except ValueError as exc:  # libSQL's every error
            failures += 1
            print("failed:", exc, file=sys.stderr, flush=True)
            try:
                conn.execute("ROLLBACK")
            except ValueError:
                pass
        time.sleep(0.02)
    print(puts, failures)
""")


def test_a_running_ironclaw_v1_0_never_fails_beside_a_mount_of_its_legacy_file(
    work_dir: Path, mount_factory: Any
) -> None:
    """IronClaw v1.0's writes on its own libSQL engine (a document with an embedded chunk
    and a settings heartbeat every 20 ms for 8 s, at its 5 s busy timeout) beside a mount
    of ``ironclaw.db`` with its vector index that saves 60 documents, moves folders and
    removes one: no write of either side fails, and the engine finds the file intact."""
    db = legacy_ironclaw_db(work_dir / f"beside-{uuid.uuid4().hex[:8]}" / "ironclaw.db")
    legacy_vector_index(db, 4)
    mount = mount_factory(f"sqlite:{db}")
    writer = subprocess.Popen(
        [sys.executable, "-c", LEGACY_WRITER, str(db), "8"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for n in range(60):
            folder = mount.path(f"f{n % 3}")
            folder.mkdir(exist_ok=True)
            (folder / f"{n}.md").write_text(f"note {n}\n" * 50)
            if n % 20 == 19:
                mount.run("mv", f"f{n % 3}", f"moved{n}")
        mount.run("rm", "-rf", "moved19")
        mount.barrier()
        out, err = writer.communicate(timeout=60)
    finally:
        writer.kill()
    puts, failures = (int(x) for x in out.split())
    assert failures == 0, err
    assert puts > 100
    with sqlite3.connect(db) as conn:
        paths = [r[0] for r in conn.execute("SELECT path FROM memory_documents")]
    assert sum(1 for p in paths if p.startswith("agent/")) == 20
    assert sum(1 for p in paths if not p.startswith("agent/")) == 60 - 7  # moved19 had 7
    assert libsql_statements(db, ("PRAGMA integrity_check", ())) == [[["ok"]]]


def test_ironclaw_s_legacy_file_mounts_with_its_history_and_search(
    work_dir: Path, mount_factory: Any
) -> None:
    """IronClaw <= v1.0's ``ironclaw.db`` with its vector index: every document, version
    and search of the scope; a save is IronClaw v1.0's write (the replaced content a
    version, the chunks replaced) made through IronClaw's libSQL engine, and the engine
    itself finds the file intact; IronClaw's own write shows on the mount.  With a Turso
    replica's metadata beside it, the same file mounts read-only (EROFS, file unchanged)."""
    db = legacy_ironclaw_db(work_dir / f"legacy-{uuid.uuid4().hex[:8]}" / "ironclaw.db")
    legacy_write(db, "MEMORY.md", "The user likes green tea.\n")
    legacy_write(db, "notes/a.md", "hello\n")
    legacy_write(db, "notes/a.md", "hello\nworld\n")
    legacy_vector_index(db, 4)
    mount = mount_factory(f"sqlite:{db}")
    assert "IronClaw's libSQL engine" in mount.log(), mount.log()[-2000:]
    assert sorted(p.name for p in mount.path().iterdir()) == ["MEMORY.md", "notes"]
    assert mount.path("notes/a.md").read_text() == "hello\nworld\n"
    grep = mount.run("grep", "-rl", "tea", ".")
    assert grep.stdout.split() == [b"./MEMORY.md"]
    kept = sorted(mount.path(".versions/notes/a.md").iterdir())
    assert [p.name.split("_")[0] for p in kept] == ["0001", "current.md"], kept
    assert kept[0].read_text() == "hello\n"
    assert [p.name for p in mount.path(".search/green tea").iterdir()] == ["01-MEMORY.md"]
    prompt = mount.path(".prompt").read_text()  # what IronClaw v1.0 tells the agent
    assert "## Long-Term Memory\n\nThe user likes green tea." in prompt, prompt
    mount.path("notes/a.md").write_text("changed\n")
    with sqlite3.connect(db) as conn:
        versions = conn.execute(
            "SELECT v.version, v.content FROM memory_document_versions v JOIN "
            "memory_documents d ON d.id = v.document_id WHERE d.path = 'notes/a.md' "
            "ORDER BY 1").fetchall()  # fmt: skip
        chunks = conn.execute(
            "SELECT c.content FROM memory_chunks c JOIN memory_documents d ON d.id = "
            "c.document_id WHERE d.path = 'notes/a.md'").fetchall()  # fmt: skip
    assert versions == [(1, "hello\n"), (2, "hello\nworld\n")]
    assert chunks == [("changed\n",)]
    assert libsql_statements(db, ("PRAGMA integrity_check", ())) == [[["ok"]]]
    legacy_write_by_libsql(db, "later.md", "IronClaw wrote this after the mount\n")
    eventually(lambda: mount.path("later.md").exists(), "IronClaw's new document")

    (db.parent / (db.name + "-info")).write_bytes(b"\0" * 32)  # a Turso embedded replica's
    replica = mount_factory(f"sqlite:{db}", name="replica")
    log = replica.log()
    assert "mounted read-only" in log and "Turso embedded replica" in log, log[-2000:]
    wal = db.with_name(db.name + "-wal")
    before = (db.read_bytes(), wal.read_bytes() if wal.exists() else b"")
    with pytest.raises(OSError) as refused:
        replica.path("notes/a.md").write_text("from the replica\n")
    assert refused.value.errno == errno.EROFS
    assert replica.path("notes/a.md").read_text() == "changed\n"
    assert (db.read_bytes(), wal.read_bytes() if wal.exists() else b"") == before


def _doctor(work_dir: Path, db: Path, *extra: str) -> tuple[int, dict[str, set[str]]]:
    from tests.mount.test_cli import run

    result = run(work_dir, "doctor", "--json", "--database-url", f"sqlite:{db}",
                 "--user-id", "default", *extra)  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    payload = json.loads(result.stdout)
    found: dict[str, set[str]] = {}
    for item in payload["items"]:
        found.setdefault(item["check"], set()).add(item["status"])
    return result.returncode, found


def _problems(found: dict[str, set[str]], status: str = "problem") -> set[str]:
    return {check for check, statuses in found.items() if status in statuses}


def test_doctor_on_the_reborn_file_finds_plants_and_mends_them(work_dir: Path) -> None:
    """Stale chunks (the agent's put without re-chunking) and a chunk row whose document
    is gone: found without a change to the file, then mended by ``--repair``."""
    db = reborn_local_dev(work_dir / f"doctor-{uuid.uuid4().hex[:8]}" / "reborn-local-dev.db")
    code, found = _doctor(work_dir, db)
    assert code == 0 and not _problems(found), found
    put(db, "notes.md", "written by the agent, never chunked\n")
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO root_filesystem_entries (path, contents, kind, content_type, indexed, "
            "version) VALUES (?, ?, 'memory_chunk', 'application/json', '{}', 1)",
            (f"{S}/gone.md.chunks/0", b"left behind"),
        )
    before = db.read_bytes(), memory_rows(db)
    code, found = _doctor(work_dir, db)
    assert code == 1 and _problems(found) == {"chunks", "orphans"}, found
    assert (db.read_bytes(), memory_rows(db)) == before  # a check changes nothing
    code, found = _doctor(work_dir, db, "--repair")
    assert code == 0 and _problems(found, "repaired") == {"chunks", "orphans"}, found
    rows = memory_rows(db)
    assert rows["notes.md.chunks/0"][0] == b"written by the agent, never chunked\n"
    assert "gone.md.chunks/0" not in rows
    code, found = _doctor(work_dir, db)
    assert code == 0 and not _problems(found), found


def test_doctor_on_the_legacy_file_finds_problems_and_mends_them(work_dir: Path) -> None:
    """Two rows at one path (IronClaw's NULL agent) and chunks of an older content: found
    without a change to the file, then mended by ``--repair`` (the older row renamed,
    nothing deleted; the chunks rebuilt)."""
    db = legacy_ironclaw_db(work_dir / f"doctor-{uuid.uuid4().hex[:8]}" / "ironclaw.db")
    legacy_write(db, "notes.md", "the first note\n")
    code, found = _doctor(work_dir, db)
    assert code == 0 and not _problems(found), found
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO memory_documents (id, user_id, agent_id, path, content) "
            "VALUES (?, 'default', NULL, 'notes.md', 'a second row\n')",
            (str(uuid.uuid4()),),
        )
        conn.execute("UPDATE memory_chunks SET content = 'stale'")
    before = db.read_bytes()
    code, found = _doctor(work_dir, db)
    assert code == 1 and _problems(found) == {"duplicate paths", "chunks"}, found
    assert db.read_bytes() == before  # a check changes nothing
    code, found = _doctor(work_dir, db, "--repair")
    assert code == 0 and _problems(found, "repaired") == {"duplicate paths", "chunks"}, found
    with sqlite3.connect(db) as conn:
        paths = sorted(r[0] for r in conn.execute("SELECT path FROM memory_documents"))
    assert len(paths) == 2 and "notes.md" in paths, paths
    code, found = _doctor(work_dir, db)
    assert code == 0 and not _problems(found), found


def test_the_facts_conformance_rows_on_a_mount(work_dir: Path, mount_factory: Any) -> None:
    """libsql facts §10.2, L1-L6, made by real programs on a mount of scope reborn-cli
    (user reborn-cli): the rows byte for byte, IronClaw's first search of the scope (spec
    row, FTS5 table named by IronClaw's hash, three triggers), bm25 and the fused scores."""
    from tests.model.test_libsql_reborn_store import (
        CHANGED_BY,
        HELLO_HASH,
        HELLOWORLD_HASH,
        chunk,
        doc,
    )  # fmt: skip
    from tests.model.test_libsql_reborn_store import rows as reborn_rows
    from tests.mount.test_cli import run

    db = reborn_local_dev(work_dir / f"facts-{uuid.uuid4().hex[:8]}" / "reborn-local-dev.db")
    mount = mount_factory(f"sqlite:{db}", extra_args=["--user-id", "reborn-cli"])
    mount.path("notes").mkdir()
    mount.run("sh", "-c", "printf hello > notes/a.md")  # L1
    chunk_a = ('{"agent_id":"reborn-cli-agent","chunk_index":0,"content":"hello",'
               '"doc_relative_path":"notes/a.md","tenant_id":"reborn-cli",'
               '"user_id":"reborn-cli"}')  # fmt: skip
    assert reborn_rows(db) == {"notes/a.md": doc(b"hello", 1),
                               "notes/a.md.chunks/0": chunk(chunk_a, b"hello")}  # fmt: skip
    mount.run("sh", "-c", "printf 'helloworld\\n' > notes/a.md")  # L2 (IronClaw's append's rows)
    found = reborn_rows(db)
    assert found["notes/a.md"] == doc(b"helloworld\n", 2)
    assert found["notes/a.md.versions/1"]["contents"] == (
        '{"changed_by":"' + CHANGED_BY + '","content":"hello","content_hash":"' + HELLO_HASH
        + '"}').encode()  # fmt: skip
    assert found["notes/a.md.versions/1"]["indexed"] == (
        '{"agent_id":"reborn-cli-agent","doc_relative_path":"notes/a.md",'
        '"tenant_id":"reborn-cli","user_id":"reborn-cli","version":1}')  # fmt: skip
    mount.path("MEMORY.md").write_text("The user likes green tea.\n")  # L3
    assert reborn_rows(db)["MEMORY.md.chunks/0"]["indexed"] == (
        '{"agent_id":"reborn-cli-agent","chunk_index":0,'
        '"content":"The user likes green tea.\\n","doc_relative_path":"MEMORY.md",'
        '"tenant_id":"reborn-cli","user_id":"reborn-cli"}')  # fmt: skip
    # L4: the scope's first search makes IronClaw's index.
    hits = [p.name for p in mount.path(".search/What tea does the user like?").iterdir()]
    assert hits == ["01-MEMORY.md"]
    table = "idx_rfs_memory_tenants_reborn_cli_users_reborn_cli_ag_05be41e0"
    with sqlite3.connect(db) as conn:
        scope = S.replace("/default/", "/reborn-cli/")
        spec = conn.execute("SELECT name, keys, kind FROM root_filesystem_index_specs "
                            "WHERE prefix = ?", (scope,)).fetchall()  # fmt: skip
        triggers = sorted(r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE ?",
            (table + "%",)))  # fmt: skip
        bm25 = conn.execute(f"SELECT path, bm25({table}_fts) FROM {table}_fts WHERE "
                            f"{table}_fts MATCH ? ORDER BY 2", ('"tea" OR "user" OR "like"',)
                            ).fetchall()  # fmt: skip
    assert spec == [("memory_chunks_content_fts", '["content"]', "fts")]
    assert triggers == [f"{table}_ad", f"{table}_ai", f"{table}_au"]
    assert bm25[0][0].endswith("/MEMORY.md.chunks/0")
    assert bm25[0][1] == pytest.approx(-0.957206747, abs=1e-8)
    mount.run("sh", "-c", "printf 'tea time' > notes/a.md")  # L5
    found = reborn_rows(db)
    assert found["notes/a.md"] == doc(b"tea time", 3)
    assert HELLOWORLD_HASH.encode() in found["notes/a.md.versions/2"]["contents"]
    assert [p.name for p in mount.path(".search/tea").iterdir()] == [  # L6
        "01-notes∕a.md", "02-MEMORY.md"]  # fmt: skip
    scored = run(work_dir, "search", "tea", "--json", "--database-url", f"sqlite:{db}",
                 "--user-id", "reborn-cli")  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    items = json.loads(scored.stdout)["items"]
    assert [(i["path"], i["score"]) for i in items] == [
        ("notes/a.md", 1.0), ("MEMORY.md", pytest.approx(61 / 62, rel=1e-6))]  # fmt: skip


def test_an_rm_rf_cut_short_by_sigkill_is_finished_by_the_next_mount(
    db: Path, work_dir: Path, mount_factory: Any
) -> None:
    """A batch of removals too large for one transaction of the file (2 documents a part
    here) is noted before its first part: the daemon SIGKILLed between two parts, the
    next mount makes the rest of it before it shows the folder, each document kept for
    undelete.  (Removals the daemon had not begun to send are not noted: those documents
    may show again, as on PostgreSQL; the batches form as ``rm`` goes.)"""
    from tests.mounting import memfs_env

    env = memfs_env(work_dir / "runtime", MEMFS_LIBSQL_MOVE_LIMIT="2")
    mount = mount_factory(f"sqlite:{db}", env=env)
    mount.shell("mkdir big && for i in $(seq 40); do echo note $i > big/n$i.md; done")
    mount.barrier()
    kept_file = f"{db}.memfs-deleted"

    def left() -> set[str]:  # the folder's documents (their sidecars go with them)
        rows = memory_rows(db).items()
        return {p for p, row in rows if p.startswith("big/") and row[1] == "memory_document"}

    def noted() -> set[str]:
        with sqlite3.connect(f"file:{kept_file}?mode=ro", uri=True) as conn:
            tables = conn.execute("SELECT name FROM sqlite_master WHERE name = 'removals_begun'")
            if tables.fetchone() is None:
                return set()
            return {p for (p,) in conn.execute("SELECT path FROM removals_begun")}

    assert len(left()) == 40
    mount.run("rm", "-rf", "big")  # returns at once: the removals go in parts after it
    eventually(lambda: bool(noted()) and len(left()) < 40, "a noted batch's first part", 15)
    mount.kill()  # SIGKILL, between two parts of that batch
    unfinished = {p for p in noted() if p.startswith("big/")}
    # Stopped between parts: some of the batch still to remove.  (A part may have committed
    # just before the kill, its note not yet cleared: finishing it again is harmless.)
    assert unfinished & left(), "the daemon was not stopped between parts"
    again = mount_factory(f"sqlite:{db}", env=env)
    shown = (
        {f"big/{p.name}" for p in again.path("big").iterdir()}
        if again.path("big").exists()
        else set()
    )
    assert not unfinished & left() and not unfinished & shown  # the batch was finished
    assert shown == left()  # what shows again is only what no batch had begun to remove
    assert noted() == set()
    assert "removals a mount began in parts" in again.log()
    with sqlite3.connect(kept_file) as conn:
        kept = conn.execute("SELECT count(DISTINCT path) FROM deleted_documents").fetchone()[0]
    assert kept == 40 - len(left())


def test_a_file_on_a_read_only_filesystem_is_read_as_it_is_and_mounts_read_only(
    work_dir: Path, mount_factory: Any
) -> None:
    """Issue 55 item 10: IronClaw's WAL file on a read-only filesystem (a backup disk, a
    read-only bind mount) could not be opened at all (SQLite makes the -shm beside it):
    status, search, doctor and mount ended in 'unable to open database file'.  Nothing can
    change the file there, so it is read immutable: the read commands answer, the mount is
    read-only and says why, and each command that writes refuses in one line."""
    from tests.mounting import memfs_env

    folder = work_dir / f"ro-{uuid.uuid4().hex[:8]}"
    source = reborn_local_dev(folder / "source" / "reborn-local-dev.db")
    put(source, "notes.md", "kept as it is\n")
    view = folder / "view"
    view.mkdir()
    bound = subprocess.run(["mount", "--bind", str(source.parent), str(view)],
                           capture_output=True, timeout=30, check=False)  # fmt: skip
    if bound.returncode != 0:
        pytest.skip(f"a read-only bind mount needs root: {bound.stderr!r}")
    try:
        ro = subprocess.run(["mount", "-o", "remount,ro,bind", str(view)],
                            capture_output=True, timeout=30, check=False)  # fmt: skip
        assert ro.returncode == 0, ro.stderr
        db = view / "reborn-local-dev.db"
        url = ["--database-url", f"sqlite:{db}", "--user-id", "default"]

        def memfs(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "memfs", *args, *url],
                                  capture_output=True, text=True, timeout=60, check=False,
                                  env=memfs_env(work_dir / "runtime"))  # fmt: skip

        for command in (["status"], ["search", "kept"], ["doctor"]):
            done = memfs(*command)  # doctor finds the chunks IronClaw's put leaves to it
            assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
            assert "unable to open" not in done.stderr and "internal error" not in done.stderr
        assert "documents:          1" in memfs("status").stdout  # read, not just opened
        for command in (["log", "a line"], ["doctor", "--repair"]):
            done = memfs(*command)
            assert done.returncode != 0 and done.stderr.count("\n") == 1, done.stderr
            assert "read-only filesystem" in done.stderr and "Traceback" not in done.stderr
        mount = mount_factory(f"sqlite:{db}")
        assert "is on a read-only filesystem" in mount.log()
        assert mount.path("notes.md").read_text() == "kept as it is\n"
        with pytest.raises(OSError) as refused:
            mount.path("new.md").write_text("new\n")
        assert refused.value.errno == errno.EROFS
        assert mount.umount() == 0
    finally:
        subprocess.run(["umount", str(view)], capture_output=True, timeout=30, check=False)
