"""How ``.search/`` looks: query names with options, result file names and contents."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from memfs.search.engine import SearchOutcome
from memfs.search.fusion import SearchResult

#: Names under ``.search/`` that are tools looking around, not queries: never searched.
PROBE_NAMES = frozenset(
    {
        "HEAD", "RCS", "CVS", "SCCS", "_darcs", "_FOSSIL_", "autorun.inf", "desktop.ini",
        "Thumbs.db", "folder.jpg", "node_modules", "__pycache__", "tags", "TAGS",
    }
)  # fmt: skip
MAX_LIMIT = 100
_OPTION = re.compile(r"^--(limit=(\d+)|fts|vector)$")
OPTIONS_HELP = "--limit=N (1-100), --fts, --vector"


class QueryError(ValueError):
    """A query name whose trailing option memfs does not understand (EINVAL)."""


SLASH = "\u2215"  # DIVISION SLASH: stands for "/" in result file names

README = """\
memfs search
============

List a directory named after your query to search this memory the way IronClaw does
(full-text + vector search fused with Reciprocal Rank Fusion):

    ls ~/memory/.search/"deploy schedule"/
    cat ~/memory/.search/"deploy schedule"/01-MEMORY.md

Each result file is one matching chunk. Its name is the rank, a dash, and the source path
with "/" shown as "\u2215" (a literal "%" is written "%25" and a literal "\u2215" as "%u2215").
The file starts with the source path, score, full-text and vector ranks and chunk index,
then "---" and the chunk text.

Options go at the end of the name:
    --limit=N    at most N results (default 10, at most 100)
    --fts        full-text search only
    --vector     vector search only (needs an embedding provider)

    ls ~/memory/.search/"deploy schedule --limit=20 --fts"/

Results are kept for a short while, so `ls` then `cat` agree. Past queries are not listed
here, so find, grep -r and rsync never run searches. A query name may be longer than a
file name (FUSE allows 1,024 bytes, about 4 KiB on Linux 6.13 and later); for longer
queries use `memfs search`.
"""


@dataclass(frozen=True)
class QuerySpec:
    text: str
    limit: int | None
    mode: str


def parse_query(name: str) -> QuerySpec | None:
    """The query in a directory name, or None for names that are probes, not queries.

    Options go at the end; a trailing ``--word`` that is not one raises ``QueryError``.
    """
    if not name or name.startswith((".", "#", "~")) or name.endswith("~") or name in PROBE_NAMES:
        return None
    words = name.split(" ")
    limit: int | None = None
    mode = "hybrid"
    while words:
        match = _OPTION.match(words[-1])
        if not match:
            if words[-1].startswith("--") and len(words) > 1:
                raise QueryError(f"unknown option {words[-1]!r} (options: {OPTIONS_HELP})")
            break
        words.pop()
        if match.group(2):
            limit = int(match.group(2))
            if not 1 <= limit <= MAX_LIMIT:
                raise QueryError(f"--limit={limit}: use 1 to {MAX_LIMIT}")
        else:
            mode = match.group(1)
    text = " ".join(words).strip()
    if not text:
        return None
    return QuerySpec(text, limit, mode)


def result_name(rank: int, width: int, path: str) -> str:
    """``07-daily∕2026-03-03.md``: zero-padded rank, then the path made filename-safe.

    Reversible: ``%`` becomes ``%25`` and a literal U+2215 becomes ``%u2215`` before ``/``
    becomes U+2215.  Over-long names are cut and end with a hash of the full path.
    """
    safe = path.replace("%", "%25").replace(SLASH, "%u2215").replace("/", SLASH)
    name = f"{rank:0{width}d}-{safe}"
    if len(name.encode()) > 255:
        digest = hashlib.sha256(path.encode()).hexdigest()[:12]
        room = 255 - len(f"…{digest}".encode())
        cut = name.encode()[:room].decode("utf-8", errors="ignore")
        name = f"{cut}…{digest}"
    return name


def source_path(name: str) -> str:
    """Inverse of ``result_name`` for names that were not cut."""
    _, _, safe = name.partition("-")
    return safe.replace(SLASH, "/").replace("%u2215", SLASH).replace("%25", "%")


def render_result(outcome: SearchOutcome, index: int, result: SearchResult) -> bytes:
    def rank(value: int | None) -> str:
        return str(value) if value is not None else "-"

    header = [
        f"source: {result.path}",
        f"score: {result.score:.6f}",
        f"fts_rank: {rank(result.fts_rank)}",
        f"vector_rank: {rank(result.vector_rank)}",
        f"chunk_index: {result.chunk_index}",
        f"result: {index} of {len(outcome.results)}",
        f"query: {outcome.query}",
        f"search: {outcome.describe()}",
        f"document_id: {result.document_id}",
        f"chunk_id: {result.chunk_id}",
        "---",
    ]
    text = "\n".join(header) + "\n" + result.content
    if not text.endswith("\n"):
        text += "\n"
    return text.encode("utf-8")
