"""IronClaw's write rules that depend only on a path, a content and a metadata object.

* **Metadata** is parsed as IronClaw parses it: the nearest folder ``.config`` metadata
  overlaid key by key with the document's own, then read *as a whole* into its typed form.
  If any known key has the wrong type (``"skip_indexing": "yes"``, a ``hygiene`` object
  without ``enabled``, a negative ``retention_days``) the whole object falls back to the
  defaults, so every flag is off, exactly as IronClaw's ``unwrap_or_default`` does.
* **Engine runtime paths** (``engine/.runtime/``, ``engine/projects/``,
  ``engine/orchestrator/failures.json``, ``engine/README.md``; never a path containing
  ``..``) are machine state: never chunked, never versioned.
* **System-prompt files** (the identity files, ``MEMORY.md``, ``SYSTEM.md``,
  ``HEARTBEAT.md``, ``BOOTSTRAP.md`` and two ``context/`` files; ASCII case-insensitive)
  are scanned for prompt injection; a high or critical finding refuses the write.
* A metadata ``schema`` (JSON Schema; JSON ``null`` means none) makes the content JSON that
  must validate against it.
"""

from __future__ import annotations

import errno
import json
import re
from dataclasses import dataclass
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from memfs.errors import WriteRefused
from memfs.paths import RUST_WHITESPACE

_U32_MAX = 2**32 - 1


@dataclass(frozen=True)
class DocumentMetadata:
    """The flags IronClaw reads from effective metadata (None = not set)."""

    skip_indexing: bool | None = None
    skip_versioning: bool | None = None
    hygiene_enabled: bool | None = None
    retention_days: int | None = None
    schema: Any = None

    @property
    def indexed(self) -> bool:
        return self.skip_indexing is not True

    @property
    def versioned(self) -> bool:
        return self.skip_versioning is not True


DEFAULT_METADATA = DocumentMetadata()


class _Invalid(Exception):
    pass


def _optional_bool(value: Any) -> bool | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    raise _Invalid


def _retention(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _U32_MAX:
        raise _Invalid  # serde's u32: a whole, non-negative JSON number (7.0 is refused)
    return max(value, 1)


def _hygiene(value: Any) -> tuple[bool, int] | None:
    if value is None:
        return None
    if isinstance(value, dict):
        if "enabled" not in value or not isinstance(value["enabled"], bool):
            raise _Invalid
        days = _retention(value["retention_days"]) if "retention_days" in value else 30
        return value["enabled"], days
    if isinstance(value, list):  # serde also reads a struct from a sequence of its fields
        if not value or len(value) > 2 or not isinstance(value[0], bool):
            raise _Invalid
        return value[0], _retention(value[1]) if len(value) == 2 else 30
    raise _Invalid


def parse_metadata(value: Any) -> DocumentMetadata:
    """IronClaw's ``DocumentMetadata::from_value``: all or nothing."""
    if not isinstance(value, dict):
        return DEFAULT_METADATA
    try:
        hygiene = _hygiene(value.get("hygiene"))
        return DocumentMetadata(
            skip_indexing=_optional_bool(value.get("skip_indexing")),
            skip_versioning=_optional_bool(value.get("skip_versioning")),
            hygiene_enabled=hygiene[0] if hygiene else None,
            retention_days=hygiene[1] if hygiene else None,
            schema=value.get("schema"),
        )
    except _Invalid:
        return DEFAULT_METADATA


def _as_object(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def effective_metadata(own: Any, folder: Any) -> DocumentMetadata:
    """Nearest folder ``.config`` metadata as the base, the document's own keys on top."""
    merged = dict(_as_object(folder))
    merged.update(_as_object(own))
    return parse_metadata(merged)


def is_engine_runtime_path(path: str) -> bool:
    """Paths of IronClaw's engine state: stored as-is, never chunked or versioned."""
    if ".." in path:
        return False
    return path.startswith(("engine/.runtime/", "engine/projects/")) or path in (
        "engine/orchestrator/failures.json",
        "engine/README.md",
    )


_SYSTEM_PROMPT_FILES = (
    "SOUL.md", "AGENTS.md", "USER.md", "IDENTITY.md", "SYSTEM.md", "MEMORY.md", "TOOLS.md",
    "HEARTBEAT.md", "BOOTSTRAP.md", "context/assistant-directives.md", "context/profile.json",
)  # fmt: skip
_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def _ascii_lower(text: str) -> str:
    return text.translate(_ASCII_LOWER)


_SYSTEM_PROMPT_LOWER = frozenset(_ascii_lower(name) for name in _SYSTEM_PROMPT_FILES)


def is_system_prompt_file(path: str) -> bool:
    return _ascii_lower(path) in _SYSTEM_PROMPT_LOWER


# IronClaw's injection patterns of high or critical severity (the medium ones never refuse
# a write but can, as literal matches, hide an overlapping one; see ``_literal_findings``).
_LITERALS: tuple[tuple[str, bool], ...] = (  # (pattern, refuses)
    ("ignore previous", True), ("ignore all previous", True), ("disregard", False),
    ("forget everything", True), ("you are now", True), ("act as", False),
    ("pretend to be", False), ("system:", True), ("assistant:", True), ("user:", True),
    ("<|", True), ("|>", True), ("[INST]", True), ("[/INST]", True),
    ("new instructions", True), ("updated instructions", True), ("```system", True),
    ("```bash\nsudo", False),
)  # fmt: skip
_WS = "[" + "".join(f"\\u{ord(c):04x}" for c in RUST_WHITESPACE) + "]*"
_CALLS = ("eval", "exec")
#: IronClaw's call patterns (``eval`` or ``exec``, whitespace, ``(``, any case): the rule
#: as written.  ``_calls_found`` finds the same matches without scanning with them.
CALL_PATTERNS = tuple((name, re.compile(name + _WS + r"\(", re.IGNORECASE)) for name in _CALLS)
_CALL_NAMES = tuple((name, re.compile(name, re.IGNORECASE)) for name in _CALLS)
_WS_CHARS = frozenset(RUST_WHITESPACE)
#: Above this many ``(``, checking each costs more than scanning with the patterns.
_FEW_PARENS = 100


def _literal_findings(content: str) -> list[str]:
    """Non-overlapping literal matches, earliest end first (Aho-Corasick's standard rule)."""
    lowered = _ascii_lower(content)
    matches: list[tuple[int, int, str, bool]] = []
    for pattern, refuses in _LITERALS:
        needle = _ascii_lower(pattern)
        start = lowered.find(needle)
        while start != -1:
            matches.append((start + len(needle), -len(needle), pattern, refuses))
            start = lowered.find(needle, start + 1)
    matches.sort()
    found, last_end = [], 0
    for end, negative_length, pattern, refuses in matches:
        if end + negative_length >= last_end:
            last_end = end
            if refuses:
                found.append(pattern)
    return found


def _calls_found(content: str) -> list[str]:
    """The names of ``CALL_PATTERNS`` that match ``content``, found from each ``(``.

    Scanning with the case-insensitive patterns costs 0.2 ms for 9 KB of text, at every
    save of a prompt file; a ``(`` is rare in notes (text with many is scanned).  A name
    matches at a ``(`` exactly when it ends where the whitespace before the ``(`` begins
    (no name letter, in any case, is whitespace), and case-insensitive matching pairs
    single characters, so the name's length of text before that point is the only
    candidate."""
    if content.count("(") > _FEW_PARENS:  # the patterns' own scan is cheaper then
        return [name for name, pattern in CALL_PATTERNS if pattern.search(content)]
    found: set[str] = set()
    paren = content.find("(")
    while paren != -1 and len(found) < len(_CALL_NAMES):
        end = paren
        while end > 0 and content[end - 1] in _WS_CHARS:
            end -= 1
        for name, pattern in _CALL_NAMES:
            if end >= len(name) and pattern.fullmatch(content, end - len(name), end):
                found.add(name)
        paren = content.find("(", paren + 1)
    return [name for name in _CALLS if name in found]


def injection_findings(content: str) -> list[str]:
    """The high/critical patterns IronClaw's sanitizer finds in ``content``."""
    found = _literal_findings(content)
    found.extend(f"{name}(" for name in _calls_found(content))
    if "\x00" in content:
        found.append("NUL byte")
    return found


def check_injection(path: str, content: str) -> None:
    """Refuse (EPERM) what IronClaw refuses in a system-prompt file."""
    if not content or not is_system_prompt_file(path):
        return
    findings = injection_findings(content)
    if findings:
        raise WriteRefused(
            errno.EPERM,
            "IronClaw's prompt-injection check",
            f"{path!r} is part of the agent's system prompt and contains "
            + ", ".join(repr(f) for f in dict.fromkeys(findings)),
        )


def check_not_blank_protected(path: str, content: str) -> None:
    """Refuse (EINVAL) blank content for a system-prompt file, as IronClaw v1.1 and later
    do (the bootstrap clear excepted: its agent empties BOOTSTRAP.md when it is done)."""
    if not content.strip() and is_system_prompt_file(path) and _ascii_lower(path) != "bootstrap.md":
        raise WriteRefused(errno.EINVAL, "IronClaw's protected files", f"{path!r} may not be empty")


def legacy_content_problem(path: str, content: str) -> WriteRefused | None:
    """IronClaw v1.0's content rule: a system-prompt file may be blank, not hold an
    injection (the refusal, or None)."""
    try:
        check_injection(path, content)
    except WriteRefused as refused:
        return refused
    return None


def reborn_content_problem(path: str, content: str) -> WriteRefused | None:
    """IronClaw v1.1+'s content rule: a system-prompt file may not be blank nor hold an
    injection (the refusal, or None)."""
    try:
        check_not_blank_protected(path, content)
        check_injection(path, content)
    except WriteRefused as refused:
        return refused
    return None


def check_schema(path: str, content: str, schema: Any) -> None:
    """Refuse (EINVAL) content that is not JSON valid against the metadata's schema."""
    if schema is None:
        return
    rule = "the JSON schema in its metadata"
    try:
        instance = json.loads(content)
    except ValueError as exc:
        raise WriteRefused(errno.EINVAL, rule, f"{path!r} is not valid JSON: {exc}") from None
    try:
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
        errors = [e.message for e in validator_class(schema).iter_errors(instance)]
    except (jsonschema.exceptions.SchemaError, TypeError) as exc:
        raise WriteRefused(errno.EINVAL, rule, f"{path!r} has an invalid schema: {exc}") from None
    if errors:
        raise WriteRefused(errno.EINVAL, rule, f"{path!r}: " + "; ".join(errors[:5]))
