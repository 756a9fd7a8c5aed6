"""Mount points: what the kernel has mounted, and whether a directory can take a mount.

Checked before anything is started (no PostgreSQL, no fork), so a mistake costs nothing and
gets one line.  Stdlib only: ``memfs umount`` and ``memfs status`` use it without loading
pyfuse3.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from memfs.errors import MountError

FSTYPE = "fuse.memfs"
FUSE_DEVICE = Path("/dev/fuse")


@dataclass(frozen=True)
class MountEntry:
    source: str
    mountpoint: str
    fstype: str


def _unescape(field: str) -> str:
    """/proc/self/mounts escapes space, tab, newline and backslash as octal."""
    for code in ("\\040", "\\011", "\\012", "\\134"):
        field = field.replace(code, chr(int(code[1:], 8)))
    return field


def mount_table() -> list[MountEntry]:
    entries = []
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        for line in mounts:
            fields = line.split()
            if len(fields) > 2:
                entries.append(MountEntry(_unescape(fields[0]), _unescape(fields[1]), fields[2]))
    return entries


def mount_at(mountpoint: Path) -> MountEntry | None:
    """The (topmost) mount whose mount point is exactly ``mountpoint``."""
    target = str(mountpoint)
    found = None
    for entry in mount_table():
        if entry.mountpoint == target:
            found = entry
    return found


def is_mounted(mountpoint: Path) -> bool:
    return mount_at(mountpoint) is not None


def memfs_mounts() -> list[MountEntry]:
    return [entry for entry in mount_table() if entry.fstype == FSTYPE]


def containing_memfs_mount(path: Path) -> MountEntry | None:
    """The memfs mount that ``path`` (absolute, resolved) lies in, if any."""
    best = None
    for entry in memfs_mounts():
        root = Path(entry.mountpoint)
        if (path == root or root in path.parents) and (
            best is None or len(entry.mountpoint) > len(best.mountpoint)
        ):
            best = entry
    return best


def resolved_mountpoint(mountpoint: Path) -> Path:
    """``mountpoint`` with its parent's symlinks resolved, never a look at the mount point
    itself: a stat of a mount whose daemon is stopped (SIGSTOP) waits for as long as it
    is, so the tools meant to free it must not make one."""
    absolute = Path(os.path.abspath(mountpoint.expanduser()))
    for candidate in (absolute.parent.resolve() / absolute.name, absolute):
        if mount_at(candidate) is not None:
            return candidate
    return absolute.resolve()  # not a mount: a stat cannot wait here


def stopped_daemon(pid: int, mountpoint: Path) -> str:
    """The line for a daemon that is stopped (SIGSTOP, a debugger): it answers nothing."""
    return (
        f"the daemon serving {mountpoint} (pid {pid}) is stopped (SIGSTOP or a debugger) and "
        f"answers nothing: `kill -CONT {pid}` resumes it; `memfs umount --lazy {mountpoint}` "
        "detaches the mount now (the daemon then ends, saving what it holds, once continued)"
    )


def pidfile_for(runtime_dir: Path, mountpoint: Path) -> Path:
    digest = hashlib.sha256(str(mountpoint).encode()).hexdigest()[:16]
    return runtime_dir / f"mount-{digest}.pid"


def check_fuse() -> None:
    """FUSE is usable by this user: the device opens read-write, fusermount3 exists."""
    if not FUSE_DEVICE.exists():
        raise MountError(
            f"{FUSE_DEVICE} is missing: load the fuse module (modprobe fuse) or, in a "
            "container, pass the device in (--device /dev/fuse); without FUSE, `memfs sync DIR` "
            "keeps a plain directory in step instead"
        )
    try:
        fd = os.open(FUSE_DEVICE, os.O_RDWR)
    except OSError as exc:
        raise MountError(
            f"cannot open {FUSE_DEVICE} ({exc.strerror}): ask an administrator to make it "
            "usable (mode 0666, or add this user to the group that owns it)"
        ) from None
    os.close(fd)
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        raise MountError("fusermount3 is not installed: install the fuse3 package")


def prepare_mountpoint(mountpoint: Path, *, allow_non_empty: bool = False) -> Path:
    """The absolute mount point, created if missing; refuse one that cannot take a mount."""
    mountpoint = mountpoint.expanduser().absolute()
    if is_mounted(mountpoint):
        raise MountError(f"{mountpoint} is already a mount point (try: memfs umount {mountpoint})")
    if mountpoint.exists() and not mountpoint.is_dir():
        raise MountError(f"{mountpoint} is a file, not a directory: choose a directory to mount on")
    try:
        mountpoint.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MountError(f"cannot create the mount point {mountpoint}: {exc.strerror}") from None
    if not os.access(mountpoint, os.W_OK | os.X_OK):
        raise MountError(f"{mountpoint}: no write permission (a mount point must be yours)")
    if not allow_non_empty:
        try:
            entries = sorted(os.listdir(mountpoint))
        except OSError as exc:
            raise MountError(f"cannot read the mount point {mountpoint}: {exc.strerror}") from None
        if entries:
            shown = ", ".join(entries[:3]) + (", …" if len(entries) > 3 else "")
            raise MountError(
                f"{mountpoint} is not empty ({shown}): the mount would hide its files; choose "
                "an empty directory, or pass --allow-non-empty"
            )
    check_fuse()
    return mountpoint.resolve()


def busy_users(mountpoint: Path) -> list[str]:
    """Processes (other than this one) whose working or root directory, or an open file,
    is inside ``mountpoint``: "pid 123 (bash): working directory".  Only processes this
    user may inspect are seen (all of them for root)."""
    inside = str(mountpoint)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            name = (entry / "comm").read_text().strip()
            how = None
            for link, what in (("cwd", "working directory"), ("root", "root directory")):
                target = os.readlink(entry / link)
                if target == inside or target.startswith(inside + "/"):
                    how = what
                    break
            if how is None:
                for fd in (entry / "fd").iterdir():
                    target = os.readlink(fd)
                    if target == inside or target.startswith(inside + "/"):
                        how = f"open file {target}"
                        break
        except OSError:
            continue  # gone, or not ours to look at
        if how is not None:
            found.append(f"pid {entry.name} ({name}): {how}")
    return found
