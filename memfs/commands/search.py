"""``memfs search QUERY``: the workspace searched as IronClaw ranks it (``.search/``'s engine)."""

from __future__ import annotations

from memfs.commands.arguments import Parser, database_flags, flag_type, json_flag
from memfs.commands.base import Command, Invocation
from memfs.options import SettingError


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise SettingError("expected a whole number from 1 to 100") from None
    if not 1 <= value <= 100:
        raise SettingError("expected a whole number from 1 to 100")
    return value


def arguments(parser: Parser) -> None:
    parser.add_argument("query", nargs="+", help="the query (words are joined by spaces)")
    database_flags(parser)
    parser.add_argument("--limit", type=flag_type(_limit), default=10, metavar="N",
                        help="results, 1-100 (default 10)")  # fmt: skip
    json_flag(parser)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--fts", action="store_true", help="full-text search only")
    group.add_argument("--vector", action="store_true",
                       help="vector search only (needs an embedding provider)")  # fmt: skip


def run(call: Invocation) -> int:
    from memfs.search_cli import print_outcome, run_search

    args = call.args
    mode = "fts" if args.fts else ("vector" if args.vector else "hybrid")
    outcome = run_search(call.settings(), " ".join(args.query), limit=args.limit, mode=mode)
    print_outcome(outcome, as_json=args.json)
    return 0


COMMAND = Command(
    name="search",
    summary="search the workspace as IronClaw ranks it",
    description="""
Full-text and vector search fused as IronClaw does (the engine behind .search/). Without
an embedding provider, full-text only. Read-only.""",
    examples="""
memfs search deploy schedule
memfs search deploy --limit 5 --json
memfs search --fts "release notes" """,
    arguments=arguments,
    run=run,
)
