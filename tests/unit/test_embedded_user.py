"""The system user the embedded PostgreSQL runs as, made once by processes starting together.

CI on a fresh machine: three test workers started their embedded servers at once, and
pgserver's unlocked ``useradd`` ran three times; two "succeeded" with different uids, one
entry overwrote the other, and a worker's ``initdb`` ran as a uid that no longer existed
(1,666 tests errored).  With pgserver's own step in place of ``ensure_system_user``, the
race below ends with a process holding a vanished uid (or a failed ``useradd``) in 20 of
20 rounds (four processes started by hand, without the barrier: 1 round in 5).
"""

from __future__ import annotations

import multiprocessing
import os
import pwd
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from memfs.db.embedded import ensure_system_user

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creates system users: root only")

PROCESSES = 6
ROUNDS = 10


def _contend(make: Callable[[str], int | None], name: str, gate: object, answers: object) -> None:
    """One process: wait for the others at ``gate``, then make sure of ``name``."""
    gate.wait(timeout=30)  # type: ignore[attr-defined]
    try:
        answers.put(("uid", make(name)))  # type: ignore[attr-defined]
    except Exception as exc:
        answers.put(("error", f"{type(exc).__name__}: {exc}"))  # type: ignore[attr-defined]


def _race(make: Callable[[str], int | None], name: str) -> list[tuple[str, object]]:
    """What each of ``PROCESSES`` processes released at once by a barrier was answered."""
    context = multiprocessing.get_context("fork")
    gate = context.Barrier(PROCESSES)
    answers = context.Queue()
    workers = [
        context.Process(target=_contend, args=(make, name, gate, answers)) for _ in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    got = [answers.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    return got


def test_processes_starting_together_all_run_as_one_user_that_exists(tmp_path: Path) -> None:
    lock = tmp_path / "system-user.lock"
    for _ in range(ROUNDS):
        name = f"memfs-u{uuid.uuid4().hex[:8]}"
        try:
            got = _race(lambda n: ensure_system_user(n, lock=lock, timeout=30), name)
            entries = [line for line in Path("/etc/passwd").read_text().splitlines()
                       if line.startswith(f"{name}:")]  # fmt: skip
            assert len(entries) == 1, entries
            uid = pwd.getpwnam(name).pw_uid
            assert got == [("uid", uid)] * PROCESSES, (name, uid, got)
        finally:
            subprocess.run(["userdel", name], check=False, capture_output=True, timeout=30)


def test_a_lock_held_elsewhere_is_one_clear_error_after_the_timeout(tmp_path: Path) -> None:
    import fasteners

    from memfs.errors import DatabaseError

    lock = tmp_path / "system-user.lock"
    held = multiprocessing.get_context("fork")
    ready, done = held.Event(), held.Event()

    def hold() -> None:
        with fasteners.InterProcessLock(lock):
            ready.set()
            done.wait(timeout=30)

    holder = held.Process(target=hold)
    holder.start()
    try:
        assert ready.wait(timeout=30)
        with pytest.raises(DatabaseError, match="stayed locked"):
            ensure_system_user("memfs-never-made", lock=lock, timeout=0.5)
        with pytest.raises(KeyError):
            pwd.getpwnam("memfs-never-made")
    finally:
        done.set()
        holder.join(timeout=30)
