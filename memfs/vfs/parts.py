"""The model's parts, as the pieces around it (other writers' events, the upkeep loop)
are handed them."""

from __future__ import annotations

from typing import Protocol

from memfs.vfs.base import Lookups
from memfs.vfs.commits import Commits
from memfs.vfs.committed import CommittedContent
from memfs.vfs.content import Contents
from memfs.vfs.namespace import Names
from memfs.vfs.saves import SavePatterns


class ModelParts(Protocol):
    """What ``memfs.vfs.Filesystem`` is made of: other writers' events and the upkeep
    loop are given it and take the parts they use."""

    lookups: Lookups
    contents: Contents
    commits: Commits
    committed: CommittedContent
    names: Names
    patterns: SavePatterns
