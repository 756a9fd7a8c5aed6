"""Nothing anyone saved is lost: unsaved changes survive unmount, SIGTERM and SIGKILL in
the recovery area; a refused new file leaves no trap behind; ``--log-file`` is honoured."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memfs.config import Settings
from memfs.vfs.content import DOCUMENT_MAX_BYTES
from tests.engines import Engine
from tests.faults import DISK_FREED, DISK_FULL, disk_freed, disk_full, timed, write_file
from tests.mounting import (
    COMMAND_TIMEOUT,
    MOUNT_TIMEOUT,
    Mount,
    memfs_env,
    wait_reindex_queue_empty,
)

pytestmark = pytest.mark.mount

LEGACY = Engine("legacy")


def memfs(mount: Mount, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memfs", *args],
        env=mount.env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )


def workspace_args(mount: Mount) -> list[str]:
    assert mount.database_url is not None
    return ["--database-url", mount.database_url, "--user-id", mount.user_id]


def kept_files(mount: Mount) -> dict[str, str]:
    """Workspace path -> content of every copy in the mount's recovery area."""
    workspace = Settings(database_url=mount.database_url, user_id=mount.user_id).recovery_dir
    root = Path(mount.env["XDG_STATE_HOME"]) / "memfs" / "recovery" / workspace.name
    found: dict[str, str] = {}
    for manifest in root.glob("*/manifest.json"):
        for path in json.loads(manifest.read_text())["files"]:
            found[path] = (manifest.parent / "files" / path).read_text()
    return found


def fail_two_saves(
    mount: Mount, sql_conn: psycopg.Connection[Any], engine: Engine = LEGACY
) -> None:
    """a.md holds v1 in the database; then the disk 'fills' and two saves get EIO."""
    mnt = mount.path()
    (mnt / "a.md").write_text("v1\n")
    sql_conn.execute(disk_full(engine.table))  # type: ignore[arg-type]
    for name, mode, text in (("a.md", "a", "v2\n"), ("new.md", "w", "new\n")):
        outcome = timed(write_file(name, mode, text), cwd=mnt, limit=30)
        assert outcome.returncode not in (0, None) and "Errno 5" in outcome.stderr, outcome
    # The mount shows what was written, and a copy is on local disk already.
    assert (mnt / "a.md").read_text() == "v1\nv2\n"
    assert kept_files(mount) == {"a.md": "v1\nv2\n", "new.md": "new\n"}


def documents(sql_conn: psycopg.Connection[Any]) -> dict[str, str]:
    return dict(sql_conn.execute("SELECT path, content FROM memory_documents").fetchall())


def test_unmount_with_unsaved_changes_keeps_them_and_says_so(
    engine: Engine, engine_mount: Mount, sql_conn: psycopg.Connection[Any]
) -> None:
    mount, documents = engine_mount, engine.contents
    fail_two_saves(mount, sql_conn, engine)
    result = memfs(mount, "umount", str(mount.mountpoint))
    assert result.returncode == 1
    assert "could not save 2 file(s): a.md, new.md" in result.stderr
    assert "memfs recover --restore" in result.stderr
    assert mount.proc.wait(timeout=MOUNT_TIMEOUT) == 1
    assert "could not save 2 file(s) at unmount: a.md, new.md" in mount.log()
    assert documents(sql_conn) == {"a.md": "v1\n"}
    assert kept_files(mount) == {"a.md": "v1\nv2\n", "new.md": "new\n"}

    listed = memfs(mount, "recover", *workspace_args(mount))
    assert listed.returncode == 0, listed.stderr
    assert "2 kept" in listed.stdout and "  a.md  6  " in listed.stdout
    refused = memfs(mount, "recover", "--restore", *workspace_args(mount))
    assert refused.returncode == 1 and "still kept" in refused.stdout  # the disk is still full
    sql_conn.execute(disk_freed(engine.table))  # type: ignore[arg-type]
    restored = memfs(mount, "recover", "--restore", *workspace_args(mount))
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "2 restored" in restored.stdout
    assert documents(sql_conn) == {"a.md": "v1\nv2\n", "new.md": "new\n"}
    assert engine.versions(sql_conn, "a.md") == ["v1\n"]  # the restore is an ordinary save
    assert kept_files(mount) == {}
    assert "0 kept" in memfs(mount, "recover", *workspace_args(mount)).stdout


def modes(root: Path) -> dict[str, str]:
    """Relative path -> octal mode of ``root`` and everything below it."""
    return {
        str(path.relative_to(root)): oct(path.lstat().st_mode & 0o777)
        for path in [root, *root.rglob("*")]
    }


def test_unsaved_memory_pid_files_and_logs_are_their_owners_alone(
    mount_factory: Any, database_url: str, sql_conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """Recovery copies hold memory: 0600 files in 0700 folders, whatever the umask of the
    shell that mounted, as are the manifest, the pid file and the log."""
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    env = memfs_env(runtime)
    second = str(tmp_path / "second")
    old = os.umask(0o022)
    try:
        mount = mount_factory(database_url, env=env)
        fail_two_saves(mount, sql_conn)
        log_file = tmp_path / "logs" / "mount.log"
        background = memfs(
            mount, "mount", "--log-file", str(log_file), "--database-url", database_url,
            "--user-id", "other", second,
        )  # fmt: skip
        assert background.returncode == 0, background.stderr
    finally:
        os.umask(old)
    try:
        state, ours = modes(runtime / "state" / "memfs"), modes(runtime / "memfs")
        assert any(name.endswith("files/a.md") for name in state), state
        assert any(name.endswith(".pid") for name in ours), ours
        for found in (state, ours, modes(log_file.parent)):
            for name, mode in found.items():
                assert mode in ("0o700", "0o600"), (name, mode)
        assert modes(log_file.parent)["mount.log"] == "0o600"
        assert modes(runtime / "state" / "memfs")["."] == "0o700"
    finally:
        memfs(mount, "umount", second)
        # Its unsaved content is in the recovery area (asserted above): no 30 s SIGTERM
        # grace for a database that will not take it.
        mount.kill()


def test_sigterm_and_sigkill_with_unsaved_changes_lose_nothing(
    engine: Engine, engine_mount: Mount, database_url: str, sql_conn: psycopg.Connection[Any],
    mount_factory: Any,
) -> None:  # fmt: skip
    mount = engine_mount
    fail_two_saves(mount, sql_conn, engine)
    mount.proc.send_signal(signal.SIGKILL)
    mount.proc.wait(timeout=MOUNT_TIMEOUT)
    mount.kill()
    assert kept_files(mount) == {"a.md": "v1\nv2\n", "new.md": "new\n"}

    again = mount_factory(database_url, env=mount.env)  # the next mount offers them back
    assert "2 unsaved file(s) from an earlier mount" in again.log()
    with pytest.raises(OSError):  # refused too: the disk is still full...
        (again.path() / "b.md").write_text("b2\n")
    listed = memfs(again, "recover", *workspace_args(again))
    assert "2 kept" in listed.stdout, listed.stdout  # the live mount's b.md is its own
    assert "1 running mount(s) still retry" in listed.stderr
    again.proc.send_signal(signal.SIGTERM)  # ...so SIGTERM keeps it and exits 1
    assert again.proc.wait(timeout=MOUNT_TIMEOUT) == 1
    assert "could not save 1 file(s) at unmount: b.md" in again.log()
    assert kept_files(again) == {"a.md": "v1\nv2\n", "new.md": "new\n", "b.md": "b2\n"}


def test_a_save_that_succeeds_later_leaves_no_copy(
    database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any
) -> None:
    mount = mount_factory(database_url)
    fail_two_saves(mount, sql_conn)
    sql_conn.execute(DISK_FREED)
    assert mount.umount() == 0  # committed at unmount after all
    assert documents(sql_conn) == {"a.md": "v1\nv2\n", "new.md": "new\n"}
    assert kept_files(mount) == {}


def test_writes_after_a_refused_new_file_reach_a_new_document(
    mounted: Any, sql_conn: psycopg.Connection[Any]
) -> None:
    """``cp /bin/ls tool.md`` is refused (EILSEQ); the next ``echo > tool.md`` must not
    write into the dead inode the kernel may still cache."""
    mnt = mounted.path()
    for _ in range(3):
        refused = mounted.shell("cp /bin/ls tool.md", check=False)
        assert refused.returncode != 0
        mounted.shell("echo notes > tool.md && sync tool.md")
        assert os.stat(mnt / "tool.md").st_nlink == 1
        assert (mnt / "tool.md").read_text() == "notes\n"
        assert documents(sql_conn) == {"tool.md": "notes\n"}
        mounted.shell("rm tool.md")


def test_log_file_is_honoured_in_the_foreground(
    database_url: str, mount_factory: Any, work_dir: Path
) -> None:
    log_file = work_dir / "foreground-log" / "memfs.log"
    mount = mount_factory(database_url, extra_args=["--log-file", str(log_file)])
    (mount.path() / "a.md").write_text("x\n")
    assert "mounted workspace 'default'" in log_file.read_text()
    assert mount.umount() == 0
    assert "unmounted" in log_file.read_text()
    assert "mounted workspace" not in mount.log()  # not on stderr as well


def _memory_mb(pid: int) -> dict[str, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {key: int(fields[key].split()[0]) // 1024 for key in ("VmRSS", "VmHWM")}


def test_a_large_document_costs_a_bounded_multiple_of_its_size(
    mounted: Any, sql_conn: psycopg.Connection[Any]
) -> None:
    """The documented bound (SEMANTICS.md): saving an N-byte document raises the daemon's
    peak RSS by at most 10 N (measured: 8.3 N for 20 MB with the mmap threshold fixed,
    9.2-11.4 N without it; before issue 13, 16 N).  At the document limit (8 MiB) now."""
    size_mb = DOCUMENT_MAX_BYTES // (1024 * 1024)
    line = "word " * 19 + "end\n"
    text = line * ((DOCUMENT_MAX_BYTES - len("tail\n")) // len(line))
    pid = mounted.proc.pid
    start = _memory_mb(pid)["VmRSS"]
    big = mounted.path() / "big.md"
    big.write_text(text)
    wait_reindex_queue_empty(sql_conn, timeout=60)
    with open(big, "a") as out:
        out.write("tail\n")
    wait_reindex_queue_empty(sql_conn, timeout=60)
    peak = _memory_mb(pid)["VmHWM"]
    assert peak - start <= 10 * size_mb, f"peak {peak} MB from {start} MB for {size_mb} MB"
    stored = sql_conn.execute("SELECT length(content) FROM memory_documents").fetchone()
    assert stored == (len(text) + 5,)


def test_error_log_lines_name_the_files(mounted: Any) -> None:
    mnt = mounted.path()
    (mnt / "d1").mkdir()
    (mnt / "d2").mkdir()
    (mnt / "d2" / "x.md").write_text("x\n")
    with pytest.raises(OSError):
        os.rename(mnt / "d1", mnt / "d2")
    with pytest.raises(OSError):
        os.rmdir(mnt / "d2")
    log = mounted.log()
    assert "rename 'd1' -> 'd2': [ENOTEMPTY]" in log
    assert "rmdir 'd2': [ENOTEMPTY]" in log


def test_restore_never_puts_an_older_copy_over_a_newer_save(
    database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any
) -> None:
    mount = mount_factory(database_url)
    fail_two_saves(mount, sql_conn)
    assert memfs(mount, "umount", str(mount.mountpoint)).returncode == 1
    sql_conn.execute(DISK_FREED)
    sql_conn.execute("UPDATE memory_documents SET content = 'agent, later\n' WHERE path = 'a.md'")
    restored = memfs(mount, "recover", "--restore", *workspace_args(mount))
    assert restored.returncode == 1
    assert "1 restored" in restored.stdout and "1 superseded still kept" in restored.stdout
    assert "a.md: changed in the database after this copy was kept" in restored.stderr
    assert documents(sql_conn) == {"a.md": "agent, later\n", "new.md": "new\n"}
    forced = memfs(mount, "recover", "--restore", "--force", *workspace_args(mount))
    assert forced.returncode == 0 and "1 restored" in forced.stdout
    assert documents(sql_conn)["a.md"] == "v1\nv2\n"  # and the agent's is a version
    assert kept_files(mount) == {}


def nowhere_to_keep(
    mount_factory: Any, database_url: str, sql_conn: psycopg.Connection[Any], tmp_path: Path
) -> Mount:
    """A mount whose database refuses every save (disk full) and whose recovery area
    cannot be written (its folder's place is taken by a file): three files written, each
    close EIO, their content in the daemon's memory only."""
    runtime = tmp_path / "runtime"
    (runtime / "state" / "memfs").mkdir(parents=True)
    (runtime / "state" / "memfs" / "recovery").write_text("not a folder\n")
    mount: Mount = mount_factory(database_url, env=memfs_env(runtime))
    sql_conn.execute(DISK_FULL)  # type: ignore[arg-type]
    for name in ("a.md", "b.md", "c.md"):
        outcome = timed(write_file(name, "w", f"only here: {name}\n"), cwd=mount.path(), limit=30)
        assert outcome.returncode not in (0, None), outcome
    assert "stay in memory only" in mount.log()
    return mount


def test_unmount_with_nowhere_to_keep_refuses_and_recover_to_drains(
    mount_factory: Any, database_url: str, sql_conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """Was: `memfs umount` exited 0, printed nothing, and the three files were gone."""
    mount = nowhere_to_keep(mount_factory, database_url, sql_conn, tmp_path)
    refused = memfs(mount, "umount", str(mount.mountpoint))
    assert refused.returncode == 1, refused.stderr
    assert "not unmounted: 3 file(s)" in refused.stderr and "c.md" in refused.stderr
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert mount.proc is not None and mount.proc.poll() is None
    assert (mount.path() / "b.md").read_text() == "only here: b.md\n"  # still mounted
    out = tmp_path / "unsaved"
    drained = memfs(mount, "recover", "--to", str(out), *workspace_args(mount))
    assert drained.returncode == 0, drained.stdout + drained.stderr
    assert "3 written" in drained.stdout
    assert {p.name: p.read_text() for p in out.iterdir()} == {
        f"{n}.md": f"only here: {n}.md\n" for n in "abc"
    }
    assert {oct(p.stat().st_mode & 0o777) for p in out.iterdir()} == {"0o600"}
    done = memfs(mount, "umount", str(mount.mountpoint))
    assert done.returncode == 0, done.stderr
    assert mount.proc.wait(timeout=MOUNT_TIMEOUT) == 0


def test_forced_unmount_keeps_the_daemon_alive_until_the_content_is_kept(
    mount_factory: Any, database_url: str, sql_conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    mount = nowhere_to_keep(mount_factory, database_url, sql_conn, tmp_path)
    forced = memfs(mount, "umount", "--force", str(mount.mountpoint))
    assert forced.returncode == 1, forced.stderr
    assert "unmounted, but 3 file(s) are in the memory of daemon" in forced.stderr
    assert mount.proc is not None and mount.proc.poll() is None  # alive, holding them
    sql_conn.execute(DISK_FREED)  # type: ignore[arg-type]
    assert mount.proc.wait(timeout=MOUNT_TIMEOUT) == 0  # its next try saves them, then exits
    assert documents(sql_conn) == {f"{n}.md": f"only here: {n}.md\n" for n in "abc"}
