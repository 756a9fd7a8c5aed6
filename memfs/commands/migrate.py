"""``memfs migrate``: a legacy workspace copied into IronClaw's Reborn layout."""

from __future__ import annotations

from memfs.commands.arguments import Parser, database_flags, flag_type, json_flag
from memfs.commands.base import Command, Invocation
from memfs.config import check_database_url
from memfs.errors import EXIT_FAILED, EXIT_OK
from memfs.options import parse_scope_segment

_TARGETS = (
    ("tenant", "tenant (default: reborn-cli)"),
    ("user", "user (default: reborn-cli for 'default', else the same id)"),
    ("agent", "agent (default: reborn-cli-agent; 'none' for no agent)"),
    ("project", "project (default: none)"),
)


def arguments(parser: Parser) -> None:
    database_flags(parser)
    parser.add_argument("--to-database-url", metavar="URL",
                        help="the database to copy into (default: the same one)")  # fmt: skip
    for flag, role in _TARGETS:
        parser.add_argument(f"--to-{flag}", dest=f"to_{flag}", metavar="ID",
                            type=flag_type(parse_scope_segment),
                            help=f"the target {role}")  # fmt: skip
    parser.add_argument("--dry-run", action="store_true",
                        help="report what would be copied; write nothing")  # fmt: skip
    json_flag(parser)


def run(call: Invocation) -> int:
    from memfs.migrate import migrate, target_from

    args = call.args
    settings = call.settings()
    if args.to_database_url:
        check_database_url(args.to_database_url, "--to-database-url")
    report = migrate(settings, target_from(args), dry_run=args.dry_run)
    report.emit(args.json)
    return EXIT_FAILED if report.counts.get("refused") else EXIT_OK


COMMAND = Command(
    name="migrate",
    summary="copy a legacy workspace into IronClaw's Reborn layout (v1.1 and later)",
    description="""
Copies the workspace's documents from memory_documents into root_filesystem_entries, each
with every version it had (as version sidecars), its metadata (as a .meta sidecar) and
chunks rebuilt as IronClaw's indexer builds them, one document per transaction. The legacy
rows are only read. A second run copies what the first did not (stopped, or new since);
documents already there with the same content and versions are counted as present, and
any other document found at a path is left as it is and listed. The target database must
hold IronClaw's Reborn tables (IronClaw >= 1.1 creates them when it starts). Without --to-*
options the copy goes where IronClaw >= 1.1 reads by default: tenant reborn-cli, agent
reborn-cli-agent, and user reborn-cli for the legacy default user 'default' (any other
user keeps its id). Exits 1 if some documents could not be copied.""",
    examples="""
memfs migrate --dry-run
memfs migrate
memfs migrate --user-id alice --to-user alice --json
memfs migrate --database-url postgresql://old/db --to-database-url postgresql://new/db""",
    arguments=arguments,
    run=run,
)
