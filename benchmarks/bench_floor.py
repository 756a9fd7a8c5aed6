"""pyfuse3's per-request floor, and what the two open flags save, on this machine.

    .venv/bin/python benchmarks/bench_floor.py [--files 20000] [--runs 5]

Serves one tree (``--files`` files of 1-3 KB in 200 folders) from memory with
``fuse_floor.py``, once as pyfuse3 3.5 can (every read-only close sends ``flush``; every
listing is read from the daemon) and once with the project's pyfuse3 flags (``noflush`` on
read-only opens, ``cache_readdir`` + ``keep_cache`` on folders), and runs warm ``grep -r``,
``find`` and ``ls -lR`` on both and on the local directory.  Prints the medians, the
requests each answered per run (counted by the filesystem) and the cost of one
synchronous request, from the difference the flush makes.  Not part of CI.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_core import WORDS  # noqa: E402
from memfs.daemon import is_mounted  # noqa: E402

WORKLOADS = {
    "grep -r (warm)": "grep -r -l vector . | wc -l",
    "find -type f": "find . -type f | wc -l",
    "ls -lR": "ls -lR | wc -l",
}


def make_tree(root: Path, files: int) -> None:
    rng = random.Random(1)
    for n in range(files):
        folder = root / f"f{n % 200}"
        folder.mkdir(parents=True, exist_ok=True)
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(150, 450)))
        (folder / f"doc{n}.md").write_text(f"# doc {n}\n{words}\n")


def run(script: str, cwd: Path) -> tuple[float, str]:
    started = time.perf_counter()
    out = subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True,
                         timeout=600, check=True).stdout  # fmt: skip
    return time.perf_counter() - started, out


def measure(where: Path, runs: int) -> dict[str, tuple[float, str]]:
    for script in WORKLOADS.values():  # warm every cache first
        run(script, where)
    found = {}
    for name, script in WORKLOADS.items():
        median = statistics.median(run(script, where)[0] for _ in range(runs))
        found[name] = (median, run(script, where)[1])
    return found


Timings = dict[str, tuple[float, str]]


def floor(tree: Path, mountpoint: Path, runs: int, flags: bool) -> tuple[Timings, dict[str, int]]:
    mountpoint.mkdir(exist_ok=True)
    args = [sys.executable, str(ROOT / "benchmarks" / "fuse_floor.py"), str(tree), str(mountpoint)]
    proc = subprocess.Popen([*args, *(["--open-flags"] if flags else [])],
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while not is_mounted(mountpoint):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("fuse_floor did not mount")
        time.sleep(0.05)
    try:
        times = measure(mountpoint / "mem", runs)
    finally:
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=False, timeout=60)
        _, err = proc.communicate(timeout=60)
    counts: dict[str, int] = json.loads(err.strip().splitlines()[-1])
    return times, counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="memfs-bench-floor-", dir="/var/tmp"))
    try:
        tree = base / "tree"
        make_tree(tree, args.files)
        local = measure(tree, args.runs)
        stock, stock_counts = floor(tree, base / "stock", args.runs, flags=False)
        flagged, flagged_counts = floor(tree, base / "flags", args.runs, flags=True)
        calls = 1 + 4 * (args.runs + 1)  # the warm-up and the timed runs of each workload
        print(f"{args.files} files; medians of {args.runs} runs, seconds")
        print(f"{'workload':18} {'local':>8} {'pyfuse3 3.5':>12} {'with flags':>11}")
        for name in WORKLOADS:
            same = local[name][1] == stock[name][1] == flagged[name][1]
            print(f"{name:18} {local[name][0]:8.3f} {stock[name][0]:12.3f} "
                  f"{flagged[name][0]:11.3f}{'' if same else '  OUTPUTS DIFFER'}")  # fmt: skip
        print(f"requests answered in all ({calls} passes of the three workloads):")
        print(f"  pyfuse3 3.5: {stock_counts}")
        print(f"  with flags:  {flagged_counts}")
        saved = stock["grep -r (warm)"][0] - flagged["grep -r (warm)"][0]
        print(f"one synchronous request (the flush a warm grep no longer waits for): "
              f"{saved / args.files * 1e6:.0f} µs; the open left: "
              f"{flagged['grep -r (warm)'][0] / args.files * 1e6:.0f} µs per file")  # fmt: skip
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
