"""IronClaw v1.0's save of a document (the legacy layout), decided once: what a save
writes, given the row as it stands (docs/ironclaw/legacy.md §3).

``plan_save`` is the rule; the engines run its plan their own way.  The PostgreSQL engine
runs it twice: carefully (``MetaStore._commit``: the row is locked and read, then the
plan made and sent) and in one round trip (``_commit_in_one_round_trip``: the plan made
on the row as the mount last knew it, sent behind a guard that fails unless the row is
still exactly that).  Both call ``plan_save``, so the fast path cannot drift from the
careful one.

The rule, step by step: a system-prompt file is scanned for prompt injection; an engine
runtime path is stored without chunks or versions; a new document's content (non-empty)
and a changed document's new content validate against a metadata ``schema``; an unchanged
save writes no content (but is re-indexed); a changed save keeps the content it replaces
as a version (IronClaw's ``maybe_save_version``, which skips an empty content and one the
newest version holds already) and, when another writer changed the row since the content
the save was based on (``expected``), keeps that writer's content first.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from memfs.errors import WriteRefused
from memfs.ironclaw.hashing import content_hash
from memfs.ironclaw.write_rules import (
    DocumentMetadata,
    check_injection,
    check_schema,
    effective_metadata,
    is_engine_runtime_path,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoredRow:
    """What a save decides on of the document's row."""

    #: IronClaw's hash of the stored content (``sha256:<hex>``).
    stored_hash: str
    stored_empty: bool
    #: The document's own metadata and its nearest folder ``.config``'s.
    own: Mapping[str, Any] | None
    folder: Mapping[str, Any] | None
    updated_at: datetime
    #: The row's content is not the one the save was based on, whatever its version: another
    #: writer's although the version token is the same (two writes within one tick of the
    #: clock: a millisecond in the libSQL file), or a row the save's writer did not know
    #: of (``SaveOptions.stale_base``).
    unseen_change: bool = False


@dataclass(frozen=True)
class SavePlan:
    """What one save writes (``plan_save``)."""

    created: bool
    #: The content differs from the stored one (a new document: always).
    changed: bool
    meta: DocumentMetadata
    #: Write the content (insert, or update a changed row).
    write: bool
    #: Keep the replaced content as a version first (IronClaw's skips still apply).
    version: bool
    #: Another writer changed the row since ``expected``: keep their content first.
    keep_other: bool
    #: The hash of the content the save replaces, where it held some.
    replaced_hash: str | None
    #: Chunk the content (False: the document keeps no chunks).
    index: bool
    #: The save fills a row that held an empty content, which IronClaw keeps no version
    #: of: memfs notes when it was empty, for ``.at/`` (memfs's rule, not IronClaw's).
    fills_empty: bool = False


class Incoming(Protocol):
    """The save a plan is for: its path, its content and IronClaw's hash of it
    (``memfs.db.records.Write`` is one)."""

    @property
    def path(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def new_hash(self) -> str: ...


class Saving(NamedTuple):
    """An ``Incoming`` save made here (a merge's text)."""

    path: str
    content: str
    new_hash: str


def plan_save(
    incoming: Incoming,
    row: StoredRow | None,
    folder: Mapping[str, Any] | None,
    expected: datetime | None,
) -> SavePlan:
    """The plan of a save of ``incoming`` over ``row`` (None: a new document under the
    folder metadata ``folder``), based on the row version ``expected`` (None: no base).
    Raises ``WriteRefused`` where IronClaw refuses it."""
    path, content, new_hash = incoming.path, incoming.content, incoming.new_hash
    check_injection(path, content)
    engine = is_engine_runtime_path(path)
    if row is None:
        meta = effective_metadata({}, folder)
        if content and not engine:
            check_schema(path, content, meta.schema)
        return SavePlan(created=True, changed=True, meta=meta, write=True, version=False,
                        keep_other=False, replaced_hash=None,
                        index=meta.indexed and not engine)  # fmt: skip
    meta = effective_metadata(row.own, row.folder)
    changed = row.stored_hash != new_hash
    if changed and not engine:
        check_schema(path, content, meta.schema)
    held = changed and not row.stored_empty
    other = row.unseen_change or (expected is not None and row.updated_at != expected)
    return SavePlan(created=False, changed=changed, meta=meta, write=changed,
                    version=held and not engine, keep_other=held and other,
                    replaced_hash=row.stored_hash if held else None,
                    index=meta.indexed and not engine,
                    fills_empty=changed and row.stored_empty)  # fmt: skip


def plan_merged(
    path: str,
    row: StoredRow,
    folder: Mapping[str, Any] | None,
    merge: Callable[[bytes], str | None],
    theirs: bytes,
) -> tuple[str, str, SavePlan] | None:
    """A save's merge with ``theirs`` (the row's content, another writer's since the
    save's base) and the plan of IronClaw's write of it over ``row``: the text, its hash
    and the plan; None if there is no merge or IronClaw refuses the merged text (the other
    writer's lines may hold what a system-prompt file may not): the save's own content is
    then written, the other change kept aside."""
    text = merge(theirs)
    if text is None:
        return None
    new_hash = content_hash(text)
    merged_over = dataclasses.replace(row, unseen_change=False)  # their change is in it
    try:
        return text, new_hash, plan_save(Saving(path, text, new_hash), merged_over, folder, None)
    except WriteRefused as exc:
        log.warning("%r: the merge with another writer's change is refused (%s); this save "
                    "alone is written, the other change is kept as a version",
                    path, exc.reason)  # fmt: skip
        return None


class PlannedSave(NamedTuple):
    """What a save writes (``plan_save_merging``): its content, that content's hash, the
    plan, and whether the content is the save's merge with another writer's change."""

    content: str
    new_hash: str
    plan: SavePlan
    merged: bool


class Merging(NamedTuple):
    """A save's merge with another writer's change, and how to read that change's
    bytes (only if the row did change)."""

    merge: Callable[[bytes], str | None]
    theirs: Callable[[], bytes]


def plan_save_merging(
    incoming: Incoming,
    row: StoredRow | None,
    folder: Mapping[str, Any] | None,
    expected: datetime | None,
    merging: Merging | None,
) -> PlannedSave:
    """``plan_save``, and where the row changed since ``expected`` and the save has a
    merge, the plan of its merge with the row's content (``merging.theirs()``, read only
    then) instead (``plan_merged``)."""
    plan = plan_save(incoming, row, folder, expected)
    if plan.keep_other and merging is not None:
        assert row is not None
        found = plan_merged(incoming.path, row, folder, merging.merge, merging.theirs())
        if found is not None:
            return PlannedSave(*found, merged=True)
    return PlannedSave(incoming.content, incoming.new_hash, plan, merged=False)
