"""Mount lifecycle: start, serve, shut down cleanly, and find a running mount to stop.

``serve`` runs in the foreground; ``mount_background`` forks first (before any thread or
database connection exists), lets the child mount, and returns once the mount is live or
has failed, so ``memfs mount`` behaves like ``mount``.  SIGTERM, SIGINT and ``memfs
umount`` all end the same way: stop serving, commit every dirty file, unmount.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyfuse3
import trio

from memfs import logs, systemd
from memfs.assembly import MountParts, Opened, assemble
from memfs.auto_unmount import init_helper_first
from memfs.config import Settings, default_log_dir
from memfs.control import Handler, ask, serve_control, socket_for
from memfs.db import reborn_scope
from memfs.errors import EXIT_FAILED, MountError
from memfs.failures import describe_failure
from memfs.fuse_ops import MemfsOperations, fsname_for, mount_options
from memfs.kernel import FuseNotifier
from memfs.memory import map_large_buffers
from memfs.mountpoint import (
    is_mounted,
    mount_at,
    pidfile_for,
    resolved_mountpoint,
    stopped_daemon,
)
from memfs.private import private_dir, write_private
from memfs.processes import process_running, process_stopped
from memfs.recovery import RecoveryArea
from memfs.serving import (
    choose_watching,
    end_workspace,
    open_served,
    run_workspace_tasks,
    start_listener,
)
from memfs.stats import MountStats
from memfs.vfs import Filesystem

log = logging.getLogger(__name__)


#: The signals that end a mount cleanly (commit, then unmount).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


async def _handle_signals(signals: AsyncIterator[int]) -> None:
    """End the FUSE loop on the first stop signal.  The receiver is opened before the mount
    appears and stays open until it is gone, so a Ctrl-C at any moment in between (even
    before this task first runs, or during the final commit) unmounts cleanly instead of
    raising KeyboardInterrupt into the middle of start-up or shutdown."""
    async for signum in signals:
        log.info("received %s: committing and unmounting", signal.Signals(signum).name)
        systemd.notify("STOPPING=1")
        pyfuse3.terminate()
        return


#: Kernel entry/attribute cache lifetime.  Every change the mount hears of, from its change
#: feed or from a poll, drops what the kernel holds of it at once (``memfs.vfs.coherence``),
#: so a long lifetime shows nothing stale; a short one only sent the kernel back to the
#: daemon for what it already knew (a lookup per name a second after each walk: 2.6
#: requests per file for a warm ``grep -r`` instead of 1; at 100,000 documents, where one
#: walk takes longer than a minute, 60 s still cost 0.45 lookups per file).
ATTR_TIMEOUT = 3600.0


def serve(
    settings: Settings, mountpoint: Path, on_ready: Callable[[int, str], None] | None = None
) -> int:
    """Mount and serve until unmounted or signalled; return a process exit code."""
    map_large_buffers()
    opened = open_served(settings)
    pidfile = pidfile_for(settings.runtime_dir, mountpoint)
    with contextlib.suppress(FileNotFoundError):
        result_file(pidfile).unlink()  # an earlier run's report nobody collected
    try:
        recovery = RecoveryArea(settings.recovery_dir)
        _offer_recovery(recovery)
        mount = _Mount(settings, mountpoint, opened, recovery, on_ready)
        code = trio.run(mount.run)
        if mount.kept:
            _report_unsaved(pidfile, recovery, mount.kept)
        return code
    finally:
        with contextlib.suppress(FileNotFoundError):
            pidfile.unlink()
        shutil.rmtree(settings.runtime_dir / f"scratch-{os.getpid()}", ignore_errors=True)
        opened.database.close()


class _Mount:
    """One FUSE mount's run: the workspace assembled (``memfs.serving``), the kernel's
    mount, its control socket and its shutdown.  Built outside the trio run; ``run``
    is the run."""

    def __init__(
        self,
        settings: Settings,
        mountpoint: Path,
        opened: Opened,
        recovery: RecoveryArea,
        on_ready: Callable[[int, str], None] | None,
    ) -> None:
        self.settings = settings
        self.mountpoint = mountpoint
        self.opened = opened
        self.recovery = recovery
        self.on_ready = on_ready
        #: Where ``memfs status``, ``umount`` and the helper find this mount.
        self.pidfile = pidfile_for(settings.runtime_dir, mountpoint)
        self.control_path = socket_for(self.pidfile)
        self.watching = choose_watching(settings, opened.database)
        self.notifier = FuseNotifier()
        #: The files the shutdown could not save (kept in the recovery area).
        self.kept: list[str] = []

    async def run(self) -> int:
        settings = self.settings
        parts = assemble(
            settings, self.opened, kernel=self.notifier, recovery=self.recovery,
            watching=self.watching.description,
        )  # fmt: skip
        if parts.embedder is None:
            log.info("no embedding provider (EMBEDDING_ENABLED is off): search is full-text")
        log.debug("this mount's transactions are tagged memfs.origin=%s", parts.store.origin)
        listener, receive = await start_listener(self.opened.database, self.watching, parts)
        await parts.fs.load()
        _return_freed_memory()
        attr_timeout = ATTR_TIMEOUT if settings.attr_timeout is None else settings.attr_timeout
        ops = MemfsOperations(parts.fs, attr_timeout=attr_timeout, stats=parts.stats)
        if settings.metrics is not None:
            _serve_metrics(parts.stats, *settings.metrics)
        control = _Control(parts, self.recovery)
        with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
            self._mount(ops, len(parts.fs.state.tree.docs))
            unmounted = False
            self.notifier.start()
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_handle_signals, signals)
                    await nursery.start(serve_control, self.control_path, control.answer)
                    await run_workspace_tasks(nursery, self.opened, parts, listener, receive)
                    await pyfuse3.main()
                    nursery.cancel_scope.cancel()
            finally:
                self.kept.extend(await end_workspace(parts, listener))
                pyfuse3.close(unmount=True)
                self.notifier.stop()
                unmounted = True
                log.info("unmounted %s", self.mountpoint)
                await _linger_while_unkept(parts.fs, self.control_path, control.answer)
            return 1 if self.kept or parts.fs.unkept() or not unmounted else 0

    def _mount(self, ops: MemfsOperations, documents: int) -> None:
        """Mount in the kernel, write the pid file, and say the mount is ready."""
        settings = self.settings
        options = mount_options(
            fsname_for(settings.user_id),
            allow_other=settings.allow_other,
            debug=settings.debug_fuse,
            read_only=settings.read_only,
            extra=settings.fuse_options,
        )
        init_helper_first(lambda: pyfuse3.init(ops, str(self.mountpoint), options))
        write_private(
            self.pidfile,
            f"{os.getpid()}\n{self.mountpoint}\n{settings.database_identity()}\n"
            f"{settings.user_id}\n{logs.current_log_file()}\n".encode(),
        )
        database = self.opened.database
        owner = reborn_scope(settings).user_id if database.reborn else settings.user_id
        log.info("mounted workspace %r at %s", owner, self.mountpoint)
        if self.on_ready is not None:
            self.on_ready(documents, owner)
        systemd.notify(f"READY=1\nSTATUS=memory of {owner!r} at {self.mountpoint}")


class _Control:
    """``memfs.control``'s requests, answered from one mount's state."""

    def __init__(self, parts: MountParts, recovery: RecoveryArea) -> None:
        self.parts = parts
        self.recovery = recovery

    async def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        fs, op = self.parts.fs, request["op"]
        if op == "prepare-unmount":
            await fs.commit_all()
            return {"kept": self.recovery.kept(), "unkept": fs.unkept()}
        if op == "status":
            return {"kept": self.recovery.kept(), "unkept": fs.unkept()}
        if op == "stats":
            return {"stats": self.parts.stats.snapshot()}
        if op == "report":  # what .status shows
            return {"report": await self.parts.status.report(fs)}
        if op == "drain":
            written, failed = fs.drain(Path(str(request["to"])))
            return {"written": written, "failed": failed, "unkept": fs.unkept()}
        if op == "force-unmount":
            log.warning("unmount forced with %d file(s) in memory only: %s",
                        len(fs.unkept()), ", ".join(fs.unkept()))  # fmt: skip
            pyfuse3.terminate()
            return {"unkept": fs.unkept()}
        return {"error": f"unknown request {op!r}"}


def _serve_metrics(stats: MountStats, host: str, port: int) -> None:
    """``--metrics``: Prometheus's endpoint; one that cannot listen is logged, never the
    end of the mount (``memfs stats`` still reads the same statistics)."""
    try:
        stats.serve(host, port)
    except OSError as exc:
        log.error("no metrics endpoint at %s:%d (%s); `memfs stats` still works",
                  host, port, exc.strerror or exc)  # fmt: skip
        return
    log.info("serving statistics for Prometheus at http://%s:%d/metrics", host, port)


#: How often a detached daemon holding unsaved files tries the database and the recovery
#: area again.
LINGER_RETRY_SECONDS = 5.0


async def _linger_while_unkept(
    fs: Filesystem,
    control_path: Path,
    control: Handler,
) -> None:
    """Detached, with files in memory only (the database and the recovery area refused
    them): stay alive, answering the control socket (``memfs recover --to`` drains them),
    and try again every few seconds, until each is saved or kept somewhere."""
    if not fs.unkept():
        return
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_control, control_path, control)
        while fs.unkept():
            log.error(
                "detached with %d file(s) in memory only: %s; this daemon (pid %d) keeps "
                "them until the database or the recovery area takes them, or "
                "`memfs recover --to DIR` writes them to a folder",
                len(fs.unkept()), ", ".join(fs.unkept()), os.getpid(),
            )  # fmt: skip
            await trio.sleep(LINGER_RETRY_SECONDS)
            await fs.commit_all()
        nursery.cancel_scope.cancel()
    log.info("every unsaved file is saved or kept now: exiting")


def result_file(pidfile: Path) -> Path:
    """Where a daemon leaves what it could not save, for ``memfs umount`` to report."""
    return pidfile.with_suffix(".result")


def _offer_recovery(recovery: RecoveryArea) -> None:
    pending = recovery.pending()
    if pending:
        log.warning(
            "%d unsaved file(s) from an earlier mount are kept in %s (%s): `memfs recover` "
            "lists them, `memfs recover --restore` saves them",
            len(pending),
            recovery.root,
            ", ".join(sorted({item.path for item in pending})[:10]),
        )


def _report_unsaved(pidfile: Path, recovery: RecoveryArea, kept: list[str]) -> None:
    where = recovery.run_dir
    log.error(
        "could not save %d file(s) at unmount: %s; their content is kept in %s "
        "(`memfs recover --restore` saves it once the database takes it)",
        len(kept),
        ", ".join(kept),
        where,
    )
    payload = {"unsaved": kept, "recovery": str(where)}
    with contextlib.suppress(OSError):
        write_private(result_file(pidfile), json.dumps(payload).encode())


@dataclass(frozen=True)
class MountOutcome:
    """What the daemon told ``memfs mount`` through the readiness pipe."""

    error: str | None = None
    exit_code: int = 0
    #: Documents in the workspace when it went live (for the empty-workspace hint).
    documents: int | None = None
    #: Whose memory it is, as the layout names it (Reborn's default user: ``reborn-cli``).
    user: str | None = None


class _ReadinessPipe(logging.Handler):
    """The daemon's end of the readiness pipe: until the answer, a log record marked
    ``tell_user`` (a lock memfs waits for) also goes to the user's terminal as a note."""

    def __init__(self, fd: int) -> None:
        super().__init__(logging.INFO)
        self._fd = fd
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "tell_user", False):
            self._send({"note": record.getMessage()}, last=False)

    def answer(self, payload: dict[str, object]) -> None:
        self._send(payload, last=True)

    def _send(self, payload: dict[str, object], *, last: bool) -> None:
        with self._guard:
            if self._fd < 0:
                return
            with contextlib.suppress(OSError):
                os.write(self._fd, json.dumps(payload).encode() + b"\n")
            if last:
                os.close(self._fd)
                self._fd = -1


def mount_background(
    settings: Settings,
    mountpoint: Path,
    log_file: Path,
    level: str = "info",
    note: Callable[[str], None] = lambda line: None,
) -> MountOutcome:
    """Fork a daemon that mounts; return once the mount is live or has failed.

    The daemon answers through a pipe with JSON lines: ``{"note": line}`` for what the
    user should know while it starts (``note`` gets them: a lock it waits for), then one
    ``{"documents": n}`` when live or ``{"error": line, "exit_code": n}`` when it failed,
    so the user sees the cause in one line (the log keeps the details).  It detaches
    from the terminal and the launch directory (cwd ``/``), so it holds no directory busy.
    """

    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the daemon
        os.close(read_fd)
        os.setsid()
        os.chdir("/")
        private_dir(log_file.parent, narrow=log_file.parent == default_log_dir())
        fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.fchmod(fd, 0o600)  # a log an older memfs made 0644
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(fd, 1)  # stray output from libraries lands in the log too
        os.dup2(fd, 2)
        os.close(fd)
        os.close(devnull)
        logs.configure(level, file=log_file)
        pipe = _ReadinessPipe(write_fd)
        logging.getLogger().addHandler(pipe)
        code = EXIT_FAILED
        try:
            code = serve(
                settings, mountpoint,
                on_ready=lambda n, owner: pipe.answer({"documents": n, "user": owner}),
            )  # fmt: skip
        except BaseException as exc:
            code, line = describe_failure(exc)
            log.error("mount failed: %s", line)
            log.debug("details", exc_info=True)
            pipe.answer({"error": line, "exit_code": code})
        finally:
            pipe.answer({"error": "the daemon ended before the mount was live", "exit_code": code})
            logging.shutdown()
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as replies:
        while True:
            payload = _reply(replies.readline())
            if payload is None or "note" not in payload:
                break
            note(str(payload["note"]))
    if payload is None:
        os.waitpid(pid, 0)
        return MountOutcome("the daemon died before the mount was live", EXIT_FAILED)
    if "error" in payload:
        os.waitpid(pid, 0)
        return MountOutcome(str(payload["error"]), int(payload.get("exit_code", EXIT_FAILED)))
    return MountOutcome(documents=payload.get("documents"), user=payload.get("user"))


def _reply(line: bytes) -> dict[str, Any] | None:
    try:
        payload = json.loads(line)
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


def _in_memory_only(pidfile: Path, op: str, timeout: float) -> list[str] | None:
    """Ask the daemon (``op``: prepare-unmount, status, force-unmount) which files it
    holds in memory only; None if it does not answer (an older daemon, or gone)."""
    try:
        reply = ask(socket_for(pidfile), {"op": op}, timeout)
    except (OSError, ValueError):
        return None
    unkept = reply.get("unkept") if reply else None
    return [str(p) for p in unkept] if isinstance(unkept, list) else None


def unmount(
    settings: Settings,
    mountpoint: Path,
    timeout: float = 60.0,
    *,
    force: bool = False,
    lazy: bool = False,
) -> int:
    """Ask the daemon serving ``mountpoint`` to commit and unmount; wait for it.

    First the daemon saves what it can and says which files it would hold in memory only
    (neither the database nor the recovery area took them): then nothing is detached and
    the answer is 1, naming them, unless ``force``.  A stopped daemon (SIGSTOP) answers
    nothing: said at once, and with ``force`` or ``lazy`` the mount is detached."""
    deadline = time.monotonic() + timeout  # the whole command's, from its first step
    mountpoint = resolved_mountpoint(mountpoint)
    pidfile = pidfile_for(settings.runtime_dir, mountpoint)
    pid = _daemon_pid(pidfile)
    if pid is not None and process_stopped(pid):
        return _detach_stopped(pid, mountpoint, timeout, detach=force or lazy)
    if pid is not None:
        unkept = _in_memory_only(pidfile, "force-unmount" if force else "prepare-unmount",
                                 max(0.5, deadline - time.monotonic()))  # fmt: skip
        if unkept and not force:
            sys.stderr.write(
                f"memfs: not unmounted: {len(unkept)} file(s) are in the daemon's memory "
                f"only (neither the database nor the recovery area took them): "
                f"{', '.join(unkept)}; `memfs recover --to DIR` writes them to a folder, "
                "`memfs umount --force` unmounts and keeps the daemon alive until they are "
                "saved or kept\n"
            )
            return 1
        try:
            if not (force and unkept is not None):  # a forced unmount has begun already
                os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pid = None
    if pid is None:
        return _unmount_orphan(mountpoint, timeout)
    stopped = _wait_for_stop(pid, pidfile, mountpoint, deadline, timeout)
    if stopped is not None:
        return stopped
    code = _report_result(pidfile)
    if is_mounted(mountpoint):
        sys.stderr.write(f"memfs: {mountpoint} is still mounted\n")
        return 1
    return code


def _daemon_pid(pidfile: Path) -> int | None:
    """The pid of the running daemon the pid file names (None: none runs)."""
    with contextlib.suppress(FileNotFoundError, ValueError):
        pid = int(pidfile.read_text(encoding="utf-8").split()[0])
        return pid if process_running(pid) else None
    return None


def _unmount_orphan(mountpoint: Path, timeout: float) -> int:
    """A memfs mount whose daemon is gone: detached with ``fusermount3 -u``; any other
    mount is not touched."""
    entry = mount_at(mountpoint)
    if entry is None:
        raise MountError(f"{mountpoint} is not mounted")
    if entry.fstype != "fuse.memfs":
        raise MountError(f"{mountpoint} is a {entry.fstype} mount, not a memfs one: not touched")
    result = subprocess.run(["fusermount3", "-u", str(mountpoint)], check=False, timeout=timeout)
    return result.returncode


def _wait_for_stop(
    pid: int, pidfile: Path, mountpoint: Path, deadline: float, timeout: float
) -> int | None:
    """Wait until the daemon ends (None), or say why the command ends first: it lingers
    unmounted with files nothing took, or it did not stop in time (1)."""
    while time.monotonic() < deadline:
        if not process_running(pid):
            return None
        if not is_mounted(mountpoint):
            unkept = _in_memory_only(pidfile, "status", 5)
            if unkept:  # detached, lingering with what nothing took
                sys.stderr.write(
                    f"memfs: unmounted, but {len(unkept)} file(s) are in the memory of daemon "
                    f"{pid} only: {', '.join(unkept)}; it keeps them until the database or "
                    "the recovery area takes them (`memfs recover --to DIR` writes them to a "
                    "folder now)\n"
                )
                return 1
        time.sleep(0.05)
    sys.stderr.write(f"memfs: daemon {pid} did not stop within {timeout:.0f}s\n")
    return 1


def _report_result(pidfile: Path) -> int:
    """What the stopped daemon left in its result file: files it could not save (1)."""
    with contextlib.suppress(FileNotFoundError, ValueError):
        result = json.loads(result_file(pidfile).read_text(encoding="utf-8"))
        result_file(pidfile).unlink()
        unsaved = result["unsaved"]
        sys.stderr.write(
            f"memfs: could not save {len(unsaved)} file(s): {', '.join(unsaved)}; their "
            f"content is kept in {result['recovery']} (`memfs recover --restore` saves it)\n"
        )
        return 1
    return 0


def _detach_stopped(pid: int, mountpoint: Path, timeout: float, *, detach: bool) -> int:
    """A stopped daemon: without ``detach``, one line and nothing done; with it, the mount
    is detached lazily (nothing inside waits on the daemon any more) and the daemon is
    asked to end, which it does, saving what it holds, once continued."""
    if not detach:
        sys.stderr.write(f"memfs: not unmounted: {stopped_daemon(pid, mountpoint)}\n")
        return 1
    try:
        done = subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], check=False,
                              timeout=timeout, capture_output=True, text=True)  # fmt: skip
    except subprocess.TimeoutExpired:
        sys.stderr.write(f"memfs: fusermount3 did not detach {mountpoint} in {timeout:.0f}s\n")
        return 1
    if done.returncode != 0:
        sys.stderr.write(f"memfs: fusermount3 could not detach {mountpoint}: "
                         f"{done.stderr.strip()}\n")  # fmt: skip
        return 1
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)  # delivered when it is continued
    sys.stderr.write(
        f"memfs: detached {mountpoint}; its daemon (pid {pid}) is stopped and ends once "
        f"continued (`kill -CONT {pid}`), saving what it holds or keeping it for "
        "`memfs recover`\n"
    )
    return 0


def _return_freed_memory() -> None:
    """Hand the heap the load freed (the workspace's rows, read whole) back to the system:
    glibc keeps it otherwise, and the daemon's resident size would count it for good."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to do
        ctypes.CDLL("libc.so.6").malloc_trim(0)
