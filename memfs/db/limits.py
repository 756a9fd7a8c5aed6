"""How long a path every index it enters can take.

PostgreSQL's btree refuses an index row over 2,704 bytes (a third of an 8 kB page, less
headers), and refuses it when the statement runs: a deferred ``mkdir`` of a too-long path
used to fail at every later transaction.  memfs refuses such paths up front with
ENAMETOOLONG, assuming keys that do not compress (TOAST compresses long ones; assuming it
does not is the safe side).  The indexes each path enters:

* legacy: IronClaw's unique ``(user_id, agent_id, path)`` on ``memory_documents`` and
  memfs's ``(user_id, agent_id, path)`` on ``memfs.directories``: the user id, a 16-byte
  uuid and the path;
* Reborn: the primary key ``path`` of ``root_filesystem_entries`` holding the scope prefix,
  the document path and its longest sidecar suffix (``.versions/<n>``, n up to 20 digits),
  and memfs's ``memfs.reborn_directories`` / ``memfs.reborn_attrs`` keyed by the same path.
"""

from __future__ import annotations

#: PostgreSQL's largest btree index row (8 kB pages).
BTREE_MAX_ROW = 2704
#: Tuple and item headers, varlena headers and alignment of a three-column key, rounded up.
KEY_OVERHEAD = 64
#: The longest sidecar suffix a Reborn document's path gets (``.versions/`` + 20 digits).
LONGEST_SIDECAR = len(".versions/") + 20


def legacy_max_path(user_id: str) -> int:
    """The longest path a legacy workspace of ``user_id`` can hold."""
    return BTREE_MAX_ROW - KEY_OVERHEAD - len(user_id.encode()) - 16


def reborn_max_path(prefix: str) -> int:
    """The longest relative path under the Reborn scope ``prefix``."""
    return BTREE_MAX_ROW - KEY_OVERHEAD - len(prefix.encode()) - 1 - LONGEST_SIDECAR
