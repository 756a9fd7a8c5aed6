"""The three-way merge of a save with another writer's change (``memfs.merge``): the cases
a line merge gets wrong first (each reported as a conflict by ``merge3`` alone), then the
general case and real overlaps."""

from __future__ import annotations

import pytest
from merge3 import Merge3

from memfs.merge import merge, mergeable


def merge3_conflicts(base: str, theirs: str, ours: str) -> bool:
    lines = [s.splitlines(True) for s in (base, theirs, ours)]
    return any(r[0] == "conflict" for r in Merge3(*lines).merge_regions())


@pytest.mark.parametrize(
    ("base", "theirs", "ours", "merged"),
    [
        # Both append at the end (two mounts, the agent's daily log): theirs, then ours.
        ("a\nb\n", "a\nb\nagent\n", "a\nb\nmine\n", "a\nb\nagent\nmine\n"),
        # An edit of the last line against an append.
        ("a\nb\n", "a\nb\nagent\n", "a\nB\n", "a\nB\nagent\n"),
        # Any edit of a one-line file against an append.
        ("x\n", "x\nagent\n", "y\n", "y\nagent\n"),
        # Legacy IronClaw's append leaves no final newline; vim's fixeol adds one.
        ("a\nb", "a\nb\nagent", "a\nb\nmine\n", "a\nb\nagent\nmine\n"),
        ("a\nb", "a\nb\nagent", "A\nb\n", "A\nb\nagent\n"),
    ],
)
def test_the_cases_a_line_merge_reports_as_conflicts(
    base: str, theirs: str, ours: str, merged: str
) -> None:
    assert merge3_conflicts(base, theirs, ours), "merge3 alone merges this one: not a hard case"
    assert merge(base, theirs, ours).text == merged


def test_changes_far_apart_are_merged_by_lines() -> None:
    base = "".join(f"line {n}\n" for n in range(10))
    theirs = base.replace("line 8\n", "line 8, theirs\n")
    ours = base.replace("line 1\n", "line 1, ours\n")
    result = merge(base, theirs, ours)
    assert result.text == base.replace("line 8\n", "line 8, theirs\n").replace(
        "line 1\n", "line 1, ours\n"
    )


def test_overlapping_changes_are_not_merged_and_name_the_lines() -> None:
    result = merge("a\nb\nc\n", "a\nB theirs\nc\n", "a\nB ours\nc\n")
    assert result.text is None and result.overlaps == [(2, 2)]


@pytest.mark.parametrize(
    ("base", "theirs", "ours", "merged"),
    [
        ("a\n", "a\n", "b\n", "b\n"),  # only ours changed
        ("a\n", "b\n", "a\n", "b\n"),  # only theirs changed
        ("a\n", "b\n", "b\n", "b\n"),  # the same change
        ("", "agent\n", "mine\n", "agent\nmine\n"),  # both wrote an empty file
        ("a", "a\nt", "a\no", "a\nt\no"),  # no side ends with a newline: none is added
    ],
)
def test_trivial_merges(base: str, theirs: str, ours: str, merged: str) -> None:
    assert merge(base, theirs, ours).text == merged


@pytest.mark.parametrize(
    ("path", "merged"),
    [("MEMORY.md", True), ("daily/2026-11-27.md", True), (".system/settings.json", False),
     ("a/.system/x.md", False), ("notes/data.json", False), ("projects/.config", False)],
)  # fmt: skip
def test_whole_value_files_are_never_merged(path: str, merged: bool) -> None:
    assert mergeable(path) is merged


@pytest.mark.parametrize(
    ("base", "theirs", "ours"),
    [
        ("a\n", "a\nagent\n", "a\nagent\nmine\n"),  # the writer had read theirs since
        ("a\n", "a\nagent\n", "A\nagent\n"),
        ("a\n", "a\nagent\nmore\n", "a\nagent\n"),  # ours is a prefix of theirs
    ],
)
def test_a_base_older_than_what_the_writer_saw_duplicates_nothing(
    base: str, theirs: str, ours: str
) -> None:
    merged = merge(base, theirs, ours).text
    assert merged is not None and merged.count("agent") == 1
