"""davfs2 (Debian's WebDAV filesystem) mounting ``memfs serve webdav``: the real-client
tests of the FUSE mount, run through the other front door.  Editors save, rsync copies and
deletes, grep and find read, cp, mv and rm move things about, in a davfs2 mount; what the
server stores is then read back over HTTP: the content, the document's versions (its
identity kept) and the folder listing (no scratch or temporary name became memory).

davfs2 keeps its own cache and uploads a file when it is closed; a read right after some
saves is served from that cache (see ``docs/webdav.md``), so each step waits, bounded,
for the mount and the server to show what the step wrote.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.savers import SAVERS, client_env
from tests.webdav.serving import Server, hrefs, propfind, versions_of

#: How long a client command, a davfs2 mount or its unmount may take.
TIMEOUT = 60.0
#: How long a step's result may take to show in the mount or on the server.
SHOW_TIMEOUT = 15.0

#: davfs2's settings for the tests.  ``buf_size 64``: davfs2 1.6's default 16 KiB read
#: buffer gets EINVAL from ``readdir`` on Linux 6.16 and later (every listing fails).
#: Uploads on close, listings and files checked again after a second.
DAVFS2_CONF = """\
buf_size 64
use_locks 1
ask_auth 0
delay_upload 0
dir_refresh 1
file_refresh 1
"""

#: davfs2's own local folder in every mount (files it could not upload): not memory.
LOST_FOUND = "lost+found"


class DavMount:
    """A davfs2 mount of one server, unmounted (waiting for its uploads) by ``unmount``."""

    def __init__(self, server: Server, where: Path) -> None:
        self.server = server
        self.path = where / "davfs"
        self.path.mkdir(parents=True)
        os.chmod(where, 0o755)  # davfs2 runs as its own user, which must reach the mount
        conf = where / "davfs2.conf"
        conf.write_text(DAVFS2_CONF)
        run(["mount", "-t", "davfs", f"http://127.0.0.1:{server.port}/", str(self.path),
             "-o", f"conf={conf}"])  # fmt: skip
        self.mounted = True

    def unmount(self) -> None:
        if self.mounted:
            run(["umount", str(self.path)])  # waits until davfs2 has uploaded what it holds
            self.mounted = False


def run(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=TIMEOUT, check=False)  # fmt: skip
    assert done.returncode == 0, f"{cmd} exited {done.returncode}: {done.stderr[-800:]}"
    return done.stdout


def needs(*programs: str) -> None:
    missing = [p for p in programs if shutil.which(p) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (scripts/setup-tests installs them)")


@pytest.fixture
def davfs(dav: Server, tmp_path: Path) -> Iterator[DavMount]:
    needs("mount.davfs")
    if os.geteuid() != 0:
        pytest.skip("mounting davfs2 for the tests needs root (the CI machine is)")
    mount = DavMount(dav, tmp_path / "client")
    try:
        yield mount
    finally:
        if mount.mounted:
            subprocess.run(["umount", "-l", str(mount.path)], timeout=TIMEOUT, check=False)


def wait_for(what: str, condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + SHOW_TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not show in {SHOW_TIMEOUT:.0f} s"
        time.sleep(0.1)


def shows(mount: DavMount, name: str, text: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return (mount.path / name).read_text() == text
        except OSError:
            return False

    return check


def served(server: Server, path: str, text: str | None) -> Callable[[], bool]:
    """The server answers ``path`` with ``text`` (None: 404)."""

    def check() -> bool:
        got = server.http.get(path)
        return got.status_code == 404 if text is None else got.text == text

    return check


def listing(server: Server, folder: str = "/") -> list[str]:
    answer = propfind(server, folder, "1")
    assert answer.status_code == 207, answer.text
    return [h for h in hrefs(answer) if h.rstrip("/") != folder.rstrip("/")]


#: The savers run one after another on one document (the programs a user has).
EDITORS = ["vim backupcopy=yes", "vim backupcopy=no", "emacs", "nano", "sed -i",
           "write-file-atomic", "os.replace", "rsync", ">", ">>"]  # fmt: skip
EDITOR_PROGRAMS = {"vim backupcopy=yes": "vim", "vim backupcopy=no": "vim", "emacs": "emacs",
                   "nano": "tmux", "write-file-atomic": "node", "rsync": "rsync"}  # fmt: skip


def test_editors_save_through_davfs2(dav: Server, davfs: DavMount, tmp_path: Path) -> None:
    """Each editor appends a line the way it saves; every line is stored, each save is
    one more version of the same document, and no swap, backup or temporary file is."""
    text = "# Notes\n"
    assert dav.http.put("/notes.md", content=text.encode()).status_code == 201
    before = versions_of(dav, "notes.md")
    env = client_env(tmp_path / "home")
    used = [s for s in EDITORS if shutil.which(EDITOR_PROGRAMS.get(s, "sh"))]
    assert len(used) >= 6, f"too few editors installed: {used}"
    for saver in used:
        wait_for(f"the mount's copy before {saver}", shows(davfs, "notes.md", text))
        line = f"saved by {saver}"
        SAVERS[saver](davfs.path, "notes.md", line, env)
        text += line + "\n"
        wait_for(f"{saver}'s save on the server", served(dav, "/notes.md", text))
    davfs.unmount()
    assert dav.http.get("/notes.md").text == text
    assert versions_of(dav, "notes.md") == before + len(used)
    assert listing(dav) == ["/notes.md"]


def make_tree(root: Path) -> dict[str, str]:
    files = {"MEMORY.md": "memory\n", "daily/2026-03-03.md": "[09:00:00] log alpha\n",
             "projects/alpha/notes.md": "alpha ✓\n", "projects/beta.md": "beta\n"}  # fmt: skip
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return files


def test_rsync_grep_and_find_through_davfs2(dav: Server, davfs: DavMount, tmp_path: Path) -> None:
    needs("rsync")
    source = tmp_path / "source"
    files = make_tree(source)
    run(["rsync", "-a", f"{source}/", f"{davfs.path}/"])
    for rel, text in files.items():
        wait_for(f"{rel} on the server", served(dav, f"/{rel}", text))
    found = run(["grep", "-rl", "alpha", "--exclude-dir", LOST_FOUND, "."], cwd=davfs.path)
    assert sorted(found.split()) == ["./daily/2026-03-03.md", "./projects/alpha/notes.md"]
    listed = run(["find", ".", "-name", "*.md", "-not", "-path", f"./{LOST_FOUND}/*"],
                 cwd=davfs.path)  # fmt: skip
    assert sorted(p.removeprefix("./") for p in listed.split()) == sorted(files)
    # A changed file (rsync's temporary, renamed over it) and a deleted one.
    (source / "MEMORY.md").write_text("memory, changed\n")
    (source / "projects/beta.md").unlink()
    history = versions_of(dav, "MEMORY.md")
    run(["rsync", "-a", "--delete", "--exclude", LOST_FOUND, f"{source}/", f"{davfs.path}/"])
    davfs.unmount()
    wait_for("the changed file", served(dav, "/MEMORY.md", "memory, changed\n"))
    wait_for("the deleted file's removal", served(dav, "/projects/beta.md", None))
    assert versions_of(dav, "MEMORY.md") == history + 1  # the same document, one more save
    assert listing(dav) == ["/MEMORY.md", "/daily/", "/projects/"]
    assert listing(dav, "/projects/") == ["/projects/alpha/"]


def test_cp_mv_and_rm_through_davfs2(dav: Server, davfs: DavMount, tmp_path: Path) -> None:
    local = tmp_path / "plan.md"
    local.write_text("the plan\n")
    run(["cp", str(local), str(davfs.path / "plan.md")])
    wait_for("the copy", served(dav, "/plan.md", "the plan\n"))
    (davfs.path / "plan.md").write_text("the plan, revised\n")
    wait_for("the revision", served(dav, "/plan.md", "the plan, revised\n"))
    run(["cp", "plan.md", "copy.md"], cwd=davfs.path)
    run(["mkdir", "archive"], cwd=davfs.path)
    run(["mv", "plan.md", "archive/plan-2026.md"], cwd=davfs.path)
    run(["mv", "copy.md", "spare.md"], cwd=davfs.path)
    run(["rm", "spare.md"], cwd=davfs.path)
    davfs.unmount()
    wait_for("the moved file", served(dav, "/archive/plan-2026.md", "the plan, revised\n"))
    assert dav.http.get("/plan.md").status_code == 404
    assert dav.http.get("/spare.md").status_code == 404
    # The moved document is the one that was revised: its history came with it.
    assert versions_of(dav, "archive/plan-2026.md") >= 2
    assert listing(dav) == ["/archive/"]
    mount = DavMount(dav, tmp_path / "again")  # a second mount sees the same tree
    try:
        assert sorted(os.listdir(mount.path)) == ["archive", LOST_FOUND]
        run(["rm", "-r", "archive"], cwd=mount.path)
    finally:
        mount.unmount()
    wait_for("the folder's removal", lambda: listing(dav) == [])
