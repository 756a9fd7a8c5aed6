"""IronClaw's libSQL (SQLite-format) files, whatever their layout: where they are, which
layout, how to open one, its lock, its watch and its engine process.  The layouts' engines
over it are ``memfs.db.legacy.libsql`` and ``memfs.db.reborn.libsql``."""
