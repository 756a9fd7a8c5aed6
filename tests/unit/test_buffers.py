"""Write validation: binary data is refused at the write; split characters are allowed."""

from __future__ import annotations

import errno

import pytest

from memfs.errors import FsError
from memfs.vfs.buffers import FileBuffer


def eilseq(fn: object, *args: object) -> FsError:
    with pytest.raises(FsError) as info:
        fn(*args)  # type: ignore[operator]
    assert info.value.errno == errno.EILSEQ
    return info.value


def test_plain_writes_and_reads() -> None:
    buf = FileBuffer(b"hello")
    assert not buf.dirty
    buf.write(5, b" world")
    assert buf.dirty and buf.snapshot() == b"hello world"
    buf.write(0, b"J")
    assert buf.read(0, 5) == b"Jello"


def test_nul_byte_is_refused_and_buffer_unchanged() -> None:
    buf = FileBuffer(b"abc")
    err = eilseq(buf.write, 1, b"x\x00y")
    assert "NUL" in err.reason
    assert buf.snapshot() == b"abc" and not buf.dirty


def test_invalid_utf8_is_refused() -> None:
    buf = FileBuffer(b"abc")
    eilseq(buf.write, 3, b"\xff")
    eilseq(buf.write, 0, b"\xc3(")
    assert buf.snapshot() == b"abc"


def test_character_split_across_writes_is_accepted() -> None:
    text = "café ✓ 😀".encode()
    buf = FileBuffer(b"")
    for i in range(len(text)):  # one byte per write, as badly as it can be split
        buf.write(i, text[i : i + 1])
    assert buf.commit_text()[0] == "café ✓ 😀"


def test_truncated_tail_fails_only_at_commit() -> None:
    buf = FileBuffer(b"")
    buf.write(0, b"caf" + "é".encode()[:1])
    eilseq(buf.commit_text)


def test_overwriting_half_a_character_is_refused() -> None:
    buf = FileBuffer("aéb".encode())  # 61 C3 A9 62
    eilseq(buf.write, 2, b"x")  # would leave C3 followed by 'x'
    buf.write(1, "ü".encode())  # replacing a whole character is fine
    assert buf.commit_text()[0] == "aüb"


def test_write_past_end_is_refused() -> None:
    buf = FileBuffer(b"abc")
    err = eilseq(buf.write, 10, b"x")
    assert "past the end" in err.reason


def test_truncate() -> None:
    buf = FileBuffer(b"abcdef")
    buf.truncate(3)
    assert buf.snapshot() == b"abc" and buf.dirty
    eilseq(buf.truncate, 10)
    cut = FileBuffer("é".encode())
    cut.truncate(1)
    eilseq(cut.commit_text)


def test_mark_clean_only_if_unchanged() -> None:
    buf = FileBuffer(b"")
    buf.write(0, b"a")
    _, generation = buf.commit_text()
    buf.write(1, b"b")
    assert not buf.mark_clean(generation)
    _, generation = buf.commit_text()
    assert buf.mark_clean(generation)


def test_a_truncation_is_the_only_change_until_data_arrives() -> None:
    """What lets a flush between a redirect's truncation and its write commit nothing."""
    buf = FileBuffer(b"old content")
    buf.truncate(0)
    assert buf.dirty and buf.truncated_only
    buf.truncate(0)  # nothing more to cut: still only the truncation
    assert buf.truncated_only
    buf.write(0, b"new")
    assert not buf.truncated_only
    buf.truncate(1)  # cutting what was written: written content to commit
    assert not buf.truncated_only
    _, generation = buf.commit_text()
    assert buf.mark_clean(generation) and not buf.truncated_only
    buf.truncate(0)  # after a commit, a truncation alone again
    assert buf.truncated_only
    opened = FileBuffer(b"", dirty=True, truncated=True)  # open(O_TRUNC) without reading
    assert opened.truncated_only
    assert not FileBuffer(b"", dirty=False, truncated=True).truncated_only
