"""Every section of IronClaw's facts the code cites (``reborn.md §5.2``) exists in
``docs/ironclaw/``: a reference always names its document, and no reference points outside
the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "ironclaw"
#: A document name, or a section (or range of sections) of the last document named.
TOKEN = re.compile(r"\b(reborn|libsql|legacy)\.md\b|§(\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?))?")


def sections(doc: str) -> set[str]:
    """The numbers of a document's headings (``## 5. Search`` → ``5``, ``### 5.2 …``)."""
    found = set()
    for line in (DOCS / f"{doc}.md").read_text().splitlines():
        match = re.match(r"#{2,4} (\d+(?:\.\d+)?)\.? ", line)
        if match:
            found.add(match.group(1))
    return found


def references() -> list[tuple[str, str, str]]:
    """(where, document, section) for every ``§`` in the package's sources and data."""
    found = []
    files = [p for p in (ROOT / "memfs").rglob("*") if p.is_file() and p.suffix != ".pyc"]
    for path in files:
        text = path.read_text(errors="replace")
        if "§" not in text:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            doc = ""
            for match in TOKEN.finditer(line):
                if match.group(1):
                    doc = match.group(1)
                    continue
                where = f"{path.relative_to(ROOT)}:{number}"
                for section in filter(None, (match.group(2), match.group(3))):
                    found.append((where, doc, section))
    return found


def test_every_cited_section_of_ironclaws_facts_is_in_the_repository() -> None:
    cited = references()
    assert len(cited) > 20  # the scan sees the code's references
    known = {doc: sections(doc) for doc in ("reborn", "libsql", "legacy")}
    unnamed = [where for where, doc, _ in cited if not doc]
    assert not unnamed, f"a § without its document (reborn.md, libsql.md, legacy.md): {unnamed}"
    missing = [(w, d, s) for w, d, s in cited if s not in known[d]]
    assert not missing, f"sections cited but not in docs/ironclaw: {missing}"


def test_no_reference_points_outside_the_repository() -> None:
    stale = re.compile(r"ironclaw-facts|reborn facts|libsql facts|\.\./shared")
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "memfs").rglob("*.py")
        if stale.search(p.read_text())
    ]
    assert not offenders
