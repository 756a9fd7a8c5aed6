"""The identity files IronClaw seeds into a workspace when they are absent
(docs/ironclaw/legacy.md §7.1).

The texts are memfs's own short templates with the same purpose as IronClaw's; IronClaw
recreates any of these it finds missing at its next start, so they only matter for a
workspace used without IronClaw running.
"""

from __future__ import annotations

SEEDS: dict[str, str] = {
    "README.md": (
        "# Workspace\n\nThis is the agent's long-term memory. Core files:\n\n"
        "- MEMORY.md: curated long-term notes, loaded into every conversation\n"
        "- IDENTITY.md, SOUL.md: who the agent is and what it values\n"
        "- AGENTS.md: how the agent works day to day\n"
        "- USER.md: what the agent knows about you\n"
        "- HEARTBEAT.md: checks to run periodically\n"
        "- TOOLS.md: notes about tools in this environment\n"
        "- daily/YYYY-MM-DD.md: the daily log\n"
    ),
    "MEMORY.md": "# Memory\n\nLong-term notes worth keeping across conversations.\n",
    "IDENTITY.md": "# Identity\n\n- Name:\n- Vibe:\n- Emoji:\n",
    "SOUL.md": (
        "# Soul\n\nCore values: be helpful, be honest, respect privacy, ask before acting "
        "on anything irreversible.\n"
    ),
    "AGENTS.md": (
        "# Agents\n\nEach session: read MEMORY.md and today's daily log; write what is worth "
        "remembering to the daily log; move lasting facts to MEMORY.md; keep USER.md current.\n"
    ),
    "USER.md": "# User\n\n- Name:\n- Timezone:\n- Preferences:\n",
    "HEARTBEAT.md": (
        "# Heartbeat Checklist\n\n<!--\n- [ ] Check for anything due today\n"
        "- [ ] Review yesterday's daily log\n-->\n"
    ),
    "TOOLS.md": "# Tools\n\n<!-- Notes about tools available in this environment. -->\n",
}

#: Only for a fresh workspace (these four all missing) without a valid profile.
BOOTSTRAP = (
    "BOOTSTRAP.md",
    "# Bootstrap\n\nFirst run: introduce yourself, learn the user's name, timezone and "
    "preferences, write them to USER.md, then clear this file.\n",
)
FRESH_MARKERS = ("BOOTSTRAP.md", "AGENTS.md", "SOUL.md", "USER.md")
