"""IronClaw chunker conformance vectors (ironclaw-facts.md §4), every one of them."""

from __future__ import annotations

import pytest

from memfs.ironclaw.chunker import DEFAULT_CONFIG, ChunkConfig, chunk_document, split_words

WORDS_1_TO_20 = [
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
    "eighteen", "nineteen", "twenty",
]  # fmt: skip


def words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


def span(chunk: str) -> tuple[str, str, int]:
    parts = chunk.split(" ")
    return parts[0], parts[-1], len(parts)


def test_empty_content() -> None:
    assert chunk_document("") == []
    assert chunk_document("   ") == []


def test_small_content_is_one_verbatim_chunk() -> None:
    text = "Hello world, this is a test."
    assert chunk_document(text) == [text]


def test_exact_chunk_size() -> None:
    config = ChunkConfig(chunk_size=5, overlap_percent=0.15, min_chunk_size=50)
    assert chunk_document("one two three four five", config) == ["one two three four five"]


def test_chunking_with_overlap_yields_exactly_three() -> None:
    config = ChunkConfig(chunk_size=10, overlap_percent=0.2, min_chunk_size=3)
    chunks = chunk_document(" ".join(WORDS_1_TO_20), config)
    assert chunks == [
        " ".join(WORDS_1_TO_20[0:10]),
        " ".join(WORDS_1_TO_20[8:18]),
        "seventeen eighteen nineteen twenty",
    ]


def test_overlap_calculation() -> None:
    config = ChunkConfig.with_overlap(100, 0.15)
    assert (config.overlap_words, config.step) == (15, 85)
    assert (DEFAULT_CONFIG.overlap_words, DEFAULT_CONFIG.step) == (120, 680)


def test_min_chunk_size_merging() -> None:
    config = ChunkConfig(chunk_size=10, overlap_percent=0.0, min_chunk_size=5)
    twelve = WORDS_1_TO_20[:12]
    assert chunk_document(" ".join(twelve), config) == [" ".join(twelve)]


def test_f32_overlap_trap() -> None:
    """Rust computes 100f32 * 0.29f32 = 29.0; a double computation truncates to 28."""
    assert int(100 * 0.29) == 28
    assert ChunkConfig(chunk_size=100, overlap_percent=0.29).overlap_words == 29


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (801, [("w0", "w799", 800), ("w680", "w800", 121)]),
        (850, [("w0", "w799", 800), ("w680", "w849", 170)]),
        (1000, [("w0", "w799", 800), ("w680", "w999", 320)]),
        (1430, [("w0", "w799", 800), ("w680", "w1429", 750), ("w1360", "w1429", 70)]),
        (1480, [("w0", "w799", 800), ("w680", "w1479", 800), ("w1360", "w1479", 120)]),
        (2000, [("w0", "w799", 800), ("w680", "w1479", 800), ("w1360", "w1999", 640)]),
    ],
)
def test_derived_vectors(n: int, expected: list[tuple[str, str, int]]) -> None:
    assert [span(c) for c in chunk_document(words(n))] == expected


def test_800_words_is_the_original_text_verbatim() -> None:
    text = "  " + words(800).replace(" ", "\n\n", 3) + "\t\n"
    assert chunk_document(text) == [text]


def test_multi_chunk_documents_join_with_single_spaces() -> None:
    text = "\n\n".join(f"w{i}" for i in range(801))
    chunks = chunk_document(text)
    assert "\n" not in chunks[0]
    assert span(chunks[1]) == ("w680", "w800", 121)


def test_rust_whitespace_set() -> None:
    # U+001F splits in Python's str.split() but is not White_Space in Rust.
    assert split_words("a\x1fb") == ["a\x1fb"]
    assert ["a", "b"] == ["a", "b"]
    # U+3000 and U+00A0 are Rust whitespace; U+200B (zero width space) is not.
    assert split_words("a\u3000b\xa0c\u200bd") == ["a", "b", "c\u200bd"]
    assert split_words("\u2028x\u2029\u205fy\x85") == ["x", "y"]


def test_whitespace_only_in_rust_sense() -> None:
    assert chunk_document("\u3000\u2003\n") == []
    assert chunk_document("\x1f") == ["\x1f"]


def test_with_overlap_clamps() -> None:
    assert ChunkConfig.with_overlap(100, 0.9).overlap_percent == 0.5
    assert ChunkConfig.with_overlap(100, -1).overlap_percent == 0.0


def test_documents_over_a_mebibyte_stream_to_the_same_chunks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import memfs.ironclaw.chunker

    words = [f"w{i}" + ("\u00a0x" if i % 97 == 0 else "") for i in range(250_000)]
    text = "\n".join(" ".join(words[i : i + 13]) for i in range(0, len(words), 13)) + "  end"
    assert len(text) > memfs.ironclaw.chunker.STREAM_ABOVE
    streamed = chunk_document(text)
    monkeypatch.setattr(memfs.ironclaw.chunker, "STREAM_ABOVE", 1 << 40)
    listed = chunk_document(text)
    assert streamed == listed and len(listed) > 300
