"""The prompt sections IronClaw derives from ``context/profile.json``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from memfs.ironclaw.profile import profile_sections

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def profile(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "version": 2, "preferred_name": "Alice",
        "personality": {k: 50 for k in ("empathy", "problem_solving", "emotional_intelligence",
                                         "adaptability", "communication")},
        "communication": {"detail_level": "concise", "formality": "casual", "tone": "warm",
                          "learning_style": "visual", "social_energy": "ambivert",
                          "decision_making": "unknown", "pace": "fast"},
        "cohort": {"cohort": "busy_professional", "confidence": 80, "indicators": []},
        "behavior": {"frictions": [], "desired_outcomes": [], "time_wasters": [],
                     "pain_points": ["context switching"], "strengths": []},
        "friendship": {"style": "few_close", "values": [], "support_style": "listener"},
        "assistance": {"proactivity": "high", "formality": "casual", "focus_areas": [],
                       "routines": [], "goals": ["ship v2", "run a marathon"],
                       "interaction_style": "direct"},
        "context": {"profession": None, "interests": [], "challenges": []},
        "confidence": 0.8, "created_at": "2026-03-01T09:00:00Z",
        "updated_at": "2026-03-08T09:00:00Z",
    }  # fmt: skip
    doc.update(changes)
    return doc


def test_a_recent_confident_profile_gives_both_sections() -> None:
    assert profile_sections(json.dumps(profile()), NOW) == [
        "## Interaction Style\n\nbusy professional | warm tone | concise detail | high proactivity",
        "## Personalization\n\nCommunication: warm tone, casual formality, concise detail, "
        "fast pace.\nActive goals: ship v2, run a marathon.\nKnown pain points: context "
        "switching.",
    ]


def test_old_or_unsure_profiles_give_the_summary_only() -> None:
    for changes in ({"confidence": 0.6}, {"updated_at": "2026-02-01T09:00:00Z"},
                    {"updated_at": "2026-03-20T09:00:00Z"},
                    {"updated_at": "yesterday"}):  # fmt: skip
        assert len(profile_sections(json.dumps(profile(**changes)), NOW)) == 1, changes


def test_non_default_preferences_are_named() -> None:
    doc = profile(interaction_preferences={"proactivity_style": "proactive",
                  "feedback_style": "gentle", "decision_making": "guided"})  # fmt: skip
    doc["communication"]["response_speed"] = "quick"
    doc["assistance"]["notification_preferences"] = "minimal"
    personalization = profile_sections(json.dumps(doc), NOW)[1]
    assert ", quick response speed." in personalization
    assert "\nFeedback style: gentle.\nProactivity style: proactive." in personalization
    assert "\nNotification preference: minimal." in personalization


def test_what_ironclaw_would_not_parse_or_says_nothing_gives_no_section() -> None:
    missing = profile()
    del missing["behavior"]
    unpopulated = profile(preferred_name="")
    unpopulated["assistance"]["goals"] = []
    for text in ("not json", "[]", json.dumps(missing), json.dumps(profile(cohort="pirate")),
                 json.dumps(unpopulated), json.dumps(profile(version=-1))):  # fmt: skip
        assert profile_sections(text, NOW) == [], text
    bare = profile(cohort="student")  # the older form: a bare cohort name
    assert profile_sections(json.dumps(bare), NOW)[0].startswith("## Interaction Style\n\nstudent")
