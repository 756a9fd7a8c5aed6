"""Content the mount could not save, kept on local disk until it is restored.

A file whose commit failed (the database down, full, refusing) stays in the daemon's memory
and is retried; so that a crash, SIGKILL or an unmount that still cannot commit loses
nothing, a copy goes to the workspace's recovery area at once and is removed when the
commit finally succeeds.  Layout (one directory per daemon run, so runs never mix)::

    <state dir>/recovery/<workspace>/<YYYYmmdd-HHMMSS>-<pid>/manifest.json
    <state dir>/recovery/<workspace>/<YYYYmmdd-HHMMSS>-<pid>/files/<workspace path>

``manifest.json`` maps each workspace path to when it was kept, its size and why.
``memfs recover`` lists what is kept; ``--restore`` saves it as ordinary writes (so the
content it replaces becomes a version), ``--discard`` deletes it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath

from memfs.private import write_private
from memfs.processes import command_line, process_running

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class KeptFile:
    """One unsaved file in the recovery area."""

    path: str
    stored: Path
    kept_at: str
    size: int
    reason: str
    run: str


def _safe(path: str) -> PurePosixPath:
    parts = PurePosixPath(path).parts
    if not parts or any(p in ("", ".", "..") for p in parts) or path.startswith("/"):
        raise ValueError(f"not a workspace path: {path!r}")
    return PurePosixPath(*parts)


def _alive(run: str) -> bool:
    """Whether the memfs daemon that named ``run`` (``<date>-<time>-<pid>``) still runs."""
    pid = run.rpartition("-")[2]
    if not pid.isdigit() or int(pid) == os.getpid():
        return False
    return process_running(int(pid)) and b"memfs" in command_line(int(pid))


class RecoveryArea:
    """One workspace's recovery directory; ``run`` is this daemon's own subdirectory."""

    def __init__(self, root: Path, run: str | None = None) -> None:
        self.root = root
        self.run = run or f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        self._manifest: dict[str, dict[str, object]] = {}
        #: Manifest entries ``pending`` passed over, one line each (a path that is not a
        #: workspace path, a copy that is a symlink or lies outside its run's folder).
        self.refused: list[str] = []

    @property
    def run_dir(self) -> Path:
        return self.root / self.run

    def keep(self, path: str, data: bytes, reason: str) -> Path:
        """Store ``data`` as the unsaved content of ``path`` (replacing an earlier copy)."""
        stored = self.run_dir / "files" / _safe(path)
        write_private(stored, data, durable=True)
        self._manifest[path] = {
            "kept_at": datetime.now().astimezone().isoformat(timespec="microseconds"),
            "size": len(data),
            "reason": reason,
        }
        self._write_manifest()
        return stored

    def forget(self, path: str) -> None:
        """``path`` was saved after all: drop its copy."""
        if self._manifest.pop(path, None) is None:
            return
        with contextlib.suppress(FileNotFoundError):
            (self.run_dir / "files" / _safe(path)).unlink()
        if self._manifest:
            self._write_manifest()
        else:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def kept(self) -> list[str]:
        """Paths this run has kept and not saved since."""
        return sorted(self._manifest)

    def _write_manifest(self) -> None:
        payload = json.dumps({"files": self._manifest}, indent=2, sort_keys=True)
        write_private(self.run_dir / MANIFEST, payload.encode(), durable=True)

    def live_runs(self) -> list[str]:
        """Runs whose daemon is still running (it still retries them itself)."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and _alive(p.name))

    def pending(self) -> list[KeptFile]:
        """Everything kept by runs of this workspace whose daemon has ended, oldest first.

        A running mount's copies are left out: it is still retrying them, and removes each
        copy as soon as its commit succeeds.
        """
        found: list[KeptFile] = []
        if not self.root.is_dir():
            return found
        for run_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            if run_dir.name == self.run or _alive(run_dir.name):
                continue
            try:
                manifest = json.loads((run_dir / MANIFEST).read_text(encoding="utf-8"))
                files = manifest["files"]
            except (OSError, ValueError, KeyError) as exc:
                log.warning("unreadable recovery manifest in %s: %s", run_dir, exc)
                continue
            for path, info in sorted(files.items()):
                stored = self._stored(run_dir, path)
                if stored is not None and stored.is_file():
                    found.append(
                        KeptFile(
                            path=path,
                            stored=stored,
                            kept_at=str(info.get("kept_at", "")),
                            size=int(info.get("size", stored.stat().st_size)),
                            reason=str(info.get("reason", "")),
                            run=run_dir.name,
                        )
                    )
        return found

    def _stored(self, run_dir: Path, path: str) -> Path | None:
        """Where ``run_dir``'s copy of ``path`` is, if it is a plain file inside the run's
        ``files/`` (a crafted manifest or a planted symlink is refused, not followed)."""
        try:
            stored = run_dir / "files" / _safe(path)
        except ValueError as exc:
            self.refused.append(f"{run_dir.name}: {exc}; passed over")
            return None
        files = (run_dir / "files").resolve()
        if stored.is_symlink() or not stored.resolve().is_relative_to(files):
            self.refused.append(f"{run_dir.name}: {path!r} is a symlink; passed over")
            return None
        return stored

    def remove(self, item: KeptFile) -> None:
        """Delete one kept file (restored or discarded), and its run once empty."""
        run_dir = self.root / item.run
        with contextlib.suppress(FileNotFoundError):
            item.stored.unlink()
        manifest_path = run_dir / MANIFEST
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            manifest = {"files": {}}
        manifest.get("files", {}).pop(item.path, None)
        if manifest.get("files"):
            write_private(manifest_path, json.dumps(manifest, indent=2).encode(), durable=True)
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
