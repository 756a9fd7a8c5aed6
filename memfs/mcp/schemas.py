"""The four tools as an MCP host sees them: IronClaw's names, parameters and defaults (its
``document-write``, ``document-read``, ``search`` and ``tree`` schemas, v1.3, with v1.4's
``expected_content_hash``), described in memfs's words."""

from __future__ import annotations

from typing import Any

#: What a path argument may not be: blank, absolute, holding ``..`` or a backslash.
_NOT_A_PATH = {"pattern": r"(^\s*$)|(^/)|(\.\.)|(\\)"}

WRITE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "content": {"type": "string", "description": "The text to write, or to append"},
        "target": {
            "type": "string",
            "default": "daily_log",
            "description": "'memory' (MEMORY.md), 'daily_log' (today's daily/YYYY-MM-DD.md), "
            "'heartbeat' (HEARTBEAT.md), 'bootstrap' (clears BOOTSTRAP.md; content is "
            "ignored) or a document path relative to the memory root",
            "not": _NOT_A_PATH,
        },
        "append": {
            "type": "boolean",
            "default": True,
            "description": "Add to the document (true) or replace it (false); the daily log "
            "is always appended to",
        },
        "metadata": {"type": "object", "description": "Document metadata, shallow-merged"},
        "old_string": {"type": "string", "description": "Exact text to replace (patch mode)"},
        "new_string": {"type": "string", "description": "Its replacement (patch mode)"},
        "replace_all": {
            "type": "boolean",
            "default": False,
            "description": "Replace every occurrence of old_string, not only the first",
        },
        "timezone": {
            "type": "string",
            "description": "IANA zone for the daily log's date (UTC by default)",
        },
        "expected_content_hash": {
            "type": "string",
            "description": "The content_hash memory_read returned: the write is made only "
            "if the document still has it, else the answer is status 'conflict'",
        },
    },
    "additionalProperties": False,
}

READ: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "minLength": 1,
            "description": "The document's path relative to the memory root",
            "not": _NOT_A_PATH,
        }
    },
    "required": ["path"],
    "additionalProperties": False,
}

_QUERY = {"type": "string", "minLength": 1}

SEARCH: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {**_QUERY, "description": "What to look for, in natural language"},
        "q": {**_QUERY, "description": "Another name for query"},
        "text": {**_QUERY, "description": "Another name for query"},
        "pattern": {**_QUERY, "description": "Another name for query"},
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": 20,
            "default": 5,
            "description": "How many results at most",
        },
    },
    "additionalProperties": False,
}

TREE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "default": "",
            "description": "The folder to list; empty for the memory root",
            "not": {"pattern": r"(^/)|(\.\.)|(\\)"},
        },
        "depth": {
            "type": "integer",
            "minimum": 1,
            "maximum": 10,
            "default": 1,
            "description": "How many folder levels to show",
        },
    },
    "additionalProperties": False,
}

#: (name, what it does, its input schema).
TOOLS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("memory_write", "Write, append to or patch a memory document (IronClaw's memory_write). "
     "Use expected_content_hash from memory_read to never overwrite a change you have not "
     "seen.", WRITE),
    ("memory_read", "Read a memory document: its content, word count and content_hash.", READ),
    ("memory_search", "Search the memory with IronClaw's ranking: path, score and snippet of "
     "each result, best first.", SEARCH),
    ("memory_tree", "List the memory's folders and documents (folders end in '/').", TREE),
)  # fmt: skip
