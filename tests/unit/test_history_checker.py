"""The history checker is itself tested: each rule fails on a history that breaks it and
holds on one that keeps it (the checker run against real mounts is in
``tests/mount/test_history.py``, planted faults in ``test_history_planted.py``)."""

from __future__ import annotations

from tests.history.check import FinalState, check, not_merged, places
from tests.history.record import FAIL, INFO, OK, History, Op


def op(kind: str, path: str, start: float, end: float, outcome: str = OK, **extra: str) -> Op:
    made = Op("w", kind, path, start, end=end, outcome=outcome)
    for name, value in extra.items():
        setattr(made, name, value)
    return made


def history(*ops: Op, seed: set[str] | None = None) -> History:
    return History(list(ops), seed_lines=seed or set())


def state(documents: dict[str, str], versions: list[tuple[str, str]] | None = None) -> FinalState:
    return FinalState(documents, versions or [])


def test_an_acknowledged_write_in_no_row_is_lost() -> None:
    found = check(history(op("append", "a.md", 0, 1, marker="w-1")), state({}))
    assert found == ["lost: w append a.md [w-1]: ok"]


def test_a_write_in_the_content_or_a_version_row_is_kept() -> None:
    h = history(op("append", "a.md", 0, 1, marker="w-1"), op("truncate", "a.md", 2, 3,
                                                             marker="w-2"))  # fmt: skip
    assert check(h, state({"a.md": "w-2\n"}, [("a.md", "w-1\n")])) == []
    assert check(h, state({"a.md": "w-2\n"})) == ["lost: w append a.md [w-1]: ok"]


def test_failed_and_indeterminate_writes_need_not_be_there() -> None:
    h = history(op("append", "a.md", 0, 1, FAIL, marker="w-1"),
                op("shell-append", "a.md", 0, 1, INFO, marker="w-2"))  # fmt: skip
    assert check(h, state({})) == []


def test_a_removal_after_the_write_excuses_it_one_finished_before_does_not() -> None:
    write = op("append", "a.md", 10, 11, marker="w-1")
    assert check(history(write, op("rm", "a.md", 12, 13)), state({})) == []
    assert check(history(write, op("rm", "a.md", 10.5, 12)), state({})) == []  # concurrent
    assert check(history(op("rm", "a.md", 1, 2), write), state({})) != []
    assert check(history(write, op("rm", "a.md", 12, 13, FAIL)), state({})) != []
    assert check(history(write, op("rm-rf", "b", 12, 13)), state({})) != []


def test_a_removal_follows_the_document_through_moves() -> None:
    write = op("append", "a/x.md", 10, 11, marker="w-1")
    moved = op("mv", "a", 12, 13, target="b")
    renamed = op("mv", "b/x.md", 14, 15, target="y.md")
    assert places(write, [write, moved, renamed]) == {"a/x.md", "b/x.md", "y.md"}
    assert check(history(write, moved, renamed, op("rm", "y.md", 16, 17)), state({})) == []
    assert check(history(write, moved, op("rm-rf", "b", 16, 17)), state({})) == []
    assert check(history(write, moved, op("rm", "a/x.md", 16, 17)), state({})) == []
    assert check(history(write, moved, op("rm", "c.md", 16, 17)), state({})) != []


def test_another_mounts_folder_move_just_before_the_write_may_still_take_it() -> None:
    """Legacy seed 13: m1's ``mv b d`` returned, m0's append to ``b/x.md`` began 0.6 ms
    later (m0 still showed b/x.md: m1 sends the move with its next transaction), the
    move reached the database 4 ms after, the save followed the row to ``d/x.md``, and an
    ``rm -rf d`` on m0 took it.  The move may have come after the write; on the writing
    mount itself, or longer before than the lag, it may not."""
    write = op("append", "b/x.md", 10.0, 10.03, marker="w-1", mount="m0")
    elsewhere = op("mv", "b", 9.99, 9.9994, target="d", mount="m1")
    removed = op("rm-rf", "d", 10.07, 10.08, mount="m0")
    assert check(history(elsewhere, write, removed), state({})) == []
    assert places(write, [elsewhere, write]) == {"b/x.md", "d/x.md"}
    here = op("mv", "b", 9.99, 9.9994, target="d", mount="m0")
    assert check(history(here, write, removed), state({})) != []
    long_before = op("mv", "b", 8.0, 8.5, target="d", mount="m1")
    assert check(history(long_before, write, removed), state({})) != []


def test_a_line_nobody_wrote_is_found() -> None:
    h = history(op("append", "a.md", 0, 1, marker="w-1"), seed={"# title"})
    assert check(h, state({"a.md": "# title\nw-1\n"})) == []
    torn = check(h, state({"a.md": "w-1\nw-\x00\n"}))
    assert torn == ["a line nobody wrote in current a.md: 'w-\\x00'"]
    assert check(h, state({"a.md": "w-1\n"}, [("a.md", "w-9\n")])) != []


def test_duplicates_eio_and_daemon_exits_are_violations() -> None:
    h = history(op("append", "a.md", 0, 1, INFO, marker="w-1", detail="close: EIO (5)"))
    found = check(h, FinalState({}, [], ["a.md"], {"/mnt": "daemon exited 3 in the run"}))
    assert found == [
        "EIO: w append a.md [w-1]: info close: EIO (5)",
        "two rows at a.md",
        "/mnt: daemon exited 3 in the run",
    ]


def test_a_truncation_in_place_on_the_same_mount_while_open_excuses_a_write() -> None:
    write = op("append", "a.md", 10, 11, marker="w-1", mount="/m0")
    assert check(history(write, op("truncate", "a.md", 10.5, 12, mount="/m0")), state({})) == []
    vim = op("save", "a.md", 9, 10.5, INFO, mount="/m0", detail="vim backupcopy=yes: exit 1")
    assert check(history(write, vim), state({})) == []
    # Another mount's truncation saves the write's content as a version first: no excuse.
    assert check(history(write, op("truncate", "a.md", 10.5, 12, mount="/m1")), state({})) != []
    # One that began after the write's close, or whose open was refused, is no excuse.
    assert check(history(write, op("truncate", "a.md", 11.5, 12, mount="/m0")), state({})) != []
    refused = op("truncate", "a.md", 10.5, 12, FAIL, mount="/m0")
    assert check(history(write, refused), state({})) != []
    # By SQL there is no shared open file.
    assert check(history(op("append", "a.md", 10, 11, marker="w-1"),
                         op("truncate", "a.md", 10.5, 12)), state({})) != []  # fmt: skip


def test_a_rename_onto_the_file_on_the_same_mount_while_open_excuses_a_write() -> None:
    """The write's descriptor then wrote to the replaced file, which no name leads to."""
    write = op("append", "a.md", 10, 11, marker="w-1", mount="/m0")
    for replacing in (
        op("replace", "a.md", 10.2, 10.6, mount="/m0"),
        op("mv", "b.md", 10.2, 10.6, target="a.md", mount="/m0"),
        op("save", "a.md", 9, 10.5, mount="/m0", detail="sed -i"),
    ):
        assert check(history(write, replacing), state({})) == [], replacing
    # On another mount a rename keeps the replaced content as a version: no excuse.
    other = op("replace", "a.md", 10.2, 10.6, mount="/m1")
    assert check(history(write, other), state({})) != []
    refused = op("mv", "b.md", 10.2, 10.6, FAIL, target="a.md", mount="/m0")
    assert check(history(write, refused), state({})) != []


def test_a_line_pushed_into_a_version_by_a_concurrent_save_breaks_the_tightened_rule() -> None:
    """Issue 32: non-overlapping concurrent changes are all in the current content."""
    append = op("append", "a.md", 10, 11, marker="w-1")
    save = op("save", "a.md", 9, 12, marker="w-2", detail="vim backupcopy=yes",
              mount="/m0")  # fmt: skip
    h = history(append, save)
    assert not_merged(h, state({"a.md": "w-2\n"}, [("a.md", "w-1\n")])) == [
        "only in a version: w append a.md [w-1]: ok"
    ]
    assert check(h, state({"a.md": "w-2\n"}, [("a.md", "w-1\n")])) == []  # kept, not lost
    assert not_merged(h, state({"a.md": "w-1\nw-2\n"})) == []


def test_the_tightened_rule_excuses_replacements_and_saves_overlapping_them() -> None:
    append = op("append", "a.md", 10, 11, marker="w-1")
    kept = state({"a.md": "w-9\n"}, [("a.md", "w-1\n")])
    assert not_merged(history(append, op("truncate", "a.md", 12, 13, marker="w-9")), kept) == []
    assert not_merged(history(append, op("mv", "b.md", 12, 13, target="a.md")), kept) == []
    # A save that read before a truncation that came before the append, and saved after it.
    save = op("save", "a.md", 5, 12, marker="w-9", detail="nano", mount="/m0")
    truncation = op("shell-truncate", "a.md", 6, 7, marker="w-8")
    assert not_merged(history(truncation, append, save), kept) == []
    assert not_merged(history(op("truncate", "a.md", 1, 2, marker="w-8"), append), kept) != []


def test_a_write_after_a_folder_move_another_mount_raced_may_be_under_the_old_name() -> None:
    """CI's seed 3 on legacy (issue 56's last run): two mounts moved a and b onto e at
    once, both told 0; the loser's move was refused at its transaction (b's documents were
    there), and its append to e/z.md a few ms later reached a/z.md, the document it had
    open, which a removal took later.  The checker called it lost."""
    move = op("mv", "a", 10.0, 10.001, target="e", mount="m1")
    raced = op("mv", "b", 10.0, 10.004, target="e", mount="m0")
    write = op("append", "e/z.md", 10.005, 10.02, marker="w-1", mount="m1")
    removed = op("rm", "a/z.md", 12.0, 12.01, mount="m0")
    assert places(write, [move, raced, write, removed]) == {"e/z.md", "a/z.md"}
    assert check(history(move, raced, write, removed), state({})) == []
    assert not_merged(history(move, raced, write, removed), state({})) == []
    # The excuse needs every part of that: another writer racing for the name...
    alone = history(move, write, removed)
    assert check(alone, state({})) == ["lost: w append e/z.md [w-1]: ok"]
    long_after = op("mv", "b", 13.0, 13.1, target="e", mount="m0")
    assert check(history(move, long_after, write, removed), state({})) != []
    # ...the write made through the mount that moved, soon after the move...
    elsewhere = op("append", "e/z.md", 10.005, 10.02, marker="w-1", mount="m0")
    assert check(history(move, raced, elsewhere, removed), state({})) != []
    later = op("append", "e/z.md", 11.5, 11.6, marker="w-1", mount="m1")
    assert check(history(move, raced, later, removed), state({})) != []
    # ...and a folder moved, not a file renamed (those are made at once, never refused).
    file_move = op("mv", "a.md", 10.0, 10.001, target="e.md", mount="m1")
    file_raced = op("mv", "b.md", 10.0, 10.004, target="e.md", mount="m0")
    file_write = op("append", "e.md", 10.005, 10.02, marker="w-1", mount="m1")
    file_removed = op("rm", "a.md", 12.0, 12.01, mount="m0")
    found = check(history(file_move, file_raced, file_write, file_removed), state({}))
    assert found == ["lost: w append e.md [w-1]: ok"]
