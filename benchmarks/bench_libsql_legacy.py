"""IronClaw's legacy (<= v1.0) libSQL file with its vector index, at size: how long
memfs holds the write lock beside a running IronClaw, and what a poll costs.

    .venv/bin/python benchmarks/bench_libsql_legacy.py [--documents 20000] [--dim 384]

Builds ``ironclaw.db`` as IronClaw v1.0 builds it with embeddings enabled
(``tests.ironclaw_libsql``: its tables, then its vector index) and fills it through
IronClaw's own libSQL engine in a child process: ``--documents`` documents in folders of
1,000, one chunk each with an embedding of ``--dim`` dimensions (every chunk in the vector
index, as IronClaw leaves them).  Then, through memfs's store (every write in IronClaw's
libSQL engine's process), with IronClaw's writer putting a ``settings`` row every 50 ms
on its own connection with its 5 s busy timeout: the write lock's hold (``BEGIN
IMMEDIATE`` to ``COMMIT``) of a small save, a 100 KiB save, each transaction of a folder
move of 1,000 documents and of an ``rm -rf`` of 1,000; the writer's puts that failed with
SQLITE_BUSY and how long each waited; a poll's pieces (fingerprint, every document's
version, the whole list).

Prints medians (and the worst) in milliseconds as JSON.  Not part of CI.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_libsql import IronClawWriter, _times
from memfs.config import Settings
from memfs.db import open_libsql
from memfs.db.deferred import Delete
from memfs.db.interface import FileAttrs
from memfs.db.records import Write
from tests.ironclaw_libsql import legacy_ironclaw_db, legacy_vector_index

#: Run by IronClaw's engine in a child: documents and embedded chunks, 1,000 a transaction.
_FILL = r"""
import random, struct, sys, uuid, libsql
path, count, dim = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
conn = libsql.connect(path, isolation_level=None)
rng = random.Random(7)
for start in range(0, count, 1000):
    conn.execute("BEGIN IMMEDIATE")
    for n in range(start, min(start + 1000, count)):
        doc = str(uuid.uuid4())
        text = f"Document {n}: the user likes green tea and dark mode.\n"
        conn.execute("INSERT INTO memory_documents (id, user_id, agent_id, path, content, "
                     "metadata) VALUES (?, 'default', NULL, ?, ?, '{}')",
                     (doc, f"f{n // 1000}/doc{n}.md", text))
        vector = struct.pack(f"<{dim}f", *(rng.random() for _ in range(dim)))
        conn.execute("INSERT INTO memory_chunks (id, document_id, chunk_index, content, "
                     "embedding) VALUES (?, ?, 0, ?, ?)", (str(uuid.uuid4()), doc, text, vector))
    conn.execute("COMMIT")
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=20_000, help="at least 3,000")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memfs-bench-legacy-", dir="/var/tmp") as tmp:
        db = legacy_vector_index(legacy_ironclaw_db(Path(tmp) / "ironclaw.db"), args.dim)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", _FILL, str(db), str(args.documents), str(args.dim)],
                       check=True, timeout=3600)  # fmt: skip
        report: dict[str, Any] = {"documents": args.documents, "dimensions": args.dim,
                                  "fill_s": round(time.perf_counter() - started, 1),
                                  "file_mb": round(db.stat().st_size / 1e6)}  # fmt: skip
        database = open_libsql(db)
        settings = Settings(user_id="default")
        settings.given.add("user_id")
        store: Any = database.workspace(settings).documents
        report["document_list"] = _times(store.load_documents, args.runs)
        report["document_versions"] = _times(store.document_versions, args.runs)

        def fingerprint_after_a_change() -> object:
            store.commit_document(Write(None, "poke.md", f"{time.time()}\n"), FileAttrs())
            began = time.perf_counter()
            store.fingerprint()  # read again: this process committed since
            return time.perf_counter() - began

        report["save_then_fingerprint"] = _times(fingerprint_after_a_change, args.runs)
        holds: list[float] = []
        real = database.file.transaction

        @contextlib.contextmanager
        def timed() -> Iterator[Any]:
            with real() as conn:
                begun = time.perf_counter()
                yield conn
            holds.append((time.perf_counter() - begun) * 1000)

        database.file.transaction = timed  # type: ignore[method-assign]
        writer = IronClawWriter(db, "INSERT OR REPLACE INTO settings (user_id, key, value) "
                                    "VALUES ('default', 'heartbeat', ?)")  # fmt: skip
        writer.start()

        def held(work: Callable[[], object], runs: int = args.runs) -> dict[str, float]:
            holds.clear()
            for _ in range(runs):
                work()
            return {"transactions": len(holds), "median_ms": round(statistics.median(holds), 2),
                    "worst_ms": round(max(holds), 2)}  # fmt: skip

        report["lock_hold_small_save"] = held(
            lambda: store.commit_document(
                Write(None, "f0/doc1.md", f"{time.time()}\n"), FileAttrs()
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
            store.rename_directory("f1" if n % 2 == 0 else "moved", "moved" if n % 2 == 0
                                   else "f1", None)  # fmt: skip

        report["lock_hold_folder_move_1000_documents"] = held(move_folder, 2)
        rows = [r for r in store.load_documents() if r.path.startswith("f2/")]

        def remove_folder() -> None:
            store.defer(*[Delete(r.id, r.updated_at, r.path) for r in rows])
            store.flush_changes()

        report["lock_hold_rm_rf_1000_documents"] = held(remove_folder, 1)
        writer.stop.set()
        writer.join()
        report["ironclaw_writer_meanwhile"] = writer.report()
        report["ironclaw_busy_timeout_ms"] = 5000
        database.close()
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
