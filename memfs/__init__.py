"""memfs: an IronClaw agent's PostgreSQL memory, mounted as a directory."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
