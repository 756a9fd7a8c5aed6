"""Three-way merge of a save with another writer's change to the same document.

A save lands over a row another writer changed since the saver read it (the agent appended
to ``MEMORY.md`` while a person had it open).  Instead of the later save winning (the other
change kept only as a version), the two are merged line by line: *base* is what the saver
started from, *theirs* the row now, *ours* the saver's bytes.  ``merge3`` does the general
case; the cases a line merge reports as conflicts although the intent is plain are decided
first:

* one side only added lines at the end (the agent's append, the daily log, another mount's
  ``>>``): the other side's content, then those lines;
* a missing final newline on one side (legacy IronClaw appends ``existing + "\\n" + text``
  with none; vim's ``fixeol`` adds one) is not a change.

Where the changes overlap there is no merge (``Merge.text`` is None) and the caller keeps
today's rule: the save wins, the other change is kept as a version.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from merge3 import Merge3

#: The largest side merged, in bytes: a larger document is saved by the plain rule.
MERGE_LIMIT = 1 << 20


@dataclass(frozen=True)
class Merge:
    """A merge's outcome: the merged text, or None with the lines of ``ours`` (1-based,
    inclusive) where the two changes overlap."""

    text: str | None
    how: str
    overlaps: list[tuple[int, int]] = field(default_factory=list)


def mergeable(path: str) -> bool:
    """Whether a document's saves are merged: not JSON (under ``.system/`` or any settings
    file a value is whole: half of each side is no value at all) and not a folder's
    ``.config``."""
    name = path.rsplit("/", 1)[-1]
    return not (
        path.endswith(".json") or path.startswith(".system/") or "/.system/" in path
        or name == ".config"
    )  # fmt: skip


def _ended(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


def merge(base: str, theirs: str, ours: str) -> Merge:
    """Merge ``ours`` (a save based on ``base``) with ``theirs`` (the row now)."""
    if theirs in (ours, base):
        return Merge(ours, "nothing to merge")
    if ours == base:
        return Merge(theirs, "only theirs changed")
    b, t, o = _ended(base), _ended(theirs), _ended(ours)
    if t in (o, b):
        return Merge(ours, "nothing to merge")
    if o == b:
        return Merge(theirs, "only theirs changed")
    if o.startswith(t):  # ours holds theirs already (its writer had read it)
        return Merge(ours, "ours holds theirs")
    if t.startswith(o):
        return Merge(theirs, "theirs holds ours")
    if t.startswith(b) and o.endswith(t[len(b) :]):
        return Merge(ours, "ours holds their lines")
    if t.startswith(b) and o.startswith(b):  # both appended: theirs, then our lines
        return _unended(Merge(t + o[len(b) :], "both appended"), theirs, ours)
    if t.startswith(b):  # they only appended: our edit, then their lines
        return _unended(Merge(o + t[len(b) :], "their lines appended"), theirs, ours)
    if o.startswith(b):  # we only appended: their content, then our lines
        return _unended(Merge(t + o[len(b) :], "our lines appended"), theirs, ours)
    merger = Merge3(b.splitlines(True), t.splitlines(True), o.splitlines(True))
    out: list[str] = []
    overlaps: list[tuple[int, int]] = []
    for region in merger.merge_regions():
        kind = region[0]
        if kind == "unchanged":
            out.extend(merger.base[region[1] : region[2]])
        elif kind in ("a", "same"):
            out.extend(merger.a[region[1] : region[2]])
        elif kind == "b":
            out.extend(merger.b[region[1] : region[2]])
        else:  # conflict: (kind, zs, ze, as, ae, bs, be)
            start, end = int(region[-2]), int(region[-1])
            overlaps.append((start + 1, max(end, start + 1)))
    if overlaps:
        return Merge(None, "overlapping changes", overlaps)
    return _unended(Merge("".join(out), "lines merged"), theirs, ours)


def _unended(result: Merge, theirs: str, ours: str) -> Merge:
    """Neither side ended with a newline: the merge adds none."""
    text = result.text
    if text and text.endswith("\n") and not theirs.endswith("\n") and not ours.endswith("\n"):
        return Merge(text[:-1], result.how)
    return result
