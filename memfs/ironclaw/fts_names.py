"""The name IronClaw gives a scope's full-text index (docs/ironclaw/reborn.md §5.4, libsql.md §3.2).

On PostgreSQL it names the scope's GIN index; on libSQL the same name with ``_fts`` is the
scope's FTS5 table, and with ``_ai``/``_au``/``_ad`` its triggers.  memfs must compute it
exactly: on libSQL it searches that table and, on a scope's first search, creates it as
IronClaw would.
"""

from __future__ import annotations

import re

from blake3 import blake3

#: The spec IronClaw's search declares for a memory scope's full-text index: its name,
#: keys (JSON text) and kind, in ``root_filesystem_index_specs``.
FTS_SPEC_NAME = "memory_chunks_content_fts"
FTS_SPEC_KEYS = '["content"]'
FTS_SPEC_KIND = "fts"

#: PostgreSQL's identifier limit is 63 bytes; IronClaw keeps names to 62.
_LONGEST = 62
_KEPT = 53
_NOT_WORD = re.compile(r"[^A-Za-z0-9]")


def sql_index_name(prefix: str, name: str) -> str:
    """``idx_rfs_`` + the prefix without its outer slashes and ``name``, every character
    that is not an ASCII letter or digit made ``_``; a longer name than 62 bytes is cut to
    53 characters, ``_`` and the first 8 hex digits of the full name's BLAKE3 hash."""
    full = "idx_rfs_" + _NOT_WORD.sub("_", f"{prefix.strip('/')}_{name}")
    if len(full.encode("utf-8")) <= _LONGEST:
        return full
    return f"{full[:_KEPT]}_{blake3(full.encode('utf-8')).hexdigest()[:8]}"


def scope_like_pattern(prefix: str) -> str:
    """The ``LIKE ... ESCAPE '!'`` pattern IronClaw's index predicate and triggers give the
    rows below a scope: ``!``, ``%`` and ``_`` in the prefix escaped with ``!``."""
    return prefix.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "/%"
