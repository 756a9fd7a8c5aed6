"""Shared parts of the soak and fault scripts: a server, mounts, timed syscalls, a ledger.

Every file operation a writer makes goes through ``Writer``, which times the syscalls and
records in a ``Ledger`` what was acknowledged (the call returned without error).  After a
run, ``verify`` compares the ledger with the database: an acknowledged change that is not
there (as current content, or for appends to shared files as current content or a version)
counts as lost.  Loopback only; every subprocess has a timeout.
"""

from __future__ import annotations

import errno
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memfs.daemon import is_mounted  # noqa: E402
from memfs.db.embedded import start_embedded  # noqa: E402

TIMEOUT = 120.0
#: Every file the writers touch lives in this directory of the workspace, so that while a
#: mount is down (killed, restarting) a write fails with ENOENT instead of landing in the
#: bare mountpoint directory underneath.
DIR = "w"
SHARED = f"{DIR}/shared.md"


def start_server(base: Path) -> tuple[str, Any]:
    """An embedded PostgreSQL of its own under ``base`` (stopped by ``server.cleanup()``)."""
    url, server = start_embedded(base / "pgdata", database="soak", cleanup_mode="stop")
    return url, server


class Mount:
    """``memfs mount -f`` in a subprocess, stopped with ``memfs umount``."""

    def __init__(
        self, base: Path, name: str, url: str, user: str = "soak", log_level: str = "info"
    ) -> None:
        self.log_level = log_level
        self.mountpoint = base / name
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        self.url = url
        self.user = user
        self.env = dict(
            os.environ,
            XDG_RUNTIME_DIR=str(base / "run"),
            XDG_STATE_HOME=str(base / "state"),
            MEMFS_STATEMENT_TIMEOUT_MS=os.environ.get("MEMFS_STATEMENT_TIMEOUT_MS", "4000"),
        )
        self.log_path = base / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Mount:
        """Mount, and make sure the writers' directory exists in the workspace."""
        args = [sys.executable, "-m", "memfs", "--log-level", self.log_level, "mount", "-f",
                "--database-url", self.url,
                "--user-id", self.user, str(self.mountpoint)]  # fmt: skip
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + 60
        while not is_mounted(self.mountpoint):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mount {self.mountpoint} failed; see {self.log_path}")
            time.sleep(0.05)
        (self.mountpoint / DIR).mkdir(exist_ok=True)
        return self

    def umount(self) -> int:
        """``memfs umount``; returns its exit code (1 if something was kept for recovery)."""
        done = subprocess.run(
            [sys.executable, "-m", "memfs", "umount", str(self.mountpoint)],
            env=self.env, capture_output=True, text=True, timeout=TIMEOUT, check=False,
        )  # fmt: skip
        if self.proc is not None:
            self.proc.wait(timeout=TIMEOUT)
        return done.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=TIMEOUT)
        if is_mounted(self.mountpoint):
            subprocess.run(
                ["fusermount3", "-u", "-z", str(self.mountpoint)], timeout=30, check=False
            )

    def recover(self) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "memfs", "recover", "--restore", "--database-url", self.url,
             "--user-id", self.user],
            env=self.env, capture_output=True, text=True, timeout=TIMEOUT, check=False,
        )  # fmt: skip
        return done.stdout + done.stderr


@dataclass
class Ledger:
    """What writers were told succeeded, for checking against the database afterwards."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Owned files: path -> contents that may be current (the last acknowledged one, plus
    #: later attempts that failed and may still be saved by the mount's retry); None: gone.
    owned: dict[str, list[str | None]] = field(default_factory=dict)
    #: Lines appended to shared files, acknowledged.
    shared: list[tuple[str, str]] = field(default_factory=list)
    operations: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    acknowledged_bytes: int = 0
    longest: float = 0.0
    longest_what: str = ""

    def acknowledge(self, path: str, content: str | None) -> None:
        with self.lock:
            self.owned[path] = [content]

    def attempt(self, path: str, content: str | None) -> None:
        with self.lock:
            self.owned.setdefault(path, [None]).append(content)

    def timed(self, what: str, seconds: float) -> None:
        with self.lock:
            if seconds > self.longest:
                self.longest, self.longest_what = seconds, what


class Writer:
    """One writer thread's file operations on one mount, timed and recorded."""

    def __init__(self, mnt: Path, prefix: str, ledger: Ledger, rng: random.Random) -> None:
        self.mnt = mnt
        self.prefix = prefix
        self.ledger = ledger
        self.rng = rng
        self.files: dict[str, str] = {}  # this writer's paths and their acknowledged content
        self.serial = 0

    def _call(self, what: str, fn: Any, *args: Any) -> bool:
        started = time.monotonic()
        try:
            fn(*args)
            return True
        except OSError as exc:
            self.ledger.errors[errno.errorcode.get(exc.errno or 0, str(exc.errno))] += 1
            return False
        finally:
            self.ledger.timed(what, time.monotonic() - started)
            self.ledger.operations[what] += 1

    def _line(self) -> str:
        self.serial += 1
        return f"{self.prefix} {self.serial} {self.rng.random():.6f}\n"

    def step(self) -> None:
        """One random operation: create, append, editor save, rename, delete, shared append."""
        kind = self.rng.choice(["create", "append", "append", "save", "rename", "delete", "shared"])
        if kind == "create" or not self.files:
            self.serial += 1
            path = f"{DIR}/{self.prefix}-{self.serial}.md"
            self._write(path, self._line(), "create")
        elif kind == "append":
            path = self.rng.choice(list(self.files))
            self._write(path, self.files[path] + self._line(), "append", append=True)
        elif kind == "save":
            path = self.rng.choice(list(self.files))
            self._editor_save(path, self.files[path] + self._line())
        elif kind == "rename":
            path = self.rng.choice(list(self.files))
            self.serial += 1
            new = f"{DIR}/{self.prefix}-{self.serial}.md"
            self.ledger.attempt(path, None)
            self.ledger.attempt(new, self.files[path])
            if self._call("rename", os.rename, self.mnt / path, self.mnt / new):
                self.ledger.acknowledge(path, None)
                self.ledger.acknowledge(new, self.files[path])
                self.files[new] = self.files.pop(path)
        elif kind == "delete":
            path = self.rng.choice(list(self.files))
            self.ledger.attempt(path, None)
            if self._call("delete", os.unlink, self.mnt / path):
                self.ledger.acknowledge(path, None)
                del self.files[path]
        else:
            line = self._line()
            if self._call("shared append", _append, self.mnt / SHARED, line):
                with self.ledger.lock:
                    self.ledger.shared.append((SHARED, line))
                    self.ledger.acknowledged_bytes += len(line)

    def _write(self, path: str, content: str, what: str, *, append: bool = False) -> None:
        self.ledger.attempt(path, content)
        if append:
            ok = self._call(what, _append, self.mnt / path, content[len(self.files[path]) :])
        else:
            ok = self._call(what, _write, self.mnt / path, content)
        if ok:
            self.files[path] = content
            self.ledger.acknowledge(path, content)
            with self.ledger.lock:
                self.ledger.acknowledged_bytes += len(content)

    def _editor_save(self, path: str, content: str) -> None:
        """vim's sequence: rename the original away, write the new file, delete the backup."""
        self.ledger.attempt(path, content)

        def save() -> None:
            target, backup = self.mnt / path, self.mnt / f"{path}~"
            os.rename(target, backup)
            _write(target, content)
            os.unlink(backup)

        if self._call("editor save", save):
            self.files[path] = content
            self.ledger.acknowledge(path, content)
            with self.ledger.lock:
                self.ledger.acknowledged_bytes += len(content)


def _write(path: Path, content: str) -> None:
    with open(path, "w", encoding="utf-8") as out:
        out.write(content)


def _append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(text)


def sql_agent(url: str, user: str, stop: threading.Event, ledger: Ledger, seed: int) -> None:
    """IronClaw's agent: appends to the shared file and its own by SQL at random moments."""
    rng = random.Random(seed)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO memory_documents (user_id, path, content) "
            "SELECT %s, %s, '' WHERE NOT EXISTS (SELECT 1 FROM memory_documents "
            "WHERE user_id = %s AND path = %s)",
            (user, f"{DIR}/agent.md", user, f"{DIR}/agent.md"),
        )
        n = 0
        while not stop.wait(rng.uniform(0.01, 0.2)):
            n += 1
            path = rng.choice([SHARED, f"{DIR}/agent.md"])
            line = f"agent {n}\n"
            try:
                updated = conn.execute(
                    "UPDATE memory_documents SET content = content || %s "
                    "WHERE user_id = %s AND path = %s",
                    (line, user, path),
                ).rowcount
            except psycopg.Error:
                ledger.errors["sql agent"] += 1
                continue
            if updated:
                with ledger.lock:
                    ledger.shared.append((path, line))
                    ledger.operations["sql append"] += 1


@dataclass
class Verdict:
    lost: list[str]
    bytes_lost: int
    duplicates: list[tuple[str, int]]


def verify(url: str, user: str, ledger: Ledger) -> Verdict:
    """Compare the ledger with the database (after every mount is unmounted)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows: dict[str, str] = dict(
            conn.execute(
                "SELECT path, content FROM memory_documents WHERE user_id = %s", (user,)
            ).fetchall()
        )
        versions = "".join(
            r[0]
            for r in conn.execute(
                "SELECT v.content FROM memory_document_versions v JOIN memory_documents d "
                "ON d.id = v.document_id WHERE d.user_id = %s",
                (user,),
            )
        )
        duplicates = conn.execute(
            "SELECT path, count(*) FROM memory_documents WHERE user_id = %s "
            "GROUP BY path, agent_id HAVING count(*) > 1",
            (user,),
        ).fetchall()
    lost: list[str] = []
    bytes_lost = 0
    for path, candidates in ledger.owned.items():
        current = rows.get(path)
        if current not in candidates:
            lost.append(f"{path}: database has {_show(current)}, expected one of "
                        f"{[_show(c) for c in candidates]}")  # fmt: skip
            bytes_lost += len(candidates[0] or "")
    for path, line in ledger.shared:
        if line not in rows.get(path, "") and line not in versions:
            lost.append(f"{path}: line {line!r} missing")
            bytes_lost += len(line)
    return Verdict(lost, bytes_lost, [(p, n) for p, n in duplicates])


def _show(content: str | None) -> str:
    if content is None:
        return "no row"
    return repr(content[-40:]) + f" ({len(content)} chars)"
