"""Names: folders, renames, folder moves and deletes, as the database keeps them."""

from __future__ import annotations

import errno

from tests.contract.conftest import Workspace
from tests.contract.fronts import only_rename_rules
from tests.contract.helpers import refused


async def test_a_new_folder_is_kept_while_empty(ws: Workspace) -> None:
    await ws.ops.mkdir("projects")
    assert "projects" in await ws.stored_names()


async def test_mkdir_of_an_existing_name_is_eexist(ws: Workspace) -> None:
    await ws.ops.mkdir("f")
    await refused(errno.EEXIST, ws.ops.mkdir("f"))
    await ws.ops.save("doc.md", b"x")
    await refused(errno.EEXIST, ws.ops.mkdir("doc.md"))


async def test_a_folder_stays_after_its_last_document_goes(ws: Workspace) -> None:
    await ws.ops.mkdir("f")
    await ws.ops.save("f/only.md", b"x")
    await ws.ops.remove("f/only.md")
    assert await ws.stored_names("f") == []
    assert "f" in await ws.stored_names()


async def test_a_rename_keeps_the_content_and_the_identity(ws: Workspace) -> None:
    await ws.ops.save("old.md", b"content\n")
    doc = await ws.identity("old.md")
    await ws.ops.move("old.md", "new.md")
    assert await ws.stored("new.md") == b"content\n"
    assert "old.md" not in await ws.stored_names()
    assert await ws.identity("new.md") == doc


async def test_a_rename_into_a_folder(ws: Workspace) -> None:
    await ws.ops.mkdir("archive")
    await ws.ops.save("note.md", b"n\n")
    await ws.ops.move("note.md", "archive/note.md")
    assert await ws.stored("archive/note.md") == b"n\n"
    assert "note.md" not in await ws.stored_names()


async def test_a_rename_over_a_document_replaces_it(ws: Workspace) -> None:
    await ws.ops.save("a.md", b"a\n")
    await ws.ops.save("b.md", b"b\n")
    await ws.ops.move("a.md", "b.md")
    assert await ws.stored("b.md") == b"a\n"
    assert sorted(await ws.stored_names()) == ["b.md"]


async def test_a_rename_without_overwrite_refuses_an_existing_target(ws: Workspace) -> None:
    await ws.ops.save("a.md", b"a\n")
    await ws.ops.save("b.md", b"b\n")
    await refused(errno.EEXIST, ws.ops.move("a.md", "b.md", overwrite=False))
    assert await ws.stored("b.md") == b"b\n"
    assert await ws.stored("a.md") == b"a\n"


async def test_renaming_a_missing_name_is_enoent(ws: Workspace) -> None:
    await refused(errno.ENOENT, ws.ops.move("ghost.md", "x.md"))


async def test_a_folder_move_moves_everything_below(ws: Workspace) -> None:
    await ws.ops.mkdir("src")
    await ws.ops.mkdir("src/deep")
    await ws.ops.save("src/a.md", b"a\n")
    await ws.ops.save("src/deep/b.md", b"b\n")
    await ws.ops.move("src", "dst")
    await ws.fs.flush_changes()
    assert await ws.stored("dst/a.md") == b"a\n"
    assert await ws.stored("dst/deep/b.md") == b"b\n"
    assert "src" not in await ws.stored_names()


async def test_a_folder_moved_into_another(ws: Workspace) -> None:
    await ws.ops.mkdir("a")
    await ws.ops.mkdir("b")
    await ws.ops.save("a/x.md", b"x\n")
    await ws.ops.move("a", "b/a")
    await ws.fs.flush_changes()
    assert await ws.stored("b/a/x.md") == b"x\n"


async def test_a_folder_cannot_move_into_itself(ws: Workspace) -> None:
    await ws.ops.mkdir("a")
    await ws.ops.mkdir("a/b")
    await refused(errno.EINVAL, ws.ops.move("a", "a/b/a"))


async def test_a_folder_cannot_replace_a_folder_with_content(ws: Workspace) -> None:
    only_rename_rules(ws.front)
    await ws.ops.mkdir("a")
    await ws.ops.mkdir("b")
    await ws.ops.save("b/kept.md", b"k\n")
    await refused(errno.ENOTEMPTY, ws.ops.move("a", "b"))
    assert await ws.stored("b/kept.md") == b"k\n"


async def test_a_document_cannot_replace_a_folder(ws: Workspace) -> None:
    only_rename_rules(ws.front)
    await ws.ops.mkdir("f")
    await ws.ops.save("d.md", b"d\n")
    await refused(errno.EISDIR, ws.ops.move("d.md", "f"))


async def test_a_folder_cannot_replace_a_document(ws: Workspace) -> None:
    only_rename_rules(ws.front)
    await ws.ops.mkdir("f")
    await ws.ops.save("d.md", b"d\n")
    await refused(errno.ENOTDIR, ws.ops.move("f", "d.md"))


async def test_a_deleted_document_is_gone_from_the_database(ws: Workspace) -> None:
    await ws.ops.save("gone.md", b"x\n")
    await ws.ops.remove("gone.md")
    await ws.fs.flush_changes()
    assert "gone.md" not in await ws.stored_names()
    await refused(errno.ENOENT, ws.ops.read("gone.md"))


async def test_a_folder_is_deleted_with_everything_below(ws: Workspace) -> None:
    await ws.ops.mkdir("tree")
    await ws.ops.mkdir("tree/sub")
    await ws.ops.save("tree/a.md", b"a")
    await ws.ops.save("tree/sub/b.md", b"b")
    await ws.ops.remove("tree")
    await ws.fs.flush_changes()
    assert "tree" not in await ws.stored_names()


async def test_rmdir_of_a_folder_with_documents_is_enotempty(ws: Workspace) -> None:
    await ws.ops.mkdir("f")
    await ws.ops.save("f/a.md", b"a")
    root = ws.fs.state.tree.root
    await refused(errno.ENOTEMPTY, ws.fs.rmdir(root.ino, "f"))


async def test_a_name_deleted_and_made_again_is_a_new_document(ws: Workspace) -> None:
    await ws.ops.save("again.md", b"first\n")
    await ws.ops.remove("again.md")
    await ws.ops.save("again.md", b"second\n")
    await ws.fs.flush_changes()
    assert await ws.stored("again.md") == b"second\n"


async def test_a_copy_is_a_new_document_and_the_source_stays(ws: Workspace) -> None:
    await ws.ops.save("src.md", b"copy me\n")
    await ws.ops.copy("src.md", "dst.md")
    assert await ws.stored("dst.md") == b"copy me\n"
    assert await ws.stored("src.md") == b"copy me\n"
    assert await ws.identity("src.md") != await ws.identity("dst.md")


async def test_a_folder_copy_copies_everything_below(ws: Workspace) -> None:
    await ws.ops.mkdir("a")
    await ws.ops.mkdir("a/b")
    await ws.ops.save("a/b/c.md", b"c\n")
    await ws.ops.copy("a", "z")
    assert await ws.stored("z/b/c.md") == b"c\n"
    assert await ws.stored("a/b/c.md") == b"c\n"


async def test_a_copy_without_overwrite_refuses_an_existing_target(ws: Workspace) -> None:
    await ws.ops.save("a.md", b"a")
    await ws.ops.save("b.md", b"b")
    await refused(errno.EEXIST, ws.ops.copy("a.md", "b.md", overwrite=False))


async def test_names_with_spaces_and_unicode(ws: Workspace) -> None:
    await ws.ops.mkdir("Meeting notes")
    await ws.ops.save("Meeting notes/Réunion 12.md", b"ok\n")
    assert await ws.stored("Meeting notes/Réunion 12.md") == b"ok\n"


async def test_sql_wildcards_in_names_are_plain_characters(ws: Workspace) -> None:
    await ws.ops.mkdir("a_b")
    await ws.ops.mkdir("axb")
    await ws.ops.save("a_b/one.md", b"1")
    await ws.ops.save("axb/two.md", b"2")
    await ws.ops.move("a_b", "moved")
    await ws.fs.flush_changes()
    assert await ws.stored_names("axb") == ["two.md"]
    assert await ws.stored_names("moved") == ["one.md"]


async def test_the_root_cannot_be_removed_or_moved(ws: Workspace) -> None:
    await refused(errno.EINVAL, ws.ops.remove(""))
    await refused(errno.EINVAL, ws.ops.move("", "x"))


async def test_a_renamed_document_keeps_its_versions(ws: Workspace) -> None:
    await ws.ops.save("h.md", b"one\n")
    await ws.ops.save("h.md", b"two\n")
    before = [e.name for e in await ws.ops.list(".versions/h.md")]
    await ws.ops.move("h.md", "k.md")
    after = [e.name for e in await ws.ops.list(".versions/k.md")]
    assert len(after) == len(before) >= 2


async def test_a_folder_move_keeps_identities_kept_folders_and_leaves_its_neighbours(
    ws: Workspace,
) -> None:
    await ws.ops.mkdir("a_b")
    await ws.ops.mkdir("a_b/deep")
    await ws.ops.mkdir("a_b/empty")
    await ws.ops.save("a_b/x.md", b"x\n")
    await ws.ops.save("a_b/deep/y.md", b"y\n")
    await ws.ops.save("a_b.md", b"the file beside\n")
    await ws.ops.mkdir("aXb")
    await ws.ops.save("aXb/z.md", b"z\n")
    before = [await ws.identity(p) for p in ("a_b/x.md", "a_b/deep/y.md")]
    await ws.ops.move("a_b", "c")
    await ws.fs.flush_changes()
    assert [await ws.identity(p) for p in ("c/x.md", "c/deep/y.md")] == before
    assert sorted(await ws.stored_names()) == ["aXb", "a_b.md", "c"]
    assert await ws.stored_names("c") == ["deep", "empty", "x.md"]
    assert await ws.stored_names("aXb") == ["z.md"]
    assert await ws.stored("a_b.md") == b"the file beside\n"


async def test_a_name_with_a_control_character_or_past_255_bytes_is_refused(
    ws: Workspace,
) -> None:
    await refused(errno.EINVAL, ws.ops.save("ctl\x01.md", b"x"))
    await refused(errno.ENAMETOOLONG, ws.ops.save("n" * 300 + ".md", b"x"))
    await refused(errno.ENAMETOOLONG, ws.ops.mkdir("d" * 256))
    assert await ws.stored_names() == []


async def test_a_folder_emptied_then_removed_is_gone_and_one_made_again_stays(
    ws: Workspace,
) -> None:
    """``rm d/x.md; rmdir d`` and ``rm e/y.md; rmdir e; mkdir e``, each sent as the
    workspace batches them: the order holds on every engine."""
    for folder, doc in (("d", "d/x.md"), ("e", "e/y.md")):
        await ws.ops.mkdir(folder)
        await ws.ops.save(doc, b"x\n")
    for folder, doc in (("d", "d/x.md"), ("e", "e/y.md")):
        await ws.ops.remove(doc)
        await ws.ops.remove(folder)
    await ws.ops.mkdir("e")
    await ws.fs.flush_changes()
    assert await ws.stored_names() == ["e"]
    assert await ws.stored_names("e") == []
