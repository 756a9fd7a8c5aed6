"""IronClaw's four memory tools over the workspace: ``memory_write``, ``memory_read``,
``memory_search`` and ``memory_tree``.

Each call applies the tool layer's rules (``memfs.ironclaw.memory_tools``) and then does
what any writer does through ``PathOperations``: a read, a listing, one save.  So a write
is the mount's commit (IronClaw's rows, chunks and versions, its refusals, the merge and
its safety net, read-only, the scope) and nothing here is a rule about rows.  An append
and a conditional write are compare-and-writes on the document's version: an append
that finds the document changed under it reads it again (up to ``APPEND_TRIES`` times,
as IronClaw does), a write with ``expected_content_hash`` that finds another content
answers ``conflict`` and writes nothing.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from memfs.errors import FsError
from memfs.ironclaw import memory_tools as rules
from memfs.ironclaw.memory_tools import ToolRefused
from memfs.paths import RESERVED_ROOT_NAMES, RUST_WHITESPACE
from memfs.vfs.by_path import Entry, PathOperations
from memfs.vfs.search_dir import Searcher

#: Tries of an append whose document keeps changing under it (IronClaw: 8).
APPEND_TRIES = 8

WRITE_KEYS = frozenset({
    "content", "target", "append", "metadata", "old_string", "new_string", "replace_all",
    "timezone", "expected_content_hash",
})  # fmt: skip
READ_KEYS = frozenset({"path"})
SEARCH_KEYS = frozenset({*rules.QUERY_NAMES, "limit"})
TREE_KEYS = frozenset({"path", "depth"})


@dataclass(frozen=True)
class _Current:
    """A document as a write found it (``entry`` None: there is none)."""

    entry: Entry | None
    content: str

    @property
    def version(self) -> datetime | None:
        return self.entry.version if self.entry is not None else None


def _arguments(arguments: dict[str, Any], allowed: frozenset[str]) -> dict[str, Any]:
    unknown = sorted(set(arguments) - allowed)
    if unknown:
        raise ToolRefused(f"unknown argument(s): {', '.join(unknown)}")
    return arguments


def _text(arguments: dict[str, Any], name: str, default: str | None = None) -> str | None:
    value = arguments.get(name, default)
    if value is not None and not isinstance(value, str):
        raise ToolRefused(f"{name} must be a string")
    return value


def _flag(arguments: dict[str, Any], name: str, default: bool) -> bool:
    value = arguments.get(name, default)
    if not isinstance(value, bool):
        raise ToolRefused(f"{name} must be true or false")
    return value


def _refusal(path: str, exc: FsError) -> ToolRefused:
    """The one line an agent gets for a refusal of the workspace's."""
    if exc.errno == errno.EROFS:
        return ToolRefused(f"{path}: the memory is read-only here")
    return ToolRefused(f"{path}: {exc.reason}")


@dataclass
class MemoryTools:
    """The tools of one workspace; one ``PathOperations`` session for every call (the
    merge's reads and bases are this server's)."""

    ops: PathOperations
    search_engine: Searcher
    #: The live layout's rules: ``legacy`` (IronClaw <= 1.0) or ``reborn`` (v1.1+).
    layout: str
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))

    # -- memory_read -----------------------------------------------------------------------

    async def read(self, arguments: dict[str, Any]) -> dict[str, Any]:
        args = _arguments(arguments, READ_KEYS)
        path = _text(args, "path")
        if path is None:
            raise ToolRefused("path is missing: give the document's path, e.g. MEMORY.md")
        rules.check_path(path, "path")
        self._check_memory(path)
        current = await self._current(path)
        if current.entry is None:
            raise ToolRefused(f"{path}: no such document (memory_tree lists them)")
        return {
            "path": current.entry.path,
            "content": current.content,
            "word_count": rules.word_count(current.content),
            "content_hash": rules.content_hash(current.content),
        }

    # -- memory_tree -----------------------------------------------------------------------

    async def tree(self, arguments: dict[str, Any]) -> list[Any]:
        args = _arguments(arguments, TREE_KEYS)
        root = _text(args, "path", "") or ""
        rules.check_path(root, "path", blank_ok=True)
        depth = rules.tree_depth(args.get("depth"))
        paths = [entry.path for entry in await self.ops.documents()]
        return rules.tree(paths, root, depth)

    # -- memory_search ---------------------------------------------------------------------

    async def search(self, arguments: dict[str, Any]) -> dict[str, Any]:
        args = _arguments(arguments, SEARCH_KEYS)
        query = rules.search_query(args)
        limit = rules.search_limit(args.get("limit"))
        outcome = await self.search_engine.search(query, limit=limit)
        results: list[dict[str, Any]] = []
        for hit in outcome.results[:limit]:
            result: dict[str, Any] = {
                "content": hit.content, "score": hit.score, "path": hit.path,
                "is_hybrid_match": hit.is_hybrid,
            }  # fmt: skip
            if self.layout == "legacy":
                result["document_id"] = str(hit.document_id)
            results.append(result)
        return {"query": query, "results": results, "result_count": len(results)}

    # -- memory_write ----------------------------------------------------------------------

    async def write(self, arguments: dict[str, Any]) -> dict[str, Any]:
        args = _arguments(arguments, WRITE_KEYS)
        metadata = args.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise ToolRefused('metadata must be an object, e.g. {"skip_indexing": true}')
        target = rules.resolve_target(
            _text(args, "target", rules.DEFAULT_TARGET) or "", _text(args, "timezone"),
            self.clock(),
        )  # fmt: skip
        self._check_memory(target.path)
        expected = _text(args, "expected_content_hash")
        if not metadata:
            return await self._write(target, args, expected)
        # IronClaw merges the metadata first, so this write follows it (skip_versioning,
        # skip_indexing); a call refused, or in conflict, changes nothing.
        current = await self._current(target.path)
        early = await self._refusal_or_conflict(target, args, current, expected)
        if early is not None:
            return early
        if current.entry is not None:
            await self._merge_metadata(target.path, metadata)
        answer = await self._write(target, args, expected)
        if current.entry is None and answer["status"] != "conflict":
            await self._merge_metadata(target.path, metadata)  # on the document just made
        return answer

    async def _refusal_or_conflict(
        self, target: rules.Target, args: dict[str, Any], current: _Current, expected: str | None
    ) -> dict[str, Any] | None:
        """What ``_write`` would refuse (raised) or answer ``conflict``, found before
        anything is written."""
        old = _text(args, "old_string")
        if target.name != rules.BOOTSTRAP and old is not None:
            if current.entry is None:
                raise ToolRefused(f"{target.path}: no such document to patch")
            rules.patched(current.content, old, _text(args, "new_string"),
                          _flag(args, "replace_all", False))  # fmt: skip
        elif target.name != rules.BOOTSTRAP:
            self._content(args)
        return await self._conflict(target.path, current, expected)

    async def _merge_metadata(self, path: str, metadata: dict[str, Any]) -> None:
        try:
            await self.ops.merge_metadata(path, metadata)
        except FsError as exc:
            raise _refusal(path, exc) from exc

    @staticmethod
    def _content(args: dict[str, Any]) -> str:
        content = _text(args, "content", "") or ""
        if not content.strip(RUST_WHITESPACE):
            raise ToolRefused("content is empty: give the text to write (only the bootstrap "
                              "target clears a document)")  # fmt: skip
        return content

    async def _write(
        self, target: rules.Target, args: dict[str, Any], expected: str | None
    ) -> dict[str, Any]:
        """The write a call asks: the bootstrap clear, a patch, an append or a rewrite."""
        if target.name == rules.BOOTSTRAP:
            return await self._clear_bootstrap(target, expected)
        old = _text(args, "old_string")
        if old is not None:
            return await self._patch(target, args, old, expected)
        content = self._content(args)
        append = target.always_appends or _flag(args, "append", True)
        if append:
            return await self._append(target, content, expected)
        current = await self._current(target.path)
        conflict = await self._conflict(target.path, current, expected)
        if conflict is not None:
            return conflict
        saved = await self._save(target.path, content, current, guarded=expected is not None)
        if saved is None:
            return await self._stale(target.path)
        return {"status": "written", "path": target.path, "append": False,
                "content_length": len(content.encode())}  # fmt: skip

    async def _append(
        self, target: rules.Target, content: str, expected: str | None
    ) -> dict[str, Any]:
        for _ in range(APPEND_TRIES):
            current = await self._current(target.path)
            conflict = await self._conflict(target.path, current, expected)
            if conflict is not None:
                return conflict
            new = rules.appended(current.content, target, content, layout=self.layout)
            if await self._save(target.path, new, current, guarded=True) is not None:
                added = len(rules.entry(target, content, layout=self.layout).encode())
                length = len(content.encode()) if self.layout == "legacy" else added
                return {"status": "written", "path": target.path, "append": True,
                        "content_length": length}  # fmt: skip
        raise ToolRefused(f"{target.path}: changed during append {APPEND_TRIES} times; "
                          "nothing was appended, try again")  # fmt: skip

    async def _patch(
        self, target: rules.Target, args: dict[str, Any], old: str, expected: str | None
    ) -> dict[str, Any]:
        new_string = _text(args, "new_string")
        replace_all = _flag(args, "replace_all", False)
        current = await self._current(target.path)
        if current.entry is None:
            raise ToolRefused(f"{target.path}: no such document to patch")
        conflict = await self._conflict(target.path, current, expected)
        if conflict is not None:
            return conflict
        result = rules.patched(current.content, old, new_string, replace_all)
        if await self._save(target.path, result.content, current, guarded=True) is None:
            return await self._stale(target.path)
        return {"status": "patched", "path": target.path, "replacements": result.replacements,
                "content_length": len(result.content.encode())}  # fmt: skip

    async def _clear_bootstrap(self, target: rules.Target, expected: str | None) -> dict[str, Any]:
        current = await self._current(target.path)
        conflict = await self._conflict(target.path, current, expected)
        if conflict is not None:
            return conflict
        if await self._save(target.path, "", current, guarded=expected is not None) is None:
            return await self._stale(target.path)
        return {"status": "cleared", "path": target.path, "append": False,
                "content_length": 0, "message": "BOOTSTRAP.md cleared."}  # fmt: skip

    # -- the workspace ---------------------------------------------------------------------

    @staticmethod
    def _check_memory(path: str) -> None:
        """Refuse what the mount shows beside the memory: ``.versions``, ``.search``,
        ``.prompt``, ``.status``..., never documents."""
        if path.strip("/").split("/", 1)[0] in RESERVED_ROOT_NAMES:
            raise ToolRefused(f"{path}: not a memory document (memfs's own view)")

    async def _current(self, path: str) -> _Current:
        try:
            entry = await self.ops.stat(path)
            if entry.is_dir:
                raise ToolRefused(f"{path}: a folder, not a document (memory_tree lists it)")
            data = await self.ops.read(path)
        except FsError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return _Current(None, "")
            raise _refusal(path, exc) from exc
        try:
            return _Current(entry, data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ToolRefused(f"{path}: not UTF-8 text") from exc

    async def _conflict(
        self, path: str, current: _Current, expected: str | None
    ) -> dict[str, Any] | None:
        """The ``conflict`` answer where ``expected`` is not the hash of the document as
        the database holds it now (one round trip: another writer's save the workspace
        has not heard of yet counts); None where it is."""
        if expected is None:
            return None
        try:
            stored = await self.ops.stored_content(path)
        except FsError as exc:
            raise _refusal(path, exc) from exc
        if stored is not None and rules.hash_matches(expected, stored):
            return None
        return self._conflict_now(path, _Current(current.entry, stored or ""), stored is not None)

    async def _stale(self, path: str) -> dict[str, Any]:
        """The ``conflict`` answer of a save the workspace refused (another writer's
        change came first), with the hash of the document as the database holds it."""
        try:
            stored = await self.ops.stored_content(path)
        except FsError as exc:
            raise _refusal(path, exc) from exc
        return self._conflict_now(path, _Current(None, stored or ""), stored is not None)

    @staticmethod
    def _conflict_now(path: str, current: _Current, exists: bool | None = None) -> dict[str, Any]:
        there = current.entry is not None if exists is None else exists
        found = rules.content_hash(current.content) if there else None
        return {
            "status": "conflict", "path": path, "content_hash": found,
            "message": f"{path} changed since it was read (or is gone); nothing was written: "
            "read it again, then write",
        }  # fmt: skip

    async def _save(
        self, path: str, content: str, current: _Current, *, guarded: bool
    ) -> Entry | None:
        """One commit of ``content`` at ``path``; None where ``guarded`` and the document
        is no longer at the version ``current`` found (nothing written)."""
        try:
            if current.entry is None:
                await self._folders(path)
                if guarded and await self.ops.exists(path):
                    return None
                return await self.ops.save(path, content.encode())
            version = current.version if guarded else None
            return await self.ops.save(path, content.encode(), if_version=version)
        except FsError as exc:
            if exc.errno == errno.ESTALE:
                return None
            raise _refusal(path, exc) from exc

    async def _folders(self, path: str) -> None:
        """The folders above a new document (IronClaw's paths need none made)."""
        names = path.strip("/").split("/")[:-1]
        for depth in range(1, len(names) + 1):
            folder = "/".join(names[:depth])
            if not await self.ops.exists(folder):
                await self.ops.mkdir(folder)
