"""The history driver: many writers at once against one workspace, every operation recorded
with what it was told (``tests.history.record``), for ``tests.history.check`` to judge.

Writers: on each mount, worker threads doing the real savers of ``tests.savers`` (vim,
sed -i, os.replace, write-file-atomic, rsync), appends and truncating writes made with
open/write/close (so close()'s answer is seen), shell ``>>`` and ``>`` (indeterminate:
bash ignores close()'s error), ``os.replace`` of a new file, ``rm``, ``rm -rf``, ``mv`` of
files and folders (onto names other writers create), ``mkdir`` and tool-folder files; and
the agent writing by SQL as IronClaw does on the engine (legacy: an UPDATE or an insert;
Reborn: a compare-and-swap on ``version``), creating and deleting documents; and
``memfs sync --once`` of a plain folder whose copies get lines appended or are removed.

The names are few (three folders, three file names) so writers collide all the time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from memfs.ironclaw.chunker import chunk_document
from tests.engines import Engine, reborn_prefix
from tests.history.check import FinalState
from tests.history.record import FAIL, INFO, OK, History, Op
from tests.history.snapshots import PAUSE_TIMEOUT, Gate, Snapshotter
from tests.mounting import Mount
from tests.savers import SAVERS

FOLDERS = ("a", "b", "c")
#: Folder names only a move creates.
SPARE_FOLDERS = ("d", "e")
NAMES = ("x.md", "y.md", "z.md")
#: Every real saver of ``tests.savers``, the quick ones more often (nano runs in tmux and
#: takes a second or two, emacs a few tenths).
SAVER_WEIGHTS = {"vim backupcopy=yes": 4, "vim backupcopy=no": 4, "sed -i": 4,
                 "os.replace": 4, "write-file-atomic": 4, "rsync": 4, "rclone": 2,
                 "emacs": 1, "nano": 1}  # fmt: skip
COMMAND_TIMEOUT = 60.0
#: How often a worker picks each operation.
WEIGHTS = {
    "append": 16, "truncate": 6, "shell-append": 6, "shell-truncate": 3, "save": 12,
    "replace": 5, "rm": 4, "rm-rf": 2, "mv": 5, "mv-dir": 3, "mkdir": 3, "tool": 3,
    "ping-pong": 6, "rm-then-write": 6, "rm-files-then-write": 3, "mv-dir-collide": 2,
}  # fmt: skip
AGENT_WEIGHTS = {"agent-append": 6, "agent-create": 3, "agent-delete": 1}


def _reweigh(setting: str) -> None:
    """``MEMFS_HISTORY_WEIGHTS=mv-dir-collide=12,rsync=20``: weigh operations or savers
    otherwise, to chase a rare violation with the operations it involves."""
    for item in filter(None, setting.split(",")):
        name, _, weight = item.partition("=")
        table = next(t for t in (WEIGHTS, SAVER_WEIGHTS, AGENT_WEIGHTS) if name in t)
        table[name] = int(weight)


_reweigh(os.environ.get("MEMFS_HISTORY_WEIGHTS", ""))


#: How often a path is the one every writer shares (collisions on one document).
HOT = 0.4


def random_path(rng: random.Random) -> str:
    if rng.random() < HOT:
        return NAMES[0]
    folder = rng.choice((*FOLDERS, *SPARE_FOLDERS, ""))
    name = rng.choice(NAMES)
    return f"{folder}/{name}" if folder else name


@dataclass
class Run:
    """One run: the mounts, the engine, the database, the seed and the history."""

    engine: Engine
    url: str
    mounts: Sequence[Mount]
    seed: int
    env: dict[str, str]
    #: IronClaw's agent id of the workspace on the legacy layout (None: NULL).
    agent_id: str | None = None
    history: History = field(default_factory=History)
    #: The agent's SQL writer (set by ``drive``), and the workers' own (closed at the end).
    agent: Agent = field(init=False)
    agents: list[Agent] = field(default_factory=list)
    #: The snapshots' taker (``drive(snapshots=...)``), None without.
    snapshotter: Snapshotter | None = None
    _counter: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def marker(self, writer: str) -> str:
        with self._lock:
            self._counter += 1
            return f"{writer}-{self.seed}.{self._counter}"


def _errno(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno is not None:
        return f"{os.strerror(exc.errno)} ({exc.errno})"
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def _timed(op: Op, call: Callable[[], Any]) -> Any:
    began = time.monotonic()
    try:
        return call()
    finally:
        op.longest = max(op.longest, time.monotonic() - began)


def _write_file(op: Op, full: Path, data: bytes, flags: int) -> None:
    """open, write, close: FAIL if open refused (nothing written), else OK or INFO."""
    try:
        fd = _timed(op, lambda: os.open(full, os.O_WRONLY | os.O_CREAT | flags, 0o644))
    except OSError as exc:
        History.end(op, FAIL, _errno(exc))
        return
    try:
        _timed(op, lambda: os.write(fd, data))
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.close(fd)
        History.end(op, INFO, "write: " + _errno(exc))
        return
    try:
        _timed(op, lambda: os.close(fd))
    except OSError as exc:
        # A save refused at close may be kept and retried by the mount: unknown.
        History.end(op, INFO, "close: " + _errno(exc))
        return
    History.end(op, OK)


def _command(op: Op, cmd: list[str], cwd: Path, env: dict[str, str], ok: str) -> None:
    """A program's run: its exit code is all the driver sees."""
    try:
        done = subprocess.run(
            cmd, cwd=cwd, env=env, capture_output=True, timeout=COMMAND_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        History.end(op, INFO, f"timed out after {COMMAND_TIMEOUT:.0f}s")
        return
    if done.returncode == 0:
        History.end(op, ok, done.stdout.decode()[-300:].strip() if op.writer == "sync" else "")
    else:
        History.end(op, INFO, f"exit {done.returncode}: {done.stderr.decode()[-200:].strip()}")


class MountWriter:
    """A worker thread's operations on one mount."""

    def __init__(self, run: Run, mount: Mount, name: str, rng: random.Random) -> None:
        self.run = run
        self.mount = mount
        self.name = name
        self.rng = rng
        self.root = mount.path()
        #: This worker's own SQL writer for sequences across writers (made when needed).
        self._agent: Agent | None = None

    def step(self) -> None:
        kind = self.rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
        getattr(self, "op_" + kind.replace("-", "_"))()

    def _begin(self, kind: str, path: str, *, write: bool = False, **extra: str) -> Op:
        marker = self.run.marker(self.name) if write else None
        return self.run.history.begin(
            self.name, kind, path, marker=marker, mount=str(self.root), **extra
        )

    def op_append(self, path: str | None = None) -> None:
        path = path or random_path(self.rng)
        op = self._begin("append", path, write=True)
        _write_file(op, self.root / path, f"{op.marker}\n".encode(), os.O_APPEND)

    def op_truncate(self) -> None:
        path = random_path(self.rng)
        op = self._begin("truncate", path, write=True)
        _write_file(op, self.root / path, f"{op.marker}\n".encode(), os.O_TRUNC)

    def _shell(self, kind: str, redirect: str, path: str | None = None) -> None:
        path = path or random_path(self.rng)
        op = self._begin(kind, path, write=True)
        script = f"echo {op.marker} {redirect} {path}"
        _command(op, ["bash", "-c", script], self.root, self.run.env, ok=INFO)

    def op_shell_append(self, path: str | None = None) -> None:
        self._shell("shell-append", ">>", path)

    def op_shell_truncate(self) -> None:
        self._shell("shell-truncate", ">")

    def op_save(self, path: str | None = None, saver: str | None = None) -> None:
        path = path or random_path(self.rng)
        if saver is None:
            saver = self.rng.choices(list(SAVER_WEIGHTS), weights=list(SAVER_WEIGHTS.values()))[0]
        op = self._begin("save", path, write=True)
        op.detail = saver
        folder, _, name = path.rpartition("/")
        cwd = self.root / folder if folder else self.root
        began = time.monotonic()
        try:
            SAVERS[saver](cwd, name, str(op.marker), self.run.env)
        except (AssertionError, OSError, subprocess.SubprocessError) as exc:
            # (nano's tmux session may end before its keys are sent: the save is unknown)
            History.end(op, INFO, f"{saver}: {str(exc)[:200]}")
            return
        finally:
            op.longest = time.monotonic() - began
        History.end(op, OK, saver)

    def op_replace(self) -> None:
        path = random_path(self.rng)
        op = self._begin("replace", path, write=True)
        folder, _, name = path.rpartition("/")
        temp = self.root / folder / f".{name}.{self.name}.tmp"
        _write_file(op, temp, f"{op.marker}\n".encode(), os.O_TRUNC)
        if op.outcome != OK:
            op.outcome = FAIL if op.outcome == FAIL else INFO
            return
        try:
            _timed(op, lambda: os.replace(temp, self.root / path))
        except OSError as exc:
            History.end(op, FAIL, "rename: " + _errno(exc))
            with contextlib.suppress(OSError):
                os.unlink(temp)
            return
        History.end(op, OK)

    def _syscall(self, op: Op, call: Callable[[], Any]) -> None:
        try:
            _timed(op, call)
        except OSError as exc:
            History.end(op, FAIL, _errno(exc))
            return
        History.end(op, OK)

    def op_rm(self) -> None:
        path = random_path(self.rng)
        op = self._begin("rm", path)
        self._syscall(op, lambda: os.unlink(self.root / path))

    def op_rm_rf(self) -> None:
        folder = self.rng.choice(FOLDERS + SPARE_FOLDERS)
        op = self._begin("rm-rf", folder)
        _command(op, ["rm", "-rf", folder], self.root, self.run.env, ok=OK)

    def op_mv(self) -> None:
        source, target = random_path(self.rng), random_path(self.rng)
        op = self._begin("mv", source, target=target)
        self._syscall(op, lambda: os.rename(self.root / source, self.root / target))

    def op_mv_dir(self) -> None:
        source, target = self.rng.sample(FOLDERS + SPARE_FOLDERS, 2)
        op = self._begin("mv", source, target=target)
        self._syscall(op, lambda: os.rename(self.root / source, self.root / target))

    def op_mkdir(self) -> None:
        folder = self.rng.choice(FOLDERS)
        op = self._begin("mkdir", folder)
        self._syscall(op, lambda: os.mkdir(self.root / folder))

    # -- sequences across writers: the races the last round's defects hid in -------------

    def _other(self) -> MountWriter:
        others = [m for m in self.run.mounts if m is not self.mount] or [self.mount]
        return MountWriter(self.run, self.rng.choice(others), self.name, self.rng)

    def op_ping_pong(self) -> None:
        """Append to one file here, then at once on another mount (its view of the row is a
        change-feed event behind: the save's guard fails, the careful save follows)."""
        path = NAMES[0] if self.rng.random() < 0.5 else random_path(self.rng)
        for writer in (self, self._other(), self):
            op = writer._begin("append", path, write=True)
            _write_file(op, writer.root / path, f"{op.marker}\n".encode(), os.O_APPEND)

    def op_rm_then_write(self) -> None:
        """Remove a file here, then at once write it on another mount or by SQL (the removal
        may still be waiting for its transaction)."""
        path = random_path(self.rng)
        self._sql()  # connected before the removal: the write follows it within a millisecond
        op = self._begin("rm", path)
        self._syscall(op, lambda: os.unlink(self.root / path))
        if op.outcome != OK:
            return
        if self.rng.random() < 0.5:
            other = self._other()
            write = other._begin("append", path, write=True)
            _write_file(write, other.root / path, f"{write.marker}\n".encode(), os.O_APPEND)
        else:  # the agent on a connection of its own, ready before the removal returned
            self._sql().step("agent-create", path)

    def op_rm_files_then_write(self) -> None:
        """Remove every file of a folder one by one, then at once append by SQL to the last
        one removed: its removal waits behind the batch the earlier ones went in."""
        folder = self.rng.choice(FOLDERS + SPARE_FOLDERS)
        sql = self._sql()
        try:
            names = sorted(n for n in os.listdir(self.root / folder) if n.endswith(".md"))
        except OSError:
            return
        removed = None
        for name in names:
            op = self._begin("rm", f"{folder}/{name}")
            self._syscall(op, lambda name=name: os.unlink(self.root / folder / name))
            if op.outcome == OK:
                removed = op.path
        if removed is not None:
            sql.step("agent-append", removed)

    def _sql(self) -> Agent:
        if self._agent is None:
            self._agent = Agent(self.run, self.rng)
            self.run.agents.append(self._agent)
        return self._agent

    def op_mv_dir_collide(self) -> None:
        """Two mounts move two folders onto one new name at the same moment."""
        first, second = self.rng.sample(FOLDERS, 2)
        target = self.rng.choice(SPARE_FOLDERS)
        other = self._other()
        start = threading.Barrier(2)

        def move(writer: MountWriter, source: str) -> None:
            op = writer._begin("mv", source, target=target)
            start.wait(timeout=10)
            writer._syscall(op, lambda: os.rename(writer.root / source, writer.root / target))

        racer = threading.Thread(target=move, args=(other, second))
        racer.start()
        move(self, first)
        racer.join(timeout=COMMAND_TIMEOUT)

    def op_tool(self) -> None:
        path = f".obsidian/{self.rng.choice(('workspace.json', 'app.json'))}"
        op = self._begin("tool", path)
        with contextlib.suppress(FileExistsError):
            (self.root / ".obsidian").mkdir(exist_ok=True)
        body = json.dumps({"by": self.name, "n": self.rng.randrange(1 << 30)}).encode()
        _write_file(op, self.root / path, body, os.O_TRUNC)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _version_body(old: bytes) -> str:
    """IronClaw's body of a Reborn version row keeping ``old``."""
    return _json({
        "changed_by": "tenant:reborn-cli:user:default:agent:reborn-cli-agent:project:_none",
        "content": old.decode(), "content_hash": "sha256:" + hashlib.sha256(old).hexdigest(),
    })  # fmt: skip


#: IronClaw's content hash of a legacy document row ``d``.
_HASH = "'sha256:' || encode(sha256(convert_to(d.content, 'UTF8')), 'hex')"


class Agent:
    """IronClaw's agent writing by SQL, as it does on the engine's layout (keeping the
    content each append replaces as a version, as IronClaw v1.0 and v1.3 do)."""

    def __init__(self, run: Run, rng: random.Random) -> None:
        self.run = run
        self.rng = rng
        self.name = "agent"
        self.libsql = run.url.startswith("sqlite:")
        self.conn: Any
        if run.engine.name == "libsql-legacy":
            # IronClaw v1.0's own engine: its vector index is on the file (one SQLite
            # library per process: libSQL's runs in a child, as memfs's does).
            from memfs.db.libsql.engine_process import EngineProcess

            self.conn = EngineProcess(Path(run.url.removeprefix("sqlite:")), foreign_keys=True)
        elif self.libsql:
            self.conn = sqlite3.connect(run.url.removeprefix("sqlite:"), isolation_level=None,
                                        timeout=15.0, check_same_thread=False)  # fmt: skip
        else:
            self.conn = psycopg.connect(run.url, autocommit=True)
        #: One statement at a time on the connection (workers call ``step`` too).
        self._lock = threading.Lock()

    def close(self) -> None:
        self.conn.close()

    def step(self, kind: str | None = None, path: str | None = None) -> None:
        with self._lock:
            self._step(kind, path)

    def _step(self, kind: str | None, path: str | None) -> None:
        if kind is None:
            kind = self.rng.choices(list(AGENT_WEIGHTS), weights=list(AGENT_WEIGHTS.values()))[0]
        if path is None:
            path = random_path(self.rng)
        marker = self.run.marker(self.name) if kind != "agent-delete" else None
        op = self.run.history.begin(self.name, kind, path, marker=marker)
        try:
            if self.run.engine.name == "libsql-legacy":
                done = self._libsql_legacy(kind, path, f"{marker}\n")
            elif self.libsql:
                done = self._libsql(kind, path, f"{marker}\n")
            elif self.run.engine.name == "legacy":
                done = self._legacy(kind, path, f"{marker}\n")
            else:
                done = self._reborn(kind, path, f"{marker}\n")
        except (psycopg.Error, sqlite3.Error) as exc:
            History.end(op, INFO, _errno(exc))
            return
        History.end(op, OK if done else FAIL, "" if done else "no such document")

    def _legacy(self, kind: str, path: str, line: str) -> bool:
        scope = {"user": "default", "agent": self.run.agent_id, "path": path, "line": line}
        where = "user_id = %(user)s AND agent_id IS NOT DISTINCT FROM %(agent)s AND path = %(path)s"
        if kind == "agent-delete":
            cur = self.conn.execute(f"DELETE FROM memory_documents WHERE {where}", scope)
            return cur.rowcount > 0
        # IronClaw's append keeps the content it replaces as a version (maybe_save_version:
        # not an empty one, nor one the newest version already holds), then updates.
        cur = self.conn.execute(
            f"WITH d AS (SELECT id, content FROM memory_documents WHERE {where} FOR UPDATE), "
            "kept AS (INSERT INTO memory_document_versions (document_id, version, content, "
            "  content_hash, changed_by) SELECT d.id, COALESCE((SELECT max(version) FROM "
            "  memory_document_versions v WHERE v.document_id = d.id), 0) + 1, d.content, "
            f"  {_HASH}, %(user)s FROM d WHERE d.content <> '' AND {_HASH} IS DISTINCT FROM "
            "  (SELECT content_hash FROM memory_document_versions v WHERE v.document_id = d.id "
            "   ORDER BY version DESC LIMIT 1)) "
            "UPDATE memory_documents m SET content = m.content || %(line)s FROM d "
            "WHERE m.id = d.id",
            scope,
        )
        if cur.rowcount > 0 or kind == "agent-append":
            return cur.rowcount > 0
        # IronClaw's get-or-create: a new row where none is (the unique index decides).
        cur = self.conn.execute(
            "INSERT INTO memory_documents (user_id, agent_id, path, content) "
            "SELECT %(user)s, %(agent)s, %(path)s, %(line)s "
            f"WHERE NOT EXISTS (SELECT 1 FROM memory_documents WHERE {where}) "
            "ON CONFLICT DO NOTHING",
            scope,
        )
        return cur.rowcount > 0

    def _reborn(self, kind: str, path: str, line: str) -> bool:
        full = f"{reborn_prefix('default')}/{path}"
        if kind == "agent-delete":
            cur = self.conn.execute(
                "DELETE FROM root_filesystem_entries WHERE path = %(p)s OR path = %(p)s || '.meta' "
                "OR left(path, length(%(p)s) + 8) = %(p)s || '.chunks/' "
                "OR left(path, length(%(p)s) + 10) = %(p)s || '.versions/'",
                {"p": full},
            )
            return cur.rowcount > 0
        for _ in range(20):  # IronClaw's compare-and-swap on version, retried on a conflict
            row = self.conn.execute(
                "SELECT contents, version FROM root_filesystem_entries "
                "WHERE path = %s AND kind = 'memory_document'",
                (full,),
            ).fetchone()
            if row is None:
                if kind == "agent-append":
                    return False
                keys = {"agent_id": "reborn-cli-agent", "tenant_id": "reborn-cli",
                        "user_id": "default"}  # fmt: skip
                cur = self.conn.execute(
                    "INSERT INTO root_filesystem_entries (path, contents, kind, content_type, "
                    "indexed, version) VALUES (%s, %s, 'memory_document', 'application/json', "
                    "%s, 1) ON CONFLICT (path) DO NOTHING",
                    (full, line.encode(), Jsonb(keys)),
                )
                if cur.rowcount > 0:
                    return True
                continue
            contents, version = bytes(row[0]), row[1]
            with self.conn.transaction():
                cur = self.conn.execute(
                    "UPDATE root_filesystem_entries SET contents = %s, version = version + 1, "
                    "updated_at = now() WHERE path = %s AND version = %s",
                    (contents + line.encode(), full, version),
                )
                if cur.rowcount > 0:
                    self._reborn_version(full, path, contents)
                    return True
        raise psycopg.errors.SerializationFailure("the row kept changing")

    def _libsql(self, kind: str, path: str, line: str) -> bool:
        """IronClaw's writes to its libSQL file: each its own ``BEGIN IMMEDIATE``
        transaction, the replaced content kept as ``.versions/<n>``."""
        full = f"{reborn_prefix('default')}/{path}"
        now = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            if kind == "agent-delete":
                gone = self.conn.execute(
                    "DELETE FROM root_filesystem_entries WHERE path = :p OR path = :p || '.meta' "
                    "OR (path >= :p || '.chunks/' AND path < :p || '.chunks0') "
                    "OR (path >= :p || '.versions/' AND path < :p || '.versions0')",
                    {"p": full},
                ).rowcount
                self.conn.execute("COMMIT")
                return gone > 0
            row = self.conn.execute(
                "SELECT contents FROM root_filesystem_entries WHERE path = ? "
                "AND kind = 'memory_document'",
                (full,),
            ).fetchone()
            keys = {"agent_id": "reborn-cli-agent", "tenant_id": "reborn-cli",
                    "user_id": "default"}  # fmt: skip
            if row is None:
                if kind == "agent-append":
                    self.conn.execute("COMMIT")
                    return False
                self.conn.execute(
                    "INSERT INTO root_filesystem_entries (path, contents, kind, content_type, "
                    f"indexed, version, updated_at) VALUES (?, ?, 'memory_document', "
                    f"'application/json', ?, 1, {now})",
                    (full, line.encode(), _json(keys)),
                )
                self.conn.execute("COMMIT")
                return True
            old = bytes(row[0])
            self.conn.execute(
                "UPDATE root_filesystem_entries SET contents = ?, version = version + 1, "
                f"updated_at = {now} WHERE path = ? AND kind = 'memory_document'",
                (old + line.encode(), full),
            )
            if old:
                (number,) = self.conn.execute(
                    "SELECT COALESCE(max(CAST(json_extract(indexed, '$.version') AS INTEGER)), "
                    "0) + 1 FROM root_filesystem_entries WHERE path >= ? AND path < ? "
                    "AND kind = 'memory_document_version'",
                    (full + ".versions/", full + ".versions0"),
                ).fetchone()
                self.conn.execute(
                    "INSERT INTO root_filesystem_entries (path, contents, kind, content_type, "
                    f"indexed, version, updated_at) VALUES (?, ?, 'memory_document_version', "
                    f"'application/json', ?, 1, {now})",
                    (f"{full}.versions/{number}", _version_body(old).encode(),
                     _json({**keys, "doc_relative_path": path, "version": number})),
                )  # fmt: skip
            self.conn.execute("COMMIT")
            return True
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")
            raise

    def _libsql_legacy(self, kind: str, path: str, line: str) -> bool:
        """IronClaw v1.0's writes to its legacy libSQL file, on its own engine: get or
        create the row, keep the content it replaces as version MAX+1 (not an empty one,
        nor one the newest version holds), update content and ``updated_at``, replace the
        chunks; a delete takes the chunks, then the row (versions cascade)."""
        now = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            found = self.conn.execute(
                "SELECT id, content FROM memory_documents WHERE user_id = 'default' "
                "AND agent_id IS NULL AND path = ?", (path,)).fetchone()  # fmt: skip
            if found is None and kind != "agent-create":
                self.conn.execute("COMMIT")
                return False
            if kind == "agent-delete":
                self.conn.execute("DELETE FROM memory_chunks WHERE document_id = ?", (found[0],))
                self.conn.execute("DELETE FROM memory_documents WHERE id = ?", (found[0],))
                self.conn.execute("COMMIT")
                return True
            if found is None:
                found = (str(uuid.uuid4()), "")
                create = ("INSERT INTO memory_documents (id, user_id, agent_id, path, content, "
                          "metadata) VALUES (?, 'default', NULL, ?, '', '{}')")  # fmt: skip
                self.conn.execute(create, (found[0], path))
            doc_id, old = found
            digest = "sha256:" + hashlib.sha256(old.encode()).hexdigest()
            newest = self.conn.execute(
                "SELECT content_hash FROM memory_document_versions WHERE document_id = ? "
                "ORDER BY version DESC LIMIT 1", (doc_id,)).fetchone()  # fmt: skip
            if old and (newest is None or newest[0] != digest):
                self.conn.execute(
                    "INSERT INTO memory_document_versions (id, document_id, version, content, "
                    "content_hash, created_at, changed_by) VALUES (?, ?, (SELECT "
                    "COALESCE(max(version), 0) + 1 FROM memory_document_versions WHERE "
                    f"document_id = ?), ?, ?, {now}, 'default')",
                    (str(uuid.uuid4()), doc_id, doc_id, old, digest))  # fmt: skip
            self.conn.execute(f"UPDATE memory_documents SET content = ?, updated_at = {now} "
                              "WHERE id = ?", (old + line, doc_id))  # fmt: skip
            self.conn.execute("DELETE FROM memory_chunks WHERE document_id = ?", (doc_id,))
            for index, chunk in enumerate(chunk_document(old + line)):
                self.conn.execute(
                    "INSERT INTO memory_chunks (id, document_id, chunk_index, content) "
                    "VALUES (?, ?, ?, ?)", (str(uuid.uuid4()), doc_id, index, chunk))  # fmt: skip
            self.conn.execute("COMMIT")
            return True
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")
            raise

    def _reborn_version(self, full: str, path: str, old: bytes) -> None:
        """IronClaw v1.3's write keeps the replaced content as ``.versions/<n>``."""
        if not old:
            return
        (number,) = self.conn.execute(
            "SELECT COALESCE(max((indexed ->> 'version')::int), 0) + 1 FROM "
            "root_filesystem_entries WHERE path >= %(v)s AND path < %(w)s "
            "AND kind = 'memory_document_version'",
            {"v": full + ".versions/", "w": full + ".versions0"},
        ).fetchone()
        keys = {"agent_id": "reborn-cli-agent", "tenant_id": "reborn-cli", "user_id": "default"}
        body = _version_body(old)
        self.conn.execute(
            "INSERT INTO root_filesystem_entries (path, contents, kind, content_type, indexed, "
            "version) VALUES (%s, %s, 'memory_document_version', 'application/json', %s, 1)",
            (f"{full}.versions/{number}", body.encode(),
             Jsonb({**keys, "doc_relative_path": path, "version": number})),
        )  # fmt: skip


class SyncWriter:
    """``memfs sync --once`` of a plain folder: a line appended to a local copy of a
    document (or a local file removed), then one sync pass pushes it.  The write is
    acknowledged when the pass exits 0."""

    def __init__(self, run: Run, rng: random.Random, env: dict[str, str], args: list[str]):
        self.run = run
        self.rng = rng
        self.name = "sync"
        self.env = env
        self.args = args
        self.local = Path(env["HOME"]) / "synced"
        self.local.mkdir(parents=True, exist_ok=True)

    def step(self) -> None:
        path = random_path(self.rng)
        target = self.local / path
        if self.rng.random() < 0.15 and target.exists():
            op = self.run.history.begin(self.name, "rm", path)
            target.unlink()
        else:
            op = self.run.history.begin(self.name, "append", path, marker=self.run.marker("sync"))
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "a", encoding="utf-8") as local:
                local.write(f"{op.marker}\n")
        cmd = [sys.executable, "-m", "memfs", "sync", *self.args, "--once", "--json",
               str(self.local)]  # fmt: skip
        _command(op, cmd, self.local, self.env, ok=OK)
        if op.outcome != OK and op.kind == "rm":
            op.outcome = INFO  # the pass may have made the removal before it failed


def _loop(
    worker: MountWriter | Agent | SyncWriter | SharedLogWriter, count: int, pause: float,
    failures: list[str],
    until: float | None = None,
    gate: Gate | None = None,
) -> None:  # fmt: skip
    try:
        for _ in range(count):
            if until is not None and time.monotonic() > until:
                return
            if gate is None:
                worker.step()
            else:
                with gate.op():
                    worker.step()
            if pause:
                time.sleep(worker.rng.uniform(0, pause))
    except BaseException as exc:  # a driver bug must fail the run, not vanish in a thread
        failures.append(f"{worker.name}: {type(exc).__name__}: {exc}")


#: The soak's shared file (``drive(shared_log=True)``): only ever appended to, by every
#: mount and the agent, through appends, ``>>`` and the savers that read and rewrite it:
#: issue 32's "one document holding every line" instead of hundreds of versions.
SHARED = "shared.md"
SHARED_SAVERS = ("vim backupcopy=yes", "vim backupcopy=no", "sed -i", "os.replace",
                 "write-file-atomic", "emacs")  # fmt: skip


class SharedLogWriter:
    """Appends to ``SHARED`` through a random mount, or by SQL as the agent."""

    def __init__(self, run: Run, rng: random.Random) -> None:
        self.rng = rng
        self.name = "shared"
        self.writers = [MountWriter(run, m, f"s{n}", random.Random(rng.randrange(1 << 30)))
                        for n, m in enumerate(run.mounts)]  # fmt: skip
        self.agent = Agent(run, random.Random(rng.randrange(1 << 30)))
        run.agents.append(self.agent)

    def step(self) -> None:
        pick = self.rng.random()
        if pick < 0.2:
            self.agent.step("agent-create", SHARED)  # appends, or makes it
            return
        writer = self.rng.choice(self.writers)
        if pick < 0.55:
            writer.op_append(SHARED)
        elif pick < 0.7:
            writer.op_shell_append(SHARED)
        else:
            writer.op_save(SHARED, self.rng.choice(SHARED_SAVERS))


#: The race (issue 54): one document the agent appends to by SQL every ``RACE_PERIOD``
#: seconds (on average) while the first mount saves it with every saver kind in turn, each
#: adding a line.  Every change only appends, so every acknowledged line must be live
#: (``check.race_live``).
RACE = "race.md"
RACE_PERIOD = 0.02


class RaceWriter:
    """Every saver kind in turn on ``RACE``, on the first mount."""

    def __init__(self, run: Run, rng: random.Random) -> None:
        self.rng = rng
        self.name = "race"
        self.writer = MountWriter(run, run.mounts[0], "race", rng)
        self.kinds = list(SAVERS)
        self.rng.shuffle(self.kinds)
        self.done = 0

    def step(self) -> None:
        self.writer.op_save(RACE, self.kinds[self.done % len(self.kinds)])
        self.done += 1


def _race_agent(agent: Agent, stop: threading.Event, failures: list[str]) -> None:
    """The agent's appends to ``RACE``, every ``RACE_PERIOD`` on average, until ``stop``."""
    try:
        while not stop.wait(agent.rng.uniform(RACE_PERIOD / 2, RACE_PERIOD * 1.5)):
            agent.step("agent-append", RACE)
    except BaseException as exc:
        failures.append(f"race agent: {type(exc).__name__}: {exc}")


def drive(
    run: Run, *, workers_per_mount: int, operations: int, agent_operations: int,
    seconds: float | None = None, deadline: float | None = None, shared_log: bool = False,
    snapshots: int = 0, snapshot_folder: Path | None = None, race: int = 0,
) -> None:  # fmt: skip
    """Run every writer for its share of ``operations`` (all at once; with ``seconds``,
    until that much time has passed if sooner), then wait."""
    until = None if seconds is None else time.monotonic() + seconds
    rng = random.Random(run.seed)
    for mount in run.mounts:
        for folder in FOLDERS[:2]:
            with contextlib.suppress(FileExistsError):
                (mount.path() / folder).mkdir()
    workers: list[MountWriter | Agent | SyncWriter] = [
        MountWriter(run, mount, f"m{m}w{w}", random.Random(rng.randrange(1 << 30)))
        for m, mount in enumerate(run.mounts)
        for w in range(workers_per_mount)
    ]
    agent = run.agent = Agent(run, random.Random(rng.randrange(1 << 30)))
    mount = run.mounts[0]
    sync_args = ["--database-url", run.url, "--user-id", mount.user_id, *mount.extra_args]
    sync = SyncWriter(run, random.Random(rng.randrange(1 << 30)), mount.env | run.env |
                      {"HOME": run.env["HOME"]}, sync_args)  # fmt: skip
    share = max(1, operations // len(workers)) if operations else 0  # 0: the race alone
    failures: list[str] = []
    gate = Gate()
    threads = [
        threading.Thread(target=_loop, args=(w, share, 0.0, failures, until, gate)) for w in workers
    ]
    threads.append(threading.Thread(
        target=_loop, args=(agent, agent_operations, 0.04, failures, until, gate)
    ))  # fmt: skip
    passes = max(1, operations // 30) if operations else 0  # a pass per 30 operations
    threads.append(threading.Thread(target=_loop, args=(sync, passes, 0.2, failures, until, gate)))
    if shared_log:
        shared = SharedLogWriter(run, random.Random(rng.randrange(1 << 30)))
        threads.append(
            threading.Thread(target=_loop, args=(shared, share, 0.0, failures, until, gate))
        )
    race_stop = threading.Event()
    race_agent = None
    if race:  # ``race`` saves of RACE, the agent appending to it meanwhile
        (run.mounts[0].path() / RACE).write_text("# race\n")
        run.history.seed_lines.add("# race")
        racer = RaceWriter(run, random.Random(rng.randrange(1 << 30)))
        race_agent = Agent(run, random.Random(rng.randrange(1 << 30)))
        race_agent.name = "race-agent"
        run.agents.append(race_agent)
        threads.append(threading.Thread(target=_loop, args=(racer, race, 0.0, failures, until)))
        threads.append(threading.Thread(target=_race_agent, args=(race_agent, race_stop, failures)))
    snapshotter = None
    if snapshots and snapshot_folder is not None:
        snapshotter = run.snapshotter = Snapshotter(
            run, gate, snapshots, share * len(workers), snapshot_folder,
            random.Random(rng.randrange(1 << 30)), lambda: _final_rows(run, {}).documents,
        )  # fmt: skip
        taker = threading.Thread(target=snapshotter.loop)
    try:
        for thread in threads:
            thread.start()
        if snapshotter is not None:
            taker.start()
        if deadline is None:  # a whole run's writers end by then, or a syscall hangs
            deadline = 120 + 2.0 * share if seconds is None else seconds + 120
        ends = time.monotonic() + deadline
        for thread in threads:
            if race_agent is not None and thread is threads[-1]:
                race_stop.set()  # the race's saves are done: its agent stops
            thread.join(timeout=max(0.0, ends - time.monotonic()))
        if snapshotter is not None:  # its last moment may never come (a writer ended early)
            snapshotter.stop.set()
            taker.join(timeout=PAUSE_TIMEOUT + 150)
            failures.extend(snapshotter.failures)
        stuck = [t for t in threads if t.is_alive()]
        if stuck:  # a syscall that never returns: a violation, and the run must still end
            hung = [str(m.mountpoint) for m in run.mounts if abort_fuse_connection(m.mountpoint)]
            for thread in stuck:
                thread.join(timeout=COMMAND_TIMEOUT)
            failures.append(
                f"hang: {len(stuck)} writer(s) did not finish by the deadline; "
                f"FUSE connections aborted to end them: {', '.join(hung) or 'none'}"
            )
    finally:
        for sql in [agent, *run.agents]:
            sql.close()
    assert not failures, failures


def abort_fuse_connection(mountpoint: Path) -> bool:
    """Abort a FUSE mount's connection (fusectl), so syscalls stuck waiting on its daemon
    return (ENOTCONN) and their processes can end: the way out of a hang, found by the
    device number in mountinfo (a stat of the mount would hang too)."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4] == str(mountpoint):
            minor = fields[2].split(":")[1]
            break
    else:
        return False
    connections = Path("/sys/fs/fuse/connections")
    if not (connections / minor).is_dir():  # fusectl not mounted yet
        subprocess.run(["mount", "-t", "fusectl", "none", str(connections)],
                       capture_output=True, timeout=10, check=False)  # fmt: skip
    try:
        (connections / minor / "abort").write_text("1")
    except OSError:
        return False
    return True


def settle_and_unmount(run: Run) -> dict[str, str]:
    """Send every mount's waiting changes, unmount them all; what went wrong with a daemon."""
    problems: dict[str, str] = {}
    for mount in run.mounts:
        if mount.proc is not None and mount.proc.poll() is not None:
            problems[str(mount.mountpoint)] = f"daemon exited {mount.proc.returncode} in the run"
            continue
        with contextlib.suppress(OSError):
            mount.barrier()
    for mount in run.mounts:
        if str(mount.mountpoint) in problems:
            continue
        try:
            code = mount.umount()
        except (subprocess.SubprocessError, AssertionError) as exc:
            problems[str(mount.mountpoint)] = f"umount failed: {exc}"
            continue
        if code != 0:
            problems[str(mount.mountpoint)] = f"the daemon exited {code} at umount"
    return problems


def final_state(run: Run, daemon_problems: dict[str, str]) -> FinalState:
    """Read back every document, version row, duplicate and kept copy of a save."""
    state = _final_rows(run, daemon_problems)
    state.saver_copies = _saver_copies(run)
    return state


def _saver_copies(run: Run) -> list[tuple[str, str]]:
    """The safety net's copies of saves as written (memfs's own storage, issue 54)."""
    if run.url.startswith("sqlite:"):
        kept = Path(run.url.removeprefix("sqlite:") + ".memfs-deleted")
        if not kept.exists():
            return []
        with contextlib.closing(sqlite3.connect(f"file:{kept}?mode=ro", uri=True)) as conn:
            try:
                rows = conn.execute("SELECT path, content FROM saver_copies").fetchall()
            except sqlite3.OperationalError:  # no copy was ever kept
                return []
        return [(path, bytes(data).decode("utf-8", "replace")) for path, data in rows]
    with psycopg.connect(run.url, autocommit=True) as conn:
        rows = conn.execute("SELECT path, content FROM memfs.saver_copies").fetchall()
    return [(path, bytes(data).decode("utf-8", "replace")) for path, data in rows]


def _final_rows(run: Run, daemon_problems: dict[str, str]) -> FinalState:
    if run.url.startswith("sqlite:"):
        return _libsql_state(run, daemon_problems)
    with psycopg.connect(run.url, autocommit=True) as conn:
        if run.engine.name == "legacy":
            scope = {"user": "default", "agent": run.agent_id}
            where = "d.user_id = %(user)s AND d.agent_id IS NOT DISTINCT FROM %(agent)s"
            rows = conn.execute(f"SELECT d.path, d.content FROM memory_documents d WHERE {where}",
                                scope).fetchall()  # fmt: skip
            documents = {path: content for path, content in rows}
            versions = conn.execute(
                "SELECT d.path, v.content FROM memory_document_versions v "
                f"JOIN memory_documents d ON d.id = v.document_id WHERE {where}",
                scope,
            ).fetchall()
            duplicates = [
                r[0]
                for r in conn.execute(
                    f"SELECT d.path FROM memory_documents d WHERE {where} "
                    "GROUP BY d.path HAVING count(*) > 1",
                    scope,
                )
            ]
            return FinalState(documents, [(p, c) for p, c in versions], duplicates, daemon_problems)
        prefix = reborn_prefix("default")
        documents = run.engine.contents(conn)
        found = []
        for path, body in conn.execute(
            "SELECT path, contents FROM root_filesystem_entries "
            "WHERE kind = 'memory_document_version' AND left(path, length(%s)) = %s",
            (prefix + "/", prefix + "/"),
        ):
            owner = path.removeprefix(prefix + "/").rpartition(".versions/")[0]
            found.append((owner, json.loads(bytes(body))["content"]))
        return FinalState(documents, found, [], daemon_problems)


def _libsql_state(run: Run, daemon_problems: dict[str, str]) -> FinalState:
    if run.engine.name == "libsql-legacy":
        return _libsql_legacy_state(run, daemon_problems)
    prefix = reborn_prefix("default") + "/"
    db = sqlite3.connect(run.url.removeprefix("sqlite:"))
    try:
        rows = db.execute(
            "SELECT path, kind, contents FROM root_filesystem_entries WHERE path >= ? "
            "AND path < ? AND kind IN ('memory_document', 'memory_document_version')",
            (prefix, prefix[:-1] + "0"),
        ).fetchall()
    finally:
        db.close()
    documents, versions = {}, []
    for path, kind, body in rows:
        relative = path[len(prefix) :]
        if kind == "memory_document":
            documents[relative] = bytes(body).decode("utf-8", errors="replace")
        else:
            owner = relative.rpartition(".versions/")[0]
            versions.append((owner, json.loads(bytes(body))["content"]))
    return FinalState(documents, versions, [], daemon_problems)


def _libsql_legacy_state(run: Run, daemon_problems: dict[str, str]) -> FinalState:
    db = sqlite3.connect(run.url.removeprefix("sqlite:"))
    try:
        documents = dict(db.execute(
            "SELECT path, content FROM memory_documents WHERE user_id = 'default' "
            "AND agent_id IS NULL").fetchall())  # fmt: skip
        versions = db.execute(
            "SELECT d.path, v.content FROM memory_document_versions v JOIN memory_documents d "
            "ON d.id = v.document_id WHERE d.user_id = 'default' AND d.agent_id IS NULL"
        ).fetchall()
        duplicates = [r[0] for r in db.execute(
            "SELECT path FROM memory_documents WHERE user_id = 'default' AND agent_id IS NULL "
            "GROUP BY path HAVING count(*) > 1")]  # fmt: skip
    finally:
        db.close()
    return FinalState(documents, [(p, c) for p, c in versions], duplicates, daemon_problems)


__all__ = ["Agent", "MountWriter", "Run", "drive", "final_state", "settle_and_unmount"]
