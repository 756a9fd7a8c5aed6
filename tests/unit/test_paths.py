"""Path rules: IronClaw's normalisation vectors and the names a mount accepts."""

from __future__ import annotations

import errno
from datetime import datetime, timedelta, timezone

import pytest

from memfs.errors import FsError
from memfs.paths import (
    check_new_name,
    conflict_copy,
    decode_name,
    escape_like,
    loadable_path,
    normalize_path,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("foo/bar", "foo/bar"),
        ("/foo/bar/", "foo/bar"),
        ("foo//bar", "foo/bar"),
        ("  /foo/  ", "foo"),
        ("README.md", "README.md"),
        ("foo/bar/", "foo/bar"),
        ("/", ""),
        ("", ""),
        (" /a/ ", "a"),
        ("/ a", " a"),
        ("\u3000x\u3000", "x"),
        ("\x1fx", "\x1fx"),  # not White_Space in Rust, so not trimmed
    ],
)
def test_normalize_path_vectors(raw: str, expected: str) -> None:
    assert normalize_path(raw) == expected


def test_check_new_name_accepts_ordinary_names() -> None:
    assert check_new_name("", "MEMORY.md") == "MEMORY.md"
    assert check_new_name("daily", "2026-03-03.md") == "daily/2026-03-03.md"
    assert check_new_name("a b", "c d.md") == "a b/c d.md"
    assert check_new_name("", "ünïcødé ✓.md") == "ünïcødé ✓.md"
    assert check_new_name("projects", ".search") == "projects/.search"
    # IronClaw trims only the ends of the whole path, so inner segments may have edges.
    assert check_new_name("dir", " lead.md") == "dir/ lead.md"


@pytest.mark.parametrize(
    ("parent", "name", "code"),
    [
        ("", "x" * 256, errno.ENAMETOOLONG),
        ("", "é" * 128, errno.ENAMETOOLONG),  # 256 bytes
        ("", "bad\x01name", errno.EINVAL),
        ("", "tab\tname", errno.EINVAL),
        ("", "del\x7f", errno.EINVAL),
        ("", " lead.md", errno.EINVAL),
        ("dir", "trail.md ", errno.EINVAL),
        ("", ".search", errno.EPERM),
    ],
)
def test_check_new_name_refuses(parent: str, name: str, code: int) -> None:
    with pytest.raises(FsError) as info:
        check_new_name(parent, name)
    assert info.value.errno == code


def test_decode_name() -> None:
    assert decode_name(b"ok.md") == "ok.md"
    with pytest.raises(FsError) as info:
        decode_name(b"\xff.md")
    assert info.value.errno == errno.EILSEQ
    with pytest.raises(FsError) as info:
        decode_name(b"a" * 256)
    assert info.value.errno == errno.ENAMETOOLONG


@pytest.mark.parametrize(
    ("path", "ok"),
    [
        ("MEMORY.md", True),
        ("daily/2026-03-03.md", True),
        (".system/gateway/README.md", True),
        ("", False),
        ("/abs.md", False),
        ("a//b", False),
        ("a/../b", False),
        ("a/./b", False),
        (".search/x", False),
        ("ctl\x07.md", False),
        ("x/" + "y" * 300, False),
        ("dir /file", True),
        ("trailing.md ", False),
    ],
)
def test_loadable_path(path: str, ok: bool) -> None:
    assert loadable_path(path) is ok


def test_escape_like() -> None:
    assert escape_like("a_b%c\\d") == "a\\_b\\%c\\\\d"


def test_a_conflict_copy_keeps_the_extension_and_is_named_in_utc() -> None:
    at = datetime(2026, 11, 28, 9, 5, 7, tzinfo=timezone(timedelta(hours=2)))
    assert conflict_copy("MEMORY.md", at) == "MEMORY.conflict-20261128T070507Z.md"
    assert conflict_copy("notes/a.b.md", at) == "notes/a.b.conflict-20261128T070507Z.md"
    assert conflict_copy("dir.x/README", at) == "dir.x/README.conflict-20261128T070507Z"
    assert conflict_copy(".vscode/.env", at) == ".vscode/.env.conflict-20261128T070507Z"
