"""The filesystem model: what each FUSE operation means for a workspace.

``Filesystem`` owns the inode tree, the open handles and their buffers, and talks to the
database only through ``MetaStore`` calls run in worker threads (never on the trio loop).
It knows nothing of pyfuse3: ``memfs.fuse_ops`` translates requests to these coroutines
and ``FsError`` to errno replies, so the whole model is testable by calling it directly.
"""

from __future__ import annotations

from memfs.vfs.base import Attributes, Handle, StatFs
from memfs.vfs.scopes import ScopesMixin

__all__ = ["Attributes", "Filesystem", "Handle", "StatFs"]


class Filesystem(ScopesMixin):
    """A workspace seen as a POSIX directory tree: state in ``base``, content in
    ``content``, names and the scratch overlay in ``namespace``, ``.search`` in
    ``search_dir``, other writers' changes in ``coherence``, read scopes in ``scopes``."""
