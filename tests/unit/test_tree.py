"""The inode tree without a database or a mount: loading, clashes, lookup counts."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from memfs.tree import ROOT_INODE, DirNode, FileNode, Tree, to_ns

T0 = datetime(2026, 3, 3, 12, 0, tzinfo=UTC)


def load(tree: Tree, path: str, *, size: int = 1, age: int = 0) -> FileNode | None:
    moment = T0 + timedelta(seconds=age)
    return tree.load_document((uuid.uuid4(), path, size, moment, moment, None, None))


def test_directories_are_implied_by_paths() -> None:
    tree = Tree(0)
    load(tree, "MEMORY.md")
    load(tree, "projects/alpha/notes.md", age=10)
    load(tree, "projects/beta/x.md", age=5)
    projects = tree.resolve("projects")
    assert isinstance(projects, DirNode)
    assert sorted(projects.children) == ["alpha", "beta"]
    assert projects.subdirs == 2
    assert tree.path_of(tree.resolve("projects/alpha/notes.md")) == "projects/alpha/notes.md"  # type: ignore[arg-type]
    tree.settle_dir_times()
    assert projects.mtime_ns == to_ns(T0 + timedelta(seconds=10))
    assert tree.count() == (3, 4)


def test_directory_wins_over_a_file_with_the_same_path() -> None:
    tree = Tree(0)
    clash = load(tree, "notes")
    assert clash is not None and clash.doc_id in tree.docs
    load(tree, "notes/today.md")
    node = tree.resolve("notes")
    assert isinstance(node, DirNode)
    assert clash.doc_id not in tree.docs
    # ...and in the other order, the file is the one skipped
    assert load(tree, "notes") is None


def test_duplicate_rows_show_the_first_loaded() -> None:
    tree = Tree(0)
    first = load(tree, "MEMORY.md")
    assert load(tree, "MEMORY.md") is None
    assert tree.resolve("MEMORY.md") is first


def test_removed_inode_lives_until_forgotten() -> None:
    tree = Tree(0)
    node = load(tree, "a.md")
    assert node is not None
    node.lookups = 2
    tree.detach(node)
    assert tree.resolve("a.md") is None
    assert tree.get(node.ino) is node  # the kernel still knows it
    tree.forget(node.ino, 1)
    assert node.ino in tree.inodes
    tree.forget(node.ino, 1)
    assert node.ino not in tree.inodes


def test_open_handle_pins_a_removed_inode() -> None:
    tree = Tree(0)
    node = load(tree, "a.md")
    assert node is not None
    node.open_count = 1
    tree.detach(node)
    assert node.ino in tree.inodes
    tree.release_handle(node)
    assert node.ino not in tree.inodes


def test_move_keeps_inode_and_updates_counts() -> None:
    tree = Tree(0)
    load(tree, "a/x.md")
    load(tree, "b/y.md")
    a = tree.resolve("a")
    b = tree.resolve("b")
    assert isinstance(a, DirNode) and isinstance(b, DirNode)
    ino = a.ino
    tree.move(a, b, "moved")
    assert tree.resolve("b/moved/x.md") is not None
    assert tree.resolve("b/moved").ino == ino  # type: ignore[union-attr]
    assert tree.root.subdirs == 1 and b.subdirs == 1
    assert tree.is_within(tree.resolve("b/moved/x.md"), b)  # type: ignore[arg-type]


def test_inode_numbers_are_never_reused() -> None:
    tree = Tree(0)
    first = load(tree, "a.md")
    assert first is not None
    tree.detach(first)
    second = load(tree, "b.md")
    assert second is not None and second.ino != first.ino and second.ino > ROOT_INODE
