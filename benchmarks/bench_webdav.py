"""The WebDAV front next to the FUSE mount, a local directory and JuiceFS, in one run.

    .venv/bin/python benchmarks/bench_webdav.py [--docs 300] [--ops 50] [--rtt-ms 0]
        [--targets local memfs webdav juicefs]

* local, memfs, juicefs: as in ``bench_peers.py`` (the same workloads, the same checks);
* webdav: ``memfs serve webdav`` on a database of its own, mounted with davfs2 (Debian's
  WebDAV filesystem: ``buf_size 64``, uploads at close), so the mount's workloads run
  through the other front door;
* http: the server spoken to directly (httpx, one connection): a PUT per file, a
  ``PROPFIND`` of every folder at depth 1, a GET per file, overwrites of one document and
  a DELETE of the tree.

A delay proxy (``tests/netproxy.py``) sits between every memfs and PostgreSQL and counts
round trips (``--rtt-ms``: how far away the database is; 0 still counts).  The counts are
every connection the process has, so a save's count includes the reindex worker's
re-chunking that ran meanwhile.  Needs root (davfs2, dropping caches).  Not part of CI.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import bench_peers  # noqa: E402
from benchmarks.bench_core import generate_corpus, peak_rss_kb  # noqa: E402
from benchmarks.bench_peers import FuseTarget, JuiceFS, Memfs, Target, sh  # noqa: E402
from memfs.db.embedded import ensure_database, start_embedded  # noqa: E402
from tests.netproxy import DelayProxy  # noqa: E402

#: The checks davfs2's own local folder (``lost+found``, in every davfs2 mount's root)
#: would fail: the same check without it.
DAVFS2_CHECKS = {"rm -rf": "ls | grep -vc '^lost+found$'"}

#: davfs2's settings: a working readdir on Linux 6.16+, uploads at close, locks on.
DAVFS2_CONF = "buf_size 64\nuse_locks 1\nask_auth 0\ndelay_upload 0\n"
READY = re.compile(rb"over WebDAV at http://127\.0\.0\.1:(\d+)/")


def start_server(url: str, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """``memfs serve webdav`` on ``url``, and the port it listens on."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memfs", "--log-level", "info", "serve", "webdav",
             "--listen", "127.0.0.1:0", "--database-url", url],
            stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
            env=dict(os.environ, XDG_RUNTIME_DIR=str(log.parent / "run")),
        )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = READY.search(log.read_bytes())
        if found:
            return proc, int(found.group(1))
        if proc.poll() is not None:
            raise RuntimeError("memfs serve webdav exited: " + log.read_text()[-2000:])
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("memfs serve webdav did not listen")


def settle(url: str, timeout: float = 900) -> float:
    """Wait until the server's reindex queue is empty (its background re-chunking)."""
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        while conn.execute("SELECT count(*) FROM memfs.reindex_queue").fetchone() != (0,):
            if time.perf_counter() - started > timeout:
                raise RuntimeError("the reindex queue did not drain")
            time.sleep(0.05)
    return time.perf_counter() - started


class WebDav(FuseTarget):
    """``memfs serve webdav`` and a davfs2 mount of it; a remount is davfs2's."""

    name = "webdav"

    def __init__(self, base: Path, url: str) -> None:
        super().__init__(base)
        self.url = url
        self.server, self.port = start_server(url, base / "webdav.log")
        self.pid = self.server.pid
        (base / "davfs2.conf").write_text(DAVFS2_CONF)
        os.chmod(base, 0o755)  # davfs2 runs as its own user
        self.start()

    def start(self) -> None:
        subprocess.run(
            ["mount", "-t", "davfs", f"http://127.0.0.1:{self.port}/", str(self.root),
             "-o", f"conf={self.base / 'davfs2.conf'}"],
            check=True, timeout=120, capture_output=True, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def stop(self) -> None:
        subprocess.run(["umount", str(self.root)], check=False, timeout=300, capture_output=True)

    def remount(self) -> None:
        self.stop()
        with open("/proc/sys/vm/drop_caches", "w") as drop:
            drop.write("3\n")
        self.start()

    def settle(self) -> float:
        return settle(self.url)

    def close(self) -> None:
        self.stop()
        self.server.send_signal(signal.SIGTERM)
        self.server.wait(timeout=120)


def http_workloads(
    url: str, base: Path, corpus: Path, proxy: DelayProxy, ops: int
) -> list[tuple[str, float, int, int]]:
    """(label, seconds, round trips, operations) of the server spoken to directly."""
    base.mkdir(parents=True, exist_ok=True)
    proc, port = start_server(url, base / "http.log")
    files = sorted(p for p in corpus.rglob("*") if p.is_file())
    folders = sorted({"/"} | {f"/{p.relative_to(corpus).parent}/" for p in files} - {"/./"})
    results = []
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:

        def measure(label: str, count: int, work: Callable[[], None]) -> None:
            proxy.reset()
            started = time.perf_counter()
            work()
            seconds = time.perf_counter() - started
            results.append((label, seconds, proxy.round_trips, count))
            settle(url)

        def put_all() -> None:
            for folder in folders[1:]:
                parts = folder.strip("/").split("/")
                for depth in range(1, len(parts) + 1):
                    http.request("MKCOL", "/" + "/".join(parts[:depth]) + "/")
            for path in files:
                answer = http.put(f"/{path.relative_to(corpus)}", content=path.read_bytes())
                assert answer.status_code == 201, answer.text

        def propfind_all() -> None:
            for folder in folders:
                answer = http.request("PROPFIND", folder, headers={"Depth": "1"})
                assert answer.status_code == 207, answer.text

        def get_all() -> None:
            for path in files:
                answer = http.get(f"/{path.relative_to(corpus)}")
                assert answer.content == path.read_bytes()

        def overwrite() -> None:
            for i in range(ops):
                answer = http.put("/MEMORY.md", content=f"# Memory\nsave {i}\n".encode())
                assert answer.status_code == 204, answer.text

        def delete_all() -> None:
            for name in sorted({p.relative_to(corpus).parts[0] for p in files}):
                answer = http.delete(f"/{name}" + ("/" if (corpus / name).is_dir() else ""))
                assert answer.status_code == 204, answer.text

        measure(f"PUT x{len(files)} (new)", len(files), put_all)
        measure(f"PROPFIND depth 1 x{len(folders)}", len(folders), propfind_all)
        measure(f"GET x{len(files)}", len(files), get_all)
        measure(f"PUT x{ops} (overwrite)", ops, overwrite)
        measure("DELETE of the tree", len(files), delete_all)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    return results


def run(docs: int, names: list[str], base: Path, rtt: float, ops: int) -> None:
    shutil.rmtree(base, ignore_errors=True)
    (base / "run").mkdir(parents=True)
    corpus, rsync_src = base / "corpus", base / "rsync-src"
    generate_corpus(corpus, docs)
    generate_corpus(rsync_src, max(docs // 4, 50), seed=99)
    bench_peers.OPS = ops
    admin, server = start_embedded(base / "pgdata", database="postgres", cleanup_mode="delete")
    proxy = DelayProxy(base / "pgdata" / ".s.PGSQL.5432", rtt / 2000)
    try:
        for database in ("memfsbench", "davbench", "httpbench"):
            ensure_database(admin, database)
        makers: dict[str, Callable[[], Target]] = {
            "local": lambda: Target(base),
            "memfs": lambda: Memfs(base, proxy.url("memfsbench")),
            "webdav": lambda: WebDav(base, proxy.url("davbench")),
            "juicefs": lambda: JuiceFS(base, admin, f"127.0.0.1:{proxy.port}"),
        }
        times: dict[str, dict[str, float]] = {}
        trips: dict[str, dict[str, int]] = {}
        outputs: dict[str, dict[str, str]] = {}
        rss: dict[str, int] = {}
        for name in names:
            target = makers[name]()
            try:
                for label, script, given in bench_peers.workloads(corpus, rsync_src):
                    check = DAVFS2_CHECKS.get(label, given) if name == "webdav" else given
                    if label == "REMOUNT":
                        target.remount()
                        continue
                    proxy.reset()
                    started = time.perf_counter()
                    text = sh(script, target.root)
                    times.setdefault(label, {})[name] = time.perf_counter() - started
                    trips.setdefault(label, {})[name] = proxy.round_trips
                    if isinstance(target, Memfs | WebDav):
                        target.settle()
                    outputs.setdefault(label, {})[name] = text + (
                        sh(check, target.root) if check else ""
                    )
                if target.pid:
                    rss[name] = peak_rss_kb(target.pid)
            finally:
                target.close()
        http = http_workloads(proxy.url("httpbench"), base / "http", corpus, proxy, ops)
    finally:
        proxy.close()
        server.cleanup()
    report(docs, rtt, names, times, trips, outputs, rss, http)


def report(
    docs: int, rtt: float, names: list[str], times: dict[str, dict[str, float]],
    trips: dict[str, dict[str, int]], outputs: dict[str, dict[str, str]], rss: dict[str, int],
    http: list[tuple[str, float, int, int]],
) -> None:  # fmt: skip
    print(f"\n{docs} documents, the database {rtt:g} ms away; seconds")
    peers = [p for p in ("local", "memfs", "juicefs") if p in names and "webdav" in names]
    head = "".join(f"{n:>10}" for n in names) + "".join(f"{'dav/' + p[:5]:>12}" for p in peers)
    print(f"| {'workload':<24}" + head)
    for label, by in times.items():
        row = "".join(f"{by[n]:>10.3f}" if n in by else f"{'-':>10}" for n in names)
        ratios = "".join(
            f"{by['webdav'] / by[p]:>11.1f}x" if by.get(p) else f"{'-':>12}" for p in peers
        )
        print(f"| {label:<24}{row}{ratios}")
    print(f"\n{'round trips':<26}" + "".join(f"{n:>10}" for n in names if n != "local"))
    for label, by in trips.items():
        print(f"{label:<26}" + "".join(f"{by.get(n, 0):>10}" for n in names if n != "local"))
    mismatches = [
        f"{label} on {n}" for label, by in outputs.items() for n, out in by.items()
        if out != by.get("local", out)
    ]  # fmt: skip
    print("outputs identical to the local directory's" if not mismatches else "MISMATCHES:")
    for line in mismatches:
        print(f"  {line}")
    print("peak RSS: " + ", ".join(f"{n} {kb / 1024:.0f} MB" for n, kb in rss.items()))
    print(f"\n{'direct HTTP':<26}{'seconds':>10}{'ms/op':>10}{'round trips':>13}{'per op':>9}")
    for label, seconds, count, ops in http:
        print(f"{label:<26}{seconds:>10.3f}{seconds * 1000 / ops:>10.2f}{count:>13}"
              f"{count / ops:>9.2f}")  # fmt: skip
    medians = statistics.median([s * 1000 / o for _, s, _, o in http])
    print(f"(median over the HTTP workloads: {medians:.2f} ms per request)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--ops", type=int, default=50)
    parser.add_argument("--rtt-ms", type=float, default=0.0)
    parser.add_argument("--targets", nargs="+", default=["local", "memfs", "webdav", "juicefs"])
    args = parser.parse_args()
    base = Path(os.environ.get("MEMFS_BENCH_DIR", "/var/tmp/memfs-webdav-bench"))
    run(args.docs, args.targets, base, args.rtt_ms, args.ops)


if __name__ == "__main__":
    main()
