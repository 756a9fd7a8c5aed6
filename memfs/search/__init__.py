"""Search: IronClaw's hybrid ranking, and how ``.search/`` presents it."""

from __future__ import annotations

from memfs.search.config import SearchConfig, SearchConfigError
from memfs.search.engine import SearchEngine, SearchOutcome
from memfs.search.fusion import SearchResult, fuse

__all__ = [
    "SearchConfig",
    "SearchConfigError",
    "SearchEngine",
    "SearchOutcome",
    "SearchResult",
    "fuse",
]
