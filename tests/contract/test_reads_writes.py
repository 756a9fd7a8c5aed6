"""Reads and writes: a save is the document's whole content, stored as sent."""

from __future__ import annotations

import errno

from memfs.vfs.content import DOCUMENT_MAX_BYTES
from tests.contract.conftest import Workspace
from tests.contract.helpers import refused


async def test_a_saved_document_is_stored_and_read_back(ws: Workspace) -> None:
    await ws.ops.save("notes.md", b"hello\n")
    assert await ws.ops.read("notes.md") == b"hello\n"
    assert await ws.stored("notes.md") == b"hello\n"


async def test_a_second_save_replaces_the_content(ws: Workspace) -> None:
    await ws.ops.save("notes.md", b"one\n")
    await ws.ops.save("notes.md", b"two\n")
    assert await ws.stored("notes.md") == b"two\n"


async def test_a_shorter_save_leaves_no_tail(ws: Workspace) -> None:
    await ws.ops.save("notes.md", b"a long first line\n")
    await ws.ops.save("notes.md", b"short\n")
    assert await ws.stored("notes.md") == b"short\n"


async def test_unicode_is_kept_byte_for_byte(ws: Workspace) -> None:
    text = "naïve café ✓ 日本語 🙂\n".encode()
    await ws.ops.save("unicode.md", text)
    assert await ws.stored("unicode.md") == text


async def test_crlf_and_no_final_newline_are_kept(ws: Workspace) -> None:
    await ws.ops.save("crlf.md", b"a\r\nb\r\nno newline")
    assert await ws.stored("crlf.md") == b"a\r\nb\r\nno newline"


async def test_a_document_in_a_folder_is_stored_at_its_path(ws: Workspace) -> None:
    await ws.ops.mkdir("daily")
    await ws.ops.save("daily/2026-12-06.md", b"today\n")
    assert await ws.stored("daily/2026-12-06.md") == b"today\n"
    assert await ws.stored_names("daily") == ["2026-12-06.md"]


async def test_deep_folders_hold_documents(ws: Workspace) -> None:
    path = ""
    for name in ["a", "b", "c", "d"]:
        path = f"{path}/{name}" if path else name
        await ws.ops.mkdir(path)
    await ws.ops.save(f"{path}/deep.md", b"deep\n")
    assert await ws.stored("a/b/c/d/deep.md") == b"deep\n"


async def test_a_large_document_is_stored_whole(ws: Workspace) -> None:
    line = b"x" * 79 + b"\n"
    data = line * 20_000  # 1.6 MB, many chunks
    await ws.ops.save("large.md", data)
    assert await ws.stored("large.md") == data


async def test_the_size_shown_is_the_contents(ws: Workspace) -> None:
    await ws.ops.save("size.md", "é\n".encode())
    assert (await ws.ops.stat("size.md")).size == 3
    async with ws.fresh() as other:
        assert (await other.stat("size.md")).size == 3


async def test_a_save_gives_the_document_a_new_version(ws: Workspace) -> None:
    first = await ws.ops.save("v.md", b"one\n")
    second = await ws.ops.save("v.md", b"two\n")
    assert first.version is not None and second.version is not None
    assert second.version != first.version


async def test_a_save_of_the_same_bytes_changes_nothing_stored(ws: Workspace) -> None:
    await ws.ops.save("same.md", b"same\n")
    await ws.ops.save("same.md", b"same\n")
    assert await ws.stored("same.md") == b"same\n"


async def test_an_empty_new_document_exists_empty(ws: Workspace) -> None:
    await ws.ops.save("empty.md", b"")
    assert await ws.stored("empty.md") == b""


async def test_many_documents_are_listed_by_name(ws: Workspace) -> None:
    names = [f"n{i:03}.md" for i in range(40)]
    for name in reversed(names):
        await ws.ops.save(name, name.encode())
    assert [e.name for e in await ws.ops.list("")] == names
    assert sorted(await ws.stored_names()) == names


async def test_a_folder_lists_documents_and_folders(ws: Workspace) -> None:
    await ws.ops.mkdir("f")
    await ws.ops.mkdir("f/sub")
    await ws.ops.save("f/doc.md", b"x")
    listed = {e.name: e.is_dir for e in await ws.ops.list("f")}
    assert listed == {"doc.md": False, "sub": True}


async def test_reading_a_missing_document_is_enoent(ws: Workspace) -> None:
    await refused(errno.ENOENT, ws.ops.read("missing.md"))


async def test_reading_a_folder_is_eisdir(ws: Workspace) -> None:
    await ws.ops.mkdir("f")
    await refused(errno.EISDIR, ws.ops.read("f"))


async def test_saving_into_a_missing_folder_is_enoent(ws: Workspace) -> None:
    await refused(errno.ENOENT, ws.ops.save("nowhere/doc.md", b"x"))


async def test_saving_over_a_folder_is_eisdir(ws: Workspace) -> None:
    await ws.ops.mkdir("f")
    await refused(errno.EISDIR, ws.ops.save("f", b"x"))


async def test_a_path_through_a_file_is_enotdir(ws: Workspace) -> None:
    await ws.ops.save("file.md", b"x")
    await refused(errno.ENOTDIR, ws.ops.read("file.md/inner.md"))


async def test_dot_and_dotdot_never_leave_the_workspace(ws: Workspace) -> None:
    await refused(errno.EINVAL, ws.ops.read("../etc/passwd"))
    await refused(errno.EINVAL, ws.ops.save("a/./b.md", b"x"))


async def test_invalid_utf8_is_refused_and_nothing_is_stored(ws: Workspace) -> None:
    await ws.ops.save("text.md", b"kept\n")
    await refused(errno.EILSEQ, ws.ops.save("text.md", b"\xff\xfe bad"))
    assert await ws.stored("text.md") == b"kept\n"


async def test_a_nul_byte_is_refused(ws: Workspace) -> None:
    await refused(errno.EILSEQ, ws.ops.save("nul.md", b"a\x00b"))
    assert "nul.md" not in await ws.stored_names()


async def test_a_document_over_the_limit_is_efbig_and_the_old_content_stays(
    ws: Workspace,
) -> None:
    await ws.ops.save("big.md", b"small\n")
    await refused(errno.EFBIG, ws.ops.save("big.md", b"x" * (DOCUMENT_MAX_BYTES + 1)))
    assert await ws.stored("big.md") == b"small\n"


async def test_a_conditional_save_on_the_current_version_is_taken(ws: Workspace) -> None:
    first = await ws.ops.save("c.md", b"one\n")
    await ws.ops.save("c.md", b"two\n", if_version=first.version)
    assert await ws.stored("c.md") == b"two\n"


async def test_a_conditional_save_on_a_stale_version_is_refused(ws: Workspace) -> None:
    first = await ws.ops.save("c.md", b"one\n")
    await ws.ops.save("c.md", b"two\n")
    await refused(errno.ESTALE, ws.ops.save("c.md", b"three\n", if_version=first.version))
    assert await ws.stored("c.md") == b"two\n"


async def test_reads_see_the_latest_save_at_once(ws: Workspace) -> None:
    for i in range(10):
        data = f"round {i}\n".encode()
        await ws.ops.save("r.md", data)
        assert await ws.ops.read("r.md") == data
