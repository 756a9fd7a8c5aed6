"""A real mount of IronClaw's Reborn memory, driven by real programs.

The database is IronClaw >= 1.1's (``tests/fixtures/reborn_schema.sql``) with memory
written as IronClaw writes it; the mount must detect the layout, show IronClaw's document
list, and leave rows IronClaw reads back: after each real save, the document keeps its
path, its ``version`` went up by one per write, the replaced content is a version sidecar,
the chunks are rebuilt, and no scratch name (swap file, backup, temporary) became a row.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.model.test_reborn_store import A, reborn_schema, rows
from tests.mounting import Mount
from tests.savers import SAVERS, client_env, missing_programs

pytestmark = pytest.mark.mount


@pytest.fixture
def reborn_url(database_url: str) -> str:
    reborn_schema(database_url)
    return database_url


@pytest.fixture
def alice(reborn_url: str, mount_factory: Any) -> Mount:
    """A mount of user alice's memory in IronClaw's default tenant and agent."""
    mount: Mount = mount_factory(reborn_url, extra_args=["--user-id", "alice"])
    return mount


def documents(conn: psycopg.Connection[Any]) -> dict[str, dict[str, Any]]:
    return {p: r for p, r in rows(conn).items() if r["kind"] == "memory_document"}


def test_the_mount_says_it_is_reborn_and_shows_ironclaws_list(
    reborn_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any
) -> None:
    sql_conn.execute(
        "INSERT INTO root_filesystem_entries (path, contents, kind, content_type, indexed, "
        "version) VALUES (%s, 'from the agent\n', 'memory_document', 'application/json', "
        "%s, 1), (%s, '{}', NULL, 'application/octet-stream', '{}', 1)",
        (A + "/MEMORY.md", '{"tenant_id":"reborn-cli","user_id":"alice",'
         '"agent_id":"reborn-cli-agent"}', A + "/MEMORY.md.meta"),
    )  # fmt: skip
    mount = mount_factory(reborn_url, extra_args=["--user-id", "alice"])
    assert "IronClaw Reborn memory" in mount.log()
    assert sorted(os.listdir(mount.path())) == ["MEMORY.md"]
    assert (mount.path() / "MEMORY.md").read_text() == "from the agent\n"


@pytest.mark.parametrize("saver", sorted(SAVERS))
def test_real_saves_leave_rows_ironclaw_reads(
    alice: Mount, sql_conn: psycopg.Connection[Any], work_dir: Path, saver: str
) -> None:
    missing = missing_programs()
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (scripts/setup-tests installs them)")
    mnt = alice.path()
    (mnt / "doc.md").write_text("# shared\n")
    assert documents(sql_conn)["doc.md"]["version"] == 1
    env = client_env(work_dir / f"reborn-home-{saver.replace(' ', '-')}")
    SAVERS[saver](mnt, "doc.md", f"saved by {saver}", env)
    left = rows(sql_conn)
    doc = left["doc.md"]
    assert doc["contents"] == f"# shared\nsaved by {saver}\n".encode()
    assert doc["kind"] == "memory_document" and doc["type"] == "application/json"
    assert doc["version"] >= 2
    versions = [p for p in left if p.startswith("doc.md.versions/")]
    assert versions, "the replaced content is kept as a version sidecar"
    assert left["doc.md.versions/1"]["indexed"]["doc_relative_path"] == "doc.md"
    assert left["doc.md.chunks/0"]["contents"] == doc["contents"]
    stray = [p for p in left if not p.startswith("doc.md")]
    assert stray == [], f"{saver} left rows that are not doc.md's: {stray}"


def test_shell_tools_and_renames_carry_sidecars(
    alice: Mount, sql_conn: psycopg.Connection[Any]
) -> None:
    mnt = alice.path()
    (mnt / "notes").mkdir()
    (mnt / "notes" / "a.md").write_text("alpha deploy\n")
    (mnt / "notes" / "a.md").write_text("alpha deploy, edited\n")
    assert sorted(documents(sql_conn)) == ["notes/a.md"]
    assert not any(r["is_dir"] for r in rows(sql_conn).values()), "no is_dir rows in /memory"
    grep = subprocess.run(
        ["grep", "-r", "deploy", "."],
        cwd=mnt, capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    assert grep.stdout == "./notes/a.md:alpha deploy, edited\n"
    os.rename(mnt / "notes", mnt / "archive")
    assert os.listdir(mnt / "archive") == ["a.md"]
    alice.barrier()
    assert sorted(rows(sql_conn)) == [
        "archive/a.md", "archive/a.md.chunks/0", "archive/a.md.versions/1"
    ]  # fmt: skip
    os.unlink(mnt / "archive" / "a.md")
    alice.barrier()
    assert rows(sql_conn) == {}, "the document went with every sidecar"


def test_names_ironclaw_refuses_fail_with_einval(alice: Mount) -> None:
    mnt = alice.path()
    for name in ("x.meta", "y.chunks", "z.versions"):
        with pytest.raises(OSError) as refused:
            (mnt / name).write_text("nope\n")
        assert refused.value.errno == 22, name
    assert "refusing 'x.meta'" in alice.log()
    # Names the layout holds but IronClaw's agent cannot write: stored, with a warning.
    (mnt / "a..b.md").write_text("kept\n")
    assert (mnt / "a..b.md").read_text() == "kept\n"
    warning = "'a..b.md' is stored, but IronClaw's agent cannot write it"
    _wait_for(lambda: warning in alice.log(), "the warning")


def test_search_ranks_as_ironclaw_v1_3(alice: Mount) -> None:
    mnt = alice.path()
    (mnt / "MEMORY.md").write_text("The user likes green tea.\n")
    (mnt / "other.md").write_text("Coffee only.\n")
    results = os.listdir(mnt / ".search" / "What tea does the user like?")
    assert results == ["01-MEMORY.md"]
    text = (mnt / ".search" / "What tea does the user like?" / "01-MEMORY.md").read_text()
    assert "score: 1.000000" in text and "The user likes green tea." in text


def _wait_for(condition: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_the_agents_writes_show_up_and_a_stale_save_keeps_them(
    alice: Mount, sql_conn: psycopg.Connection[Any]
) -> None:
    """IronClaw notifies nothing: the mount polls. The agent's update (a compare-and-swap
    on version), a new document and a removal show up; a file opened before the agent's
    change and saved after it keeps the agent's content as a version (nothing lost)."""
    mnt = alice.path()
    (mnt / "MEMORY.md").write_text("mine\n")
    held = open(mnt / "MEMORY.md", "r+")  # noqa: SIM115 - an editor holding the file
    try:
        held.read()
        keys = '{"agent_id":"reborn-cli-agent","tenant_id":"reborn-cli","user_id":"alice"}'
        sql_conn.execute(
            "UPDATE root_filesystem_entries SET contents = 'the agent wrote this\n', "
            "version = version + 1, updated_at = now() WHERE path = %s",
            (A + "/MEMORY.md",),
        )
        sql_conn.execute(
            "INSERT INTO root_filesystem_entries (path, contents, kind, content_type, indexed, "
            "version) VALUES (%s, 'from the agent\n', 'memory_document', 'application/json', "
            "%s, 1)",
            (A + "/daily/2026-11-24.md", keys),
        )
        _wait_for((mnt / "daily").exists, "the agent's new document")
        assert (mnt / "daily" / "2026-11-24.md").read_text() == "from the agent\n"
        held.seek(0)
        held.truncate()
        held.write("mine, saved late\n")
    finally:
        held.close()
    left = rows(sql_conn)
    assert left["MEMORY.md"]["contents"] == b"mine, saved late\n"
    kept = [json.loads(r["contents"])["content"] for p, r in left.items()
            if p.startswith("MEMORY.md.versions/")]  # fmt: skip
    assert "the agent wrote this\n" in kept, "the agent's content is kept as a version"
    sql_conn.execute(
        "DELETE FROM root_filesystem_entries WHERE path = %s OR path LIKE %s",
        (A + "/daily/2026-11-24.md", A + "/daily/2026-11-24.md.%"),
    )
    _wait_for(lambda: not (mnt / "daily" / "2026-11-24.md").exists(), "the removal")


def test_mv_into_and_out_of_a_skip_indexing_folder_follows_its_rules(
    alice: Mount, sql_conn: psycopg.Connection[Any]
) -> None:
    """``mv notes/x.md private/`` below ``private/.config {skip_indexing}`` leaves no
    chunks for IronClaw's search to find; moving out builds them; a folder moved in or out
    (a deferred change, sent with a later transaction) alike."""
    mnt = alice.path()
    (mnt / "private").mkdir()
    (mnt / "private" / ".config").write_text("")
    sql_conn.execute(
        "INSERT INTO root_filesystem_entries (path, contents, version) VALUES (%s, %s, 1)",
        (A + "/private/.config.meta", b'{"skip_indexing":true}'),
    )
    (mnt / "notes").mkdir()
    (mnt / "notes" / "x.md").write_text("the secret plan\n")
    (mnt / "p" / "q").mkdir(parents=True)
    (mnt / "p" / "q" / "2.md").write_text("text of two\n")

    def chunked() -> list[str]:
        return sorted(p.split(".chunks/")[0] for p in rows(sql_conn) if ".chunks/" in p)

    assert chunked() == ["notes/x.md", "p/q/2.md"]
    os.rename(mnt / "notes" / "x.md", mnt / "private" / "x.md")
    os.rename(mnt / "p", mnt / "private" / "p")
    _wait_for(lambda: chunked() == [], "the chunks of documents moved into private/ to go")
    os.rename(mnt / "private" / "x.md", mnt / "notes" / "x.md")
    os.rename(mnt / "private" / "p", mnt / "p")
    _wait_for(lambda: chunked() == ["notes/x.md", "p/q/2.md"], "chunks built again")
