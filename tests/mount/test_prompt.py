"""``.prompt``: the system prompt IronClaw (v0.22 - v1.0) assembles from the workspace, on a
real mount: its order and headings, rebuilt when an input changes, hidden from listings."""

from __future__ import annotations

import errno
import json
import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from memfs.vfs.prompt_file import assemble_prompt, daily_path
from tests.mounting import Mount

pytestmark = pytest.mark.mount

#: A profile IronClaw parses (confidence too low for the Personalization section).
PROFILE = {
    "version": 2, "preferred_name": "Alice",
    "personality": dict.fromkeys(("empathy", "problem_solving", "emotional_intelligence",
                                  "adaptability", "communication"), 50),
    "communication": {"detail_level": "concise", "formality": "casual", "tone": "warm",
                      "learning_style": "visual", "social_energy": "ambivert",
                      "decision_making": "unknown", "pace": "fast"},
    "cohort": "student",
    "behavior": {"frictions": [], "desired_outcomes": [], "time_wasters": [],
                 "pain_points": [], "strengths": []},
    "friendship": {"style": "few_close", "values": [], "support_style": "listener"},
    "assistance": {"proactivity": "high", "formality": "casual", "focus_areas": [],
                   "routines": [], "goals": [], "interaction_style": "direct"},
    "context": {"profession": None, "interests": [], "challenges": []},
    "confidence": 0.3, "created_at": "2026-03-01T09:00:00Z", "updated_at": "2026-03-01T09:00:00Z",
}  # fmt: skip


def test_the_prompt_in_ironclaws_order_and_headings() -> None:
    today = datetime(2026, 3, 3, tzinfo=UTC).date()
    contents = {
        "BOOTSTRAP.md": "ask the user's name", "AGENTS.md": "be brief",
        "SOUL.md": "be kind", "USER.md": "Alice", "IDENTITY.md": "Claw", "TOOLS.md": "",
        "MEMORY.md": "likes tea", daily_path(today): "[09:00:00] standup",
        "daily/2026-03-02.md": "[17:00:00] shipped", "daily/2026-03-01.md": "too old",
        "context/assistant-directives.md": "Be direct.",
        "context/profile.json": json.dumps(PROFILE),
    }  # fmt: skip
    assert assemble_prompt(contents, today, onboarded=False) == (
        "## First-Run Bootstrap\n\nask the user's name\n\n---\n\n"
        "## Agent Instructions\n\nbe brief\n\n---\n\n"
        "## Core Values\n\nbe kind\n\n---\n\n"
        "## User Context\n\nAlice\n\n---\n\n"
        "## Identity\n\nClaw\n\n---\n\n"
        "## Long-Term Memory\n\nlikes tea\n\n---\n\n"
        "## Today's Notes\n\n[09:00:00] standup\n\n---\n\n"
        "## Yesterday's Notes\n\n[17:00:00] shipped\n\n---\n\n"
        "## Interaction Style\n\nstudent | warm tone | concise detail | high proactivity"
        "\n\n---\n\nBe direct."
    )  # empty TOOLS.md is skipped; the day before yesterday is not included
    assert not assemble_prompt(contents, today, onboarded=True).startswith("## First-Run")
    assert assemble_prompt({}, today, onboarded=False) == ""


def test_prompt_file_follows_its_inputs_and_stays_hidden(
    mounted: Mount, sql_conn: psycopg.Connection[Any]
) -> None:
    mnt = mounted.path()
    (mnt / "SOUL.md").write_text("Be kind.\n")
    (mnt / "MEMORY.md").write_text("likes tea\n")
    today = datetime.now(UTC).date()
    (mnt / "daily").mkdir()
    (mnt / "daily" / f"{today:%Y-%m-%d}.md").write_text("[09:00:00] standup\n")
    (mnt / "daily" / f"{today - timedelta(days=5):%Y-%m-%d}.md").write_text("old\n")
    prompt = (mnt / ".prompt").read_text()
    assert prompt == (
        "## Core Values\n\nBe kind.\n\n\n---\n\n## Long-Term Memory\n\nlikes tea\n\n\n---\n\n"
        "## Today's Notes\n\n[09:00:00] standup\n"
    )
    assert (mnt / ".prompt").stat().st_size == len(prompt.encode())
    (mnt / "SOUL.md").write_text("Be kind, and brief.\n")
    assert "Be kind, and brief." in (mnt / ".prompt").read_text(), "rebuilt when SOUL.md changes"
    # The agent's change (another writer) shows up too.
    sql_conn.execute("UPDATE memory_documents SET content = 'likes green tea\n' "
                     "WHERE path = 'MEMORY.md'")  # fmt: skip
    deadline = time.monotonic() + 10
    while "likes green tea" not in (mnt / ".prompt").read_text():
        assert time.monotonic() < deadline, "the agent's change did not reach .prompt"
        time.sleep(0.05)
    assert ".prompt" not in os.listdir(mnt)
    with pytest.raises(OSError) as refused:
        (mnt / ".prompt").write_text("mine")
    assert refused.value.errno in (errno.EROFS, errno.EACCES, errno.EPERM)
    found = mounted.run("grep", "-r", "likes", ".").stdout.decode()
    assert found == "./MEMORY.md:likes green tea\n", "grep -r never sees .prompt"


def test_a_read_scope_lends_memory_but_never_identity(
    database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any
) -> None:
    """IronClaw reads MEMORY.md and the daily logs from a read scope when the workspace
    has none; identity files only ever from the workspace itself."""
    mount = mount_factory(database_url, user_id="alice", extra_args=["--read-scope", "bob"])
    sql_conn.execute(
        "INSERT INTO memory_documents (user_id, path, content) VALUES "
        "('bob', 'MEMORY.md', 'bob remembers the launch'), ('bob', 'SOUL.md', 'bob''s soul')"
    )
    (mount.path() / "SOUL.md").write_text("alice's soul")
    prompt = (mount.path() / ".prompt").read_text()
    assert prompt == (
        "## Core Values\n\nalice's soul\n\n---\n\n## Long-Term Memory\n\nbob remembers the launch"
    )
    (mount.path() / "MEMORY.md").write_text("alice's own memory")
    assert (
        (mount.path() / ".prompt").read_text().endswith("## Long-Term Memory\n\nalice's own memory")
    )
