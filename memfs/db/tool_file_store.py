"""Files of tool folders (``.obsidian``, ``.trash``, …) in ``memfs.tool_files``: any bytes,
kept for every mount of a workspace, never in the agent's tables (``memfs.vfs.tool_folders``)."""

from __future__ import annotations

from collections.abc import Sequence

from memfs.db.capabilities import KnownDigests, ToolFile, WrittenMeanwhile
from memfs.db.scoped import Conn, Pool, fetch_all


class ToolFileStore:
    """One workspace's tool files."""

    def __init__(self, pool: Pool, workspace: str) -> None:
        self.pool = pool
        self.workspace = workspace

    def load(self) -> list[ToolFile]:
        """Every tool file and folder, parents before children."""
        rows = fetch_all(
            self.pool,
            "SELECT path, is_dir, content, mode, mtime_ns FROM memfs.tool_files "
            "WHERE workspace = %s ORDER BY path",
            (self.workspace,),
            binary=True,
        )
        return [ToolFile(p, d, bytes(c), m, t) for p, d, c, m, t in rows]

    def fingerprint(self) -> tuple[int, object]:
        """Changes by any mount show as a new (count, sum of the rows' ``xmin``) pair:
        every write gives its rows the writing transaction's id.  Not the latest
        ``changed_at``: a write whose statement ran earlier may commit later, leaving the
        latest time as it was when this mount last looked."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*), sum(xmin::text::bigint) FROM memfs.tool_files "
                "WHERE workspace = %s",
                (self.workspace,),
            ).fetchone()
        return (int(row[0]), row[1]) if row else (0, None)

    def digests(self) -> dict[str, tuple[bool, int, int, str]]:
        """Path -> (is a folder, mode, mtime, MD5 of the content), without the contents."""
        rows = fetch_all(
            self.pool,
            "SELECT path, is_dir, mode, mtime_ns, md5(content) FROM memfs.tool_files "
            "WHERE workspace = %s ORDER BY path",
            (self.workspace,),
        )
        return {path: (d, m, t, h) for path, d, m, t, h in rows}

    def contents(self, paths: Sequence[str]) -> dict[str, bytes]:
        rows = fetch_all(
            self.pool,
            "SELECT path, content FROM memfs.tool_files WHERE workspace = %s AND path = ANY(%s)",
            (self.workspace, list(paths)),
            binary=True,
        )
        return {path: bytes(content) for path, content in rows}

    def apply_checked(
        self, upserts: Sequence[ToolFile], removed: Sequence[str], expected: KnownDigests
    ) -> WrittenMeanwhile:
        """Write, in one transaction, what still holds what the caller last knew
        (``expected``: path -> MD5 of the content, None for absent): a compare-and-swap.
        Paths another mount wrote meanwhile are left as they are and answered, with their
        content and its MD5, so the caller can keep that content before writing its own."""
        paths = [f.path for f in upserts] + list(removed)
        with self.pool.connection() as conn, conn.transaction():
            rows = conn.execute(
                "SELECT path, is_dir, content, mode, mtime_ns, md5(content) FROM memfs.tool_files "
                "WHERE workspace = %s AND path = ANY(%s) FOR UPDATE",
                (self.workspace, paths),
                binary=True,
            ).fetchall()
            found = {
                path: (ToolFile(path, is_dir, bytes(content), mode, mtime), str(digest))
                for path, is_dir, content, mode, mtime, digest in rows
            }
            clashes = {
                path: found[path]
                for path in paths
                if path in found and found[path][1] != expected.get(path)
                and not found[path][0].is_dir
            }  # fmt: skip
            self._write(
                conn,
                [f for f in upserts if f.path not in clashes],
                [p for p in removed if p not in clashes],
            )
        return clashes

    def apply(self, upserts: Sequence[ToolFile], removed: Sequence[str]) -> None:
        """Write what changed since the last call, in one transaction."""
        with self.pool.connection() as conn, conn.transaction():
            self._write(conn, upserts, removed)

    def _write(self, conn: Conn, upserts: Sequence[ToolFile], removed: Sequence[str]) -> None:
        if removed:
            conn.execute(
                "DELETE FROM memfs.tool_files WHERE workspace = %s AND path = ANY(%s)",
                (self.workspace, list(removed)),
            )
        if upserts:
            conn.cursor().executemany(
                "INSERT INTO memfs.tool_files (workspace, path, is_dir, content, mode, "
                "mtime_ns) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (workspace, path) "
                "DO UPDATE SET is_dir = EXCLUDED.is_dir, content = EXCLUDED.content, "
                "mode = EXCLUDED.mode, mtime_ns = EXCLUDED.mtime_ns, "
                "changed_at = clock_timestamp()",
                [(self.workspace, f.path, f.is_dir, f.content, f.mode, f.mtime_ns)
                 for f in upserts],
            )  # fmt: skip
