"""A large document is a save, not an outage (issue 55 item 6), on every engine.

A document of ``DOCUMENT_MAX_BYTES`` is written and closed and lands whole, chunks and
all, within a call's deadline.  A write that would take a document past it is refused up
front with EFBIG: the database keeps its previous content, the bytes received are kept in
the recovery area, the mount goes on (no breaker opens: a ``mkdir`` right after works),
and a removal after it stays removed.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memfs.vfs.content import DOCUMENT_MAX_BYTES
from tests.engines import Engine
from tests.mount.test_nothing_lost import kept_files
from tests.mounting import Mount

pytestmark = [pytest.mark.mount, pytest.mark.libsql_too]


def markdown(size: int) -> bytes:
    """``size`` bytes of Markdown: headings and paragraphs of plain words."""
    lines: list[bytes] = []
    total, n = 0, 0
    while total < size:
        line = (
            f"## Part {n}\n" if n % 20 == 0
            else f"Line {n} of the long note, with words enough to chunk as prose.\n"
        ).encode()  # fmt: skip
        lines.append(line)
        total += len(line)
        n += 1
    return b"".join(lines)[: size - 1] + b"\n"


def test_a_document_at_the_limit_lands_and_one_past_it_is_refused_alone(
    engine: Engine, database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any
) -> None:
    mount: Mount = mount_factory(engine.mount_url(database_url))
    mnt = mount.path()
    big = markdown(DOCUMENT_MAX_BYTES)
    (mnt / "big.md").write_bytes(big)  # close commits: an EIO here fails the test
    assert engine.contents(sql_conn)["big.md"].encode() == big

    (mnt / "kept.md").write_text("kept as it was\n")
    fifty = markdown(50 * 1000 * 1000)  # the 50 MB document
    with pytest.raises(OSError) as refused, open(mnt / "kept.md", "wb") as out:
        out.write(fifty)
    assert refused.value.errno == errno.EFBIG
    os.mkdir(mnt / "elsewhere")  # the mount goes on at once: nothing opened a breaker
    assert (mnt / "kept.md").read_text() == "kept as it was\n"
    assert engine.contents(sql_conn)["kept.md"] == "kept as it was\n"
    received = kept_files(mount)["kept.md"].encode()
    assert received and fifty.startswith(received)  # what reached the mount, for recovery
    with pytest.raises(OSError) as grown:
        os.truncate(mnt / "kept.md", DOCUMENT_MAX_BYTES + 1)
    assert grown.value.errno == errno.EFBIG
    assert (mnt / "kept.md").stat().st_size == len("kept as it was\n")

    os.unlink(mnt / "big.md")
    mount.barrier()
    time.sleep(2.0)  # a save retried behind the removal would have put it back by now
    assert not (mnt / "big.md").exists()
    assert "big.md" not in engine.contents(sql_conn)
    assert "big.md" not in os.listdir(Path(mnt))
