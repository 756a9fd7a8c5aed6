"""IronClaw v1.1+'s save of a document (the Reborn layout), decided once: what a save
writes, given the entry as it stands (docs/ironclaw/reborn.md).

``plan_save`` is the rule; both Reborn engines (PostgreSQL and the libSQL file) run its
plan through ``memfs.db.reborn.store.RebornStore``, each with its own SQL.

The rule: a new entry is inserted (IronClaw's agent may not write every path: such an
entry is stored, and the refusal logged).  An existing entry takes the save's bytes, or
their merge with another writer's change made under the row lock (``merged``).  The
bytes it replaces are kept as a version when they were not empty, differ from the save
(or the save is a rename over the document, ``Versions.ALWAYS``) and the document's
metadata keeps versions.  When another writer changed the entry since the content the
save was based on (``expected``) and no merge took their change in, their bytes are kept
first: as that version, or, where no version is kept, as a conflict copy.  An entry that
held an empty content, which IronClaw keeps no version of, has the time it was empty
noted (memfs's rule, for ``.at/``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from memfs.ironclaw.hashing import bytes_hash


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """What a save decides on of the entry it lands on."""

    contents: bytes
    updated_at: datetime
    #: The entry is another writer's change whatever its time: the save's writer found
    #: none there, or read nothing of it (``SaveOptions.stale_base``).
    unseen_change: bool = False


@dataclass(frozen=True, slots=True)
class SavePlan:
    """What one save writes (``plan_save``)."""

    created: bool
    #: The bytes written: the save's, or the merge's.
    data: bytes
    #: Another writer changed the entry since ``expected`` and no merge took it in.
    other_changed: bool
    #: Keep the replaced bytes as a version first.
    version: bool
    #: Keep the other writer's bytes as a conflict copy (they are no version).
    conflict_copy: bool
    #: The hash of another writer's content the save replaces (not hashed on a plain save).
    replaced_hash: str | None
    #: The entry held an empty content: when, is noted for ``.at/``.
    fills_empty: bool


class Versions(Enum):
    """Which replaced contents a save keeps as versions."""

    #: None (the document's ``.meta`` says ``skip_versioning``).
    NONE = "none"
    #: Those the save changes.
    OF_CHANGES = "of changes"
    #: Even one the save leaves the same (a rename over the document: its history up to
    #: then stays its own before the source's versions are carried after it).
    ALWAYS = "always"

    @classmethod
    def kept(cls, keeps_versions: bool, *, even_unchanged: bool = False) -> Versions:
        if not keeps_versions:
            return cls.NONE
        return cls.ALWAYS if even_unchanged else cls.OF_CHANGES


def plan_save(
    current: StoredEntry | None,
    data: bytes,
    expected: datetime | None,
    *,
    versions: Versions,
    merged: bytes | None = None,
) -> SavePlan:
    """What the save of ``data`` writes over ``current`` (None: no entry there yet).

    ``expected``: the entry's ``updated_at`` the save was based on (None: unknown);
    ``merged``: the save merged with the entry's bytes under the row lock, if it was."""
    if current is None:
        return SavePlan(True, data, False, False, False, None, False)
    written = merged if merged is not None else data
    changed_since = current.unseen_change or expected not in (None, current.updated_at)
    other_changed = merged is None and changed_since
    old = current.contents
    replaced = None
    if old and old != written and (other_changed or not expected):
        replaced = bytes_hash(old)
    always = versions is Versions.ALWAYS
    version = bool(old) and (old != written or always) and versions is not Versions.NONE
    conflict_copy = other_changed and not version and old != written
    return SavePlan(
        False, written, other_changed, version, conflict_copy, replaced, not old and bool(written)
    )
