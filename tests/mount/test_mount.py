"""Real FUSE mounts driven by real programs, checked afterwards with SQL."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import stat
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memfs.ironclaw.chunker import chunk_document
from tests.conftest import apply_ironclaw_migrations
from tests.engines import Engine
from tests.mounting import Mount, wait_reindex_queue_empty

pytestmark = [pytest.mark.mount, pytest.mark.libsql_too]


def docs(conn: psycopg.Connection[Any], user: str = "default") -> dict[str, str]:
    return dict(
        conn.execute(
            "SELECT path, content FROM memory_documents WHERE user_id = %s", (user,)
        ).fetchall()
    )


def assert_reindexed(conn: psycopg.Connection[Any], user: str = "default") -> None:
    """Every document's chunks are exactly IronClaw's chunker output for its content."""
    wait_reindex_queue_empty(conn)
    query = "SELECT id, content FROM memory_documents WHERE user_id = %s"
    for doc_id, content in conn.execute(query, (user,)).fetchall():
        stored = [
            r[0]
            for r in conn.execute(
                "SELECT content FROM memory_chunks WHERE document_id = %s ORDER BY chunk_index",
                (doc_id,),
            )
        ]
        assert stored == chunk_document(content), f"chunks of {doc_id} are stale"


def make_tree(root: Path) -> dict[str, str]:
    files = {
        "MEMORY.md": "# Memory\n- deploy on Fridays is forbidden\n",
        "daily/2026-03-03.md": "[09:00:00] deploy schedule moved to Tuesday\n",
        "projects/alpha/notes.md": "Alpha notes: naïve café ✓\n" + "word " * 900,
        "projects/alpha/todo.md": "- [ ] ship it\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return files


def test_issue_walkthrough(
    mounted: Mount, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    """The user story of issue 2, command for command."""
    mnt = mounted.path()
    src = work_dir / "walkthrough-src"
    files = make_tree(src)
    mounted.run("cp", "-r", f"{src}/.", str(mnt))
    assert docs(sql_conn) == files
    assert mounted.run("ls", "-a", "projects").stdout.decode().split() == [".", "..", "alpha"]
    listing = mounted.run("ls", "-lR", str(mnt)).stdout.decode()
    assert "notes.md" in listing and "daily:" in listing.replace(str(mnt) + "/", "")
    assert mounted.run("cat", "MEMORY.md").stdout.decode() == files["MEMORY.md"]
    grep = mounted.run("grep", "-rl", "deploy", ".").stdout.decode().split()
    assert sorted(grep) == ["./MEMORY.md", "./daily/2026-03-03.md"]
    found = mounted.run("find", ".", "-name", "*.md").stdout.decode().split()
    assert sorted(found) == sorted(f"./{p}" for p in files)
    mounted.shell('echo "- prefers dark mode" >> MEMORY.md')
    assert docs(sql_conn)["MEMORY.md"] == files["MEMORY.md"] + "- prefers dark mode\n"
    notes = work_dir / "notes.md"
    notes.write_text("beta notes\n")
    mounted.shell(f"mkdir -p projects/beta && cp {notes} projects/beta/")
    assert docs(sql_conn)["projects/beta/notes.md"] == "beta notes\n"
    beta_id = sql_conn.execute(
        "SELECT id FROM memory_documents WHERE path = 'projects/beta/notes.md'"
    ).fetchone()
    mounted.run("mv", "projects/beta", "projects/gamma")
    mounted.barrier()  # a directory rename rides on the mount's next transaction
    assert (
        sql_conn.execute(
            "SELECT id FROM memory_documents WHERE path = 'projects/gamma/notes.md'"
        ).fetchone()
        == beta_id
    )
    assert not (mnt / "projects/beta").exists()
    mounted.run("rm", "-r", "projects/gamma")
    deadline = time.monotonic() + 5  # the deletes go out moments after rm returns
    while "projects/gamma/notes.md" in docs(sql_conn):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not (mnt / "projects/gamma").exists()
    assert_reindexed(sql_conn)
    chunks = sql_conn.execute(
        "SELECT count(*) FROM memory_chunks c JOIN memory_documents d ON d.id = c.document_id "
        "WHERE d.path = 'projects/alpha/notes.md'"
    ).fetchone()
    assert chunks == (2,)  # 904 words: two IronClaw chunks
    assert mounted.umount() == 0


def test_o_trunc_and_in_place_edits(
    engine: Engine, engine_mount: Mount, sql_conn: psycopg.Connection[Any]
) -> None:
    mounted, docs = engine_mount, engine.contents
    mnt = mounted.path()
    (mnt / "long.md").write_text("a much longer original line\n")
    mounted.shell("echo hi > long.md")  # O_TRUNC through open(): no stale tail
    assert (mnt / "long.md").read_text() == "hi\n"
    assert docs(sql_conn)["long.md"] == "hi\n"
    # A mid-file edit through r+ replacing one 2-byte character with another.
    (mnt / "utf.md").write_text("naïve café\n", encoding="utf-8")
    with open(mnt / "utf.md", "r+b") as handle:
        handle.seek("naïve caf".encode().__len__())
        handle.write("è".encode())
    assert docs(sql_conn)["utf.md"] == "naïve cafè\n"
    # Half a character in the middle is refused at the write; the row is untouched.
    fd = os.open(mnt / "utf.md", os.O_RDWR)
    with pytest.raises(OSError) as info:
        os.pwrite(fd, b"x", 3)  # inside "ï"
    assert info.value.errno == errno.EILSEQ
    with pytest.raises(OSError) as info:
        os.close(fd)  # the abandoned save is reported again at close
    assert info.value.errno == errno.EILSEQ
    assert docs(sql_conn)["utf.md"] == "naïve cafè\n"
    engine.assert_chunked(sql_conn)


def test_sed_cp_tar_and_os_replace(
    engine: Engine, engine_mount: Mount, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    mounted, docs = engine_mount, engine.contents
    mnt = mounted.path()
    src = work_dir / "cp-a-src"
    files = make_tree(src)
    os.chmod(src / "MEMORY.md", 0o600)
    os.utime(src / "projects/alpha/todo.md", ns=(1_700_000_000_000_000_000,) * 2)
    mounted.run("cp", "-a", f"{src}/.", str(mnt / "copy"))
    for rel in files:
        a, b = (src / rel).stat(), (mnt / "copy" / rel).stat()
        assert (a.st_mode, a.st_size, a.st_mtime_ns) == (b.st_mode, b.st_size, b.st_mtime_ns)
    mounted.run("sed", "-i", "s/Fridays/Mondays/", "copy/MEMORY.md")
    assert docs(sql_conn)["copy/MEMORY.md"] == files["MEMORY.md"].replace("Fridays", "Mondays")
    assert sum(p == "copy/MEMORY.md" for p in docs(sql_conn)) == 1
    # tar x keeps contents and mtimes
    archive = work_dir / "tree.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(src, arcname="untarred")
    mounted.run("tar", "xf", str(archive))
    for rel, text in files.items():
        assert docs(sql_conn)[f"untarred/{rel}"] == text
    todo = (mnt / "untarred/projects/alpha/todo.md").stat()
    assert todo.st_mtime_ns == 1_700_000_000_000_000_000
    # os.replace over an existing document
    target = mnt / "copy/projects/alpha/todo.md"
    temp = mnt / "copy/projects/alpha/.todo.tmp"
    temp.write_text("- [x] shipped\n")
    os.replace(temp, target)
    assert docs(sql_conn)["copy/projects/alpha/todo.md"] == "- [x] shipped\n"
    assert "copy/projects/alpha/.todo.tmp" not in docs(sql_conn)
    engine.assert_chunked(sql_conn)


def test_errnos_through_the_kernel(
    engine: Engine, engine_mount: Mount, sql_conn: psycopg.Connection[Any]
) -> None:
    mounted, docs = engine_mount, engine.contents
    mnt = mounted.path()
    (mnt / "MEMORY.md").write_text("keep me\n")
    fd = os.open(mnt / "MEMORY.md", os.O_WRONLY | os.O_TRUNC)
    with pytest.raises(OSError) as info:
        os.write(fd, b"bin\x00ary")
    assert info.value.errno == errno.EILSEQ
    with pytest.raises(OSError) as info:
        os.close(fd)
    assert info.value.errno == errno.EILSEQ
    assert docs(sql_conn)["MEMORY.md"] == "keep me\n"
    assert (mnt / "MEMORY.md").read_text() == "keep me\n"
    cases: list[tuple[int, Any]] = [
        (errno.ENAMETOOLONG, lambda: (mnt / ("x" * 256)).write_text("x")),
        (errno.EEXIST, lambda: os.mkdir(mnt / ".search")),  # the search directory exists
        (errno.EROFS, lambda: (mnt / ".search" / "README.md").write_text("x")),
        (errno.EROFS, lambda: os.mkdir(mnt / ".search" / "q" / "x")),
        (errno.EPERM, lambda: os.symlink("MEMORY.md", mnt / "link.md")),
        (errno.EPERM, lambda: os.link(mnt / "MEMORY.md", mnt / "hard.md")),
        (errno.EINVAL, lambda: (mnt / "bell\x07.md").write_text("x")),
        (errno.ENOTEMPTY, lambda: (os.makedirs(mnt / "d/e"), os.rmdir(mnt / "d"))),
        (errno.EPERM, lambda: os.chown(mnt / "MEMORY.md", 4242, -1)),
        (errno.EOPNOTSUPP, lambda: os.setxattr(mnt / "MEMORY.md", "user.x", b"1")),
    ]
    for code, action in cases:
        with pytest.raises(OSError) as info:
            action()
        assert info.value.errno == code, (code, info.value)
    os.chown(mnt / "MEMORY.md", os.getuid(), os.getgid())  # same owner: a no-op
    statvfs = os.statvfs(mnt)
    assert statvfs.f_bavail > 0 and statvfs.f_namemax == 255
    assert set(docs(sql_conn)) == {"MEMORY.md"}
    assert "not saving 'MEMORY.md'" in mounted.log()


def test_ironclaw_database_round_trip(
    database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any
) -> None:
    apply_ironclaw_migrations(database_url, with_versions=True)
    sql_conn.execute(
        "INSERT INTO memory_documents (user_id, path, content, metadata) VALUES "
        "('default', 'MEMORY.md', 'agent wrote this', '{\"owner\": \"agent\"}'), "
        "('someone-else', 'MEMORY.md', 'not yours', '{}')"
    )
    mount = mount_factory(database_url)
    mnt = mount.path()
    assert sorted(os.listdir(mnt)) == ["MEMORY.md"]
    mount.shell("echo '- edited by a person' >> MEMORY.md")
    row = sql_conn.execute(
        "SELECT content, metadata FROM memory_documents WHERE user_id = 'default'"
    ).fetchone()
    assert row == ("agent wrote this- edited by a person\n", {"owner": "agent"})
    versions = sql_conn.execute(
        "SELECT version, content, changed_by FROM memory_document_versions"
    ).fetchall()
    assert versions == [(1, "agent wrote this", "default")]
    assert docs(sql_conn, "someone-else") == {"MEMORY.md": "not yours"}
    untouched = sql_conn.execute(
        "SELECT count(*) FROM memory_chunks c JOIN memory_documents d ON d.id = c.document_id "
        "WHERE d.user_id = 'someone-else'"
    ).fetchone()
    assert untouched == (0,)  # the other user's row was not even reindexed
    assert_reindexed(sql_conn)
    assert mount.umount() == 0


def test_ironclaw_database_without_versions_table(
    database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any
) -> None:
    apply_ironclaw_migrations(database_url, with_versions=False)
    mount = mount_factory(database_url)
    (mount.path() / "notes.md").write_text("one\n")
    (mount.path() / "notes.md").write_text("two\n")
    assert docs(sql_conn) == {"notes.md": "two\n"}
    assert_reindexed(sql_conn)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_commits_open_files_and_unmounts(
    engine: Engine, engine_mount: Mount, sql_conn: psycopg.Connection[Any], signum: int
) -> None:
    mounted, docs = engine_mount, engine.contents
    handle = open(mounted.path("open.md"), "w")  # noqa: SIM115 - left open on purpose
    handle.write("written but never closed\n")
    handle.flush()  # reaches the daemon's buffer, not the database
    assert "open.md" not in docs(sql_conn)
    assert mounted.proc is not None
    mounted.proc.send_signal(signum)
    assert mounted.proc.wait(timeout=30) == 0
    assert docs(sql_conn) == {"open.md": "written but never closed\n"}
    assert f"received {signal.Signals(signum).name}" in mounted.log()
    with pytest.raises(OSError):
        handle.close()


def test_embedded_default_daemon_survives_remount(work_dir: Path, mount_factory: Any) -> None:
    """`memfs mount DIR` with no database: embedded PostgreSQL, background daemon, umount."""
    from tests.mounting import memfs_env

    data_dir = work_dir / "embedded-data"
    mnt = work_dir / "embedded-mnt"
    env = memfs_env(work_dir / "runtime", MEMFS_DATA_DIR=str(data_dir))
    log_file = work_dir / "embedded.log"
    memfs = [os.environ.get("PYTHON", shutil.which("python3") or "python3"), "-m", "memfs"]
    import sys

    memfs[0] = sys.executable

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*memfs, *args], env=env, capture_output=True, text=True, timeout=90, check=False
        )

    mounted = run("mount", str(mnt), "--log-file", str(log_file))
    try:
        assert mounted.returncode == 0, mounted.stderr + log_file.read_text()
        assert "mounted workspace 'default'" in mounted.stdout
        (mnt / "MEMORY.md").write_text("persisted\n")
        assert run("umount", str(mnt)).returncode == 0
        assert not (mnt / "MEMORY.md").exists()
        assert run("mount", str(mnt), "--log-file", str(log_file)).returncode == 0
        assert (mnt / "MEMORY.md").read_text() == "persisted\n"
        assert (data_dir / "pgdata" / "PG_VERSION").exists()
        status = run("status")  # a command using the server while the mount does
        assert status.returncode == 0, status.stderr
        assert (data_dir / "pgdata" / "postmaster.pid").exists(), "status stopped it"
        assert run("umount", str(mnt)).returncode == 0
        # The last user is gone: the server stops and its user list is empty.
        deadline = time.monotonic() + 30
        while (data_dir / "pgdata" / "postmaster.pid").exists():
            assert time.monotonic() < deadline, "the embedded server kept running"
            time.sleep(0.1)
        assert json.loads((data_dir / "pgdata" / ".handle_pids.json").read_text()) == []
    finally:
        run("umount", str(mnt))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "memfs" in Path("/proc/self/mounts").read_text():
            if str(mnt) not in Path("/proc/self/mounts").read_text():
                break
            time.sleep(0.1)
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], check=False, timeout=30)


@pytest.mark.parametrize("user_id", ["Zoë", "alice,bob", "team lead"])
def test_a_user_id_libfuse_cannot_spell_still_mounts(
    database_url: str, mount_factory: Any, sql_conn: psycopg.Connection[Any], user_id: str
) -> None:
    """The mount's source name is ASCII and one libfuse option whatever the user id (a
    non-ASCII one failed in pyfuse3, a comma split the options: "FUSE refused the mount")."""
    mount = mount_factory(database_url, user_id=user_id)
    (mount.path() / "note.md").write_text("mine\n")
    owners = {row[0] for row in sql_conn.execute("SELECT user_id FROM memory_documents")}
    assert owners == {user_id}
    assert os.path.ismount(mount.path())


def test_uid_gid_and_umask_set_what_every_file_is_shown_with(
    database_url: str, mount_factory: Any
) -> None:
    """sshfs's and rclone's uid=, gid= and umask=, which users bring along."""
    mount = mount_factory(database_url, extra_args=["--uid", "12345", "--gid", "23456",
                                                    "-o", "umask=077"])  # fmt: skip
    (mount.path() / "notes").mkdir()
    (mount.path() / "notes" / "a.md").write_text("a\n")
    shown = (mount.path() / "notes" / "a.md").stat()
    assert (shown.st_uid, shown.st_gid) == (12345, 23456)
    assert stat.S_IMODE(shown.st_mode) == 0o600
    assert stat.S_IMODE((mount.path() / "notes").stat().st_mode) == 0o700
    os.chmod(mount.path() / "notes" / "a.md", 0o640)  # the stored mode; the mask still applies
    assert stat.S_IMODE((mount.path() / "notes" / "a.md").stat().st_mode) == 0o600
