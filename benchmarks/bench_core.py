"""Core workloads on a memfs mount next to a plain local directory, in one run.

    .venv/bin/python benchmarks/bench_core.py [--docs 1000] [--repeat 3]

Starts its own embedded PostgreSQL under ``$MEMFS_BENCH_DIR`` (default
``/var/tmp/memfs-bench``), generates a seeded IronClaw-style Markdown corpus, runs each
workload on both targets, checks that both produced the same result, and prints the median
time per workload with the memfs/local ratio.  Not part of CI.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memfs.daemon import is_mounted  # noqa: E402
from memfs.db.embedded import start_embedded  # noqa: E402

WORDS = [
    "deploy", "schedule", "memory", "agent", "notes", "project", "alpha", "beta", "review",
    "meeting", "decision", "postgres", "index", "search", "vector", "chunk", "embedding",
    "user", "prefers", "dark", "mode", "tuesday", "friday", "release", "plan", "customer",
    "feedback", "bug", "fix", "retro", "summary", "context", "archive", "idea",
]  # fmt: skip


def generate_corpus(root: Path, count: int, seed: int = 7) -> int:
    """IronClaw's layout: identity files, daily logs, projects; 0.5-8 KB, a few to 200 KB."""
    rng = random.Random(seed)
    paths = ["MEMORY.md", "USER.md", "SOUL.md", "AGENTS.md", "IDENTITY.md", "HEARTBEAT.md"]
    day = 0
    while len(paths) < count:
        kind = rng.random()
        if kind < 0.4:
            day += 1
            paths.append(f"daily/2026-{1 + day // 28 % 12:02d}-{1 + day % 28:02d}-{day}.md")
        elif kind < 0.9:
            paths.append(f"projects/p{rng.randrange(40)}/notes-{len(paths)}.md")
        else:
            paths.append(f"context/topic-{len(paths)}.md")
    total = 0
    for i, rel in enumerate(paths[:count]):
        size = rng.randint(500, 8000) if i % 100 else rng.randint(50_000, 200_000)
        lines = []
        length = 0
        while length < size:
            line = "- " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14)))
            lines.append(line)
            length += len(line) + 1
        text = "# " + rel + "\n" + "\n".join(lines) + "\n"
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        total += len(text.encode())
    return total


def sh(script: str, cwd: Path) -> str:
    result = subprocess.run(
        ["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )
    if result.returncode not in (0, 1):  # grep exits 1 on no match
        raise RuntimeError(f"{script!r} failed in {cwd}: {result.stderr}")
    return result.stdout


def timed(fn: Callable[[], str]) -> tuple[float, str]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


class MemfsMount:
    def __init__(self, mountpoint: Path, url: str, log: Path) -> None:
        self.mountpoint, self.url, self.log = mountpoint, url, log
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Path:
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "memfs",
                    "--log-level",
                    "warning",
                    "mount",
                    "-f",
                    "--database-url",
                    self.url,
                    str(self.mountpoint),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
            )
        deadline = time.monotonic() + 60
        while not is_mounted(self.mountpoint):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("mount failed: " + self.log.read_text()[-2000:])
            time.sleep(0.05)
        return self.mountpoint

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.terminate()
        self.proc.wait(timeout=60)
        if is_mounted(self.mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(self.mountpoint)], check=False)


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank; NaN for none)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def run(docs: int, repeat: int, base: Path) -> None:
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    corpus = base / "corpus"
    size = generate_corpus(corpus, docs)
    print(f"corpus: {docs} documents, {size / 1e6:.1f} MB")
    admin_url, server = start_embedded(base / "pgdata", database="postgres", cleanup_mode="delete")
    results: dict[str, dict[str, list[float]]] = {}

    def record(target: str, name: str, seconds: float) -> None:
        results.setdefault(name, {}).setdefault(target, []).append(seconds)

    try:
        for attempt in range(repeat):
            db = f"bench{attempt}"
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")  # type: ignore[arg-type]
                conn.execute(f"CREATE DATABASE {db}")  # type: ignore[arg-type]
            url = server.get_uri(database=db)
            local = base / f"local{attempt}"
            local.mkdir()
            mount = MemfsMount(base / f"mnt{attempt}", url, base / "memfs.log")
            with mount as mnt:
                outputs: dict[str, dict[str, str]] = {}
                for target, root in (("local", local), ("memfs", mnt)):
                    steps: list[tuple[str, str]] = [
                        ("populate cp -r", f"cp -r {corpus} mem"),
                        ("ls -lR", "ls -lR mem | grep -c '\\.md$'"),
                        ("grep -r (first)", "grep -rc deploy mem | sort | md5sum"),
                        ("grep -r (again)", "grep -rc deploy mem | sort | md5sum"),
                        ("read all", "find mem -type f | sort | xargs cat | md5sum"),
                        (
                            "200 appends",
                            'for i in $(seq 200); do echo "- note $i" >> mem/MEMORY.md; done;'
                            " wc -l < mem/MEMORY.md",
                        ),
                        ("rm -rf", "rm -rf mem; ls | wc -l"),
                    ]
                    for name, script in steps:
                        seconds, out = timed(lambda s=script, r=root: sh(s, r))
                        record(target, name, seconds)
                        outputs.setdefault(name, {})[target] = out
                for name, by_target in outputs.items():
                    if by_target["local"] != by_target["memfs"]:
                        raise RuntimeError(f"{name}: results differ: {by_target}")
                assert mount.proc is not None
                rss = peak_rss_kb(mount.proc.pid)
            shutil.rmtree(local)
        print(f"\n{'workload':<18}{'local s':>10}{'memfs s':>10}{'ratio':>9}")
        for name, by_target in results.items():
            lo = statistics.median(by_target["local"])
            me = statistics.median(by_target["memfs"])
            print(f"{name:<18}{lo:>10.3f}{me:>10.3f}{me / lo:>8.1f}x")
        print(
            f"\nmemfs daemon peak RSS: {rss / 1024:.0f} MB; median of {repeat} run(s); "
            "all outputs identical to the local directory's"
        )
    finally:
        server.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    base = Path(os.environ.get("MEMFS_BENCH_DIR", "/var/tmp/memfs-bench"))
    run(args.docs, args.repeat, base)


if __name__ == "__main__":
    main()
