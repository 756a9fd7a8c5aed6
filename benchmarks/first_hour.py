"""A newcomer's first hour, replayed: every command a new user types, right or wrong, on a
fresh HOME with the embedded PostgreSQL, and what each one answered.

    .venv/bin/python benchmarks/first_hour.py [--markdown]

Each case runs ``python -m memfs`` (as ``~/.local/bin/memfs`` would) with a time limit and
records its exit code, how many lines it printed to stderr, its first line, whether that
line tells the user what to do next, and whether it printed a traceback or hung.  Files the
case wrote are checked afterwards where a command could lose one (``sync`` with another
workspace, ``export`` over an edited file).  Exits 1 if any case printed a traceback, hung,
lost a file, or answered a mistake with exit 0.  Not part of CI (the mount and command tests
hold each behaviour); this is the closing note's table, made again on demand.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

TIMEOUT = 120.0
#: Words a line uses when it tells the user what to do (a command, a flag, a verb).
_ADVICE = re.compile(
    r"(\brun\b|\buse\b|\bpass\b|\bgive\b|\btry\b|\bcheck\b|\bset\b|\bpick\b|\bchoose\b|"
    r"\bstart\b|\bremove\b|\bclose\b|\bunmount\b|\bcreate\b|\binstall\b|did you mean|"
    r"\bexpected\b|\blists\b|\bfinds\b|"
    r"\s--[a-z]|`memfs |'memfs |memfs [a-z]+ )",
    re.IGNORECASE,
)


@dataclass
class Case:
    """One command a newcomer types; ``mistake``: it must fail (exit ≠ 0) with one line."""

    what: str
    args: list[str]
    mistake: bool
    env: dict[str, str] = field(default_factory=dict)
    stdin: str | None = None
    #: Run before the command (makes files, mounts ...), in the work folder.
    before: Callable[[Path], None] | None = None
    #: Checked after it: a problem (lost file ...) or None.
    after: Callable[[Path], str | None] | None = None


@dataclass
class Outcome:
    case: Case
    code: int | None
    lines: int
    first: str
    advice: bool
    traceback: bool
    problem: str | None


def _env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMFS_", "DATABASE_URL"))}
    env.update(HOME=str(home), XDG_RUNTIME_DIR=str(home / "run"),
               XDG_STATE_HOME=str(home / ".local/state"), XDG_DATA_HOME=str(home / ".local/share"),
               XDG_CONFIG_HOME=str(home / ".config"))  # fmt: skip
    env.update(extra)
    return env


def memfs(home: Path, *args: str, env: dict[str, str] | None = None,
          stdin: str | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "memfs", *args], env=_env(home, env or {}), cwd=home,
        capture_output=True, text=True, timeout=TIMEOUT, input=stdin, check=False,
    )  # fmt: skip


def run_case(home: Path, case: Case) -> Outcome:
    if case.before is not None:
        case.before(home)
    try:
        result = memfs(home, *case.args, env=case.env, stdin=case.stdin)
    except subprocess.TimeoutExpired:
        return Outcome(case, None, 0, f"hung for {TIMEOUT:.0f}s", False, False, "hang")
    text = result.stderr.strip() or (result.stdout.strip() if case.mistake else "")
    lines = result.stderr.strip().splitlines()
    first = (text.splitlines() or [""])[0]
    traceback = "Traceback" in result.stderr or "Traceback" in result.stdout
    problem = case.after(home) if case.after is not None else None
    if case.mistake and result.returncode == 0:
        problem = problem or "a mistake answered with exit 0"
    if not case.mistake and result.returncode != 0:
        problem = problem or f"exit {result.returncode}"
    return Outcome(case, result.returncode, len(lines), first,
                   bool(_ADVICE.search(first)), traceback, problem)  # fmt: skip


# -- the cases ---------------------------------------------------------------------------


def _write(relative: str, text: str) -> Callable[[Path], None]:
    def make(home: Path) -> None:
        path = home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    return make


def _fifo_and_git(home: Path) -> None:
    tree = home / "notes-with-extras"
    (tree / ".git/hooks").mkdir(parents=True, exist_ok=True)
    (tree / ".git/hooks/commit-msg.sample").write_text("commit message hook\n")
    (tree / ".obsidian").mkdir(exist_ok=True)
    (tree / ".obsidian/app.json").write_text("{}\n")
    (tree / "idea.md").write_text("an idea\n")
    if not (tree / "pipe").exists():
        os.mkfifo(tree / "pipe")


def _kept(relative: str, text: str) -> Callable[[Path], str | None]:
    def check(home: Path) -> str | None:
        path = home / relative
        if not path.exists() or path.read_text() != text:
            return f"lost: {relative}"
        return None

    return check


def _unmounted_at(relative: str) -> Callable[[Path], str | None]:
    def unmount(home: Path) -> str | None:
        memfs(home, "umount", "--force", str(home / relative))
        return None

    return unmount


_unmounted = _unmounted_at("memory")


def cases() -> list[Case]:
    mnt = "memory"
    return [
        Case("no command", [], True),
        Case("an unknown command", ["frobnicate"], True),
        Case("a misspelt option", ["mount", "--read-onyl", mnt], True),
        Case("a misspelt --json", ["status", "--jsn"], True),
        Case("mount without a mount point", ["mount"], True),
        Case("--limit 0", ["search", "--limit", "0", "q"], True),
        Case("a timeout that is not a number", ["mount", mnt, "--attr-timeout", "soon"], True),
        Case("an agent id that is neither", ["status", "--agent-id", "no/pe"], True),
        Case("a pool size that is not a number", ["status"], True, {"MEMFS_POOL_SIZE": "abc"}),
        Case("a garbage DATABASE_URL", ["status"], True, {"DATABASE_URL": "garbage"}),
        Case(
            "an unreachable server",
            ["status", "--database-url", "postgresql://nobody@127.0.0.1:1/none"],
            True,
        ),
        Case("a bad log level", ["status"], True, {"MEMFS_LOG_LEVEL": "loud"}),
        Case("--version", ["--version"], False),
        Case("--help", ["--help"], False),
        Case("status before anything exists", ["status"], True),
        Case("init", ["init"], False),
        Case("status after init", ["status"], False),
        Case("seed the starter files", ["seed"], False),
        Case("mount with a bogus -o option", ["mount", mnt, "-o", "bogus_option"], True),
        Case("mount with sshfs's -o nonempty", ["mount", mnt, "-o", "nonempty"], True),
        # IronClaw's user ids are free text: a comma or a space is part of one id.
        Case(
            "a user id with a comma",
            ["mount", mnt, "--user-id", "alice,bob"],
            False,
            after=_unmounted,
        ),
        Case("mount onto a file", ["mount", "afile.md"], True, before=_write("afile.md", "x\n")),
        # Like the README's ~/memory, a missing mount point is made (and removed if the mount
        # fails).
        Case(
            "mount where the parent is missing",
            ["mount", "no/such/dir"],
            False,
            after=_unmounted_at("no/such/dir"),
        ),
        Case("umount of what is not mounted", ["umount", mnt], True),
        Case("stats of what is not mounted", ["stats", mnt], True),
        Case("mount (README command 1)", ["mount", mnt], False),
        Case("mount the same point twice", ["mount", mnt], True),
        Case("status with a mount", ["status"], False),
        Case("stats of the mount", ["stats", mnt], False),
        Case("doctor", ["doctor"], False),
        Case("doctor --json", ["doctor", "--json"], False),
        Case("search", ["search", "dark mode"], False),
        Case("an empty log entry", ["log", ""], True),
        Case("a log entry", ["log", "met Bob about the deploy"], False),
        Case("export into the mount itself", ["export", f"{mnt}/backup"], True),
        Case("export onto a file", ["export", "afile.md"], True),
        Case("export to a folder", ["export", "backup"], False),
        Case(
            "export over a file edited since",
            ["export", "backup"],
            True,
            before=_write("backup/MEMORY.md", "edited by hand\n"),
            after=_kept("backup/MEMORY.md", "edited by hand\n"),
        ),
        Case(
            "import a tree with a FIFO, .git and .obsidian",
            ["import", "notes-with-extras"],
            False,
            before=_fifo_and_git,
        ),
        Case(
            "sync --dry-run",
            ["sync", "--once", "--dry-run", "synced"],
            False,
            before=_write("synced/draft.md", "a draft\n"),
        ),
        Case("sync", ["sync", "--once", "synced"], False),
        Case(
            "sync the same folder as another user",
            ["sync", "--once", "synced", "--user-id", "bob"],
            True,
            after=_kept("synced/draft.md", "a draft\n"),
        ),
        Case("versions of a file that does not exist", ["versions", "nope.md"], True),
        Case("restore a version that does not exist", ["restore", "MEMORY.md", "999"], True),
        Case("recover with nothing to recover", ["recover"], False),
        Case("completion for fish", ["completion", "fish"], False),
        Case("completion for a shell it does not know", ["completion", "tcsh"], True),
        Case("the manual", ["man"], False),
        Case("migrate with no Reborn table", ["migrate", "--dry-run"], True),
        Case("umount", ["umount", mnt], False),
        Case(
            "mount with a non-ASCII user id",
            ["mount", mnt, "--user-id", "Zoë"],
            False,
            after=_unmounted,
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the HOME it made")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="memfs-first-hour-", dir="/var/tmp"))
    (home / "run").mkdir(mode=0o700)
    outcomes: list[Outcome] = []
    try:
        for case in cases():
            outcomes.append(run_case(home, case))
            print(".", end="", flush=True, file=sys.stderr)
    finally:
        memfs(home, "umount", "--force", str(home / "memory"))
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
    print(file=sys.stderr)
    print("| # | case | exit | lines | first line | says what to do | problem |")
    print("|---|---|---|---|---|---|---|")
    for n, o in enumerate(outcomes, 1):
        first = o.first.replace("|", "\\|")[:110]
        advice = ("yes" if o.advice else "no") if o.case.mistake else "-"
        problem = "traceback" if o.traceback else (o.problem or "")
        print(f"| {n} | {o.case.what} | {o.code} | {o.lines} | {first} | {advice} | {problem} |")
    mistakes = [o for o in outcomes if o.case.mistake]
    bad = [o for o in outcomes if o.traceback or o.problem]
    print(f"\n{len(outcomes)} cases, {len(mistakes)} mistakes: "
          f"{sum(o.lines == 1 for o in mistakes)} answered in one line, "
          f"{sum(o.advice for o in mistakes)} saying what to do; "
          f"{sum(o.traceback for o in outcomes)} tracebacks, "
          f"{sum(o.problem == 'hang' for o in outcomes)} hangs, "
          f"{sum(bool(o.problem and o.problem.startswith('lost')) for o in outcomes)} lost files, "
          f"{len(bad)} problems")  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
