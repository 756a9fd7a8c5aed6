"""``DeferredChanges.deletions_during``: what reads under way must hide (no database)."""

from __future__ import annotations

import uuid

from memfs.db.deferred import BatchOutcome, DeferredChanges, Delete


def test_reads_that_overlap_each_end_with_their_own_set() -> None:
    """Two reads under way at once end in either order (their sets may be equal: the
    daemon of a history-checker run exited with ``list.remove(x): x not in list``)."""
    changes = DeferredChanges()
    gone = Delete(uuid.uuid4())
    changes.add(gone)
    with changes.deletions_during() as outer:
        with changes.deletions_during() as inner:
            pass
        assert inner == {gone.doc_id}
    assert outer == {gone.doc_id}


def test_a_delete_committed_while_a_read_ran_is_hidden_from_it() -> None:
    changes = DeferredChanges()
    gone, kept = Delete(uuid.uuid4()), Delete(uuid.uuid4())
    with changes.deletions_during() as hidden:
        changes.add(gone, kept)
        batch = changes.take()
        changes.finish(batch, committed=True, outcome=BatchOutcome(skipped=[(kept, "changed")]))
        assert not changes.hidden(), "nothing waits any more"
    assert hidden == {gone.doc_id}, "a skipped delete left its row: shown"
