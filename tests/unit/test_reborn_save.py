"""IronClaw v1.1+'s save rule as a pure plan (``memfs.ironclaw.reborn_save``): each case of
the rule, and the properties every plan keeps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from memfs.ironclaw.hashing import bytes_hash
from memfs.ironclaw.reborn_save import StoredEntry, Versions, plan_save

T0 = datetime(2026, 12, 1, tzinfo=UTC)
T1 = T0 + timedelta(seconds=1)


def test_a_new_entry_is_created_and_keeps_nothing() -> None:
    plan = plan_save(None, b"hello\n", None, versions=Versions.OF_CHANGES)
    assert plan.created and plan.data == b"hello\n"
    assert not (plan.version or plan.conflict_copy or plan.other_changed or plan.fills_empty)
    assert plan.replaced_hash is None


def test_a_changed_save_keeps_the_replaced_bytes_as_a_version() -> None:
    plan = plan_save(StoredEntry(b"old\n", T0), b"new\n", T0, versions=Versions.OF_CHANGES)
    assert not plan.created and plan.version and not plan.conflict_copy
    assert plan.replaced_hash is None  # a plain save is not hashed


def test_an_unchanged_save_keeps_no_version_unless_renamed_over() -> None:
    same = StoredEntry(b"same\n", T0)
    assert not plan_save(same, b"same\n", T0, versions=Versions.OF_CHANGES).version
    assert plan_save(same, b"same\n", T0, versions=Versions.ALWAYS).version


def test_another_writers_change_is_kept_as_a_version_or_a_copy() -> None:
    theirs = StoredEntry(b"theirs\n", T1)
    kept = plan_save(theirs, b"ours\n", T0, versions=Versions.OF_CHANGES)
    assert kept.other_changed and kept.version and not kept.conflict_copy
    assert kept.replaced_hash == bytes_hash(b"theirs\n")
    copied = plan_save(theirs, b"ours\n", T0, versions=Versions.NONE)
    assert copied.other_changed and copied.conflict_copy and not copied.version


def test_a_merge_writes_the_merged_bytes_and_is_no_conflict() -> None:
    theirs = StoredEntry(b"a\nb\n", T1)
    plan = plan_save(theirs, b"a\n", T0, versions=Versions.OF_CHANGES, merged=b"a\nb\nc\n")
    assert plan.data == b"a\nb\nc\n" and not plan.other_changed and plan.version


def test_an_empty_entry_filled_is_noted_not_versioned() -> None:
    plan = plan_save(StoredEntry(b"", T0), b"now\n", T0, versions=Versions.OF_CHANGES)
    assert plan.fills_empty and not plan.version


@given(
    old=st.binary(max_size=8),
    new=st.binary(max_size=8),
    stale=st.booleans(),
    keeps=st.booleans(),
    unchanged=st.booleans(),
)
def test_other_writers_bytes_are_never_dropped(
    old: bytes, new: bytes, stale: bool, keeps: bool, unchanged: bool
) -> None:
    """Whatever the case, bytes another writer saved that the save replaces are kept: as a
    version or as a conflict copy (an empty content is IronClaw's one exception)."""
    entry = StoredEntry(old, T1)
    plan = plan_save(
        entry, new, T0 if stale else T1, versions=Versions.kept(keeps, even_unchanged=unchanged)
    )
    if stale and old and old != new:
        assert plan.version or plan.conflict_copy
    assert not (plan.version and plan.conflict_copy)
    assert plan.data == new
