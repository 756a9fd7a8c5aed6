"""IronClaw's document chunker (``src/workspace/chunker.rs``), reproduced exactly.

Conformance details that a naive port gets wrong, each covered by a test:

* words are split on Rust's Unicode White_Space set, not Python's ``str.split``;
* the overlap is computed in 32-bit float and truncated toward zero;
* a document of at most ``chunk_size`` words is one chunk equal to the original text,
  byte for byte; longer documents are re-joined with single spaces.
"""

from __future__ import annotations

import re
import struct
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from memfs.paths import RUST_WHITESPACE

_WORD_SPLIT = re.compile("[" + re.escape(RUST_WHITESPACE) + "]+")
_WORD = re.compile("[^" + re.escape(RUST_WHITESPACE) + "]+")

#: Above this many characters the chunker streams over the words instead of listing them
#: all: a list of every word of a 50 MB document costs about 9 times its size.
STREAM_ABOVE = 1 << 20


def _f32(value: float) -> float:
    """Round a Python float to the nearest IEEE-754 single-precision value."""
    result: float = struct.unpack("<f", struct.pack("<f", value))[0]
    return result


@dataclass(frozen=True)
class ChunkConfig:
    """Chunker settings; the defaults are IronClaw's."""

    chunk_size: int = 800
    overlap_percent: float = 0.15
    min_chunk_size: int = 50

    @classmethod
    def with_overlap(cls, chunk_size: int, overlap: float, min_chunk_size: int = 50) -> ChunkConfig:
        """IronClaw's ``with_overlap`` builder clamps the overlap to [0, 0.5]."""
        return cls(chunk_size, min(max(overlap, 0.0), 0.5), min_chunk_size)

    @property
    def overlap_words(self) -> int:
        """``(chunk_size as f32 * overlap_percent) as usize``, in f32 as Rust does it."""
        product = _f32(_f32(float(self.chunk_size)) * _f32(self.overlap_percent))
        return max(int(product), 0)

    @property
    def step(self) -> int:
        """Words to advance between chunk starts (saturating at 0)."""
        return max(self.chunk_size - self.overlap_words, 0)


DEFAULT_CONFIG = ChunkConfig()


def split_words(content: str) -> list[str]:
    """Rust ``split_whitespace``: no empty words, Rust's White_Space set only."""
    return [w for w in _WORD_SPLIT.split(content) if w]


def chunk_document(content: str, config: ChunkConfig = DEFAULT_CONFIG) -> list[str]:
    """Split ``content`` into IronClaw's chunks (index = list position)."""
    if not content:
        return []
    if len(content) > STREAM_ABOVE:
        return chunk_streaming(content, config)
    words = split_words(content)
    return _chunk_words(content, iter(words), len(words), config)


def chunk_streaming(content: str, config: ChunkConfig = DEFAULT_CONFIG) -> list[str]:
    """``chunk_document`` without a list of every word (same result, less memory).

    One pass counts the words (the loop's end conditions need the total), a second walks
    them with a window of at most ``chunk_size`` words.
    """
    count = sum(1 for _ in _WORD.finditer(content))
    words = (match.group() for match in _WORD.finditer(content))
    return _chunk_words(content, words, count, config)


def _chunk_words(content: str, words: Iterator[str], count: int, config: ChunkConfig) -> list[str]:
    """IronClaw's loop over ``count`` words, holding at most one chunk's worth of them."""
    if count == 0:
        return []
    if count <= config.chunk_size:
        return [content]
    if config.step == 0 or config.chunk_size == 0:
        # IronClaw's original loops forever here; its later port clamps to 1.
        raise ValueError("chunk_size must exceed the overlap so the chunker can advance")
    window: deque[str] = deque()
    pulled = 0  # words taken from ``words``; the window holds words[pulled - len(window):pulled]
    chunks: list[str] = []
    start = 0
    while start < count:
        end = min(start + config.chunk_size, count)
        while pulled < end:
            window.append(next(words))
            pulled += 1
        while pulled - len(window) < start:
            window.popleft()
        if len(window) < config.min_chunk_size and chunks:
            chunks[-1] = chunks[-1] + " " + " ".join(window)
            break
        chunks.append(" ".join(window))
        start += config.step
        if start + config.min_chunk_size >= count and end == count:
            break
    return chunks
