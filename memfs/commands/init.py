"""``memfs init``: IronClaw's tables where none are, memfs's schema, the change feed."""

from __future__ import annotations

import sys

from memfs.commands.arguments import Parser, database_flags
from memfs.commands.base import Command, Invocation
from memfs.commands.common import check_embedded


def arguments(parser: Parser) -> None:
    database_flags(parser)
    parser.add_argument("--no-trigger", action="store_true", help="do not install the trigger")


def run(call: Invocation) -> int:
    import psycopg

    from memfs.db import open_for_writing

    settings = call.settings()
    check_embedded(settings)
    database = open_for_writing(settings)
    try:
        if not settings.no_trigger:
            try:
                database.install_change_feed()
            except psycopg.errors.InsufficientPrivilege:
                sys.stderr.write(
                    "memfs: no privilege to add the change-feed trigger to memory_documents "
                    "(it needs the table's owner); mounts will poll for changes instead\n"
                )
        feed = "change feed installed" if database.has_change_feed() else "no change feed"
        print(f"memfs: database ready: {database.schema.describe()}; {feed}")
    finally:
        database.close()
    return 0


COMMAND = Command(
    name="init",
    summary="create the schema and the change-feed trigger",
    description="""
Creates IronClaw's memory tables if the database has none, memfs's own schema, and the
trigger that tells mounts about other writers' changes. Idempotent.""",
    examples="""
memfs init --database-url postgresql://owner@db/ironclaw""",
    arguments=arguments,
    run=run,
)
