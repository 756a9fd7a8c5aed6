"""Many machines, one server: N mounts (separate daemons and mount points) on one PostgreSQL
with its default limit of 100 connections, through PgBouncer in transaction mode or directly.

    .venv/bin/python benchmarks/bench_many.py [--mounts 50] [--writers 4] [--seconds 300]
        [--workspaces different one] [--via pgbouncer direct]

``different``: every mount is its own workspace (``--user-id w<i>``); ``one``: every mount
shows the same workspace.  On each mount ``--writers`` threads save their own files
(``open(O_TRUNC)``, write, ``close``: one IronClaw save each) as fast as they can for
``--seconds``.  Meanwhile a prober, twice a second, changes a document the way the agent
does (by SQL) and times until a chosen mount shows it (coherence); with ``one`` it also
saves through one mount and times until another shows it.

Through PgBouncer a mount has no session (transaction mode cannot carry LISTEN), so each
mount keeps one direct connection for LISTEN (``--listen-url``) and saves through the pool.

Prints saves per second, save latency p50/p95/p99, the server connections seen (sampled
from ``pg_stat_activity``), coherence p50/p95/p99, and where the CPU went (the daemons,
the server, PgBouncer, the writers, idle), from ``/proc``.  Not part of CI.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_core import quantile  # noqa: E402
from memfs.daemon import is_mounted  # noqa: E402
from memfs.db.embedded import ensure_database, start_embedded  # noqa: E402
from tests.netproxy import DelayProxy  # noqa: E402
from tests.pgbouncer import start_pgbouncer  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def percentiles(values: list[float]) -> str:
    """p50/p95/p99 of ``values`` (seconds) in milliseconds."""
    if not values:
        return "none"
    p50, p95, p99 = (quantile(values, q) * 1000 for q in (0.50, 0.95, 0.99))
    return f"p50 {p50:.1f} ms, p95 {p95:.1f} ms, p99 {p99:.1f} ms"


def cpu_by_group(pids: dict[str, set[int]]) -> dict[str, float]:
    """CPU seconds used so far by each group of processes (and their children's, for the
    embedded server's backends, which are found by name)."""
    used = {name: 0.0 for name in pids}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        seconds = (int(fields[11]) + int(fields[12])) / TICK
        pid = int(entry.name)
        for name, members in pids.items():
            if pid in members or (name == "server" and comm == "postgres"):
                used[name] += seconds
                break
    return used


def idle_seconds() -> float:
    """The machine's idle CPU seconds since boot (all cores)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    return (int(fields[3]) + int(fields[4])) / TICK


def run(mounts: int, writers: int, seconds: float, workspaces: str, via: str, base: Path) -> None:
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    admin, server = start_embedded(base / "pgdata", database="postgres", cleanup_mode="delete")
    ensure_database(admin, "many")
    direct = server.get_uri(database="many")
    bridge = DelayProxy(base / "pgdata" / ".s.PGSQL.5432")  # TCP for PgBouncer
    bouncer = None
    url_args = ["--database-url", direct]
    if via == "pgbouncer":
        bouncer, port = start_pgbouncer(base / "pgbouncer", bridge.port, pool_size=20,
                                        max_clients=2000)  # fmt: skip
        time.sleep(1.0)
        url_args = ["--database-url", f"postgresql://postgres@127.0.0.1:{port}/many",
                    "--pooler", "--listen-url", direct]  # fmt: skip
    shown_as = "one workspace" if workspaces == "one" else "different workspaces"
    label = f"{mounts} mounts of {shown_as} via {via}"
    procs: list[subprocess.Popen[bytes]] = []
    connections: list[int] = []
    stop = threading.Event()

    def sample_connections() -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            while not stop.is_set():
                row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE "
                                   "backend_type = 'client backend'").fetchone()  # fmt: skip
                connections.append(int(row[0]) if row else 0)
                time.sleep(0.25)

    sampler = threading.Thread(target=sample_connections, daemon=True)
    sampler.start()
    mount_points = [base / f"m{i}" for i in range(mounts)]
    users = [f"w{i}" if workspaces == "different" else "shared" for i in range(mounts)]
    try:
        for i, mnt in enumerate(mount_points):
            mnt.mkdir()
            env = dict(os.environ, XDG_RUNTIME_DIR=str(base / f"run{i}"),
                       XDG_STATE_HOME=str(base / f"state{i}"))  # fmt: skip
            log = open(base / f"m{i}.log", "wb")  # noqa: SIM115
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "memfs", "mount", "-f", *url_args,
                 "--user-id", users[i], str(mnt)],
                stdout=log, stderr=subprocess.STDOUT, env=env,
            ))  # fmt: skip
            if i == 0:  # the first creates the schema; the rest find it
                wait_mounted([mnt], procs, 120)
        started = time.monotonic()
        if not wait_mounted(mount_points, procs, 600):
            up = sum(is_mounted(m) for m in mount_points)
            print(f"{label}: only {up} came up (most server connections seen: "
                  f"{max(connections, default=0)}); see {base}/m*.log", flush=True)  # fmt: skip
            return
        mount_seconds = time.monotonic() - started
        at_rest = connections[-1] if connections else 0
        for mnt in mount_points:
            (mnt / "probe.md").write_text("probe 0\n")
        time.sleep(2.0)

        latencies: list[float] = []
        errors: list[str] = []
        coherence: list[float] = []
        peer_coherence: list[float] = []
        lock = threading.Lock()
        deadline = time.monotonic() + seconds

        def writer(i: int, w: int) -> None:
            folder = mount_points[i] / f"writer-{w}"
            folder.mkdir(exist_ok=True)
            n = 0
            while time.monotonic() < deadline:
                target = folder / f"note-{n % 20}.md"
                began = time.perf_counter()
                try:
                    target.write_text(f"# note {n}\nsaved by mount {i} writer {w}, round {n}\n")
                except OSError as error:
                    with lock:
                        errors.append(f"{target}: {error}")
                    continue
                took = time.perf_counter() - began
                with lock:
                    latencies.append(took)
                n += 1

        def shown(path: Path, text: str, limit: float = 30.0) -> float | None:
            began = time.perf_counter()
            while time.perf_counter() - began < limit:
                try:
                    if path.read_text() == text:
                        return time.perf_counter() - began
                except OSError:
                    pass
                time.sleep(0.005)
            return None

        def prober() -> None:
            rng = random.Random(7)
            n = 0
            with psycopg.connect(direct, autocommit=True) as conn:
                while time.monotonic() < deadline:
                    n += 1
                    i = rng.randrange(mounts)
                    text = f"probe {n} by the agent\n"
                    conn.execute(
                        "UPDATE memory_documents SET content = %s, updated_at = now() "
                        "WHERE user_id = %s AND path = 'probe.md'", (text, users[i]),
                    )  # fmt: skip
                    took = shown(mount_points[i] / "probe.md", text)
                    with lock:
                        coherence.append(took if took is not None else float("inf"))
                    if workspaces == "one":
                        j = (i + 1 + rng.randrange(mounts - 1)) % mounts
                        text = f"probe {n} by mount {i}\n"
                        (mount_points[i] / "probe.md").write_text(text)
                        took = shown(mount_points[j] / "probe.md", text)
                        with lock:
                            peer_coherence.append(took if took is not None else float("inf"))
                    time.sleep(0.5)

        groups = {"daemons": {p.pid for p in procs}, "server": set(),
                  "pgbouncer": {bouncer.pid} if bouncer else set(),
                  "this script (writers, prober, TCP bridge)": {os.getpid()}}  # fmt: skip
        cpu_before, idle_before, wall_before = (
            cpu_by_group(groups),
            idle_seconds(),
            time.monotonic(),
        )
        threads = [threading.Thread(target=writer, args=(i, w)) for i in range(mounts)
                   for w in range(writers)]  # fmt: skip
        threads.append(threading.Thread(target=prober))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.monotonic() - wall_before
        cpu_after, idle_after = cpu_by_group(groups), idle_seconds()
        cores = os.cpu_count() or 1
        print(f"{label}, {writers} writers each, {seconds:.0f} s:", flush=True)
        print(f"  all mounted in {mount_seconds:.1f} s; server connections at rest {at_rest}, "
              f"during the run median {statistics.median(connections)}, at most "
              f"{max(connections)} (limit 100)")  # fmt: skip
        print(f"  {len(latencies)} saves, {len(latencies) / wall:.1f} per second, "
              f"{len(errors)} errors; save latency {percentiles(latencies)}")  # fmt: skip
        print(f"  coherence, agent's SQL change to the mount showing it ({len(coherence)} "
              f"probes): {percentiles(coherence)}")  # fmt: skip
        if peer_coherence:
            print(f"  coherence, one mount's save to another showing it "
                  f"({len(peer_coherence)} probes): {percentiles(peer_coherence)}")  # fmt: skip
        busy = {k: (cpu_after[k] - cpu_before[k]) / wall / cores * 100 for k in groups}
        idle = (idle_after - idle_before) / wall / cores * 100
        shares = ", ".join(f"{k} {v:.0f}%" for k, v in busy.items())
        print(f"  CPU (% of {cores} cores): {shares}, idle {idle:.0f}%")
        for line in errors[:5]:
            print(f"  error: {line}")
    finally:
        stop.set()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        for mnt in mount_points:
            if is_mounted(mnt):
                subprocess.run(["fusermount3", "-uz", str(mnt)], check=False, timeout=30)
        if bouncer is not None:  # SIGTERM waits for its clients; SIGKILL then
            bouncer.terminate()
            try:
                bouncer.wait(timeout=10)
            except subprocess.TimeoutExpired:
                bouncer.kill()
                bouncer.wait(timeout=10)
        bridge.close()
        server.cleanup()


def wait_mounted(points: list[Path], procs: list[subprocess.Popen[bytes]], limit: float) -> bool:
    """Whether every mount point is mounted within ``limit`` seconds (no daemon exiting)."""
    deadline = time.monotonic() + limit
    while not all(is_mounted(p) for p in points):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            return False
        time.sleep(0.2)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mounts", type=int, default=50)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--workspaces", nargs="+", default=["different", "one"],
                        choices=["different", "one"])  # fmt: skip
    parser.add_argument("--via", nargs="+", default=["pgbouncer"], choices=["pgbouncer", "direct"])
    args = parser.parse_args()
    base = Path(os.environ.get("MEMFS_BENCH_DIR", "/var/tmp/memfs-many"))
    for via in args.via:
        for workspaces in args.workspaces:
            run(args.mounts, args.writers, args.seconds, workspaces, via, base)


if __name__ == "__main__":
    main()
