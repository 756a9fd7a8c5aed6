"""IronClaw's version hash (``content_hash`` of a version row): ``sha256:`` and the
lowercase hex of the content's UTF-8 bytes."""

from __future__ import annotations

import hashlib

#: Characters hashed at a time, so hashing a large document never holds a second copy.
_HASH_SLICE = 1 << 20


def bytes_hash(data: bytes) -> str:
    """The hash of content held as its UTF-8 bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def content_hash(content: str) -> str:
    """The hash of content held as text (encoded a slice at a time: UTF-8 encodes each
    character alone, so the bytes are the same)."""
    digest = hashlib.sha256()
    for start in range(0, len(content), _HASH_SLICE):
        digest.update(content[start : start + _HASH_SLICE].encode("utf-8"))
    return "sha256:" + digest.hexdigest()
