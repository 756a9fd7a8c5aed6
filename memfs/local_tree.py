"""Which files of a local folder are memory: what ``memfs import`` and ``memfs sync`` read.

The mount's rules, applied to a plain folder: scratch names are never memory, a ``.git``
repository is not (its history belongs in git), nor are the top-level tool folders
(``.obsidian``, ``.vscode`` …); only regular files are read (a FIFO would block the reader
forever, a device or socket holds no text), and a symlink is followed only to a regular
file inside the folder (one out of it could copy a private file into memory).  What is
passed over is said, with why, except scratch names (editors leave many).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memfs.scratch import REFUSED_NAMES, Kind, ScratchRules

#: memfs's own records in a folder it syncs or exports into (``sync.STATE_FILE``, its lock,
#: a pull's temporary file, ``workspace_tasks.EXPORT_STATE``): never memory.
OWN_STATE = (".memfs-sync.json", ".memfs-sync-", ".memfs-export.json")


#: What is passed over without a word (editors leave many scratch files).
SILENT = frozenset({"skipped_scratch", "own_state"})


@dataclass(frozen=True)
class Passed:
    """A file or folder not read, and why."""

    path: str  # relative to the folder; a folder ends in "/"
    why: str
    #: The report's count it goes to (those in ``SILENT`` are not listed one by one).
    kind: str


_SPECIAL = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
            (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))  # fmt: skip


def memory_files(root: Path, rules: ScratchRules) -> Iterator[tuple[str, Path] | Passed]:
    """(relative path, path to read) of every file of ``root`` that may be memory, in
    path order, and a ``Passed`` for everything passed over."""
    real_root = root.resolve()
    for directory, dirnames, filenames in os.walk(root):
        here = Path(directory)
        kept = []
        for name in sorted(dirnames):
            full = here / name
            rel = f"{full.relative_to(root)}/"
            if name in REFUSED_NAMES:
                yield Passed(rel, "a git repository: its history belongs in git, never in "
                             "memory", "skipped_repository")  # fmt: skip
            elif here == root and name in rules.tool_folders:
                yield Passed(rel, "a tool's own folder, never memory", "skipped_tool_folder")
            elif full.is_symlink():
                yield Passed(rel, "a symlink to a folder, not followed", "skipped_symlink")
            elif rules.classify(name) is not Kind.DOCUMENT:
                yield Passed(rel, "a scratch name", "skipped_scratch")
            else:
                kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            full = here / name
            rel = str(full.relative_to(root))
            if name.startswith(OWN_STATE):
                yield Passed(rel, "memfs's own record", "own_state")
                continue
            if rules.classify(name) is not Kind.DOCUMENT:
                yield Passed(rel, "a scratch name", "skipped_scratch")
                continue
            passed = _not_a_file_here(full, rel, real_root)
            yield passed if passed is not None else (rel, full)


def _not_a_file_here(full: Path, rel: str, real_root: Path) -> Passed | None:
    try:
        mode = os.lstat(full).st_mode
        if stat.S_ISLNK(mode):
            target = full.resolve()
            if not target.is_relative_to(real_root):
                return Passed(rel, f"a symlink out of the tree to {target}",
                              "skipped_symlink_out")  # fmt: skip
            mode = os.stat(full).st_mode
    except OSError as exc:
        return Passed(rel, f"cannot read it ({exc.strerror})", "unreadable")
    for test, what in _SPECIAL:
        if test(mode):
            return Passed(rel, f"{what}, not a file", "skipped_special")
    if not stat.S_ISREG(mode):
        return Passed(rel, "not a regular file", "skipped_special")
    return None


def read_regular(path: Path) -> bytes:
    """A regular file's bytes, following no symlink at the last step; anything else turns
    into an OSError, never a block (a FIFO swapped in after the walk looked)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return file.read()
