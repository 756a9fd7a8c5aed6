"""``memfs stats DIR``: a running mount's live statistics."""

from __future__ import annotations

from pathlib import Path

from memfs.commands.arguments import Parser, json_flag
from memfs.commands.base import Command, Invocation
from memfs.commands.common import ask_mount
from memfs.errors import MountError


def arguments(parser: Parser) -> None:
    parser.add_argument("mountpoint", type=Path, help="a directory memfs has mounted")
    parser.add_argument("--all", action="store_true", help="every sample, buckets too")
    json_flag(parser)


def run(call: Invocation) -> int:
    """Ask the daemon for its live statistics (``memfs.stats``); the command's modules
    only, not the daemon's."""
    from memfs.stats import sample_name
    from memfs.workspace_tasks import Report

    args = call.args
    reply = ask_mount(args.mountpoint, {"op": "stats"})
    samples = reply.get("stats") if reply else None
    if not isinstance(samples, list):
        raise MountError(
            f"no statistics from {args.mountpoint}: not a memfs mount of this user, or its "
            "daemon predates `memfs stats`"
        )
    shown = [s for s in samples if args.all or not s["metric"].endswith("_bucket")]
    if args.json:
        Report("stats", items=shown).emit(True)
        return 0
    names = [sample_name(s) for s in shown]
    width = max((len(n) for n in names), default=0)
    for name, sample in zip(names, shown, strict=True):
        print(f"{name:<{width}}  {sample['value']:g}")
    return 0


COMMAND = Command(
    name="stats",
    summary="print a running mount's live statistics",
    description="""
Asks the daemon serving the mount for its statistics: FUSE requests and errors (by
operation and errno), commits by outcome, database calls and their time, the content
cache, open and unsaved files, deferred changes. The same numbers `--metrics` serves to
Prometheus. Histogram buckets only with --all.""",
    examples="""
memfs stats ~/memory
memfs stats --json ~/memory | jq '.counts'""",
    arguments=arguments,
    run=run,
)
