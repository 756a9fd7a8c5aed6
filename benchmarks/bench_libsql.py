"""IronClaw's libSQL file at size: what a poll costs, and how long memfs holds the write lock.

    .venv/bin/python benchmarks/bench_libsql.py [--documents 100000] [--runs 5]

Builds a Reborn file as IronClaw builds it (``tests.ironclaw_libsql``) holding
``--documents`` documents with one chunk each (rows written directly, in IronClaw's
shapes), then measures through memfs's own store (``RebornStore`` over ``SqliteRows``):

* a poll when nothing changed anywhere (``PRAGMA data_version`` only), after a heartbeat
  (another connection's commit outside memory: the scope's fingerprint is read), the
  whole document list (a mount's load) and every document's version (what a poll reads
  to find what changed, before it reads those rows whole);
* the write lock's hold time (``BEGIN IMMEDIATE`` to ``COMMIT``) of a save of a small and
  of a 100 KiB document, of one folder move of 1,000 documents with their sidecars, and of
  each transaction of the first search's making of the FTS5 index, against IronClaw's 5 s
  busy timeout, with IronClaw's writer putting a heartbeat every 50 ms meanwhile (its puts
  that failed with SQLITE_BUSY, and how long each waited).

Prints medians (and the worst) in milliseconds as JSON.  Not part of CI.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memfs.db.interface import FileAttrs
from memfs.db.reborn import layout
from memfs.db.reborn.layout import RebornScope
from memfs.db.reborn.libsql.rows import SqliteRows, open_file
from memfs.db.reborn.libsql.stores import LibsqlSearchStore
from memfs.db.reborn.store import RebornStore
from memfs.db.records import Write
from tests.ironclaw_libsql import reborn_local_dev


def _fill(db: Path, scope: RebornScope, documents: int) -> None:
    keys = layout.dumps(scope.keys())
    rows: list[tuple[Any, ...]] = []
    for n in range(documents):
        relative = f"f{n % 100}/g{n % 1000}/doc{n}.md"
        text = f"Document {n}: the user likes green tea and dark mode.\n"
        rows.append((scope.row(relative), text.encode(), "memory_document", keys))
        chunk = layout.dumps({**scope.keys(), "chunk_index": 0, "content": text,
                              "doc_relative_path": relative})  # fmt: skip
        rows.append((scope.row(layout.chunk_path(relative, 0)), text.encode(), "memory_chunk",
                     chunk))  # fmt: skip
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "INSERT INTO root_filesystem_entries (path, contents, content_type, kind, indexed, "
            "version, updated_at) VALUES (?, ?, 'application/json', ?, ?, 1, "
            "strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
            rows,
        )


class IronClawWriter(threading.Thread):
    """IronClaw's side beside memfs: a heartbeat put every 50 ms on a connection of its own
    with IronClaw's 5 s busy timeout, each in ``BEGIN IMMEDIATE``; counts the puts that
    failed with SQLITE_BUSY and how long each waited for the lock."""

    #: IronClaw's put (Reborn: a sequence row outside memory).
    PUT = ("INSERT OR REPLACE INTO root_filesystem_sequences (path, next_seq) "
           "VALUES ('/heartbeat', ?)")  # fmt: skip

    def __init__(self, db: Path, put: str = PUT) -> None:
        super().__init__(daemon=True)
        self.db = db
        self.put = put
        self.waits: list[float] = []
        self.busy = 0
        self.stop = threading.Event()

    def run(self) -> None:
        conn = sqlite3.connect(self.db, timeout=5.0, isolation_level=None)
        n = 0
        while not self.stop.wait(0.05):
            n += 1
            started = time.perf_counter()
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(self.put, (n,))
                conn.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                self.busy += 1
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            self.waits.append((time.perf_counter() - started) * 1000)
        conn.close()

    def report(self) -> dict[str, float]:
        return {"puts": len(self.waits), "busy_errors": self.busy,
                "median_ms": round(statistics.median(self.waits), 2),
                "worst_ms": round(max(self.waits), 2)}  # fmt: skip


def _times(work: Callable[[], object], runs: int) -> dict[str, float]:
    taken = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        taken.append((time.perf_counter() - started) * 1000)
    return {"median_ms": round(statistics.median(taken), 2), "worst_ms": round(max(taken), 2)}


def _first_search(opened: Any, scope: RebornScope) -> dict[str, float]:
    """The first search of the scope makes IronClaw's FTS5 index: its write transactions
    (each timed from ``BEGIN IMMEDIATE`` to ``COMMIT``) and the whole search."""
    holds: list[float] = []
    real = opened.write

    def timed(work: Callable[[Any], Any]) -> Any:
        started = time.perf_counter()
        try:
            return real(work)
        finally:
            holds.append((time.perf_counter() - started) * 1000)

    opened.write = timed
    started = time.perf_counter()
    found = LibsqlSearchStore(opened, scope, read_only=False).search(["tea"], 10)
    took = time.perf_counter() - started
    opened.write = real
    assert found, "the first search found nothing"
    return {"transactions": len(holds), "worst_hold_ms": round(max(holds), 2),
            "median_hold_ms": round(statistics.median(holds), 2),
            "whole_search_s": round(took, 2)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    scope = RebornScope()
    with tempfile.TemporaryDirectory(prefix="memfs-bench-libsql-") as tmp:
        db = reborn_local_dev(Path(tmp) / "reborn-local-dev.db")
        started = time.perf_counter()
        _fill(db, scope, args.documents)
        filled = time.perf_counter() - started
        opened = open_file(db)
        store = RebornStore(opened, scope, rows=SqliteRows(opened))
        store.fingerprint()
        report: dict[str, Any] = {"documents": args.documents, "fill_s": round(filled, 1)}
        report["poll_unchanged"] = _times(store.fingerprint, args.runs)

        def after_heartbeat() -> object:
            with sqlite3.connect(db) as other:
                other.execute("INSERT OR REPLACE INTO root_filesystem_sequences (path, next_seq) "
                              "VALUES ('/heartbeat', 1)")  # fmt: skip
            return store.fingerprint()

        report["poll_after_a_heartbeat"] = _times(after_heartbeat, args.runs)
        report["document_list"] = _times(store.load_documents, args.runs)
        # What a poll reads when the fingerprint moved: every document's version, then the
        # rows that differ whole (here one).
        report["document_versions"] = _times(store.document_versions, args.runs)

        holds: list[float] = []
        real = opened.transaction

        def timed() -> Any:
            class Timed:
                def __enter__(self) -> Any:
                    self.inner = real()
                    conn = self.inner.__enter__()
                    self.started = time.perf_counter()
                    return conn

                def __exit__(self, *exc: Any) -> Any:
                    try:
                        return self.inner.__exit__(*exc)
                    finally:
                        holds.append((time.perf_counter() - self.started) * 1000)

            return Timed()

        opened.transaction = timed  # type: ignore[method-assign]
        writer = IronClawWriter(db)  # IronClaw writing through the lock measurements
        writer.start()

        def held(work: Callable[[], object]) -> dict[str, float]:
            holds.clear()
            for _ in range(args.runs):
                work()
            return {"median_ms": round(statistics.median(holds), 2),
                    "worst_ms": round(max(holds), 2)}  # fmt: skip

        report["lock_hold_small_save"] = held(
            lambda: store.commit_document(
                Write(None, "f1/g1/doc1.md", f"{time.time()}\n"), FileAttrs()
            )
        )
        big = "".join(f"line {i} of a long note about the user's projects\n" for i in range(2000))
        report["lock_hold_100k_save"] = held(
            lambda: store.commit_document(
                Write(None, "big.md", big + f"{time.time()}\n"), FileAttrs()
            )
        )
        moves = iter(range(args.runs * 2))

        def move_folder() -> None:
            n = next(moves)
            store.rename_directory("f7" if n % 2 == 0 else "moved", "moved" if n % 2 == 0
                                   else "f7", None)  # fmt: skip

        # Moved in parts of ``MOVE_LIMIT`` documents: each transaction's hold is reported.
        report["lock_hold_folder_move_1000_documents"] = held(move_folder)
        opened.transaction = real  # type: ignore[method-assign]
        report["first_search_backfill"] = _first_search(opened, scope)
        writer.stop.set()
        writer.join()
        report["ironclaw_writer_meanwhile"] = writer.report()
        searching = LibsqlSearchStore(opened, scope, read_only=False)
        report["search_two_words_every_document_holds"] = _times(
            lambda: searching.search(["tea", "mode"], 50), args.runs
        )
        report["search_a_rare_word"] = _times(lambda: searching.search(["77"], 50), args.runs)
        report["ironclaw_busy_timeout_ms"] = 5000
        opened.close()
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
