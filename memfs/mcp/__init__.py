"""The MCP front door: ``memfs serve mcp`` (``serve``), its handlers on the SDK
(``server``), IronClaw's four memory tools over the workspace (``tools``) and their schemas
(``schemas``)."""
