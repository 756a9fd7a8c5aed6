"""What a mount holds that is not yet where its user thinks: ``.status``, ``.status.json``
and ``memfs status MNT`` (one report, three views).

A report is made when asked (each open of ``.status``, each ``memfs status MNT``), from
the parts that own each fact: the database (its address, layout, round trip and counts),
how other writers are watched, the model's files with unsaved changes, the deferred-change
queue, the re-chunking and embedding workers, the recovery area and the live statistics.
The database's part is bounded (``DATABASE_SECONDS`` each, in a thread of its own, not
through the mount's call breaker): a stopped server makes a report that says so, never a
read that hangs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import trio

from memfs.stats import MountStats, sample_name
from memfs.vfs.buffers import FileBuffer

if TYPE_CHECKING:
    from memfs.db.calls import DatabaseCalls
    from memfs.embeddings.worker import EmbeddingWorker
    from memfs.recovery import RecoveryArea
    from memfs.reindex import Reindexer
    from memfs.tree import FileNode
    from memfs.vfs.extensions import MountView

#: How long each of the report's database questions may take.
DATABASE_SECONDS = 2.0


def _when(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


async def _bounded(fn: Callable[[], Any], seconds: float) -> tuple[Any, str | None, float]:
    """``fn()`` in a thread, given up after ``seconds``: (result, error, seconds taken)."""
    started = time.monotonic()
    error: str | None = None
    result: Any = None
    with trio.move_on_after(seconds) as scope:
        try:
            result = await trio.to_thread.run_sync(fn, abandon_on_cancel=True)
        except Exception as exc:  # the report says what failed, it never fails itself
            error = " ".join(str(exc).split())[:300] or type(exc).__name__
    if scope.cancelled_caught:
        error = f"no answer within {seconds:g}s"
    return result, error, time.monotonic() - started


@dataclass
class MountStatus:
    """Makes one mount's report; every collaborator is passed in (None: the mount has no
    such part, a read-only mount no re-chunking, a mount without a provider no embeddings)."""

    #: The database's address (secrets masked) and its layout, in words.
    server: str
    layout: str
    #: How other writers' changes reach this mount, in words.
    watching: str
    #: One round trip (a ``SELECT 1``), and the workspace's counts.
    ping: Callable[[], object]
    counts: Callable[[], dict[str, Any]]
    calls: DatabaseCalls
    stats: MountStats
    recovery: RecoveryArea | None
    reindexer: Reindexer | None
    embeddings: EmbeddingWorker | None
    deferred: Callable[[], int]
    #: The embedding provider and model in words (None: full-text search only).
    provider: str | None = None
    #: Since when (wall time) another program holds the write lock memfs waits for
    #: (IronClaw's libSQL file); None when nobody holds it or the store has no such lock.
    lock_held_since: Callable[[], float | None] = lambda: None

    async def report(self, fs: MountView) -> dict[str, Any]:
        """The whole report as plain data (what ``.status.json`` holds)."""
        database: dict[str, Any] = {"server": self.server, "layout": self.layout}
        since = self.calls.unresponsive_since
        held = self.lock_held_since()
        counts: dict[str, Any] | None = None
        if held is not None:
            database["write_lock"] = (
                f"IronClaw (or another program) holds the file's write lock since "
                f"{time.strftime('%H:%M:%S', time.localtime(held))} "
                f"({time.time() - held:.0f}s); saves wait in memory and the recovery area"
            )
        if since is not None:
            database["answering"] = False
            database["error"] = database.get("write_lock") or (
                f"not answering for {time.monotonic() - since:.0f}s; saves wait in memory "
                "and the recovery area"
            )
        else:
            _, error, took = await _bounded(self.ping, DATABASE_SECONDS)
            database["answering"] = error is None
            if error is None:
                database["round_trip_ms"] = round(took * 1000, 2)
                counts, error, _ = await _bounded(self.counts, DATABASE_SECONDS)
            if error is not None:
                database["error"] = error
        embeddings: dict[str, Any] = {"provider": self.provider}
        chunking: dict[str, Any] = {"in_each_save": self.reindexer is None}
        if counts is not None:
            database["documents"] = counts.get("documents")
            database["chunks"] = counts.get("chunks")
            embeddings["chunks_waiting"] = counts.get("embeddings_pending")
            chunking["queued_in_database"] = counts.get("documents_queued")
        if self.embeddings is not None:
            embeddings["enabled"] = self.embeddings.enabled
            embeddings["last_error"] = self.embeddings.last_error
        if self.reindexer is not None:
            chunking["documents_waiting"] = self.reindexer.waiting
            chunking["last_error"] = self.reindexer.last_error
        return {
            "generated_at": _when(time.time()),
            "database": database,
            "other_writers": self.watching,
            "last_commit": _when(self.stats.last_commit),
            "unsaved": self._unsaved(fs),
            "deferred_changes": self.deferred(),
            "chunking": chunking,
            "embeddings": embeddings,
            "recovery_area": self._recovery(),
            "statistics": {
                sample_name(s): s["value"]
                for s in self.stats.snapshot()
                if not s["metric"].endswith("_bucket")
            },
        }

    @staticmethod
    def _unsaved(fs: MountView) -> list[dict[str, Any]]:
        """Files whose content is not in the database: refused or waiting (and where a
        copy is kept), and files written and not closed yet."""
        found: list[dict[str, Any]] = []
        unkept = set(fs.unkept())
        for ino, node in sorted(fs.state.unsaved.items()):
            what = fs.describe_node(node)
            copy = fs.kept_copy(ino)
            found.append({
                "file": what,
                "why": "the database refused or did not take it; retried",
                "kept_in": copy,
                "memory_only": what in unkept,
            })  # fmt: skip
        written: dict[int, FileNode] = {}
        for handle in fs.state.handles.values():
            buffer, node = handle.buffer, handle.node
            if handle.writable and isinstance(buffer, FileBuffer) and buffer.dirty:
                written.setdefault(node.ino, node)
        for ino, node in sorted(written.items()):
            if ino in fs.state.unsaved:
                continue
            found.append({
                "file": fs.describe_node(node),
                "why": "written and not closed yet: saved at close or fsync",
                "kept_in": None,
                "memory_only": False,
            })  # fmt: skip
        return found

    def _recovery(self) -> list[dict[str, Any]]:
        """Copies kept by ended mounts, and how to restore them."""
        if self.recovery is None:
            return []
        return [
            {
                "path": item.path,
                "kept_at": item.kept_at,
                "reason": item.reason,
                "copy": str(item.stored),
                "restore": f"memfs recover --restore  # or: cp {item.stored} <mount>/{item.path}",
            }
            for item in self.recovery.pending()
        ]


def render_text(report: dict[str, Any]) -> str:
    """The report as ``.status`` and ``memfs status MNT`` show it."""
    lines: list[str] = []

    def line(label: str, value: object) -> None:
        lines.append(f"{label + ':':<20}{value}")

    line("generated", report["generated_at"])
    _database_lines(report["database"], line)
    line("other writers", report["other_writers"])
    line("last commit", report["last_commit"] or "none by this mount yet")
    unsaved = report["unsaved"]
    line("unsaved files", len(unsaved) or "none")
    for item in unsaved:
        where = f" (kept in {item['kept_in']})" if item["kept_in"] else ""
        only = " IN MEMORY ONLY" if item["memory_only"] else ""
        lines.append(f"  {item['file']}: {item['why']}{where}{only}")
    line("deferred changes", report["deferred_changes"] or "none queued")
    line("chunks", _chunking_text(report["chunking"]))
    line("embeddings", _embeddings_text(report["embeddings"]))
    recovery = report["recovery_area"]
    line("recovery area", len(recovery) or "empty")
    for item in recovery:
        lines.append(f"  {item['path']} (kept {item['kept_at']}: {item['reason']})")
        lines.append(f"    restore: {item['restore']}")
    lines.append("statistics:")
    stats = report["statistics"]
    width = max((len(name) for name in stats), default=0)
    lines.extend(f"  {name:<{width}}  {value:g}" for name, value in stats.items())
    return "\n".join(lines) + "\n"


def _database_lines(db: dict[str, Any], line: Callable[[str, object], None]) -> None:
    """The database's lines: where, how fast it answers, its write lock, its counts."""
    line("database", f"{db['server']} ({db['layout']})")
    if db.get("answering"):
        line("round trip", f"{db['round_trip_ms']:.2f} ms")
    else:
        line("round trip", f"NOT ANSWERING: {db.get('error', 'unknown')}")
    if db.get("answering") and "write_lock" in db:
        line("write lock", f"WAITING: {db['write_lock']}")
    if "documents" in db:
        line("documents", f"{db['documents']} ({db['chunks']} chunks)")
    elif db.get("answering"):
        line("documents", f"not counted: {db.get('error')}")


def _chunking_text(chunking: dict[str, Any]) -> str:
    if chunking["in_each_save"]:
        return "made in each save's transaction"
    waiting = chunking["documents_waiting"]
    error = f" (last error: {chunking['last_error']})" if chunking["last_error"] else ""
    queued = chunking.get("queued_in_database")
    everyone = f", {queued} queued by all mounts" if queued is not None else ""
    return f"{waiting or 'no'} documents of this mount waiting{everyone}{error}"


def _embeddings_text(embeddings: dict[str, Any]) -> str:
    if embeddings["provider"] is None:
        return "no provider: search is full-text"
    waiting = embeddings.get("chunks_waiting")
    state = f"{waiting} chunks waiting" if waiting is not None else "chunks waiting: unknown"
    if embeddings.get("enabled") is False:
        state += ", OFF"
    error = f" (last error: {embeddings['last_error']})" if embeddings.get("last_error") else ""
    return f"{embeddings['provider']}: {state}{error}"


def render_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=False) + "\n"
