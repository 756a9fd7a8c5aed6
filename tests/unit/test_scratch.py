"""The scratch overlay in the model: editor saves keep identity and never reach the database."""

from __future__ import annotations

from pathlib import Path

import pytest

from memfs.scratch import Kind, ScratchRules
from memfs.vfs.buffers import ScratchBuffer, ScratchSpill


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        (".MEMORY.md.swp", Kind.SCRATCH),
        (".MEMORY.md.swx", Kind.SCRATCH),
        ("MEMORY.md.un~", Kind.SCRATCH),
        ("4913", Kind.SCRATCH),
        ("5036", Kind.SCRATCH),
        ("MEMORY.md~", Kind.SCRATCH),
        ("notes.md.~3~", Kind.SCRATCH),
        (".#notes.md", Kind.SCRATCH),
        ("#notes.md#", Kind.SCRATCH),
        ("notes.md.AbC123.partial", Kind.SCRATCH),
        (".unison.notes.md.4f2a.unison.tmp", Kind.SCRATCH),
        ("settings.json.vsctmp", Kind.SCRATCH),
        ("index.lock", Kind.SCRATCH),
        ("sedAb12Cd", Kind.SCRATCH),
        (".goutputstream-XYZ123", Kind.SCRATCH),
        ("notes.md___jb_tmp___", Kind.SCRATCH),
        (".~lock.notes.odt#", Kind.SCRATCH),
        (".DS_Store", Kind.SCRATCH),
        (".notes.md.Xy12Ab", Kind.TENTATIVE),
        (".github.action", Kind.TENTATIVE),
        ("MEMORY.md", Kind.DOCUMENT),
        ("2026", Kind.DOCUMENT),
        ("4914", Kind.DOCUMENT),
        ("daily", Kind.DOCUMENT),
        (".config", Kind.DOCUMENT),
        ("sedation.md", Kind.DOCUMENT),
    ],
)
def test_default_rules(name: str, kind: Kind) -> None:
    assert ScratchRules().classify(name) is kind


def test_extra_patterns() -> None:
    rules = ScratchRules.with_extra([r".+\.tmp"])
    assert rules.classify("x.tmp") is Kind.SCRATCH
    assert rules.classify("4913") is Kind.SCRATCH


def test_scratch_buffer_spills_and_keeps_content(tmp_path: Path) -> None:
    spill = ScratchSpill(tmp_path / "spill", memory_cap=1 << 20, file_cap=1000)
    buf = ScratchBuffer(spill)
    buf.write(0, b"\x00binary" * 100)
    assert not buf.spilled and spill.in_memory == 700
    buf.write(700, b"y" * 500)
    assert buf.spilled and spill.in_memory == 0
    assert buf.read(0, 7) == b"\x00binary" and len(buf) == 1200
    buf.truncate(10)
    assert buf.snapshot() == b"\x00binary\x00bi"
    buf.release()
