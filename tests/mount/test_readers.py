"""Readers never see bytes nobody wrote.

First the kernel's part, on a one-file filesystem whose size and bytes disagree
(``tests.stale_size_fs``): a short read under a larger cached size comes back zero-filled,
and the NUL bytes stay in the page cache.  Then memfs: a reader on a second mount, while
another mount and the agent append to one file, gets in every read (a fresh open's and a
descriptor held open throughout) a content some commit left, and no read holds a NUL byte
(a cached size larger than the bytes served) nor a torn last line (a smaller one).

Every content any commit leaves is logged by a trigger (the set reads are checked
against), so a stale read of an older commit is fine; a mixture is not.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.engines import Engine, reborn_prefix
from tests.mounting import Mount, needs_fuse
from tests.stale_size_fs import SERVED

pytestmark = pytest.mark.mount

#: Appends by each writer (the mount's and the agent's).
APPENDS = 250

LOG_SQL = """
CREATE TABLE committed_contents (content bytea);
CREATE FUNCTION log_content() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO committed_contents VALUES ({column});
  RETURN NULL;
END $$;
CREATE TRIGGER log_content AFTER INSERT OR UPDATE ON {table}
  FOR EACH ROW WHEN (NEW.path = '{path}') EXECUTE FUNCTION log_content();
"""


def _agent_append(engine: Engine, conn: psycopg.Connection[Any], path: str, line: str) -> None:
    if engine.name == "legacy":
        conn.execute(
            "UPDATE memory_documents SET content = content || %s WHERE path = %s", (line, path)
        )
    else:
        conn.execute(
            "UPDATE root_filesystem_entries SET contents = contents || %s, "
            "version = version + 1, updated_at = now() WHERE path = %s",
            (line.encode(), path),
        )


@needs_fuse
def test_the_kernel_pads_a_short_read_under_a_larger_cached_size_and_caches_it(
    tmp_path: Path,
) -> None:
    mountpoint = tmp_path / "stale"
    mountpoint.mkdir()
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.stale_size_fs", str(mountpoint)],
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        deadline = time.monotonic() + 20
        while not os.path.ismount(mountpoint):
            assert server.poll() is None, "the stale-size filesystem exited"
            assert time.monotonic() < deadline, "the stale-size filesystem never mounted"
            time.sleep(0.05)
        fd = os.open(mountpoint / "f", os.O_RDONLY)
        try:
            first = os.read(fd, 1 << 20)
            again = os.pread(fd, 1 << 20, 0)  # from the page cache
        finally:
            os.close(fd)
    finally:
        subprocess.run(["fusermount3", "-u", str(mountpoint)], timeout=20, check=False)
        server.wait(timeout=20)
    assert first.startswith(SERVED)
    assert first[len(SERVED) :] == b"\0" * (len(first) - len(SERVED)) and len(first) > len(SERVED)
    assert again == first, "the zero-filled page was not kept in the page cache"


def test_a_reader_on_another_mount_sees_only_committed_contents(
    engine: Engine, database_url: str, mount_factory: Any, sql_conn: psycopg.Connection[Any]
) -> None:
    writer: Mount = mount_factory(database_url, name="writer")
    reader: Mount = mount_factory(database_url, name="reader")
    row_path = "notes.md" if engine.name == "legacy" else f"{reborn_prefix('default')}/notes.md"
    column = "convert_to(NEW.content, 'UTF8')" if engine.name == "legacy" else "NEW.contents"
    sql_conn.execute(LOG_SQL.format(column=column, table=engine.table, path=row_path))  # type: ignore[arg-type]
    (writer.path() / "notes.md").write_text("start\n")
    target = reader.path() / "notes.md"
    deadline = time.monotonic() + 30
    while not target.exists():
        assert time.monotonic() < deadline, "the reader's mount never showed the file"
        time.sleep(0.05)
    rng = random.Random(27)
    done = threading.Event()
    errors: list[str] = []

    def mount_writer() -> None:
        try:
            for n in range(APPENDS):
                fd = os.open(writer.path() / "notes.md", os.O_WRONLY | os.O_APPEND)
                try:
                    os.write(fd, f"m-{n}-{'x' * rng.randrange(1, 300)}\n".encode())
                finally:
                    os.close(fd)
        except OSError as exc:
            errors.append(f"mount writer: {exc}")

    def agent() -> None:
        with psycopg.connect(database_url, autocommit=True) as conn:
            for n in range(APPENDS):
                _agent_append(engine, conn, row_path, f"a-{n}-{'y' * rng.randrange(1, 300)}\n")
                time.sleep(0.002)

    reads: list[bytes] = []
    kinds: list[str] = []

    def fresh_reads() -> None:
        try:
            while not done.is_set():
                fd = os.open(target, os.O_RDONLY)
                try:
                    size = os.fstat(fd).st_size
                    data = os.read(fd, 1 << 22)
                finally:
                    os.close(fd)
                reads.append(data)
                kinds.append("fresh" if len(data) == size else "fresh-size-differs")
        except OSError as exc:
            errors.append(f"fresh reader: {exc}")

    def held_reads() -> None:
        held = os.open(target, os.O_RDONLY)  # one descriptor kept open across the changes
        try:
            while not done.is_set():
                data = os.pread(held, 1 << 22, 0)
                reads.append(data)
                kinds.append("held")
        except OSError as exc:
            errors.append(f"held reader: {exc}")
        finally:
            os.close(held)

    threads = [threading.Thread(target=f) for f in (mount_writer, agent)]
    reading = [threading.Thread(target=f) for f in (fresh_reads, held_reads)]
    for thread in [*reading, *threads]:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    done.set()
    for thread in reading:
        thread.join(timeout=30)
    assert not any(t.is_alive() for t in [*threads, *reading]), "a writer or a reader hung"
    assert not errors, errors
    committed = {
        bytes(row[0]) for row in sql_conn.execute("SELECT content FROM committed_contents")
    }
    assert len(reads) > 200, f"only {len(reads)} reads: the race was hardly run"
    nul = [data for data in reads if b"\x00" in data]
    assert not nul, f"{len(nul)} of {len(reads)} reads hold NUL bytes nobody wrote"
    for kind in ("fresh", "held"):
        these = [data for data, k in zip(reads, kinds, strict=True) if k.startswith(kind)]
        bad = [data for data in these if data not in committed]
        assert not bad, (
            f"{len(bad)} of {len(these)} {kind} reads match no committed content; "
            f"first ends {bad[0][-120:]!r}"
        )
