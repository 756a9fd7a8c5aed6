"""The system-prompt sections IronClaw (v0.25 - v1.0) derives from ``context/profile.json``.

IronClaw reads the file as its psychographic profile; when it does not parse as one, the
sections are left out.  A profile parses when it is a JSON object holding every part
IronClaw requires, with the JSON type each needs (checked by ``parse``).  From a parsed
profile that says something about the user (a preferred name, a profession, or a goal):

* "Interaction Style": the cohort, tone, detail level and proactivity on one line;
* "Personalization", only if the profile's confidence is above 0.6 and it was updated in
  the last 7 days (an RFC 3339 time, not in the future): the communication preferences,
  then one line for each preference that differs from IronClaw's default and for the goals
  and pain points, when there are any.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

COHORTS = {
    "busy_professional": "busy professional",
    "new_parent": "new parent",
    "student": "student",
    "elder": "elder",
    "other": "general",
}
TRAITS = ("empathy", "problem_solving", "emotional_intelligence", "adaptability", "communication")


class NotAProfile(ValueError):
    """The document does not parse as IronClaw's profile."""


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise NotAProfile("expected an object")
    return value


def _text(parent: dict[str, Any], key: str, default: str | None = None) -> str:
    value = parent.get(key, default)
    if not isinstance(value, str):
        raise NotAProfile(f"{key}: expected a string")
    return value


def _texts(parent: dict[str, Any], key: str, *, optional: bool = False) -> list[str]:
    value = parent.get(key, [] if optional else None)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise NotAProfile(f"{key}: expected a list of strings")
    return value


def _cohort(value: Any) -> str:
    """Accepts a bare variant name or an object with an optional one (default: other)."""
    if isinstance(value, str):
        name = value
    else:
        found = _object(value)
        name = found.get("cohort", "other")
        confidence = found.get("confidence", 0)
        if not (isinstance(confidence, int) and not isinstance(confidence, bool)) or not (
            0 <= confidence <= 255
        ):
            raise NotAProfile("cohort.confidence: expected 0-255")
        _texts(found, "indicators", optional=True)
    if name not in COHORTS:
        raise NotAProfile(f"cohort: unknown {name!r}")
    return COHORTS[name]


def parse(text: str) -> dict[str, Any]:
    """The profile's parts the prompt uses; ``NotAProfile`` if IronClaw would not parse it."""
    import json

    try:
        doc = _object(json.loads(text))
    except ValueError as exc:
        raise NotAProfile(str(exc)) from None
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or not 0 <= version < 2**32:
        raise NotAProfile("version: expected a whole number")
    name = _text(doc, "preferred_name")
    personality = _object(doc.get("personality"))
    if any(trait not in personality for trait in TRAITS):
        raise NotAProfile("personality: a trait is missing")
    communication = _object(doc.get("communication"))
    comm = {key: _text(communication, key) for key in (
        "detail_level", "formality", "tone", "learning_style", "social_energy",
        "decision_making", "pace")}  # fmt: skip
    comm["response_speed"] = _text(communication, "response_speed", "unknown")
    cohort = _cohort(doc.get("cohort"))
    behavior = _object(doc.get("behavior"))
    for key in ("frictions", "desired_outcomes", "time_wasters", "pain_points", "strengths"):
        _texts(behavior, key)
    _texts(behavior, "suggested_support", optional=True)
    friendship = _object(doc.get("friendship"))
    _text(friendship, "style")
    _texts(friendship, "values")
    _text(friendship, "support_style")
    qualities = friendship.get("qualities", {})
    if not isinstance(qualities, (dict, list)):
        raise NotAProfile("friendship.qualities: expected an object or a list")
    assistance = _object(doc.get("assistance"))
    assist = {
        key: _text(assistance, key) for key in ("proactivity", "formality", "interaction_style")
    }
    for key in ("focus_areas", "routines"):
        _texts(assistance, key)
    goals = _texts(assistance, "goals")
    assist["notification_preferences"] = _text(assistance, "notification_preferences", "moderate")
    context = _object(doc.get("context"))
    profession = context.get("profession")
    if profession is not None and not isinstance(profession, str):
        raise NotAProfile("context.profession: expected a string or null")
    _texts(context, "interests")
    _texts(context, "challenges")
    preferences = doc.get("interaction_preferences")
    if preferences is None:
        prefs = {"proactivity_style": "reactive", "feedback_style": "direct"}
    else:
        found = _object(preferences)
        prefs = {key: _text(found, key) for key in ("proactivity_style", "feedback_style")}
        _text(found, "decision_making")
    confidence = doc.get("confidence", 0.0)
    if not isinstance(confidence, (int, float)) or isinstance(confidence, bool):
        raise NotAProfile("confidence: expected a number")
    _text(doc, "created_at")
    updated_at = _text(doc, "updated_at")
    return {
        "populated": bool(name) or profession is not None or bool(goals),
        "cohort": cohort, "communication": comm, "assistance": assist, "goals": goals,
        "pain_points": behavior["pain_points"], "preferences": prefs,
        "confidence": float(confidence), "updated_at": updated_at,
    }  # fmt: skip


def _recent(updated_at: str, now: datetime, days: int = 7) -> bool:
    try:
        when = datetime.fromisoformat(updated_at.replace("Z", "+00:00"))
    except ValueError:
        return False
    if when.tzinfo is None or "T" not in updated_at.upper():
        return False  # RFC 3339 needs a date, a time and an offset
    age = (now - when).total_seconds()
    return age >= 0 and math.floor(age / 86400) <= days


def profile_sections(text: str, now: datetime | None = None) -> list[str]:  # noqa: C901 - IronClaw's section order, one branch per section
    """The prompt sections for this profile document (none if it does not parse, or says
    nothing about the user)."""
    try:
        profile = parse(text)
    except NotAProfile:
        return []
    if not profile["populated"]:
        return []
    comm, assist, prefs = profile["communication"], profile["assistance"], profile["preferences"]
    sections = [
        f"## Interaction Style\n\n{profile['cohort']} | {comm['tone']} tone | "
        f"{comm['detail_level']} detail | {assist['proactivity']} proactivity"
    ]
    if profile["confidence"] > 0.6 and _recent(profile["updated_at"], now or datetime.now(UTC)):
        lines = (
            f"Communication: {comm['tone']} tone, {comm['formality']} formality, "
            f"{comm['detail_level']} detail, {comm['pace']} pace"
        )
        if comm["response_speed"] != "unknown":
            lines += f", {comm['response_speed']} response speed"
        if comm["decision_making"] != "unknown":
            lines += f", {comm['decision_making']} decision-making"
        lines += "."
        if prefs["feedback_style"] != "direct":
            lines += f"\nFeedback style: {prefs['feedback_style']}."
        if prefs["proactivity_style"] != "reactive":
            lines += f"\nProactivity style: {prefs['proactivity_style']}."
        if assist["notification_preferences"] not in ("moderate", "unknown"):
            lines += f"\nNotification preference: {assist['notification_preferences']}."
        if profile["goals"]:
            lines += f"\nActive goals: {', '.join(profile['goals'])}."
        if profile["pain_points"]:
            lines += f"\nKnown pain points: {', '.join(profile['pain_points'])}."
        sections.append(f"## Personalization\n\n{lines}")
    return sections
