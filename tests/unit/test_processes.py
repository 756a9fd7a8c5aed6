"""``process_of``: FUSE names the calling thread; a save's base is kept per process."""

from __future__ import annotations

import os
import threading

from memfs.processes import RecentProcesses, process_of


def test_a_threads_id_names_its_process() -> None:
    seen: list[int] = []
    worker = threading.Thread(target=lambda: seen.append(threading.get_native_id()))
    worker.start()
    worker.join(timeout=10)
    assert seen and seen[0] != os.getpid()  # a thread of its own
    assert process_of(seen[0]) in (os.getpid(), seen[0])  # gone once joined: itself
    assert process_of(threading.get_native_id()) == os.getpid()


def test_a_live_thread_of_another_thread_maps_to_this_process() -> None:
    ready, done = threading.Event(), threading.Event()
    found: list[int] = []

    def run() -> None:
        found.append(threading.get_native_id())
        ready.set()
        done.wait(timeout=10)

    worker = threading.Thread(target=run)
    worker.start()
    try:
        assert ready.wait(timeout=10)
        assert found[0] != os.getpid()
        assert process_of(found[0]) == os.getpid()
    finally:
        done.set()
        worker.join(timeout=10)


def test_an_unknown_thread_is_itself() -> None:
    assert process_of(0) == 0
    assert process_of(2**22 + 12345) == 2**22 + 12345  # above any pid_max: no such thread


def test_a_threads_process_is_asked_of_proc_once_a_second() -> None:
    """``RecentProcesses``: a warm ``grep -r`` opens 100,000 files from one thread; its
    process is read from ``/proc`` once a second, not at every open."""
    asked: list[int] = []
    now = [100.0]

    def lookup(thread: int) -> int:
        asked.append(thread)
        return process_of(thread)

    recent = RecentProcesses(lookup, clock=lambda: now[0])
    assert recent(os.getpid()) == os.getpid()
    assert recent(os.getpid()) == os.getpid()
    assert asked == [os.getpid()]
    now[0] += RecentProcesses.TTL  # a second on: asked again (a thread id may be reused)
    assert recent(os.getpid()) == os.getpid()
    assert asked == [os.getpid(), os.getpid()]
    for tid in range(1, RecentProcesses.LIMIT + 10):  # bounded: the oldest half goes
        recent(10_000_000 + tid)
    assert len(recent._known) <= RecentProcesses.LIMIT
