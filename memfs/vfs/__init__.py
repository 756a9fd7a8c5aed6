"""The filesystem model: what each FUSE operation means for a workspace.

``Filesystem`` owns the inode tree, the open handles and their buffers, and talks to the
database only through a ``memfs.db.interface.DocumentStore``, whose calls run in worker
threads (never on the trio loop).  It knows nothing of pyfuse3: ``memfs.fuse_ops``
translates requests to these coroutines and ``FsError`` to errno replies, so the whole
model is testable by calling it directly.

The core is one state machine in three layers: ``base`` (state, attributes, listings),
``content`` (buffers and commits), ``namespace`` (names, renames, the scratch overlay).
Around it, each built separately and passed in or handed the filesystem: ``saves``
(editors' save patterns), ``extensions`` (``.search`` in ``search_dir``, ``.scopes`` in
``scopes``, ``.versions`` in ``versions_dir``), ``coherence`` (other writers' changes),
``maintenance`` (background upkeep).
"""

from __future__ import annotations

from memfs.vfs.base import Attributes, Handle, ReindexRequests, StatFs
from memfs.vfs.coherence import OtherWriters
from memfs.vfs.extensions import SyntheticTree
from memfs.vfs.maintenance import Maintenance
from memfs.vfs.namespace import NamespaceMixin
from memfs.vfs.scopes import ScopesTree
from memfs.vfs.search_dir import SearchTree
from memfs.vfs.versions_dir import VersionsTree

__all__ = [
    "Attributes",
    "Filesystem",
    "Handle",
    "Maintenance",
    "OtherWriters",
    "ReindexRequests",
    "ScopesTree",
    "SearchTree",
    "StatFs",
    "SyntheticTree",
    "VersionsTree",
]


class Filesystem(NamespaceMixin):
    """A workspace seen as a POSIX directory tree, built complete by its constructor."""
