"""Loading IronClaw's conformance vectors (``tests/fixtures/ironclaw-vectors``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

VECTORS = Path(__file__).parent / "fixtures" / "ironclaw-vectors"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((VECTORS / name).read_text(encoding="utf-8"))
    assert data["meta"]["ironclaw_tag"] == "ironclaw-v1.0.0"
    return data
