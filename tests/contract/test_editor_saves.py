"""Editors' and sync tools' saves through scratch names, as every front sees them: the
original renamed away to a backup (vim, emacs ``x -> x~``) keeps its row until a new file
takes its place, so the save keeps the document's identity and loses nothing if it stops
half-way; a temporary folder renamed into place (unison) brings its documents; binary
scratch never becomes a document.  The statements each pattern costs on the legacy
layout stay with that engine (``tests/model/test_scratch.py``)."""

from __future__ import annotations

import errno

from tests.contract.conftest import Workspace
from tests.contract.helpers import refused


async def kept_versions(ws: Workspace, path: str) -> list[bytes]:
    names = [e.name for e in await ws.ops.list(f".versions/{path}") if e.name[0].isdigit()]
    return [await ws.ops.read(f".versions/{path}/{name}") for name in sorted(names)]


async def test_a_save_through_a_backup_name_keeps_the_document(ws: Workspace) -> None:
    await ws.ops.save("MEMORY.md", b"old\n")
    identity = await ws.identity("MEMORY.md")
    await ws.ops.move("MEMORY.md", "MEMORY.md~")
    assert await ws.stored("MEMORY.md") == b"old\n", "the agent still sees the document"
    await ws.ops.save("MEMORY.md", b"new\n")
    await ws.ops.remove("MEMORY.md~")
    assert await ws.stored("MEMORY.md") == b"new\n"
    assert await ws.identity("MEMORY.md") == identity
    assert "MEMORY.md~" not in await ws.stored_names()
    assert await kept_versions(ws, "MEMORY.md") == [b"old\n"]


async def test_a_save_stopped_after_the_backup_rename_loses_nothing(ws: Workspace) -> None:
    await ws.ops.save("x.md", b"precious\n")
    await ws.ops.move("x.md", "x.md~")
    assert await ws.stored_names() == ["x.md"]
    assert await ws.stored("x.md") == b"precious\n"


async def test_a_backup_removed_without_a_new_file_deletes_the_document(ws: Workspace) -> None:
    await ws.ops.save("a.md", b"a\n")
    await ws.ops.move("a.md", "a.md~")
    await ws.ops.remove("a.md~")  # no new a.md: the user deleted it
    assert "a.md" not in await ws.stored_names()


async def test_a_backup_renamed_back_restores_the_document(ws: Workspace) -> None:
    await ws.ops.save("b.md", b"b\n")
    identity = await ws.identity("b.md")
    await ws.ops.move("b.md", "b.md~")
    await ws.ops.move("b.md~", "b.md")
    assert await ws.stored("b.md") == b"b\n"
    assert await ws.identity("b.md") == identity
    assert await ws.stored_names() == ["b.md"]


async def test_binary_scratch_cannot_become_a_document(ws: Workspace) -> None:
    await ws.ops.save("img.png.partial", b"\x89PNG\x00\x00")
    await refused(errno.EILSEQ, ws.ops.move("img.png.partial", "img.png"))
    assert await ws.ops.read("img.png.partial") == b"\x89PNG\x00\x00"
    assert await ws.stored_names() == []


async def test_a_temporary_folder_renamed_into_place_brings_its_documents(
    ws: Workspace,
) -> None:
    await ws.ops.mkdir(".unison.proj.8f3a.unison.tmp")
    await ws.ops.mkdir(".unison.proj.8f3a.unison.tmp/sub")
    await ws.ops.save(".unison.proj.8f3a.unison.tmp/a.md", b"A\n")
    await ws.ops.save(".unison.proj.8f3a.unison.tmp/sub/b.md", b"B\n")
    await ws.ops.save(".unison.proj.8f3a.unison.tmp/sub/b.md~", b"backup\n")
    assert await ws.stored_names() == []
    await ws.ops.move(".unison.proj.8f3a.unison.tmp", "proj")
    assert await ws.stored_names("proj") == ["a.md", "sub"]
    assert await ws.stored_names("proj/sub") == ["b.md"]
    assert await ws.stored("proj/sub/b.md") == b"B\n"
    assert await ws.ops.read("proj/sub/b.md~") == b"backup\n"  # scratch: shown, not stored
