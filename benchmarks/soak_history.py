"""Soak of the history checker: many mounts of one workspace for a chosen time, then proof.

    .venv/bin/python benchmarks/soak_history.py [--engine legacy|reborn|both]
        [--mounts 8] [--workers 2] [--minutes 30] [--seed 1]

Runs ``tests.history``'s driver (every real saver, shell redirects, removals, moves of files
and folders, tool files, the agent by SQL as IronClaw writes on the layout) against
``--mounts`` mounts of one workspace on an embedded PostgreSQL for ``--minutes`` per engine,
then unmounts them and checks the history (SEMANTICS.md, "What the history checker
proves").  Reports operations, acknowledgements, errors by errno, lost writes (must be 0),
duplicate paths (must be 0), lines only in a version where the merge rule wants them in the
current content (must be 0), the most shared file's figures (its writers, their lines, how
many are in the current content, the versions made), daemons that exited, and the longest
syscall; exits 1 on any violation.  Not part of CI.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memfs.db.embedded import start_embedded
from tests.engines import Engine
from tests.history.check import check, not_merged, shared_file
from tests.history.driver import Run, drive, final_state, settle_and_unmount
from tests.mounting import Mount
from tests.savers import client_env


def soak(engine: Engine, work: Path, args: argparse.Namespace) -> dict[str, object]:
    url0, _ = start_embedded(work / "pgdata", database="postgres", cleanup_mode="delete")
    name = f"soak_{engine}"
    with psycopg.connect(url0, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
    url = url0.replace("/postgres?", f"/{name}?") if "?" in url0 else (
        url0.rsplit("/", 1)[0] + f"/{name}")  # fmt: skip
    engine.prepare(url)
    agent_id = str(uuid.uuid4()) if engine.name == "legacy" else None
    extra = ["--agent-id", agent_id] if agent_id else []
    runtime = work / f"runtime-{engine}"
    runtime.mkdir()
    mounts: list[Mount] = []
    try:
        for n in range(args.mounts):
            mounts.append(Mount(work / f"{engine}-m{n}", url, runtime, extra_args=extra).start())
        run = Run(engine, url, mounts, args.seed, client_env(work / f"home-{engine}"), agent_id)
        began = time.monotonic()
        driver_failures: list[str] = []
        try:
            drive(run, workers_per_mount=args.workers, operations=10**9,
                  agent_operations=10**9, seconds=args.minutes * 60,
                  shared_log=True)  # fmt: skip
        except AssertionError as failed:  # a writer thread's own failure: report, go on
            driver_failures = [str(failed)]
        elapsed = time.monotonic() - began
        problems = settle_and_unmount(run)
    finally:
        for mount in mounts:
            mount.stop()
    state = final_state(run, problems)
    violations = check(run.history, state)
    unmerged = not_merged(run.history, state)
    violations += unmerged
    if violations:  # kept for the post-mortem: the history, the rows, the daemons' logs
        (work / f"history-{engine}.json").write_text(
            json.dumps([dataclasses.asdict(op) for op in run.history.ops], default=str)
        )
        (work / f"final-{engine}.json").write_text(
            json.dumps({"documents": state.documents, "versions": state.versions})
        )
    summary = run.history.summary()
    lost = [v for v in violations if v.startswith("lost:")]
    return {
        "engine": str(engine), "mounts": args.mounts, "minutes": round(elapsed / 60, 1),
        **summary, "lost": len(lost), "duplicates": len(state.duplicates),
        "daemons_exited": len(problems), "not_merged": len(unmerged),
        "shared_file": shared_file(run.history, state), "violations": len(violations),
        "driver_failures": driver_failures,
        "first_violations": violations[:20],
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=["legacy", "reborn", "both"], default="both")
    parser.add_argument("--mounts", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    engines = ["legacy", "reborn"] if args.engine == "both" else [args.engine]
    work = Path(tempfile.mkdtemp(prefix="memfs-soak-", dir="/var/tmp"))
    failed = False
    try:
        for name in engines:
            report = soak(Engine(name), work, args)
            print(json.dumps(report, indent=1))
            failed = failed or bool(report["violations"])
    finally:
        if failed:
            print(f"kept for the post-mortem: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
