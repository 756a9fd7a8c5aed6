"""``memfs migrate`` of a legacy workspace with versions, then a Reborn mount compared
byte for byte with the source tree.

    .venv/bin/python benchmarks/bench_migrate.py [--docs 1000] [--max-versions 4]

The corpus (``bench_core.generate_corpus``) is imported into IronClaw's legacy tables with
``memfs import``; document i then gets i mod (max-versions + 1) older versions (legacy rows,
IronClaw's hash format); IronClaw's Reborn tables are created beside (``tests/fixtures``).
Prints the dry run's, the migration's and an idempotent re-run's times and counts, then
mounts the target scope and checks every file's bytes and every document's version count.
Not part of CI (``tests/mount/test_migrate.py`` is).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_core import generate_corpus  # noqa: E402
from memfs.daemon import is_mounted  # noqa: E402
from memfs.db.embedded import ensure_database, start_embedded  # noqa: E402

TARGET = "/memory/tenants/reborn-cli/users/reborn-cli/agents/reborn-cli-agent/projects/_none"


def memfs(*args: str, env: dict[str, str]) -> tuple[float, Any]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "memfs", *args], capture_output=True, text=True, timeout=3600,
        env=env, check=False,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    if result.returncode != 0:
        raise RuntimeError(f"memfs {args[0]} failed: {result.stderr[-800:]}")
    return elapsed, json.loads(result.stdout) if "--json" in args else result.stdout


def add_versions(url: str, max_versions: int) -> int:
    """Older contents for each document (the i-th gets i mod (max + 1)), as IronClaw's
    legacy versioning leaves them."""
    added = 0
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        docs = conn.execute("SELECT id, content FROM memory_documents ORDER BY path").fetchall()
        rows = []
        for i, (doc_id, content) in enumerate(docs):
            for number in range(1, i % (max_versions + 1) + 1):
                old = content[: max(1, len(content) * number // (max_versions + 2))]
                digest = "sha256:" + hashlib.sha256(old.encode()).hexdigest()
                rows.append((doc_id, number, old, digest))
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memory_document_versions (document_id, version, content, "
                "content_hash, changed_by) VALUES (%s, %s, %s, %s, 'default')",
                rows,
            )
        added = len(rows)
    return added


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--max-versions", type=int, default=4)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="memfs-bench-migrate-", dir="/var/tmp"))
    admin, server = start_embedded(base / "pgdata", database="postgres", cleanup_mode="delete")
    mount = None
    try:
        ensure_database(admin, "migrate")
        url = f"postgresql://postgres@/migrate?host={base / 'pgdata'}"
        env = dict(os.environ, XDG_RUNTIME_DIR=str(base / "run"), MEMFS_LOG_LEVEL="warning")
        (base / "run").mkdir()
        corpus = base / "corpus"
        size = generate_corpus(corpus, args.docs)
        memfs("import", str(corpus), "--database-url", url, "--json", env=env)
        versions = add_versions(url, args.max_versions)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute((ROOT / "tests/fixtures/reborn_schema.sql").read_text())  # type: ignore[arg-type]
        print(f"legacy workspace: {args.docs} documents, {size / 1e6:.1f} MB, {versions} versions")
        for label, extra in (("dry run", ["--dry-run"]), ("migrate", []), ("re-run", [])):
            elapsed, report = memfs("migrate", "--database-url", url, "--json", *extra, env=env)
            counts = {k: v for k, v in report["counts"].items() if k != "milliseconds"}
            print(f"{label:8} {elapsed:7.2f} s  {counts}")
        mnt = base / "mnt"
        mnt.mkdir()
        mount = subprocess.Popen(
            [sys.executable, "-m", "memfs", "mount", "-f", "--database-url", url,
             "--user-id", "reborn-cli", str(mnt)], env=env,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not is_mounted(mnt):
            if time.monotonic() > deadline or mount.poll() is not None:
                raise RuntimeError("the Reborn mount did not come up")
            time.sleep(0.1)
        started = time.monotonic()
        mismatched = [
            str(path.relative_to(corpus))
            for path in corpus.rglob("*")
            if path.is_file() and (mnt / path.relative_to(corpus)).read_bytes() != path.read_bytes()
        ]
        shown = sum(1 for p in mnt.rglob("*") if p.is_file())
        compare = time.monotonic() - started
        with psycopg.connect(url) as conn:
            legacy = dict(conn.execute(
                "SELECT d.path, count(v.id) FROM memory_documents d LEFT JOIN "
                "memory_document_versions v ON v.document_id = d.id GROUP BY d.path"
            ).fetchall())  # fmt: skip
            reborn = dict(conn.execute(
                "SELECT indexed ->> 'doc_relative_path', count(*) FROM root_filesystem_entries "
                "WHERE kind = 'memory_document_version' AND path LIKE %s GROUP BY 1",
                (TARGET + "/%",),
            ).fetchall())  # fmt: skip
        counts_differ = [p for p, n in legacy.items() if reborn.get(p, 0) != n]
        print(
            f"mount: {shown} files shown, {len(mismatched)} differ in bytes "
            f"(compared in {compare:.2f} s); version counts differ for {len(counts_differ)}"
        )
        if mismatched or counts_differ or shown != args.docs:
            raise SystemExit(f"MISMATCH: {mismatched[:5]} {counts_differ[:5]}")
    finally:
        if mount is not None:
            subprocess.run(["fusermount3", "-u", str(base / "mnt")], check=False, timeout=60)
            mount.wait(timeout=60)
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
