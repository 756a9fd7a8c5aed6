"""IronClaw's Reborn memory (v1.1+): documents as rows of ``root_filesystem_entries``."""
