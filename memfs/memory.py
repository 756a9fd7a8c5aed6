"""Keep the daemon's peak memory a stable multiple of the largest document it handles.

glibc serves allocations above a threshold with their own mappings, returned to the system
when freed; but it raises that threshold to the size of every such block freed (up to
32 MiB), after which a document's buffers come from the heap and its peak depends on the
order of earlier saves.  Fixing the threshold at 1 MiB keeps each large buffer in a
mapping of its own: a 20 MB save then peaks at about 8 N instead of 9-11 N.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

#: glibc's ``mallopt`` parameter number for the mmap threshold.
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1024 * 1024


def map_large_buffers() -> bool:
    """Fix glibc's mmap threshold (no-op, False, on another C library)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    log.debug("glibc mmap threshold fixed at %d bytes: %s", MMAP_THRESHOLD, done)
    return done
