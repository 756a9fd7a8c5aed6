"""Telling the kernel to drop cached entries, attributes and pages.

pyfuse3's ``invalidate_inode``/``invalidate_entry`` are blocking calls into the kernel that
can deadlock when made from inside a request handler for a related inode (the kernel
waits on the inode the handler is answering for), so they are queued here and made by one
thread of their own.  The one exception is
``attributes``: dropping an inode's cached attributes alone takes no lock in the kernel
(no page, no inode mutex), so it is made at once, inside the request that needs it: an
``open`` that loaded content of another size than the kernel caches must not answer before
the kernel forgets that size, or the opener's ``fstat`` and reads stop at the old end (a
torn last line) or run past the new one (NUL bytes).  ``RecordingNotifier`` stands in for
tests without a mount.
"""

from __future__ import annotations

import errno
import logging
import queue
import threading
from typing import Protocol

log = logging.getLogger(__name__)


class KernelNotifier(Protocol):
    def inode(self, ino: int) -> None:
        """Drop the inode's cached attributes and pages."""

    def entry(self, parent: int, name: str) -> None:
        """Drop the cached name ``name`` in directory ``parent``."""

    def attributes(self, ino: int) -> None:
        """Drop the inode's cached attributes now, before the current request answers."""


class NoKernel:
    """A front with no kernel cache to keep in step (WebDAV, MCP): nothing to drop."""

    def inode(self, ino: int) -> None:
        pass

    def entry(self, parent: int, name: str) -> None:
        pass

    def attributes(self, ino: int) -> None:
        pass


class RecordingNotifier:
    """Records what would have been invalidated (no kernel involved)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, str]] = []

    def inode(self, ino: int) -> None:
        self.calls.append(("inode", ino, ""))

    def entry(self, parent: int, name: str) -> None:
        self.calls.append(("entry", parent, name))

    def attributes(self, ino: int) -> None:
        self.calls.append(("attributes", ino, ""))


class FuseNotifier:
    """Invalidates through pyfuse3 from a dedicated thread fed by a queue."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[str, int, str] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="memfs-invalidate", daemon=True)
        #: Invalidations queued, and those the kernel has been sent (``wait_sent``).
        self._queued = 0
        self._sent = 0
        self._progress = threading.Condition()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=5)

    def inode(self, ino: int) -> None:
        self._put(("inode", ino, ""))

    def entry(self, parent: int, name: str) -> None:
        self._put(("entry", parent, name))

    def _put(self, item: tuple[str, int, str]) -> None:
        with self._progress:
            self._queued += 1
        self._queue.put(item)

    def wait_sent(self, timeout: float = 5.0) -> bool:
        """Wait until every invalidation queued so far has been sent to the kernel (a
        reader after this sees no name or page the mount has dropped); False on timeout."""
        with self._progress:
            target = self._queued
            return self._progress.wait_for(lambda: self._sent >= target, timeout)

    def attributes(self, ino: int) -> None:
        import pyfuse3

        try:
            pyfuse3.invalidate_inode(ino, attr_only=True)  # type: ignore[arg-type]
        except OSError as exc:
            if exc.errno != errno.ENOENT:  # ENOENT: the kernel did not know it anyway
                log.warning("kernel invalidation of attributes of %s failed: %s", ino, exc)

    def _run(self) -> None:
        import pyfuse3

        while True:
            item = self._queue.get()
            if item is None:
                return
            kind, ino, name = item
            try:
                if kind == "inode":
                    pyfuse3.invalidate_inode(ino)  # type: ignore[arg-type]
                else:
                    pyfuse3.invalidate_entry(ino, name.encode("utf-8"))  # type: ignore[arg-type]
            except OSError as exc:
                if exc.errno != errno.ENOENT:  # ENOENT: the kernel did not know it anyway
                    log.warning("kernel invalidation of %s %s failed: %s", kind, ino, exc)
            except Exception:
                log.exception("kernel invalidation of %s %s failed", kind, ino)
            finally:
                with self._progress:
                    self._sent += 1
                    self._progress.notify_all()
