"""Many mounts, one server: N mounts (separate processes and mount points) on one
PostgreSQL with its default limit of 100 connections, directly or through PgBouncer.

    .venv/bin/python benchmarks/bench_many.py [--mounts 50] [--via direct pgbouncer]
        [--rounds 20]

Each round every mount saves one file and appends to a shared one, all at once; the
script prints the per-save latency (p50, p95), the most server connections seen
(``pg_stat_activity``, sampled every 50 ms), and errors.  Not part of CI.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memfs.daemon import is_mounted  # noqa: E402
from memfs.db.embedded import ensure_database, start_embedded  # noqa: E402
from tests.netproxy import DelayProxy  # noqa: E402
from tests.pgbouncer import start_pgbouncer  # noqa: E402


def run(mounts: int, via: str, rounds: int, base: Path) -> None:
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    admin, server = start_embedded(base / "pgdata", database="postgres", cleanup_mode="delete")
    ensure_database(admin, "many")
    bridge = DelayProxy(base / "pgdata" / ".s.PGSQL.5432")  # TCP for PgBouncer
    direct = server.get_uri(database="many")
    bouncer = None
    args = ["--database-url", direct]
    if via == "pgbouncer":
        bouncer, port = start_pgbouncer(base / "pgbouncer", bridge.port, pool_size=20,
                                        max_clients=1000)  # fmt: skip
        time.sleep(1.0)
        args = ["--database-url", f"postgresql://postgres@127.0.0.1:{port}/many", "--pooler",
                "--listen-url", direct]  # fmt: skip
    procs = []
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        with psycopg.connect(admin, autocommit=True) as conn:
            while not stop.is_set():
                row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE "
                                   "backend_type = 'client backend'").fetchone()  # fmt: skip
                peak = max(peak, int(row[0]) if row else 0)
                time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    errors = 0
    latencies: list[float] = []
    try:
        for i in range(mounts):
            mnt = base / f"m{i}"
            mnt.mkdir()
            env = dict(os.environ, XDG_RUNTIME_DIR=str(base / f"run{i}"),
                       XDG_STATE_HOME=str(base / f"state{i}"))  # fmt: skip
            log = open(base / f"m{i}.log", "wb")  # noqa: SIM115
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "memfs", "mount", "-f", *args, str(mnt)],
                stdout=log, stderr=subprocess.STDOUT, env=env,
            ))  # fmt: skip
        deadline = time.monotonic() + 300
        while not all(is_mounted(base / f"m{i}") for i in range(mounts)):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                up = sum(is_mounted(base / f"m{i}") for i in range(mounts))
                refused = sum(
                    "too many clients" in (base / f"m{i}.log").read_text(errors="replace")
                    for i in range(mounts)
                )  # fmt: skip
                print(f"{mounts} mounts {via}: only {up} came up; {refused} logged the "
                      f"server's 'too many clients' (most connections seen: {peak}); see "
                      f"{base}/m*.log", flush=True)  # fmt: skip
                return
            time.sleep(0.2)
        at_rest = peak

        def save(i: int, r: int) -> float:
            started = time.perf_counter()
            (base / f"m{i}" / f"own-{i}.md").write_text(f"round {r}\n")
            with open(base / f"m{i}" / "shared.md", "a") as handle:
                handle.write(f"m{i} r{r}\n")
            return time.perf_counter() - started

        with ThreadPoolExecutor(max_workers=mounts) as pool:
            for r in range(rounds):
                futures = [pool.submit(save, i, r) for i in range(mounts)]
                for future in futures:
                    try:
                        latencies.append(future.result())
                    except OSError:
                        errors += 1
        time.sleep(1.0)
        ordered = sorted(latencies)
        print(f"{mounts} mounts via {via}: {len(latencies)} saves+appends, {errors} errors")
        print(
            f"  p50 {statistics.median(ordered) * 1000:.1f} ms, "
            f"p95 {ordered[int(0.95 * (len(ordered) - 1))] * 1000:.1f} ms per save+append"
        )
        print(f"  server connections: {at_rest} once all were mounted, at most {peak} "
              "(limit 100)")  # fmt: skip
    finally:
        stop.set()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        for i in range(mounts):
            if is_mounted(base / f"m{i}"):
                subprocess.run(["fusermount3", "-uz", str(base / f"m{i}")], check=False)
        if bouncer is not None:
            bouncer.terminate()
        bridge.close()
        server.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mounts", type=int, default=50)
    parser.add_argument("--via", nargs="+", default=["direct", "pgbouncer"])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    base = Path(os.environ.get("MEMFS_BENCH_DIR", "/var/tmp/memfs-many"))
    for via in args.via:
        run(args.mounts, via, args.rounds, base)


if __name__ == "__main__":
    main()
