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


def _eol(*texts: str) -> str:
    """The documents' line ending: CRLF if any side uses it, else LF."""
    return "\r\n" if any("\r\n" in text for text in texts) else "\n"


def _ended(text: str, eol: str) -> str:
    return text if not text or text.endswith("\n") else text + eol


def merge(base: str, theirs: str, ours: str) -> Merge:  # noqa: C901 - the merge rule's cases, kept on one screen
    """Merge ``ours`` (a save based on ``base``) with ``theirs`` (the row now)."""
    if theirs in (ours, base):
        return Merge(ours, "nothing to merge")
    if ours == base:
        return Merge(theirs, "only theirs changed")
    eol = _eol(base, theirs, ours)
    b, t, o = _ended(base, eol), _ended(theirs, eol), _ended(ours, eol)
    if t in (o, b):
        return Merge(ours, "nothing to merge")
    if o == b:
        return Merge(theirs, "only theirs changed")
    if t.startswith(b) and o.startswith(b):  # both appended: theirs, then our lines
        return _unended(_tails(t, o, len(b), "both appended"), theirs, ours, eol)
    if t.startswith(b):  # they only appended: our edit, then their lines
        if o.endswith(t[len(b) :]):  # a base older than what the writer saw
            return Merge(ours, "ours holds their lines")
        return _unended(Merge(o + t[len(b) :], "their lines appended"), theirs, ours, eol)
    if o.startswith(b):  # we only appended: their content, then our lines
        if t.endswith(o[len(b) :]):
            return Merge(theirs, "theirs holds our lines")
        return _unended(Merge(t + o[len(b) :], "our lines appended"), theirs, ours, eol)
    merged = _lines(b, t, o)
    if merged.text is not None:
        return _unended(merged, theirs, ours, eol)
    # Overlapping by the base given: it may be older than what the writer saw.
    if o.startswith(t):
        return Merge(ours, "ours holds theirs")
    if t.startswith(o):
        return Merge(theirs, "theirs holds ours")
    return merged


def _tails(t: str, o: str, at: int, how: str) -> Merge:
    """Both sides added lines after the base's ``at`` characters: theirs, then ours; one
    holding the other (the writer had read it) is not written twice."""
    mine, their = o[at:], t[at:]
    if mine.startswith(their):
        return Merge(o, how)
    if their.startswith(mine):
        return Merge(t, how)
    return Merge(t + mine, how)


def _lines(b: str, t: str, o: str) -> Merge:
    """The general case: ``merge3`` line by line; lines both sides added after the
    base's last line are theirs, then ours (``_tails``)."""
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
        elif region[1] == region[2] == len(merger.base):  # both added at the end
            a_start, a_end, b_start, b_end = (int(x) for x in region[3:7])
            their = "".join(merger.a[a_start:a_end])
            mine = "".join(merger.b[b_start:b_end])
            out.append(_tails(their, mine, 0, "").text or "")
        else:  # conflict: (kind, zs, ze, as, ae, bs, be)
            start, end = int(region[-2]), int(region[-1])
            overlaps.append((start + 1, max(end, start + 1)))
    if overlaps:
        return Merge(None, "overlapping changes", overlaps)
    return Merge("".join(out), "lines merged")


def _unended(result: Merge, theirs: str, ours: str, eol: str) -> Merge:
    """Neither side ended with a newline: the merge adds none."""
    text = result.text
    if text and text.endswith(eol) and not theirs.endswith("\n") and not ours.endswith("\n"):
        return Merge(text[: -len(eol)], result.how)
    return result
