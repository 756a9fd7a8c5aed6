"""The Reborn engine (``memfs.db.reborn``) against IronClaw's rows.

The database is built from ``tests/fixtures/reborn_schema.sql`` (IronClaw's V26-V34 as the
reborn facts record them, projection trigger included).  Each test performs through the
store what the facts' conformance examples (§8) perform through IronClaw, and compares
every row left; every row memfs writes must also pass the validators IronClaw runs on each
row it reads (§3.2), since one bad row breaks a user's whole memory.
"""

from __future__ import annotations

import errno
import hashlib
import json
import re
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from memfs.db.deferred import MoveDir
from memfs.db.interface import FileAttrs
from memfs.db.reborn.layout import RebornScope
from memfs.db.reborn.search_store import RebornSearchStore
from memfs.db.reborn.store import PATH_IDS, RebornStore, path_id
from memfs.db.records import Rename, Replacement, SaveOptions, Write
from memfs.db.schema import MEMFS_SCHEMA_DDL
from memfs.errors import WriteRefused
from memfs.search.reborn import RebornSearch

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "reborn_schema.sql"
A = "/memory/tenants/reborn-cli/users/alice/agents/reborn-cli-agent/projects/_none"
K = {"tenant_id": "reborn-cli", "user_id": "alice", "agent_id": "reborn-cli-agent"}
CHANGED_BY = "tenant:reborn-cli:user:alice:agent:reborn-cli-agent:project:_none"
NO_ATTRS = FileAttrs()

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_CONTENT_TYPE = re.compile(r"^[A-Za-z0-9/+._-]{1,128}$")


def reborn_schema(url: str) -> None:
    """A database as IronClaw >= 1.1 leaves it, plus memfs's own schema."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(FIXTURE.read_text())  # type: ignore[arg-type]
        conn.execute(MEMFS_SCHEMA_DDL)  # type: ignore[arg-type]


@pytest.fixture
def store(database_url: str) -> Iterator[RebornStore]:
    reborn_schema(database_url)
    pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]] = ConnectionPool(
        database_url, min_size=1, max_size=2, kwargs={"autocommit": True}, open=True
    )
    yield RebornStore(pool, RebornScope("reborn-cli", "alice", "reborn-cli-agent"), origin="t")
    pool.close()


def rows(conn: psycopg.Connection[Any]) -> dict[str, dict[str, Any]]:
    """Every row of the table, by path relative to scope A where it is under it."""
    found = {}
    for path, contents, kind, ctype, indexed, version, is_dir, created, updated in conn.execute(
        "SELECT path, contents, kind, content_type, indexed, version, is_dir, created_at, "
        "updated_at FROM root_filesystem_entries ORDER BY path"
    ):
        assert_ironclaw_can_read(path, kind, ctype, indexed)
        assert created <= updated
        found[path.removeprefix(A + "/")] = {
            "contents": bytes(contents), "kind": kind, "type": ctype, "indexed": indexed,
            "version": version, "is_dir": is_dir,
        }  # fmt: skip
    return found


def assert_ironclaw_can_read(path: str, kind: str | None, ctype: str, indexed: Any) -> None:
    """IronClaw's validators for every row it reads under a scope (reborn facts §3.2)."""
    assert isinstance(indexed, dict), (path, indexed)
    for key, value in indexed.items():
        assert _KEY.match(key), (path, key)
        assert isinstance(value, (bool, int, str)) or (
            isinstance(value, list) and all(isinstance(b, int) and 0 <= b <= 255 for b in value)
        ), (path, key, value)
        if isinstance(value, int) and not isinstance(value, bool):
            assert -(2**63) <= value < 2**63
    assert kind is None or _KEY.match(kind), (path, kind)
    assert _CONTENT_TYPE.match(ctype), (path, ctype)
    assert path.startswith("/") and "\\" not in path
    assert not any(ord(c) < 0x20 or ord(c) == 0x7F for c in path), path
    assert ".." not in path.split("/"), path


def document(contents: bytes, version: int) -> dict[str, Any]:
    return {"contents": contents, "kind": "memory_document", "type": "application/json",
            "indexed": K, "version": version, "is_dir": False}  # fmt: skip


def chunk(text: str, index: int, relative: str) -> dict[str, Any]:
    indexed = {**K, "content": text, "chunk_index": index, "doc_relative_path": relative}
    return {"contents": text.encode(), "kind": "memory_chunk", "type": "application/json",
            "indexed": indexed, "version": 1, "is_dir": False}  # fmt: skip


def version_row(old: bytes, number: int, relative: str) -> dict[str, Any]:
    body = (
        '{"changed_by":"' + CHANGED_BY + '","content":' + json.dumps(old.decode(),
        ensure_ascii=False) + ',"content_hash":"sha256:' + hashlib.sha256(old).hexdigest() + '"}'
    )  # fmt: skip
    indexed = {**K, "doc_relative_path": relative, "version": number}
    return {"contents": body.encode(), "kind": "memory_document_version",
            "type": "application/json", "indexed": indexed, "version": 1,
            "is_dir": False}  # fmt: skip


def test_e1_to_e4_writes_leave_ironclaws_rows(
    store: RebornStore, sql_conn: psycopg.Connection[Any]
) -> None:
    first = store.commit_document(Write(None, "notes/a.md", "hello"), NO_ATTRS)  # E1
    assert first.created
    assert rows(sql_conn) == {
        "notes/a.md": document(b"hello", 1),
        "notes/a.md.chunks/0": chunk("hello", 0, "notes/a.md"),
    }
    doc_id = first.doc_id
    store.commit_document(
        Write(doc_id, "notes/a.md", "helloworld\n"),
        NO_ATTRS,
        SaveOptions(expected=first.updated_at),
    )  # E2
    after_e2 = rows(sql_conn)
    assert after_e2 == {
        "notes/a.md": document(b"helloworld\n", 2),
        "notes/a.md.chunks/0": chunk("helloworld\n", 0, "notes/a.md"),
        "notes/a.md.versions/1": version_row(b"hello", 1, "notes/a.md"),
    }
    assert after_e2["notes/a.md.versions/1"]["contents"] == (
        b'{"changed_by":"tenant:reborn-cli:user:alice:agent:reborn-cli-agent:project:_none",'
        b'"content":"hello","content_hash":"sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7'
        b'425e73043362938b9824"}'
    )
    store.commit_document(Write(doc_id, "notes/a.md", "hello"), NO_ATTRS)  # E3
    third = rows(sql_conn)
    assert third["notes/a.md"] == document(b"hello", 3)
    assert third["notes/a.md.versions/2"] == version_row(b"helloworld\n", 2, "notes/a.md")
    assert json.loads(third["notes/a.md.versions/2"]["contents"])["content_hash"].startswith(
        "sha256:8cd07f3a"
    )
    store.commit_document(Write(doc_id, "notes/a.md", "hello"), NO_ATTRS)  # E4: same bytes
    fourth = rows(sql_conn)
    assert fourth["notes/a.md"] == document(b"hello", 4)
    assert sorted(fourth) == sorted(third), "no version row for an identical rewrite"


def test_e5_skip_versioning_in_the_meta_sidecar_keeps_no_version(
    store: RebornStore, sql_conn: psycopg.Connection[Any]
) -> None:
    result = store.commit_document(Write(None, "notes/a.md", "hello"), NO_ATTRS)
    sql_conn.execute(  # IronClaw's write with metadata leaves this sidecar (E5)
        "INSERT INTO root_filesystem_entries (path, contents, version) VALUES (%s, %s, 1)",
        (A + "/notes/a.md.meta", b'{"skip_versioning":true}'),
    )
    store.commit_document(Write(result.doc_id, "notes/a.md", "bye"), NO_ATTRS)
    left = rows(sql_conn)
    assert left["notes/a.md"] == document(b"bye", 2)
    assert not [p for p in left if ".versions/" in p], "hello must not be archived"
    assert left["notes/a.md.meta"]["contents"] == b'{"skip_versioning":true}'  # untouched


def test_e6_names_and_places_ironclaw_refuses(store: RebornStore) -> None:
    store.commit_document(Write(None, "notes/a.md", "hello"), NO_ATTRS)
    cases = [("notes", errno.EEXIST), ("notes/a.md/c.md", errno.EEXIST), ("x.meta", errno.EINVAL),
             ("a.chunks/b.md", errno.EINVAL), ("v.versions", errno.EINVAL)]  # fmt: skip
    for path, code in cases:
        with pytest.raises(WriteRefused) as refused:
            store.commit_document(Write(None, path, "x"), NO_ATTRS)
        assert refused.value.errno == code, (path, refused.value)


def test_e7_a_folder_config_with_skip_indexing_leaves_no_chunks(
    store: RebornStore, sql_conn: psycopg.Connection[Any]
) -> None:
    store.commit_document(Write(None, "private/.config", ""), NO_ATTRS)
    sql_conn.execute(
        "INSERT INTO root_filesystem_entries (path, contents, version) VALUES (%s, %s, 1)",
        (A + "/private/.config.meta", b'{"skip_indexing":true}'),
    )
    store.commit_document(Write(None, "private/diary.md", "dear diary"), NO_ATTRS)
    left = rows(sql_conn)
    assert left["private/diary.md"] == document(b"dear diary", 1)
    assert not [p for p in left if ".chunks/" in p]


def _sidecar(sql_conn: psycopg.Connection[Any], relative: str, body: bytes) -> None:
    sql_conn.execute(
        "INSERT INTO root_filesystem_entries (path, contents, version) VALUES (%s, %s, 1)",
        (f"{A}/{relative}", body),
    )


def test_a_config_without_metadata_is_walked_past(
    store: RebornStore, sql_conn: psycopg.Connection[Any]
) -> None:
    """Reborn facts §3.4 [ran]: ``cfg/.config {skip_indexing}`` and a metadata-less
    ``cfg/sub/.config`` (none, or a zero-byte sidecar): ``cfg/sub/x.md`` gets no chunks."""
    store.commit_document(Write(None, "cfg/.config", ""), NO_ATTRS)
    _sidecar(sql_conn, "cfg/.config.meta", b'{"skip_indexing":true}')
    store.commit_document(Write(None, "cfg/sub/.config", ""), NO_ATTRS)
    store.commit_document(Write(None, "cfg/sub/x.md", "hidden words"), NO_ATTRS)
    store.commit_document(Write(None, "cfg/empty/.config", ""), NO_ATTRS)
    _sidecar(sql_conn, "cfg/empty/.config.meta", b"")
    store.commit_document(Write(None, "cfg/empty/y.md", "more hidden words"), NO_ATTRS)
    left = rows(sql_conn)
    assert left["cfg/sub/x.md"] == document(b"hidden words", 1)
    assert left["cfg/empty/y.md"] == document(b"more hidden words", 1)
    assert not [p for p in left if ".chunks/" in p], [p for p in left if ".chunks/" in p]


@pytest.mark.parametrize("body", [b" \n", b"{not json"])
def test_a_whitespace_or_broken_meta_refuses_every_write_it_governs(
    store: RebornStore, sql_conn: psycopg.Connection[Any], body: bytes,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """Only a zero-byte ``.meta`` means none (§3.4): whitespace or non-JSON fails the
    write, of the document itself or, for a ``.config`` sidecar, of every one below."""
    own = store.commit_document(Write(None, "a.md", "first"), NO_ATTRS)
    _sidecar(sql_conn, "a.md.meta", body)
    store.commit_document(Write(None, "cfg/.config", ""), NO_ATTRS)
    _sidecar(sql_conn, "cfg/.config.meta", body)
    before = rows(sql_conn)
    for doc_id, path in [(own.doc_id, "a.md"), (None, "cfg/deep/b.md")]:
        with pytest.raises(WriteRefused) as refused:
            store.commit_document(Write(doc_id, path, "second"), NO_ATTRS)
        assert refused.value.errno == errno.EINVAL
    assert rows(sql_conn) == before, "a refused write wrote something"
    logged = caplog.text
    assert "a.md.meta" in logged and "cfg/.config.meta" in logged


def test_e10_a_long_document_is_chunked_as_ironclaws_indexer_does(
    store: RebornStore, sql_conn: psycopg.Connection[Any]
) -> None:
    words = [f"w{i}" for i in range(1, 1001)]
    store.commit_document(Write(None, "long.md", " ".join(words) + "\n"), NO_ATTRS)
    left = rows(sql_conn)
    assert left["long.md.chunks/0"] == chunk(" ".join(words[:800]), 0, "long.md")
    assert left["long.md.chunks/1"] == chunk(" ".join(words[680:]), 1, "long.md")
    assert "long.md.chunks/2" not in left


def test_the_listing_is_ironclaws(store: RebornStore, sql_conn: psycopg.Connection[Any]) -> None:
    """Only memory_document rows at listable paths (§3.3); sidecars, other kinds, NULL
    kind, directory rows and other scopes stay hidden and untouched."""
    store.commit_document(Write(None, "MEMORY.md", "remember"), NO_ATTRS)
    for path, kind, is_dir in [
        (A + "/opaque.bin", None, False),
        (A + "/thread.json", "thread_record", False),
        (A + "/emptydir", None, True),
        ("/memory/tenants/reborn-cli/users/bob/agents/reborn-cli-agent/projects/_none/b.md",
         "memory_document", False),
    ]:  # fmt: skip
        sql_conn.execute(
            "INSERT INTO root_filesystem_entries (path, kind, is_dir, indexed) "
            "VALUES (%s, %s, %s, '{}')",
            (path, kind, is_dir),
        )
    assert [row.path for row in store.load_documents()] == ["MEMORY.md"]


def test_another_writers_change_is_kept_as_a_version(
    store: RebornStore, sql_conn: psycopg.Connection[Any]
) -> None:
    """A save based on an older version: the row the other writer left becomes a version
    (IronClaw's own archive of replaced content), then the save is the content."""
    first = store.commit_document(Write(None, "doc.md", "mine\n"), NO_ATTRS)
    sql_conn.execute(  # the agent's write: a compare-and-swap on version, as IronClaw's is
        "UPDATE root_filesystem_entries SET contents = 'agent\n', version = version + 1, "
        "updated_at = now() WHERE path = %s AND version = 1",
        (A + "/doc.md",),
    )
    result = store.commit_document(
        Write(first.doc_id, "doc.md", "mine, later\n"),
        NO_ATTRS,
        SaveOptions(expected=first.updated_at),
    )
    assert result.conflict == "version 1"
    left = rows(sql_conn)
    assert left["doc.md"] == document(b"mine, later\n", 3)
    assert left["doc.md.versions/1"] == version_row(b"agent\n", 1, "doc.md")


def test_delete_and_rename_carry_the_sidecars(
    store: RebornStore, sql_conn: psycopg.Connection[Any]
) -> None:
    first = store.commit_document(Write(None, "a/x.md", "one"), NO_ATTRS)
    store.commit_document(Write(first.doc_id, "a/x.md", "two"), NO_ATTRS)
    sql_conn.execute(
        "INSERT INTO root_filesystem_entries (path, contents, version) VALUES (%s, '{}', 1)",
        (A + "/a/x.md.meta",),
    )
    moved = store.rename_document(Rename(first.doc_id, "b/y.md"), NO_ATTRS)
    assert moved is not None
    left = rows(sql_conn)
    assert sorted(left) == ["b/y.md", "b/y.md.chunks/0", "b/y.md.meta", "b/y.md.versions/1"]
    assert left["b/y.md.chunks/0"]["indexed"]["doc_relative_path"] == "b/y.md"
    assert left["b/y.md.versions/1"]["indexed"]["doc_relative_path"] == "b/y.md"
    assert left["b/y.md"]["contents"] == b"two"
    assert [row.path for row in store.load_documents()] == ["b/y.md"]
    assert store.delete_document(first.doc_id)
    assert rows(sql_conn) == {}, "the document goes with every sidecar"


def test_a_folder_rename_moves_every_document_and_sidecar(
    store: RebornStore, sql_conn: psycopg.Connection[Any]
) -> None:
    for name in ("p/1.md", "p/q/2.md"):
        store.commit_document(Write(None, name, f"text of {name}"), NO_ATTRS)
    moved = store.rename_directory("p", "archive/p", None)
    assert len(moved) == 2
    left = rows(sql_conn)
    assert sorted(left) == ["archive/p/1.md", "archive/p/1.md.chunks/0",
                            "archive/p/q/2.md", "archive/p/q/2.md.chunks/0"]  # fmt: skip
    assert left["archive/p/q/2.md.chunks/0"]["indexed"]["doc_relative_path"] == "archive/p/q/2.md"


def test_a_folder_move_rolled_back_with_its_transaction_keeps_the_ids(
    store: RebornStore, sql_conn: psycopg.Connection[Any]
) -> None:
    """A folder move waiting for the next transaction rides on a save IronClaw refuses
    (an emptied ``SOUL.md``): the transaction rolls back, and the ids must still name the
    rows where they are.  The move changed them as it was sent: the retry then gave the
    moved document a new id, so the mount never learnt the row's version after the move,
    and its ``rm`` of the moved file was skipped as another writer's change."""
    from memfs.db.deferred import MoveDir

    first = store.commit_document(Write(None, "b/z.md", "one"), NO_ATTRS)
    store.commit_document(Write(None, "SOUL.md", "soul"), NO_ATTRS)
    store.defer(MoveDir("b", "c"))
    with pytest.raises(WriteRefused):
        store.commit_document(Write(None, "SOUL.md", ""), NO_ATTRS)
    assert store.path_of(first.doc_id) == "b/z.md", "the ids follow only committed moves"
    assert store.flush_changes()
    assert list(store.take_moved()) == [first.doc_id]
    assert store.path_of(first.doc_id) == "c/z.md"
    assert store.id_of("c/z.md") == first.doc_id


def _chunked(conn: psycopg.Connection[Any]) -> list[str]:
    return sorted(p.split(".chunks/")[0] for p in rows(conn) if ".chunks/" in p)


def test_a_move_applies_the_destinations_indexing_rules(
    store: RebornStore, sql_conn: psycopg.Connection[Any]
) -> None:
    """Into a ``skip_indexing`` folder the chunks go (IronClaw's search must not find a
    private document); out of one they are built; a document and a folder alike, and a
    move within one kind of folder leaves the chunks as they are."""
    store.commit_document(Write(None, "private/.config", ""), NO_ATTRS)
    _sidecar(sql_conn, "private/.config.meta", b'{"skip_indexing":true}')
    x = store.commit_document(Write(None, "notes/x.md", "the secret plan"), NO_ATTRS)
    for name in ("p/1.md", "p/q/2.md"):
        store.commit_document(Write(None, name, f"text of {name}"), NO_ATTRS)
    assert _chunked(sql_conn) == ["notes/x.md", "p/1.md", "p/q/2.md"]
    store.rename_document(Rename(x.doc_id, "private/x.md"), NO_ATTRS)
    store.rename_directory("p", "private/p", None)
    assert _chunked(sql_conn) == []
    store.rename_document(Rename(x.doc_id, "notes/x.md"), NO_ATTRS)
    store.rename_directory("private/p", "back/p", None)
    assert _chunked(sql_conn) == ["back/p/1.md", "back/p/q/2.md", "notes/x.md"]
    left = rows(sql_conn)
    assert left["notes/x.md.chunks/0"] == chunk("the secret plan", 0, "notes/x.md")
    assert left["back/p/q/2.md.chunks/0"] == chunk("text of p/q/2.md", 0, "back/p/q/2.md")
    store.rename_directory("back", "elsewhere", None)  # indexed to indexed: left alone
    assert _chunked(sql_conn) == ["elsewhere/p/1.md", "elsewhere/p/q/2.md", "notes/x.md"]


@pytest.mark.timeout(120)
def test_a_deferred_folder_move_into_skip_indexing_does_not_wait_on_itself(
    store: RebornStore, sql_conn: psycopg.Connection[Any]
) -> None:
    """``mv p private/`` as the mount sends it (a deferred move, sent by
    ``flush_changes``): the chunks go once it committed.  The rebuild ran in a transaction
    that took deferred changes and waited for the batch its own caller held, for a
    minute (the history checker's Reborn seed 13: a mount failing every call with EIO)."""
    store.commit_document(Write(None, "private/.config", ""), NO_ATTRS)
    _sidecar(sql_conn, "private/.config.meta", b'{"skip_indexing":true}')
    store.commit_document(Write(None, "p/1.md", "text of p/1.md"), NO_ATTRS)
    store.defer(MoveDir("p", "private/p"))
    started = time.monotonic()
    assert store.flush_changes()
    assert time.monotonic() - started < 10
    assert _chunked(sql_conn) == []


def test_e8_the_bootstrap_clear_keeps_the_text_as_a_version(
    store: RebornStore, sql_conn: psycopg.Connection[Any]
) -> None:
    first = store.commit_document(
        Write(None, "BOOTSTRAP.md", "# Bootstrap\nask the name\n"), NO_ATTRS
    )
    store.commit_document(Write(first.doc_id, "BOOTSTRAP.md", ""), NO_ATTRS)  # `: > BOOTSTRAP.md`
    assert rows(sql_conn) == {
        "BOOTSTRAP.md": document(b"", 2),
        "BOOTSTRAP.md.versions/1": version_row(b"# Bootstrap\nask the name\n", 1, "BOOTSTRAP.md"),
    }, "empty: no chunks; the cleared text is version 1"


def test_e9_a_profile_in_the_agentless_scope(
    database_url: str, store: RebornStore, sql_conn: psycopg.Connection[Any]
) -> None:
    """profile_set twice: the second write keeps the first as a version; indexed holds only
    tenant and user, and changed_by has no agent part (facts §3.2)."""
    agentless = RebornStore(store.pool, RebornScope("reborn-cli", "alice", None), origin="t")
    first = agentless.commit_document(
        Write(None, "context/profile.json", '{"timezone":"Europe/Berlin"}'), NO_ATTRS
    )
    agentless.commit_document(
        Write(first.doc_id, "context/profile.json",
        '{"locale":"de-DE","timezone":"Europe/Berlin"}'), NO_ATTRS,
    )  # fmt: skip
    prefix = "/memory/tenants/reborn-cli/users/alice/agents/_none/projects/_none/"
    keys = {"tenant_id": "reborn-cli", "user_id": "alice"}
    left = {path.removeprefix(prefix): row for path, row in rows(sql_conn).items()}
    assert sorted(left) == [
        "context/profile.json", "context/profile.json.chunks/0",
        "context/profile.json.versions/1",
    ]  # fmt: skip
    doc = left["context/profile.json"]
    assert doc["contents"] == b'{"locale":"de-DE","timezone":"Europe/Berlin"}'
    assert doc["version"] == 2 and doc["indexed"] == keys
    version = left["context/profile.json.versions/1"]
    assert version["indexed"] == {**keys, "doc_relative_path": "context/profile.json", "version": 1}
    assert json.loads(version["contents"]) == {
        "changed_by": "tenant:reborn-cli:user:alice:project:_none",
        "content": '{"timezone":"Europe/Berlin"}',
        "content_hash": "sha256:" + hashlib.sha256(b'{"timezone":"Europe/Berlin"}').hexdigest(),
    }
    assert left["context/profile.json.chunks/0"]["indexed"]["chunk_index"] == 0


def _f32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


async def _direct(fn: Any, *args: Any) -> Any:
    return fn(*args)


def tea_documents(store: RebornStore) -> None:
    """Conformance example E11's three documents (two hold tea, one does not)."""
    store.commit_document(
        Write(None, "threads/2026-03-03.md",
        "User: do you like tea? I like tea. Tea is what the user likes.\n"), NO_ATTRS,
    )  # fmt: skip
    store.commit_document(Write(None, "MEMORY.md", "The user drinks green tea.\n"), NO_ATTRS)
    store.commit_document(Write(None, "other.md", "Coffee, black, no sugar.\n"), NO_ATTRS)


async def test_e11_search_ranks_and_scores_as_ironclaw(
    store: RebornStore, sql_conn: psycopg.Connection[Any]
) -> None:
    """Terms tea, user, like (any may match), ts_rank order, per-document fusion in f32:
    rank 1 scores 1.0 and rank 2 scores (1/62) / (1/61) = 61/62 as f32."""
    tea_documents(store)
    engine = RebornSearch(RebornSearchStore(store.pool, store.scope), _direct, store.id_of)
    outcome = await engine.search("What tea does the user like?")
    assert [(r.path, r.fts_rank) for r in outcome.results] == [
        ("threads/2026-03-03.md", 1), ("MEMORY.md", 2),
    ]  # fmt: skip
    assert outcome.results[0].score == 1.0
    assert outcome.results[1].score == _f32(_f32(1 / 62) / _f32(1 / 61))
    assert abs(outcome.results[1].score - 0.98387) < 1e-5
    # A store given no session to build on (a read-only mount, a pooler with no direct
    # URL) declares no spec and makes no index (test_reborn_fts_index.py: one that may).
    assert sql_conn.execute("SELECT count(*) FROM root_filesystem_index_specs").fetchone() == (0,)
    assert sql_conn.execute(
        "SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'idx_rfs_%'"
    ).fetchone() == (0,)


async def test_e12_a_deleted_document_leaves_nothing_search_could_find(
    store: RebornStore, sql_conn: psycopg.Connection[Any]
) -> None:
    """IronClaw has no delete; a delete of the path alone would orphan the sidecars, and
    orphan chunks would still be found under the vanished path. memfs's removes them all."""
    first = store.commit_document(Write(None, "notes/a.md", "the launch is on Monday"), NO_ATTRS)
    store.commit_document(Write(first.doc_id, "notes/a.md", "the launch is on Tuesday"), NO_ATTRS)
    sql_conn.execute(
        "INSERT INTO root_filesystem_entries (path, contents, version) VALUES (%s, '{}', 1)",
        (A + "/notes/a.md.meta",),
    )
    assert store.delete_document(first.doc_id)
    assert rows(sql_conn) == {}
    engine = RebornSearch(RebornSearchStore(store.pool, store.scope), _direct, store.id_of)
    assert (await engine.search("launch")).results == []


def test_a_rename_over_whose_source_changed_meanwhile_leaves_the_source_its_history(
    store: RebornStore, sql_conn: psycopg.Connection[Any]
) -> None:
    """Found by the history checker's ``.at/`` snapshots (Reborn seed 5): a rename over
    another document whose source another writer changed after the mount read it kept the
    source (its delete is conditional) but carried its versions to the target anyway: the
    source lost its history, and ``.at/`` showed it wrong."""
    source = store.commit_document(Write(None, "z.md", "one\n"), NO_ATTRS)
    store.commit_document(Write(source.doc_id, "z.md", "two\n"), NO_ATTRS)
    target = store.commit_document(Write(None, "x.md", "ex\n"), NO_ATTRS)
    seen = store.find_document("z.md")
    assert seen is not None
    sql_conn.execute(  # another writer, after the mount read the source
        "UPDATE root_filesystem_entries SET contents = 'two\nthree\n', version = version + 1, "
        "updated_at = now() WHERE path = %s",
        (A + "/z.md",),
    )
    store.replace_document(
        Replacement(
            source.doc_id, target.doc_id, "x.md", "two\n", NO_ATTRS, source_at=seen.updated_at
        ),
        SaveOptions(index_now=False),
    )
    left = rows(sql_conn)
    assert "z.md" in left, "the changed source stays"
    assert "z.md.versions/1" in left, "with its own versions"
    assert json.loads(left["z.md.versions/1"]["contents"])["content"] == "one\n"


def test_a_documents_id_is_the_uuid5_of_its_row_path() -> None:
    """``path_id`` computes ``uuid.uuid5(PATH_IDS, path)`` (its own way, for speed): the
    ids a mount gives documents stay what they were."""
    for full in ["/memory/tenants/t/users/u/agents/a/projects/_none/notes/a.md", "/x/ü é.md", ""]:
        assert path_id(full) == uuid.uuid5(PATH_IDS, full)
