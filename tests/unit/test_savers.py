"""The savers' own harness: what rsync and rclone copy is the content each save meant.

Two saves of files with one name in different folders (``x.md`` and ``d/x.md``) ran at once
in the history driver and shared one local source file: the later one overwrote it before
the earlier program read it, that program copied the other file's content, and the checker
reported the earlier save's line lost (Reborn seed 6 of stop 39: ``d/x.md`` ended with a
version holding ``x.md``'s lines and the rsync save's marker, not the rclone save's).
"""

from __future__ import annotations

from pathlib import Path

from tests.savers import _local_copy


def test_two_saves_of_one_name_in_two_folders_copy_their_own_content(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home")}
    (tmp_path / "d").mkdir()
    (tmp_path / "x.md").write_text("root\n")
    (tmp_path / "d" / "x.md").write_text("in d\n")
    first = _local_copy(tmp_path / "d", "x.md", "m0w0-6.434", env)
    second = _local_copy(tmp_path, "x.md", "m0w1-6.440", env)  # before the first program read
    assert first != second
    assert first.name == second.name == "x.md"  # the programs copy onto that name
    assert first.read_text() == "in d\nm0w0-6.434\n"
    assert second.read_text() == "root\nm0w1-6.440\n"
