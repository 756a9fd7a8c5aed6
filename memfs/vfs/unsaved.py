"""Content the database did not take: kept in memory (retried), in the recovery area on
local disk (``memfs recover``), or drained to a folder the user names."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from memfs.private import write_private
from memfs.recovery import RecoveryArea
from memfs.tree import FileNode
from memfs.vfs.base import log
from memfs.vfs.buffers import FileBuffer
from memfs.vfs.roles import Describing
from memfs.vfs.state import MountState


class UnsavedLookups(Describing, Protocol):
    """What the unsaved files ask of the lookups: names for log lines, and telling the
    listings that a document changed."""

    def documents_changed(self) -> None: ...


class UnsavedFiles:
    """Which files hold changes not in the database, and where their copies are."""

    def __init__(
        self, lookups: UnsavedLookups, state: MountState, recovery: RecoveryArea | None
    ) -> None:
        #: Names for log lines, and the count of saved documents.
        self.lookups = lookups
        self.state = state
        self.recovery = recovery
        #: The path each unsaved inode's copy is kept under in the recovery area.
        self._kept: dict[int, str] = {}
        #: Unsaved files whose content ``drain`` wrote to a folder the user named.
        self.drained: dict[int, str] = {}

    def describe_node(self, node: FileNode) -> str:
        """The file's path for a report (``Lookups.describe_node``)."""
        return self.lookups.describe_node(node)

    def keep(self, node: FileNode, reason: str) -> None:
        """A commit failed: keep the content in memory (retried) and on local disk (so a
        crash or an unmount that still cannot commit loses nothing)."""
        self.state.unsaved[node.ino] = node
        buffer = self.state.buffers.get(node.ino)
        self.keep_copy(node, buffer.snapshot() if isinstance(buffer, FileBuffer) else None, reason)

    def keep_copy(self, node: FileNode, data: bytes | None, reason: str) -> None:
        """Copy content the database did not take to the recovery area (``memfs recover``)."""
        what = self.lookups.describe_node(node)
        if self.recovery is None or data is None or node.parent is None:
            log.error("changes to %s stay in memory until the database is back: %s", what, reason)
            return
        path = self.state.tree.path_of(node)
        try:
            stored = self.recovery.keep(path, data, reason)
        except OSError as exc:
            log.error("changes to %s stay in memory only (%s): %s", what, exc, reason)
            return
        if self._kept.get(node.ino, path) != path:
            self.recovery.forget(self._kept[node.ino])  # renamed since: one copy, latest name
        self._kept[node.ino] = path
        log.error(
            "changes to %s stay in memory until the database is back, and are kept in %s: %s",
            what,
            stored,
            reason,
        )

    def saved(self, node: FileNode) -> None:
        """The node's changes reached the database: nothing left to recover."""
        self.lookups.documents_changed()
        self.state.unsaved.pop(node.ino, None)
        self.drained.pop(node.ino, None)
        path = self._kept.pop(node.ino, None)
        if path is not None and self.recovery is not None:
            self.recovery.forget(path)

    def kept_copy(self, ino: int) -> str | None:
        """Where the recovery area keeps the unsaved content of ``ino`` (None: nowhere)."""
        path = self._kept.get(ino)
        if path is None or self.recovery is None:
            return None
        return str(self.recovery.run_dir / "files" / path)

    def unkept(self) -> list[str]:
        """Files whose changes are in this daemon's memory only: not in the database, not in
        the recovery area, not drained to a folder (``drain``).  Exiting would lose them."""
        return sorted(
            self.lookups.describe_node(node)
            for ino, node in self.state.unsaved.items()
            if ino not in self._kept and ino not in self.drained
        )

    def drain(self, folder: Path) -> tuple[list[str], list[str]]:
        """Write every unsaved file's content to ``folder/<workspace path>`` (0600): the
        way out when neither the database nor the recovery area takes it.  Returns the
        files written and those that could not be (with why)."""
        written: list[str] = []
        failed: list[str] = []
        for ino, node in list(self.state.unsaved.items()):
            buffer = self.state.buffers.get(ino)
            if not isinstance(buffer, FileBuffer) or node.parent is None:
                continue
            path = self.state.tree.path_of(node)
            target = folder / path
            try:
                write_private(target, buffer.snapshot(), durable=True)
            except OSError as exc:
                failed.append(f"{path}: {exc}")
                continue
            self.drained[ino] = str(target)
            written.append(str(target))
            log.warning("unsaved changes to %s written to %s", path, target)
        return written, failed
