"""IronClaw's libSQL (SQLite-format) files: where they are, which layout, how to open one."""
