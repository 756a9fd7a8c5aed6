"""What each process's next save is based on (``SaverBases``), from what it looked up,
locked, read and wrote: no database needed."""

from __future__ import annotations

import uuid

from memfs.vfs.save_tables import SaverBases

DOC = uuid.uuid4()
EMACS, SHELL = 101, 202


def test_a_process_that_found_no_file_starts_from_an_empty_one() -> None:
    bases = SaverBases()
    bases.absent("notes.md", SHELL)
    found = bases.base("notes.md", SHELL)
    assert found is not None and found.doc_id is None and found.data == b""


def test_a_read_after_finding_none_is_the_base_unless_the_process_locked_it_for_emacs() -> None:
    bases = SaverBases()
    bases.absent("a.md", SHELL)
    bases.read("a.md", SHELL, DOC, "v1")
    read = bases.base("a.md", SHELL)
    assert read is not None and read.doc_id == DOC and read.version == "v1"
    bases.absent("b.md", EMACS)
    bases.editing("b.md", EMACS)  # .#b.md: its buffer changed while there was no file
    bases.read("b.md", EMACS, DOC, "v1")  # emacs compares the file with its buffer
    kept = bases.base("b.md", EMACS)
    assert kept is not None and kept.doc_id is None and kept.data == b""


def test_finding_none_after_reading_keeps_the_read() -> None:
    """vim looks its file's name up after renaming it to ``x~``: it still edits what it
    read."""
    bases = SaverBases()
    bases.read("x.md", SHELL, DOC, "v1")
    bases.absent("x.md", SHELL)
    bases.editing("x.md", SHELL)  # a lock of a file it read changes nothing
    kept = bases.base("x.md", SHELL)
    assert kept is not None and kept.doc_id == DOC and not kept.editing


def test_a_write_replaces_an_empty_base() -> None:
    bases = SaverBases()
    bases.absent("x.md", EMACS)
    bases.editing("x.md", EMACS)
    bases.saw("x.md", EMACS, DOC, "v2")
    written = bases.base("x.md", EMACS)
    assert written is not None and written.doc_id == DOC and written.version == "v2"


def test_unknown_processes_leave_no_base() -> None:
    bases = SaverBases()
    bases.absent("x.md", 0)
    assert bases.base("x.md", 0) is None


def test_emacs_locking_after_its_compare_read_undoes_that_read() -> None:
    """Emacs 28 compares the file with its buffer before it makes the lock file: the read
    comes first when the agent made the file after emacs found none."""
    bases = SaverBases()
    bases.absent("b.md", EMACS)
    bases.read("b.md", EMACS, DOC, "v1")  # the supersession check's compare
    bases.editing("b.md", EMACS)  # then .#b.md
    found = bases.base("b.md", EMACS)
    assert found is not None and found.doc_id is None and found.data == b""
    bases.read("b.md", SHELL, DOC, "v1")  # another process that read it, no lock: its read
    bases.editing("c.md", SHELL)
    read = bases.base("b.md", SHELL)
    assert read is not None and read.doc_id == DOC


def test_bases_given_their_bytes_past_the_budget_never_break_the_save() -> None:
    """The save race's vim at 200 saves (a 230 KB document, a new process each save):
    the bytes given to every base at the version a commit leaves went past the byte
    budget midway, the oldest base was let go inside the loop, and the loop's next look
    raised KeyError, answering the saver's fsync with EIO (vim's "E667: Fsync failed")
    after the commit had landed.  Now the bases past the budget go, oldest first, the
    newest stay with their bytes, and the budget holds."""
    data = b"x" * 1000
    bases = SaverBases(max_bytes=5 * len(data))
    for pid in range(1, 20):  # each a process of its own: a thread key and a process key
        bases.read("doc.md", pid, DOC, "v1")
    bases.superseded(DOC, "v1", data)  # raised KeyError
    kept = [pid for pid in range(1, 20) if bases.base("doc.md", pid) is not None]
    assert kept and all(bases.base("doc.md", pid).data == data for pid in kept)  # type: ignore[union-attr]
    assert 19 in kept  # the newest reader keeps its base
    assert bases._bytes <= 5 * len(data)
