"""IronClaw's legacy layout in a libSQL file (``ironclaw.db``): reads (``stores``) and
writes (``writes``)."""
