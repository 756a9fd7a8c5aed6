"""Schema: detect what a database holds, create IronClaw's tables on an empty one.

Three cases (``docs/ironclaw/legacy.md`` §1.8 and requirements 1-3):

* **IronClaw database** - ``refinery_schema_history`` holds IronClaw's V1 row and
  ``memory_documents`` + ``list_workspace_files`` exist.  Its objects are used as they are:
  memfs never alters them and never touches ``refinery_schema_history``.  Optional features
  (versions, escaped LIKE) are enabled only where their objects exist.
* **Empty database** - memfs creates IronClaw's memory objects in their final legacy form
  (V1 + V9 dimensionless vector + V16 versions + V23 escaped listing).
* **Reborn-only database** (``root_filesystem_entries`` without ``memory_documents``) -
  refused: IronClaw >= 1.1 no longer reads ``memory_documents``, so a mount would be a dead copy.

memfs's own state always lives in the ``memfs`` schema.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import psycopg

from memfs.errors import SchemaError

log = logging.getLogger(__name__)

#: IronClaw's pinned refinery checksum of ``V1__initial.sql`` (docs/ironclaw/legacy.md §1.8).
IRONCLAW_V1_CHECKSUM = "13924994861355873385"
#: Advisory lock key that serialises schema set-up between concurrent mounts ("memfs" in hex).
SCHEMA_LOCK_KEY = 0x6D656D6673
#: Version of the objects in the ``memfs`` schema.
MEMFS_SCHEMA_VERSION = 8


def _trigger_once(name: str, table: str, events: str, action: str) -> str:
    """DDL creating trigger ``name`` on ``table`` unless it is there (``CREATE OR REPLACE
    TRIGGER`` needs PostgreSQL 14, and IronClaw's databases may be older)."""
    return f"""DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = '{name}'
                   AND tgrelid = '{table}'::regclass) THEN
        CREATE TRIGGER {name} {events} ON {table} {action};
    END IF;
END $$;
"""


IRONCLAW_TABLES_DDL = r"""
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE memory_documents (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id TEXT NOT NULL,
    agent_id UUID,
    path TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    metadata JSONB NOT NULL DEFAULT '{}'::jsonb,
    CONSTRAINT unique_path_per_user UNIQUE (user_id, agent_id, path)
);
CREATE INDEX idx_memory_documents_user ON memory_documents (user_id);
CREATE INDEX idx_memory_documents_path ON memory_documents (user_id, path);
CREATE INDEX idx_memory_documents_path_prefix ON memory_documents (user_id, path text_pattern_ops);
CREATE INDEX idx_memory_documents_updated ON memory_documents (updated_at DESC);
CREATE INDEX idx_memory_documents_metadata ON memory_documents USING GIN (metadata jsonb_path_ops);

CREATE OR REPLACE FUNCTION update_updated_at_column() RETURNS TRIGGER AS $$
BEGIN
    NEW.updated_at = NOW();
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER update_memory_documents_updated_at
    BEFORE UPDATE ON memory_documents
    FOR EACH ROW EXECUTE FUNCTION update_updated_at_column();

CREATE TABLE memory_chunks (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    document_id UUID NOT NULL REFERENCES memory_documents(id) ON DELETE CASCADE,
    chunk_index INT NOT NULL,
    content TEXT NOT NULL,
    content_tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    embedding vector,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    CONSTRAINT unique_chunk_per_doc UNIQUE (document_id, chunk_index)
);
CREATE INDEX idx_memory_chunks_tsv ON memory_chunks USING GIN (content_tsv);
CREATE INDEX idx_memory_chunks_document ON memory_chunks (document_id);

CREATE TABLE memory_document_versions (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    document_id UUID NOT NULL REFERENCES memory_documents(id) ON DELETE CASCADE,
    version INTEGER NOT NULL,
    content TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    changed_by TEXT,
    UNIQUE (document_id, version)
);
CREATE INDEX idx_doc_versions_lookup ON memory_document_versions (document_id, version DESC);

CREATE VIEW memory_documents_summary AS
SELECT d.id, d.user_id, d.path, d.created_at, d.updated_at,
       COUNT(c.id) AS chunk_count,
       COUNT(c.embedding) AS embedded_chunk_count
FROM memory_documents d
LEFT JOIN memory_chunks c ON c.document_id = d.id
GROUP BY d.id;

CREATE VIEW chunks_pending_embedding AS
SELECT c.id AS chunk_id, c.document_id, d.user_id, d.path, LENGTH(c.content) AS content_length
FROM memory_chunks c
JOIN memory_documents d ON d.id = c.document_id
WHERE c.embedding IS NULL;

CREATE OR REPLACE FUNCTION ironclaw_escape_like(s TEXT) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $$
    SELECT replace(replace(replace(s, '\', '\\'), '%', '\%'), '_', '\_')
$$;

CREATE OR REPLACE FUNCTION list_workspace_files(
    p_user_id TEXT, p_agent_id UUID, p_directory TEXT DEFAULT ''
) RETURNS TABLE (path TEXT, is_directory BOOLEAN, updated_at TIMESTAMPTZ, content_preview TEXT)
LANGUAGE sql STABLE AS $$
    WITH params AS (
        SELECT CASE WHEN p_directory <> '' AND right(p_directory, 1) <> '/'
                    THEN p_directory || '/' ELSE p_directory END AS dir
    ), docs AS (
        SELECT d.path AS doc_path, d.updated_at AS doc_updated, d.content AS doc_content,
               split_part(substr(d.path, length(p.dir) + 1), '/', 1) AS child, p.dir AS dir
        FROM memory_documents d, params p
        WHERE d.user_id = p_user_id
          AND d.agent_id IS NOT DISTINCT FROM p_agent_id
          AND (p.dir = '' OR d.path LIKE ironclaw_escape_like(p.dir) || '%' ESCAPE '\')
    ), children AS (
        SELECT dir, child, MAX(doc_updated) AS newest,
               bool_or(doc_path <> dir || child) AS is_dir,
               (array_agg(left(doc_content, 200)) FILTER (WHERE doc_path = dir || child))[1]
                   AS preview
        FROM docs
        WHERE child <> ''
        GROUP BY dir, child
    )
    SELECT dir || child, is_dir, newest, CASE WHEN is_dir THEN NULL ELSE preview END
    FROM children
    ORDER BY child
$$;
"""

MEMFS_SCHEMA_DDL = (
    r"""
CREATE SCHEMA IF NOT EXISTS memfs;
CREATE TABLE IF NOT EXISTS memfs.meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
-- Directories created through a mount (or left empty by one).  IronClaw never reads this.
CREATE TABLE IF NOT EXISTS memfs.directories (
    user_id TEXT NOT NULL,
    agent_id UUID,
    path TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);
CREATE UNIQUE INDEX IF NOT EXISTS directories_scope_path ON memfs.directories
    (user_id, COALESCE(agent_id, '00000000-0000-0000-0000-000000000000'::uuid), path);
-- Client-set mode and mtime of a document, trusted only while the document's updated_at
-- equals set_against (IronClaw's trigger rewrites updated_at on every UPDATE).
-- No foreign key: that would add triggers to IronClaw's table.
CREATE TABLE IF NOT EXISTS memfs.file_attrs (
    document_id UUID PRIMARY KEY,
    mode INTEGER,
    mtime_ns BIGINT,
    set_against TIMESTAMPTZ NOT NULL
);
-- Documents whose content a mount committed and whose chunks are still to be replaced
-- (schema 2).  Written in the content's transaction, emptied by the reindex worker, so a
-- crash between the two is finished by the next mount.  No foreign key, as above.
CREATE TABLE IF NOT EXISTS memfs.reindex_queue (
    document_id UUID PRIMARY KEY,
    queued_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);
-- Reborn workspaces (root_filesystem_entries, keyed by path): directories a mount keeps,
-- never as is_dir rows under /memory (they would block IronClaw's writes), and client
-- attributes, trusted while the row's updated_at equals set_against (schema 4).
CREATE TABLE IF NOT EXISTS memfs.reborn_directories (
    path TEXT COLLATE "C" PRIMARY KEY,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);
CREATE TABLE IF NOT EXISTS memfs.reborn_attrs (
    path TEXT COLLATE "C" PRIMARY KEY,
    mode INTEGER,
    mtime_ns BIGINT,
    set_against TIMESTAMPTZ NOT NULL
);
-- Files of tool folders (.obsidian, .trash, …): kept across mounts, never memory (schema 5).
-- ``workspace`` names the workspace (legacy user and agent, or a Reborn scope prefix).
CREATE TABLE IF NOT EXISTS memfs.tool_files (
    workspace TEXT NOT NULL,
    path TEXT COLLATE "C" NOT NULL,
    is_dir BOOLEAN NOT NULL DEFAULT false,
    content BYTEA NOT NULL DEFAULT ''::bytea,
    mode INTEGER NOT NULL,
    mtime_ns BIGINT NOT NULL,
    changed_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (workspace, path)
);
ALTER TABLE memfs.tool_files
    ADD COLUMN IF NOT EXISTS changed_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp();
-- Mounts listening to the change feed learn that tool files changed (they look which).
CREATE OR REPLACE FUNCTION memfs.notify_tools() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('memfs_changes', '{"op": "TOOLS"}');
    RETURN NULL;
END $$;
"""
    + _trigger_once(
        "memfs_notify_tools",
        "memfs.tool_files",
        "AFTER INSERT OR UPDATE OR DELETE",
        "FOR EACH STATEMENT EXECUTE FUNCTION memfs.notify_tools()",
    )
    + r"""
-- Documents deleted from memory, kept with their versions for `memfs undelete` and `.at/`
-- (schema 6): what a mount deletes (in the deleting transaction), and with memfs's trigger
-- what SQL deletes.  ``workspace`` names the workspace as in memfs.tool_files; ``versions``
-- is a JSON array of {version, content, changed_by, created_at}.  IronClaw's tables hold
-- nothing extra; rows older than the retention are purged by the mounts' upkeep.
CREATE TABLE IF NOT EXISTS memfs.deleted_documents (
    id BIGSERIAL PRIMARY KEY,
    workspace TEXT NOT NULL,
    path TEXT COLLATE "C" NOT NULL,
    content TEXT NOT NULL,
    created_at TIMESTAMPTZ,
    updated_at TIMESTAMPTZ,
    versions JSONB NOT NULL DEFAULT '[]'::jsonb,
    deleted_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    deleted_by TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS deleted_documents_by_path
    ON memfs.deleted_documents (workspace, path, deleted_at);
-- Moves of documents and folders (schema 6), recorded from the first mount of schema 6
-- on: by a mount in the moving transaction, and with memfs's trigger those made by SQL.
-- ``.at/<time>/`` places each document where it was then.
CREATE TABLE IF NOT EXISTS memfs.path_history (
    id BIGSERIAL PRIMARY KEY,
    workspace TEXT NOT NULL,
    old_path TEXT COLLATE "C" NOT NULL,
    new_path TEXT COLLATE "C" NOT NULL,
    folder BOOLEAN NOT NULL DEFAULT false,
    moved_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS path_history_by_time ON memfs.path_history (workspace, moved_at);
-- When a document held an empty content (schema 7): IronClaw keeps no version of one, so
-- without this ``.at/`` would show a later content for a moment the document was empty.
-- Written by the save that fills it again, at the path the document has then.
CREATE TABLE IF NOT EXISTS memfs.empty_spells (
    id BIGSERIAL PRIMARY KEY,
    workspace TEXT NOT NULL,
    path TEXT COLLATE "C" NOT NULL,
    emptied_at TIMESTAMPTZ NOT NULL,
    filled_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS empty_spells_by_time ON memfs.empty_spells (workspace, filled_at);
-- A writer's bytes exactly as saved, where the stored content is not them (schema 8): a
-- save merged with another writer's change.  The safety net under the merge rule, listed
-- as ``.versions/<file>/as-saved_*``; never a row of IronClaw's.
CREATE TABLE IF NOT EXISTS memfs.saver_copies (
    id BIGSERIAL PRIMARY KEY,
    workspace TEXT NOT NULL,
    path TEXT COLLATE "C" NOT NULL,
    reason TEXT NOT NULL,
    content BYTEA NOT NULL,
    kept_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS saver_copies_by_path ON memfs.saver_copies (workspace, path, kept_at);
CREATE INDEX IF NOT EXISTS saver_copies_by_time ON memfs.saver_copies (workspace, kept_at);
-- Since when moves are recorded, per workspace (``.at/`` before it: today's paths).
CREATE TABLE IF NOT EXISTS memfs.history_start (
    workspace TEXT PRIMARY KEY,
    started_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE OR REPLACE FUNCTION memfs.legacy_workspace(p_user text, p_agent uuid) RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT 'legacy/' || p_user || '/' || COALESCE(p_agent::text, '-') $$;
-- A legacy document and its versions into memfs.deleted_documents, before its delete
-- (the versions go with it: ON DELETE CASCADE).  Names resolve at run time: a database
-- without memory_document_versions (IronClaw < 0.25) keeps the content alone.
CREATE OR REPLACE FUNCTION memfs.keep_document(doc uuid, by_whom text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF to_regclass('memory_document_versions') IS NULL THEN
        INSERT INTO memfs.deleted_documents
            (workspace, path, content, created_at, updated_at, deleted_by)
        SELECT memfs.legacy_workspace(d.user_id, d.agent_id), d.path, d.content,
               d.created_at, d.updated_at, by_whom
        FROM memory_documents d WHERE d.id = doc;
    ELSE
        INSERT INTO memfs.deleted_documents
            (workspace, path, content, created_at, updated_at, versions, deleted_by)
        SELECT memfs.legacy_workspace(d.user_id, d.agent_id), d.path, d.content,
               d.created_at, d.updated_at,
               COALESCE((SELECT jsonb_agg(jsonb_build_object(
                            'version', v.version, 'content', v.content,
                            'changed_by', v.changed_by, 'created_at', v.created_at)
                            ORDER BY v.version)
                         FROM memory_document_versions v WHERE v.document_id = d.id),
                        '[]'::jsonb),
               by_whom
        FROM memory_documents d WHERE d.id = doc;
    END IF;
END $$;
-- A one-round-trip save sends every statement at once, guarded by this: if the row (or
-- the path, for a new document) is not as the mount last saw it, the transaction fails
-- with SQLSTATE MF001 and the mount saves again the careful way (schema 3).
CREATE OR REPLACE FUNCTION memfs.expect(ok boolean, what text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF ok IS NOT TRUE THEN
        RAISE EXCEPTION 'memfs: the % changed since this mount last saw it', what
            USING ERRCODE = 'MF001';
    END IF;
END $$;
"""
)


#: Channel the change-feed trigger notifies on.
CHANGE_CHANNEL = "memfs_changes"

# The one addition memfs makes to an IronClaw object (docs/ironclaw/legacy.md, requirement 3): a
# trigger named memfs_* whose function lives in the memfs schema.  It sends ids and paths,
# never content; payloads over NOTIFY's 8000-byte limit become a RESYNC request.
CHANGE_FEED_DDL = r"""
CREATE OR REPLACE FUNCTION memfs.notify_change() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    payload jsonb;
BEGIN
    IF TG_OP = 'DELETE' THEN
        payload := jsonb_build_object('op', 'DELETE', 'id', OLD.id, 'user', OLD.user_id,
                                      'agent', OLD.agent_id, 'path', OLD.path);
    ELSIF TG_OP = 'INSERT' THEN
        payload := jsonb_build_object('op', 'INSERT', 'id', NEW.id, 'user', NEW.user_id,
                                      'agent', NEW.agent_id, 'path', NEW.path);
    ELSE
        payload := jsonb_build_object('op', 'UPDATE', 'id', NEW.id, 'user', NEW.user_id,
                                      'agent', NEW.agent_id, 'path', NEW.path,
                                      'old_path', OLD.path);
    END IF;
    payload := payload || jsonb_build_object('origin', current_setting('memfs.origin', true));
    IF octet_length(payload::text) > 7900 THEN
        payload := jsonb_build_object('op', 'RESYNC', 'user', COALESCE(NEW.user_id, OLD.user_id));
    END IF;
    PERFORM pg_notify('memfs_changes', payload::text);
    RETURN NULL;
END;
$$;
-- What SQL deletes (IronClaw's own delete, an agent's statement) is kept with its
-- versions, and what SQL moves is recorded, unless a mount's transaction does it (it keeps
-- and records itself: memfs.origin is set).  Never IronClaw's transaction's failure: an
-- error here is a warning and the delete goes on.
CREATE OR REPLACE FUNCTION memfs.keep_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF COALESCE(current_setting('memfs.origin', true), '') = '' THEN
        BEGIN
            IF TG_OP = 'DELETE' THEN
                PERFORM memfs.keep_document(OLD.id, 'sql');
            ELSIF NEW.path IS DISTINCT FROM OLD.path THEN
                INSERT INTO memfs.path_history (workspace, old_path, new_path)
                VALUES (memfs.legacy_workspace(NEW.user_id, NEW.agent_id), OLD.path, NEW.path);
            END IF;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'memfs: % of % not kept: %', TG_OP, OLD.path, SQLERRM;
        END;
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END;
$$;
""" + _trigger_once(
    "memfs_keep_deleted", "memory_documents",
    "BEFORE DELETE OR UPDATE OF path", "FOR EACH ROW EXECUTE FUNCTION memfs.keep_deleted()",
) + _trigger_once(
    "memfs_notify_change", "memory_documents",
    "AFTER INSERT OR UPDATE OR DELETE", "FOR EACH ROW EXECUTE FUNCTION memfs.notify_change()",
)  # fmt: skip


def install_change_feed(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Install (idempotently) the change-feed trigger; needs ownership of memory_documents."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
        conn.execute(CHANGE_FEED_DDL)  # type: ignore[arg-type]


def has_change_feed(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'memfs_notify_change' "
        "AND tgrelid = to_regclass('memory_documents'))"
    ).fetchone()
    return bool(row and row[0])


@dataclass(frozen=True)
class SchemaInfo:
    """What the connected database holds, as far as memfs cares."""

    kind: str  # "ironclaw", "compatible", "created" or "reborn"
    has_versions: bool
    has_escape_like: bool

    def describe(self) -> str:
        if self.kind == "reborn":
            return "IronClaw Reborn memory (root_filesystem_entries, v1.1 and later)"
        extras = []
        if self.has_versions:
            extras.append("document versions")
        if self.has_escape_like:
            extras.append("escaped listing")
        features = ", ".join(extras) or "no optional features"
        return f"{self.kind} memory schema ({features})"


def _exists(conn: psycopg.Connection[tuple[object, ...]], regclass: str) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (regclass,)).fetchone()
    return bool(row and row[0])


def _function_exists(conn: psycopg.Connection[tuple[object, ...]], signature: str) -> bool:
    row = conn.execute("SELECT to_regprocedure(%s) IS NOT NULL", (signature,)).fetchone()
    return bool(row and row[0])


def _is_ironclaw(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    if not _exists(conn, "refinery_schema_history"):
        return False
    row = conn.execute(
        "SELECT name, checksum FROM refinery_schema_history WHERE version = 1"
    ).fetchone()
    if row is None:
        return False
    if row[0] != "initial" or str(row[1]) != IRONCLAW_V1_CHECKSUM:
        log.warning(
            "refinery_schema_history V1 is %r with checksum %s, not IronClaw's; "
            "treating the database as IronClaw's anyway and altering nothing",
            row[0],
            row[1],
        )
    return True


def reborn_is_live(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    """True when IronClaw >= 1.1 keeps this database's memory in ``root_filesystem_entries``.

    Either a >= 1.1 process has started here (it creates ``root_filesystem_ordered_index_rows``,
    migration V33), or memory documents already live under ``/memory/tenants/`` (a Reborn
    1.0 binary).  IronClaw <= 1.0 also creates ``root_filesystem_entries`` (V26+) but keeps
    no memory there, so the table alone decides nothing.
    """
    if not _exists(conn, "root_filesystem_entries"):
        return False
    if _exists(conn, "root_filesystem_ordered_index_rows"):
        return True
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM information_schema.columns "
        "WHERE table_name = 'root_filesystem_entries' AND column_name = 'kind' "
        "AND table_schema = ANY (current_schemas(false)))"
    ).fetchone()
    if not (row and row[0]):
        return False
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM root_filesystem_entries "
        "WHERE kind = 'memory_document' AND path LIKE '/memory/tenants/%')"
    ).fetchone()
    return bool(row and row[0])


#: The columns memfs reads and writes in each of IronClaw's tables: a table of that name
#: without them is another program's, refused in one line before any query of memfs's
#: fails on it.
EXPECTED_COLUMNS = {
    "memory_documents": ("id", "user_id", "agent_id", "path", "content", "created_at",
                         "updated_at", "metadata"),
    "memory_chunks": ("document_id", "chunk_index", "content"),
    "root_filesystem_entries": ("path", "contents", "created_at", "updated_at", "is_dir",
                                "content_type", "kind", "indexed", "version"),
}  # fmt: skip


def _check_columns(conn: psycopg.Connection[tuple[object, ...]], table: str) -> None:
    found = {
        str(row[0])
        for row in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) "
            "AND attnum > 0 AND NOT attisdropped",
            (table,),
        )
    }
    missing = [c for c in EXPECTED_COLUMNS[table] if c not in found]
    if missing:
        raise SchemaError(
            f"this database's {table} table is not IronClaw's (no column "
            f"{', '.join(missing)}): memfs will not guess; point it at IronClaw's database "
            "or an empty one"
        )


def inspect(conn: psycopg.Connection[tuple[object, ...]]) -> SchemaInfo | None:
    """Describe the database's memory schema, or None if it has none yet."""
    has_docs = _exists(conn, "memory_documents")
    reborn = reborn_is_live(conn) or (not has_docs and _exists(conn, "root_filesystem_entries"))
    if reborn:
        _check_columns(conn, "root_filesystem_entries")
        if has_docs:
            log.info(
                "IronClaw >= 1.1 keeps this database's memory in root_filesystem_entries; "
                "memory_documents is the frozen copy it no longer reads (left untouched; "
                "`memfs migrate` copies it over)"
            )
        return SchemaInfo(kind="reborn", has_versions=True, has_escape_like=False)
    if not has_docs:
        return None
    for needed in ("memory_chunks",):
        if not _exists(conn, needed):
            raise SchemaError(f"memory_documents exists but {needed} does not; refusing to guess")
    _check_columns(conn, "memory_documents")
    _check_columns(conn, "memory_chunks")
    kind = "ironclaw" if _is_ironclaw(conn) else "compatible"
    if kind == "ironclaw" and not _function_exists(conn, "list_workspace_files(text,uuid,text)"):
        log.warning("IronClaw database without list_workspace_files; continuing")
    return SchemaInfo(
        kind=kind,
        has_versions=_exists(conn, "memory_document_versions"),
        has_escape_like=_function_exists(conn, "ironclaw_escape_like(text)"),
    )


def _upgrade_change_feed(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """An installed change feed gets schema 6's trigger too (SQL deletes kept, SQL moves
    recorded), where this role may (it needs ownership of memory_documents)."""
    try:
        with conn.transaction():  # a savepoint: a refusal leaves the upgrade whole
            conn.execute(CHANGE_FEED_DDL)  # type: ignore[arg-type]
    except psycopg.errors.InsufficientPrivilege:
        log.warning(
            "memfs's trigger that keeps documents deleted by SQL is not installed (this "
            "role does not own memory_documents): `memfs init` as the owner installs it"
        )


def memfs_schema_version(conn: psycopg.Connection[tuple[object, ...]]) -> int | None:
    """The version of the ``memfs`` schema's objects here (None: not there yet)."""
    if not _exists(conn, "memfs.meta"):
        return None
    row = conn.execute("SELECT value FROM memfs.meta WHERE key = 'schema_version'").fetchone()
    return int(str(row[0])) if row else None


def ensure_schema(conn: psycopg.Connection[tuple[object, ...]]) -> SchemaInfo:
    """Create what is missing, in one transaction, and describe the result.

    IronClaw's objects are created only when ``memory_documents`` is absent; an existing
    memory schema is never altered.  The ``memfs`` schema is created or upgraded in place.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
        info = inspect(conn)
        if info is not None and memfs_schema_version(conn) == MEMFS_SCHEMA_VERSION:
            # Nothing to create or upgrade: no DDL, so a role that may not create (a
            # SELECT-only role's read-only mount) uses what the owner set up.
            return info
        created = info is None
        if info is None:
            log.info("no memory tables found: creating IronClaw-compatible schema")
            conn.execute(IRONCLAW_TABLES_DDL)  # type: ignore[arg-type]
            info = SchemaInfo(kind="created", has_versions=True, has_escape_like=True)
        conn.execute(MEMFS_SCHEMA_DDL)  # type: ignore[arg-type]
        if created:  # our own database: the change feed comes with it
            conn.execute(CHANGE_FEED_DDL)  # type: ignore[arg-type]
        elif info.kind != "reborn" and has_change_feed(conn):
            _upgrade_change_feed(conn)
        conn.execute(
            "INSERT INTO memfs.meta (key, value) VALUES ('schema_version', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            (str(MEMFS_SCHEMA_VERSION),),
        )
    return info
