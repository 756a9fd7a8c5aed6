"""A flight recorder for a history run: every change to the workspace's rows, in commit
order, with the writer that made it.

A lost save is usually found seconds after it happened, among hundreds of writes; the rows
at the end say only that the marker is nowhere.  With ``MEMFS_HISTORY_KEEP`` set the
checker installs a trigger that records each INSERT, UPDATE and DELETE (which mount's
transaction, by its ``memfs.origin`` tag, the path before and after, and the last lines
of the content), and saves the record next to the history when a run fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg

#: The table each layout keeps its documents in.
TABLES = {"legacy": "memory_documents", "reborn": "root_filesystem_entries"}

_CONTENT = {
    "legacy": "right({row}.content, 120)",
    "reborn": "right(convert_from({row}.contents, 'UTF8'), 160)",
}


def install(url: str, engine: str) -> None:
    """Record every change to the engine's document table from now on."""
    table = TABLES[engine]
    ident = "id::text" if engine == "legacy" else "path"
    old, new = (_CONTENT[engine].format(row=r) for r in ("OLD", "NEW"))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS history_audit (n bigserial PRIMARY KEY, "
            "at timestamptz DEFAULT clock_timestamp(), xid bigint DEFAULT txid_current(), "
            "origin text, op text, id text, old_path text, new_path text, "
            "old_tail text, new_tail text)"
        )
        conn.execute(
            f"""
            CREATE OR REPLACE FUNCTION history_audit_row() RETURNS trigger AS $$
            BEGIN
              IF TG_OP = 'INSERT' THEN
                INSERT INTO history_audit (origin, op, id, new_path, new_tail) VALUES
                  (current_setting('memfs.origin', true), TG_OP, NEW.{ident}, NEW.path, {new});
              ELSIF TG_OP = 'UPDATE' THEN
                INSERT INTO history_audit (origin, op, id, old_path, new_path, old_tail,
                  new_tail) VALUES (current_setting('memfs.origin', true), TG_OP,
                  NEW.{ident}, OLD.path, NEW.path, {old}, {new});
              ELSE
                INSERT INTO history_audit (origin, op, id, old_path, old_tail) VALUES
                  (current_setting('memfs.origin', true), TG_OP, OLD.{ident}, OLD.path, {old});
              END IF;
              RETURN NULL;
            END $$ LANGUAGE plpgsql
            """
        )
        conn.execute(f"DROP TRIGGER IF EXISTS history_audit ON {table}")
        conn.execute(
            f"CREATE TRIGGER history_audit AFTER INSERT OR UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION history_audit_row()"
        )


def save(url: str, where: Path) -> None:
    """Write the record, in the order the changes were made."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT n, at::text, xid, origin, op, id, old_path, new_path, old_tail, new_tail "
            "FROM history_audit ORDER BY n"
        ).fetchall()
    names = ("n", "at", "xid", "origin", "op", "id", "old_path", "new_path", "old", "new")
    where.write_text(json.dumps([dict(zip(names, r, strict=True)) for r in rows], indent=1))
