"""Tool folders (``.obsidian``, ``.trash``, …) on real mounts of both engines: what
Obsidian does to a vault survives unmount and remount, is shared by the workspace's next
mount, and never becomes memory (no document row, no chunk, no search hit)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from typing import Any

import psycopg
import pytest

from tests.engines import Engine
from tests.mounting import Mount

pytestmark = pytest.mark.mount

#: What Obsidian does to its vault, as system calls (its config writes go through a
#: temporary renamed over the file; "move to vault trash" renames a note into .trash/).
OBSIDIAN = textwrap.dedent(
    """
    import os
    os.makedirs(".obsidian/plugins/calendar", exist_ok=True)
    def save_json(path, text):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    save_json(".obsidian/app.json", '{"alwaysUpdateLinks": true}')
    save_json(".obsidian/app.json", '{"alwaysUpdateLinks": true, "vimMode": true}')
    save_json(".obsidian/workspace.json", '{"main": {"id": "a1"}}')
    with open(".obsidian/plugins/calendar/data.bin", "wb") as f:
        f.write(bytes(range(256)))
    os.makedirs(".trash", exist_ok=True)
    os.rename("deleted note.md", ".trash/deleted note.md")
    os.rename("old project", ".trash/old project")  # a deleted folder goes there whole
    """
)


@pytest.mark.libsql_too
def test_obsidian_vault_state_persists_and_never_becomes_memory(
    engine: Engine, database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any
) -> None:
    first: Mount = mount_factory(engine.mount_url(database_url))
    mnt = first.path()
    (mnt / "deleted note.md").write_text("the launch code is in the drawer\n")
    (mnt / "kept.md").write_text("a note that stays\n")
    (mnt / "old project" / "drafts").mkdir(parents=True)
    (mnt / "old project" / "plan.md").write_text("the old plan\n")
    (mnt / "old project" / "drafts" / "idea.md").write_text("an old idea\n")
    assert engine.contents(sql_conn).keys() == {
        "deleted note.md", "kept.md", "old project/plan.md", "old project/drafts/idea.md"
    }  # fmt: skip
    first.run(sys.executable, "-c", OBSIDIAN)
    first.barrier()  # the folder's rows go with the next transaction
    assert engine.contents(sql_conn) == {"kept.md": "a note that stays\n"}, (
        "only real notes are memory; the trashed notes left it"
    )
    assert not any("launch code" in text for text in engine.chunk_texts(sql_conn))
    assert sorted(os.listdir(mnt)) == [".obsidian", ".trash", "kept.md"], first.log()
    search = os.listdir(mnt / ".search" / "alwaysUpdateLinks")
    assert search == [], "tool files are never searched"
    assert first.umount() == 0

    second: Mount = mount_factory(engine.mount_url(database_url), name="again")
    again = second.path()
    assert (again / ".obsidian" / "app.json").read_text() == (
        '{"alwaysUpdateLinks": true, "vimMode": true}'
    )
    assert (again / ".obsidian" / "workspace.json").read_text() == '{"main": {"id": "a1"}}'
    assert (again / ".obsidian" / "plugins" / "calendar" / "data.bin").read_bytes() == bytes(
        range(256)
    )
    assert (again / ".trash" / "deleted note.md").read_text() == (
        "the launch code is in the drawer\n"
    )
    assert not (again / ".obsidian" / "app.json.tmp").exists(), (
        f"{first.log()}\n--- the second mount:\n{second.log()}"
    )
    assert (again / ".trash" / "old project" / "drafts" / "idea.md").read_text() == (
        "an old idea\n"
    )
    assert sorted(os.listdir(again)) == [".obsidian", ".trash", "kept.md"]
    # Restoring from the trash makes it memory again; emptying the trash forgets it.
    os.rename(again / ".trash" / "deleted note.md", again / "restored.md")
    os.unlink(again / ".obsidian" / "workspace.json")
    deadline = time.monotonic() + 10
    while "restored.md" not in engine.contents(sql_conn):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert engine.contents(sql_conn)["restored.md"] == "the launch code is in the drawer\n"
    assert second.umount() == 0
    third: Mount = mount_factory(engine.mount_url(database_url), name="third")
    logs = f"{first.log()}\n--- the second mount:\n{second.log()}\n--- the third:\n{third.log()}"
    assert sorted(os.listdir(third.path() / ".trash")) == ["old project"], logs
    assert sorted(os.listdir(third.path() / ".obsidian")) == ["app.json", "plugins"], logs
    kept = engine.tool_file_paths(sql_conn)
    assert kept == [".obsidian", ".obsidian/app.json", ".obsidian/plugins",
                    ".obsidian/plugins/calendar", ".obsidian/plugins/calendar/data.bin",
                    ".trash", ".trash/old project", ".trash/old project/drafts",
                    ".trash/old project/drafts/idea.md",
                    ".trash/old project/plan.md"]  # fmt: skip
    # Not so for git: refused as before.
    git = subprocess.run(["mkdir", str(third.path() / ".git")], capture_output=True,
                         text=True, timeout=30, check=False)  # fmt: skip
    assert git.returncode != 0


@pytest.mark.libsql_too
def test_two_mounts_of_a_workspace_share_tool_folders_while_both_run(
    engine: Engine, database_url: str, mount_factory: Any
) -> None:
    one: Mount = mount_factory(engine.mount_url(database_url), name="one")
    two: Mount = mount_factory(engine.mount_url(database_url), name="two")

    def wait_for(condition: Any, what: str) -> None:
        deadline = time.monotonic() + 15
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.1)

    (one.path() / ".obsidian").mkdir()
    (one.path() / ".obsidian" / "app.json").write_text('{"theme": "dark"}')
    app = two.path() / ".obsidian" / "app.json"
    wait_for(lambda: app.exists() and app.read_text() == '{"theme": "dark"}', "the new file")
    app.write_text('{"theme": "light"}')
    mine = one.path() / ".obsidian" / "app.json"
    wait_for(lambda: mine.read_text() == '{"theme": "light"}', "the other mount's change")
    os.unlink(mine)
    wait_for(lambda: not app.exists(), "the removal")


@pytest.mark.libsql_too
def test_a_tool_file_saved_in_two_mounts_at_once_keeps_both(
    engine: Engine, database_url: str, mount_factory: Any
) -> None:
    """A compare-and-swap on every write: the other mount's content, written while this
    one had the file open, is kept beside it as a .conflict- copy, in both mounts."""
    one: Mount = mount_factory(engine.mount_url(database_url), name="one")
    two: Mount = mount_factory(engine.mount_url(database_url), name="two")
    (one.path() / ".vscode").mkdir()
    (one.path() / ".vscode" / "settings.json").write_text("{}")
    theirs = two.path() / ".vscode" / "settings.json"
    deadline = time.monotonic() + 15
    while not theirs.exists():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    with open(one.path() / ".vscode" / "settings.json", "w") as held:
        held.write('{"mine": 1}')
        time.sleep(1.5)  # mount one's upkeep writes the open file's content meanwhile
        theirs.write_text('{"theirs": 2}')  # the other mount saves while it is open here
        time.sleep(1.5)
    # Python writes '{"mine": 1}' only at the close: until then the open file is empty
    # here, and mount one's upkeep may publish that; if mount two saves before it has
    # seen it, two keeps one's empty content beside its own as a copy too.  Whatever
    # the order, a copy holds theirs.
    vscode = one.path() / ".vscode"

    def copy_of_theirs() -> str | None:
        for name in os.listdir(vscode):
            if ".conflict-" in name and (vscode / name).read_text() == '{"theirs": 2}':
                return name
        return None

    deadline = time.monotonic() + 15
    while copy_of_theirs() is None:
        assert time.monotonic() < deadline, "the other mount's content was not kept"
        time.sleep(0.1)
    copy = copy_of_theirs()
    assert copy is not None
    assert (vscode / "settings.json").read_text() == '{"mine": 1}'
    deadline = time.monotonic() + 15  # and the other mount gets both
    while theirs.read_text() != '{"mine": 1}' or not (two.path() / ".vscode" / copy).exists():
        assert time.monotonic() < deadline, sorted(os.listdir(two.path() / ".vscode"))
        time.sleep(0.1)


def test_a_tool_file_closed_survives_sigkill_at_once(
    database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any
) -> None:
    """SEMANTICS promises what was closed survives SIGKILL; tool files were kept at the
    release that follows close asynchronously (10 of 10 lost when killed within 50 ms)."""
    for n in range(10):
        mount: Mount = mount_factory(database_url)
        (mount.path() / ".obsidian").mkdir(exist_ok=True)
        with open(mount.path() / ".obsidian" / "workspace.json", "w") as f:
            f.write(f'{{"n": {n}}}')
        assert mount.proc is not None
        mount.proc.kill()  # at once after close
        mount.proc.wait(timeout=30)
        mount.kill()
        row = sql_conn.execute(
            "SELECT content FROM memfs.tool_files WHERE path = '.obsidian/workspace.json'"
        ).fetchone()
        assert row is not None and bytes(row[0]) == f'{{"n": {n}}}'.encode(), (n, row)


def test_a_tool_file_past_the_bound_is_refused_and_the_mount_goes_on(
    database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any
) -> None:
    """A 1 GiB file in .obsidian drove the daemon to 10 GB and hung fsync for minutes."""
    from memfs.vfs.tool_folders import TOOL_FILE_MAX_BYTES

    mount: Mount = mount_factory(database_url)
    (mount.path() / ".obsidian").mkdir()
    size_mb = TOOL_FILE_MAX_BYTES // (1 << 20) + 8
    dd = subprocess.run(
        ["dd", "if=/dev/zero", f"of={mount.path() / '.obsidian' / 'big.bin'}", "bs=1M",
         f"count={size_mb}", "conv=fsync"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert dd.returncode != 0 and "File too large" in dd.stderr, dd.stderr
    assert "big.bin': a tool-folder file may not grow past" in mount.log_path.read_text()
    truncated = subprocess.run(
        ["truncate", "-s", "1G", str(mount.path() / ".obsidian" / "sparse.bin")],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert truncated.returncode != 0 and "File too large" in truncated.stderr
    (mount.path() / ".obsidian" / "app.json").write_text('{"ok": true}')
    (mount.path() / "note.md").write_text("the mount goes on\n")
    kept = dict(sql_conn.execute("SELECT path, octet_length(content) FROM memfs.tool_files"))
    assert kept.get(".obsidian/app.json") == 12
    assert (kept.get(".obsidian/big.bin") or 0) <= TOOL_FILE_MAX_BYTES
