"""Whole-tree scans done cheaply: ``.recent``'s choice of documents (paths built only for
the ties at its edge) and the resync's map of every document's path (one walk)."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from memfs.tree import Tree
from memfs.vfs.recent_dir import RecentTree


def test_the_newest_documents_ties_by_path_equal_a_full_sort() -> None:
    rng = random.Random(4)
    tree = Tree(0)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    for n in range(600):
        folder = tree.ensure_dir(f"f{rng.randrange(9)}", 0)
        assert folder is not None
        node = tree.new_file(f"d{n}.md", 0o644, 0)
        tree.attach(folder, node)
        tree.bind_document(node, uuid.uuid4())
        # Few distinct times: many ties, at the edge of the hundred too.
        node.updated_at = start + timedelta(seconds=rng.randrange(12))
    recent = RecentTree(Any, Any, Any, count=100)  # type: ignore[arg-type]
    chosen = recent._latest(tree)
    every = sorted(tree.docs.values(), key=lambda n: (n.updated_at, tree.path_of(n)), reverse=True)
    assert [tree.path_of(n) for n in chosen] == [tree.path_of(n) for n in every[:100]]


def test_shown_documents_in_one_walk_equal_path_of_each() -> None:
    """The resync's map of every shown document's version and path (one walk) against
    ``path_of``; a document not in the tree maps to None."""
    rng = random.Random(8)
    tree = Tree(0)
    for n in range(300):
        folder = tree.ensure_dir(
            "/".join(f"d{rng.randrange(4)}" for _ in range(rng.randrange(4))), 0
        )
        assert folder is not None
        node = tree.new_file(f"f{n}.md", 0o644, 0)
        tree.attach(folder, node)
        if n % 7:
            tree.bind_document(node, uuid.uuid4())
        if n % 11 == 0:
            tree.add_link(node, tree.root, f"link{n}.md")  # another name: not the path
    gone = next(iter(tree.docs.values()))
    tree.detach(gone)
    assert gone.doc_id is not None
    tree.docs[gone.doc_id] = gone  # a document whose file left the tree (unlinked, open)
    expected: dict[uuid.UUID, Any] = {}
    for doc_id, node in tree.docs.items():
        expected[doc_id] = None if node is gone else (node.updated_at, tree.path_of(node))
    assert tree.shown_documents() == expected
    assert expected[gone.doc_id] is None and len(expected) > 200
