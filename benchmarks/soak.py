"""Soak: many mounts of one workspace, many writers, an SQL agent; then nothing may be lost.

    .venv/bin/python benchmarks/soak.py [--mounts 8] [--writers 4] [--seconds 300]

Runs ``--mounts`` mounts of one workspace on one embedded server (loopback only), each with
``--writers`` threads doing random creates, appends, editor-style saves (rename away, write,
delete the backup), renames, deletes and appends to one shared file, plus an SQL writer
appending to shared files as IronClaw's agent would.  A probe measures how long an SQL
change takes to show in every mount.  Afterwards every mount is unmounted and every
acknowledged change is checked against the database.  Prints operations, errors by errno,
changes lost (must be 0), duplicate rows (must be 0) and coherence latency p50/p95; exits 1
if anything was lost or duplicated.  Not part of CI (it runs for minutes).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.stress import Ledger, Mount, Writer, sql_agent, start_server, verify


def probe_coherence(
    url: str, user: str, mounts: list[Mount], stop: threading.Event, latencies: list[float]
) -> None:
    """Write a token by SQL; time until every mount shows it."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO memory_documents (user_id, path, content) VALUES (%s, 'probe.md', '')",
            (user,),
        )
        n = 0
        while not stop.wait(1.0):
            n += 1
            token = f"probe {n}\n"
            conn.execute(
                "UPDATE memory_documents SET content = %s WHERE user_id = %s AND path = 'probe.md'",
                (token, user),
            )
            written = time.monotonic()
            for mount in mounts:
                target = mount.mountpoint / "probe.md"
                deadline = written + 30
                while time.monotonic() < deadline:
                    try:
                        if target.read_text() == token:
                            latencies.append(time.monotonic() - written)
                            break
                    except OSError as exc:
                        print("probe", exc)
                    time.sleep(0.005)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mounts", type=int, default=8)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    base = Path(tempfile.mkdtemp(prefix="memfs-soak-", dir="/var/tmp"))
    url, server = start_server(base)
    user = "soak"
    mounts = [Mount(base, f"m{i}", url, user) for i in range(args.mounts)]
    ledger = Ledger()
    stop = threading.Event()
    latencies: list[float] = []
    print(f"soak: {args.mounts} mounts x {args.writers} writers + SQL agent, "
          f"{args.seconds:.0f}s, seed {seed}, in {base}", flush=True)  # fmt: skip
    try:
        for mount in mounts:
            mount.start()

        def work(mount: Mount, index: int) -> None:
            rng = random.Random(f"{seed}-{mount.mountpoint.name}-{index}")
            writer = Writer(mount.mountpoint, f"{mount.mountpoint.name}w{index}", ledger, rng)
            while not stop.is_set():
                writer.step()

        threads = [
            threading.Thread(target=work, args=(mount, i), daemon=True)
            for mount in mounts
            for i in range(args.writers)
        ]
        threads.append(
            threading.Thread(target=sql_agent, args=(url, user, stop, ledger, seed), daemon=True)
        )
        threads.append(
            threading.Thread(
                target=probe_coherence, args=(url, user, mounts, stop, latencies), daemon=True
            )
        )
        started = time.monotonic()
        for thread in threads:
            thread.start()
        while time.monotonic() - started < args.seconds:
            time.sleep(5)
            print(f"  {time.monotonic() - started:5.0f}s  {sum(ledger.operations.values())} ops, "
                  f"{sum(ledger.errors.values())} errors", flush=True)  # fmt: skip
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
        codes = [mount.umount() for mount in mounts]
        verdict = verify(url, user, ledger)
    finally:
        stop.set()
        for mount in mounts:
            mount.kill()
        server.cleanup()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    total = sum(ledger.operations.values())
    print(
        f"operations: {total} ({', '.join(f'{k} {v}' for k, v in ledger.operations.most_common())})"
    )
    print(f"errors by errno: {dict(ledger.errors) or 'none'}")
    print(f"acknowledged bytes: {ledger.acknowledged_bytes}")
    print(f"longest syscall: {ledger.longest:.2f}s ({ledger.longest_what})")
    print(f"unmount exit codes: {codes}")
    print(f"changes lost: {len(verdict.lost)} ({verdict.bytes_lost} bytes)")
    for line in verdict.lost[:20]:
        print(f"  lost: {line}")
    print(f"duplicate rows: {len(verdict.duplicates)} {verdict.duplicates[:5]}")
    print(f"coherence latency: p50 {pct(latencies, 0.5) * 1000:.0f} ms, "
          f"p95 {pct(latencies, 0.95) * 1000:.0f} ms over {len(latencies)} samples")  # fmt: skip
    return 1 if verdict.lost or verdict.duplicates else 0


if __name__ == "__main__":
    raise SystemExit(main())
