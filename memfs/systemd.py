"""systemd integration: the readiness protocol and installing the user unit.

``Type=notify`` units learn that the mount is live from a datagram on ``$NOTIFY_SOCKET``
(``READY=1``), sent only after the kernel has the mount; ``STOPPING=1`` announces the
commit-and-unmount on SIGTERM.  A leading ``@`` in the socket path means the abstract
namespace.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from memfs.options import SettingError

log = logging.getLogger(__name__)

UNIT_NAME = "memfs@.service"
#: The unit of ``memfs serve`` profiles (WebDAV, MCP over HTTP).
SERVE_UNIT_NAME = "memfs-serve@.service"


def notify(state: str) -> bool:
    """Send ``state`` (e.g. ``READY=1``) to systemd if it is listening; True if sent."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(state.encode())
    except OSError as exc:
        log.warning("could not notify systemd (%s): %s", state, exc)
        return False
    return True


def unit_text(memfs_command: str, template: str = UNIT_NAME) -> str:
    text = resources.files("memfs").joinpath(f"data/{template}").read_text()
    return text.replace("@MEMFS@", memfs_command)


def memfs_command() -> str:
    """The absolute path of this installation's ``memfs`` console script."""
    script = Path(sys.prefix) / "bin" / "memfs"  # the venv memfs is installed in
    if script.exists():
        return str(script)
    found = shutil.which("memfs")
    return found or str(script)


@dataclass(frozen=True)
class InstalledUnit:
    unit: Path
    env_file: Path
    #: Why ``systemctl --user`` could not enable the unit (None: enabled, or not asked).
    enable_error: str | None = None


def install_unit(
    name: str,
    lines: list[str],
    *,
    config_home: Path,
    template: str = UNIT_NAME,
    enable: bool = True,
) -> InstalledUnit:
    """Write the user unit ``template`` (a mount's, or ``SERVE_UNIT_NAME``) and the
    profile's environment file (``VARIABLE=value`` lines); optionally enable and start
    it.  A missing or failing ``systemctl --user`` leaves the files written and says why
    in ``enable_error``."""
    if not name or "/" in name or name.startswith(".") or "\n" in name:
        raise SettingError(f"profile name {name!r}: use a plain name such as notes")
    unit_dir = config_home / "systemd" / "user"
    unit_dir.mkdir(parents=True, exist_ok=True)
    unit = unit_dir / template
    unit.write_text(unit_text(memfs_command(), template))
    env_dir = config_home / "memfs"
    env_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    env_file = env_dir / f"{name}.env"
    body = lines
    fd = os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write("# memfs profile; secrets belong here, not on the command line\n")
        handle.write("\n".join(body) + "\n")
    os.chmod(env_file, 0o600)
    error = None
    if enable:
        instance = template.replace("@.", f"@{name}.")
        error = _systemctl(["daemon-reload"]) or _systemctl(["enable", "--now", instance])
    return InstalledUnit(unit, env_file, error)


def _systemctl(arguments: list[str]) -> str | None:
    """Run ``systemctl --user``; None if it worked, else its complaint in one line."""
    try:
        result = subprocess.run(
            ["systemctl", "--user", *arguments], capture_output=True, text=True, timeout=120,
            check=False,
        )  # fmt: skip
    except FileNotFoundError:
        return "systemctl is not installed"
    except subprocess.TimeoutExpired:
        return f"systemctl --user {arguments[0]} did not answer in 120 s"
    if result.returncode != 0:
        said = " ".join((result.stderr or result.stdout).split()) or f"exit {result.returncode}"
        return f"systemctl --user {' '.join(arguments)} failed ({said})"
    return None
