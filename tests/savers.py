"""Real programs' save sequences, each appending one line to a file on a mount.

Used by the save-race test and the fault script: every saver reads the file's current
content through the mount and saves it back with ``line`` appended, the way that program
saves (in place, temp + rename, backup + rewrite ...).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

TIMEOUT = 60.0

Saver = Callable[[Path, str, str, dict[str, str]], None]


def _run(cmd: list[str], cwd: Path, env: dict[str, str], answers: bytes | None = b"") -> None:
    """``cmd`` in ``cwd``; ``answers`` on its stdin (None: no stdin at all, /dev/null)."""
    try:
        done = subprocess.run(
            cmd, cwd=cwd, env=env, check=False, timeout=TIMEOUT, capture_output=True,
            input=answers, stdin=subprocess.DEVNULL if answers is None else None,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:  # what it last said: the question it waits on
        said = (exc.stdout or b"")[-600:] + b" | " + (exc.stderr or b"")[-600:]
        raise AssertionError(f"{cmd} did not finish in {TIMEOUT:.0f}s: {said!r}") from None
    if done.returncode != 0:  # what it said on its screen too (vim's errors go there)
        shown = done.stdout.decode(errors="replace")[-1500:]
        raise AssertionError(
            f"{cmd} exited {done.returncode}: {done.stderr.decode()[-1000:]} | screen: {shown!r}"
        )


def _vim(backupcopy: str) -> Saver:
    """vim; "y" on stdin answers "file changed since reading, write anyway?" as a user would."""

    def save(mnt: Path, name: str, line: str, env: dict[str, str]) -> None:
        _run(
            ["vim", "--clean", "-c", f"set backupcopy={backupcopy}",
             "-c", f"normal! Go{line}", "-c", "wq", name],
            mnt, env, answers=b"y",
        )  # fmt: skip

    return save


def neovim(mnt: Path, name: str, line: str, env: dict[str, str]) -> None:
    """neovim in a tmux session, as a person types: ``Go`` and the line, ``:wq``, and "y"
    to "the file has been changed since reading it: really write?" (headless neovim asks
    that too and reads no answer from its stdin: it would wait for ever)."""
    session = f"memfs-nvim-{os.getpid()}-{time.monotonic_ns()}"
    tmux = ["tmux", "-L", session]

    def keys(*typed: str) -> None:
        subprocess.run([*tmux, "send-keys", "-t", session, *typed], check=True, timeout=30)

    def screen() -> str:
        shown = subprocess.run([*tmux, "capture-pane", "-p", "-t", session],
                               capture_output=True, text=True, check=False, timeout=30)  # fmt: skip
        return shown.stdout if shown.returncode == 0 else ""

    def alive() -> bool:
        return subprocess.run([*tmux, "has-session", "-t", session], capture_output=True,
                              check=False, timeout=30).returncode == 0  # fmt: skip

    subprocess.run(
        [*tmux, "new-session", "-d", "-s", session, "-x", "100", "-y", "30",
         f"cd {mnt} && nvim --clean {name}; sleep 0.2"],
        env=env, check=True, timeout=TIMEOUT,
    )  # fmt: skip
    try:
        _wait(lambda: name in screen(), "neovim to show the file")
        keys("G", "o")
        keys("-l", line)  # typed as is (a flag: before the keys)
        keys("Escape")
        keys(":wq", "Enter")

        def done() -> bool:
            if "(y/n)" in screen():  # the agent wrote meanwhile: write anyway
                keys("y")
                time.sleep(0.1)
            return not alive()

        _wait(done, "neovim's write and exit", timeout=TIMEOUT)
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, timeout=30, capture_output=True)


def shell_rewrite(mnt: Path, name: str, line: str, env: dict[str, str]) -> None:
    """The shell's ``>``: ``cat`` reads the file, then the shell truncates it and writes
    what was read plus a line (the shell itself read nothing)."""
    _run(["sh", "-c", 'c=$(cat "$1"); printf "%s\\n%s\\n" "$c" "$2" > "$1"', "sh", name,
          line], mnt, env)  # fmt: skip


def shell_append(mnt: Path, name: str, line: str, env: dict[str, str]) -> None:
    """The shell's ``>>``."""
    _run(["sh", "-c", 'printf "%s\\n" "$2" >> "$1"', "sh", name, line], mnt, env)


def emacs(mnt: Path, name: str, line: str, env: dict[str, str]) -> None:
    """emacs; answers "changed on disk: edit anyway / save anyway?" with yes, as a user
    would (``userlock`` is loaded first, or its autoload would replace the answer)."""
    lisp = (
        '(progn (load "userlock" nil t) (defun ask-user-about-supersession-threat (_f) nil)'
        " (fset 'yes-or-no-p (lambda (&rest _) t))"
        f' (goto-char (point-max)) (insert "{line}\\n") (save-buffer))'
    )
    _run(["emacs", "--batch", name, "--eval", lisp], mnt, env)


def nano(mnt: Path, name: str, line: str, env: dict[str, str]) -> None:
    """nano in a tmux session: end of file, type, ^O Enter, ^X."""
    session = f"memfs-nano-{os.getpid()}-{time.monotonic_ns()}"
    tmux = ["tmux", "-L", session]
    lock = mnt / f".{name}.swp"
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", session, "-x", "100", "-y", "30",
         f"cd {mnt} && nano {name}"],
        env=env, check=True, timeout=TIMEOUT,
    )  # fmt: skip
    try:
        _wait(lock.exists, "nano's lock file")
        for keys in (["M-/", line], ["C-o"], ["Enter"]):
            subprocess.run([*tmux, "send-keys", "-t", session, *keys], check=True, timeout=30)
            time.sleep(0.2)

        def showing(question: str) -> bool:
            screen = subprocess.run(
                [*tmux, "capture-pane", "-p", "-t", session],
                capture_output=True, text=True, check=False, timeout=30,
            )  # fmt: skip
            return screen.returncode == 0 and question in screen.stdout

        def answer(question: str, key: str) -> None:
            """One key per prompt: a second before nano has redrawn would be typed into
            the text (legacy seed 13 found 'yyyyyyyyy' in nano's emergency save)."""
            if showing(question):
                subprocess.run([*tmux, "send-keys", "-t", session, key], check=True, timeout=30)
                deadline = time.monotonic() + 5
                while showing(question) and time.monotonic() < deadline:
                    time.sleep(0.02)

        def saved() -> bool:
            answer("was modified", "y")  # the agent wrote meanwhile: save anyway
            return line in (mnt / name).read_text()

        _wait(saved, "nano's save")
        subprocess.run([*tmux, "send-keys", "-t", session, "C-x"], check=True, timeout=30)

        def exited() -> bool:
            answer("Save modified buffer", "n")
            return not lock.exists()

        _wait(exited, "nano to exit")
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, timeout=30, capture_output=True)


def sed_in_place(mnt: Path, name: str, line: str, env: dict[str, str]) -> None:
    _run(["sed", "-i", f"$a {line}", name], mnt, env)


def os_replace(mnt: Path, name: str, line: str, env: dict[str, str]) -> None:
    """Python's atomic save: a closed temp renamed over the target."""
    script = textwrap.dedent(
        f"""
        import os
        text = open({name!r}).read() + {line + chr(10)!r}
        with open({"." + name + ".new"!r}, "w") as f:
            f.write(text)
        os.replace({"." + name + ".new"!r}, {name!r})
        """
    )
    _run([sys.executable, "-c", script], mnt, env)


def write_file_atomic(mnt: Path, name: str, line: str, env: dict[str, str]) -> None:
    """node's write-file-atomic: ``<name>.<murmurhex>`` written, fsynced, renamed over."""
    script = textwrap.dedent(
        f"""
        const fs = require("fs");
        const text = fs.readFileSync({name!r}, "utf8") + {line + chr(10)!r};
        const tmp = {name!r} + "." + (Math.random() * 0xffffffff >>> 0).toString(16);
        const fd = fs.openSync(tmp, "w");
        fs.writeSync(fd, text);
        fs.fsyncSync(fd);
        fs.closeSync(fd);
        fs.renameSync(tmp, {name!r});
        """
    )
    _run(["node", "-e", script], mnt, env)


def _local_copy(mnt: Path, name: str, line: str, env: dict[str, str]) -> Path:
    """The file rsync or rclone copies over ``mnt / name``: its content plus ``line``, in a
    folder of this save's own (``line`` is unique).  One shared ``sync-source/<name>`` let a
    concurrent save of another folder's file of the same name overwrite it before the
    program read it: the program then copied that other content, and the history blamed
    the mount for the line it never wrote (stop 38's ``z.md``, stop 39's ``d/x.md``)."""
    source = Path(env["HOME"]) / "sync-source" / line / name
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text((mnt / name).read_text() + line + "\n")
    return source


def rsync(mnt: Path, name: str, line: str, env: dict[str, str]) -> None:
    source = _local_copy(mnt, name, line, env)
    try:
        _run(["rsync", "--checksum", str(source), name], mnt, env)
    finally:
        shutil.rmtree(source.parent, ignore_errors=True)


def rclone(mnt: Path, name: str, line: str, env: dict[str, str]) -> None:
    """rclone copyto.  Without ``--ignore-size --ignore-checksum`` rclone checks the
    destination after the copy and, if another writer changed it meanwhile ("corrupted on
    transfer: sizes differ"), deletes it itself ("Removing failed copy") and copies again:
    a delete the user's tool chose, on a local disk too, which the race would count."""
    source = _local_copy(mnt, name, line, env)
    try:
        _run(
            ["rclone", "copyto", "--checksum", "--ignore-size", "--ignore-checksum",
             str(source), str(mnt / name)],
            mnt, env,
        )  # fmt: skip
    finally:
        shutil.rmtree(source.parent, ignore_errors=True)


SAVERS: dict[str, Saver] = {
    "vim backupcopy=yes": _vim("yes"),
    "vim backupcopy=no": _vim("no"),
    "neovim": neovim,
    "emacs": emacs,
    "nano": nano,
    "sed -i": sed_in_place,
    "os.replace": os_replace,
    "write-file-atomic": write_file_atomic,
    "rsync": rsync,
    "rclone": rclone,
    ">": shell_rewrite,
    ">>": shell_append,
}

PROGRAMS = {"vim", "nvim", "emacs", "nano", "tmux", "sed", "node", "rsync", "rclone"}


def missing_programs() -> list[str]:
    return sorted(p for p in PROGRAMS if shutil.which(p) is None)


def client_env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), TERM="xterm")
    env.update(XDG_DATA_HOME=str(home / ".local/share"), XDG_STATE_HOME=str(home / ".state"))
    return env


def _wait(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
