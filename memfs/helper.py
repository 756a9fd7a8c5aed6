"""``memfs install-helper``: what mount(8) needs to mount ``-t fuse.memfs``.

mount(8) looks for ``/sbin/mount.<type>`` and runs it with a fixed PATH, so a memfs in a
venv is invisible to it.  The helper is a symlink to this installation's ``memfs`` script;
called by that name, ``memfs`` reads mount(8)'s argument order (``SOURCE DIR -o opts``),
as JuiceFS and rclone do.
"""

from __future__ import annotations

import os
from pathlib import Path

from memfs.errors import CommandError
from memfs.systemd import memfs_command

HELPER_NAME = "mount.fuse.memfs"


def install_helper(sbin: Path) -> str:
    """Link ``sbin/mount.fuse.memfs`` to this memfs; return what was done, in one line."""
    target = Path(memfs_command())
    if not target.exists():
        raise CommandError(f"cannot find this installation's memfs script ({target})")
    link = sbin / HELPER_NAME
    if os.geteuid() != 0 and not os.access(sbin, os.W_OK):
        raise CommandError(f"cannot write {link}: run it as root (sudo memfs install-helper)")
    try:
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    except OSError as exc:
        raise CommandError(f"cannot write {link}: {exc.strerror}") from None
    return (
        f"linked {link} -> {target}: `mount -t fuse.memfs memfs DIR -o key=value,...` and "
        "fstab lines of type fuse.memfs now work"
    )
