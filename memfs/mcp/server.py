"""The MCP server over one workspace, on the official SDK's low-level ``Server``.

Tools: IronClaw's four (``memfs.mcp.tools``).  Resources: every document as
``memory://<path>`` (its path percent-encoded), listed ``PAGE`` at a time by path.  A
subscription (``resources/subscribe`` on 2025 connections, ``subscriptions/listen`` on
2026-07-28 ones) hears of a document's change whoever made it: ``Changes`` compares the
workspace's tree, which the mount's change feed or poll keeps current, every
``WATCH_INTERVAL``.  Prompt: ``.prompt``'s text (what IronClaw tells the agent), where the
layout has one.

Every refusal is a tool error of one line; anything unexpected is logged here, with its
traceback, and the host is told one line.
"""

from __future__ import annotations

import errno
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import mcp_types as types
import trio
from mcp.server import Server, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError

from memfs import __version__
from memfs.errors import FsError
from memfs.ironclaw.memory_tools import ToolRefused
from memfs.mcp.schemas import TOOLS
from memfs.mcp.tools import MemoryTools
from memfs.paths import PROMPT_FILE
from memfs.vfs.by_path import Entry, PathOperations

log = logging.getLogger(__name__)

SCHEME = "memory://"
#: Resources per page of ``resources/list``.
PAGE = 100
#: How often subscribed documents are compared with the tree (seconds).
WATCH_INTERVAL = 0.25
PROMPT_NAME = "ironclaw-prompt"
INSTRUCTIONS = (
    "The long-term memory IronClaw keeps (MEMORY.md, the daily log, notes), shared with "
    "the agent itself and with people editing it. Read a document before rewriting it and "
    "pass its content_hash as expected_content_hash."
)


def uri_of(path: str) -> str:
    return SCHEME + quote(path, safe="/")


def path_of(uri: str) -> str:
    if not uri.startswith(SCHEME):
        raise MCPError(code=types.INVALID_PARAMS, message=f"{uri}: not a memory:// resource")
    parts = urlsplit(uri)
    return unquote(parts.netloc + parts.path).strip("/")


def _mime(path: str) -> str:
    if path.endswith(".md"):
        return "text/markdown"
    if path.endswith(".json"):
        return "application/json"
    return "text/plain"


def _resource(entry: Entry) -> types.Resource:
    return types.Resource(name=entry.path, uri=uri_of(entry.path), mime_type=_mime(entry.path),
                          size=entry.size)  # fmt: skip


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _answer(result: Any) -> types.CallToolResult:
    text = json.dumps(result, ensure_ascii=False)
    structured = result if isinstance(result, dict) else None
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=structured
    )


@dataclass
class Changes:
    """Who hears of which document's change: the 2026 listeners (through the SDK's bus,
    which filters by each stream's URIs) and the 2025 sessions that subscribed."""

    ops: PathOperations
    bus: InMemorySubscriptionBus = field(default_factory=InMemorySubscriptionBus)
    #: By connection: a session to notify it through (the SDK makes one per request; any
    #: of them sends on the connection) and the URIs it subscribed to.
    _sessions: dict[int, tuple[ServerSession, set[str]]] = field(default_factory=dict)
    _seen: dict[str, datetime | None] = field(default_factory=dict)

    @staticmethod
    def _connection(session: ServerSession) -> int:
        return id(getattr(session, "_connection", session))

    def subscribe(self, session: ServerSession, uri: str) -> None:
        key = self._connection(session)
        _, uris = self._sessions.get(key, (session, set()))
        uris.add(uri)
        self._sessions[key] = (session, uris)

    def unsubscribe(self, session: ServerSession, uri: str) -> None:
        found = self._sessions.get(self._connection(session))
        if found is not None:
            found[1].discard(uri)

    async def watch(self) -> None:
        """Forever: every ``WATCH_INTERVAL``, each document whose version changed (or
        that went, or came) is announced."""
        self._seen = await self._versions()
        while True:
            await trio.sleep(WATCH_INTERVAL)
            now = await self._versions()
            changed = [p for p in self._seen.keys() | now.keys() if self._seen.get(p) != now.get(p)]
            self._seen = now
            for path in sorted(changed):
                await self._announce(uri_of(path))

    async def _versions(self) -> dict[str, datetime | None]:
        return {entry.path: entry.version for entry in await self.ops.documents()}

    async def _announce(self, uri: str) -> None:
        await self.bus.publish(ResourceUpdated(uri=uri))
        for key, (session, uris) in list(self._sessions.items()):
            if uri in uris:
                try:
                    await session.send_resource_updated(uri)
                except Exception as exc:  # the connection closed between two ticks
                    log.debug("could not tell a session of %s: %s", uri, exc)
                    self._sessions.pop(key, None)


@dataclass
class MemoryServer:
    """The handlers of one server; ``server`` is what a transport runs."""

    tools: MemoryTools
    changes: Changes
    #: Whether the workspace has a ``.prompt`` (the layout tells the agent one).
    has_prompt: bool
    server: Server[Any] = field(init=False)

    def __post_init__(self) -> None:
        self.server = Server(
            "memfs", version=__version__, title="memfs: IronClaw's memory",
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools, on_call_tool=self._call_tool,
            on_list_resources=self._list_resources, on_read_resource=self._read_resource,
            on_list_resource_templates=self._list_templates,
            on_subscribe_resource=self._subscribe, on_unsubscribe_resource=self._unsubscribe,
            on_subscriptions_listen=ListenHandler(self.changes.bus),
            on_list_prompts=self._list_prompts, on_get_prompt=self._get_prompt,
        )  # fmt: skip

    @property
    def ops(self) -> PathOperations:
        return self.tools.ops

    # -- tools -----------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=name, description=what, input_schema=schema)
            for name, what, schema in TOOLS
        ])  # fmt: skip

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        calls: dict[str, Callable[[dict[str, Any]], Awaitable[Any]]] = {
            "memory_write": self.tools.write, "memory_read": self.tools.read,
            "memory_search": self.tools.search, "memory_tree": self.tools.tree,
        }  # fmt: skip
        call = calls.get(params.name)
        if call is None:
            return _error(f"no tool named {params.name!r} (memory_write, memory_read, "
                          "memory_search, memory_tree)")  # fmt: skip
        try:
            result = await call(dict(params.arguments or {}))
        except ToolRefused as exc:
            log.info("%s refused: %s", params.name, exc)
            return _error(str(exc))
        except FsError as exc:
            log.warning("%s failed: %s", params.name, exc)
            return _error(exc.reason)
        except Exception:  # the host gets one line, the log the traceback
            log.exception("%s failed unexpectedly", params.name)
            return _error(f"{params.name} failed inside memfs (its log says why); nothing "
                          "more was written")  # fmt: skip
        return _answer(result)

    # -- resources -------------------------------------------------------------------------

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        after = params.cursor if params is not None and params.cursor else ""
        documents = [e for e in await self.ops.documents() if e.path > after]
        page = documents[:PAGE]
        more = len(documents) > PAGE
        return types.ListResourcesResult(
            resources=[_resource(e) for e in page],
            next_cursor=page[-1].path if more and page else None,
        )

    async def _list_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[
            types.ResourceTemplate(name="memory document", uri_template=SCHEME + "{+path}",
                                   description="A memory document by its path")
        ])  # fmt: skip

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        path = path_of(params.uri)
        try:
            entry = await self.ops.stat(path)
            if entry.is_dir or entry.version is None:
                raise FsError(errno.ENOENT, "not a document")
            data = await self.ops.read(path)
        except FsError as exc:
            message = f"{params.uri}: no such document ({exc.reason})"
            raise MCPError(code=types.INVALID_PARAMS, message=message) from None
        text = data.decode("utf-8", errors="replace")
        return types.ReadResourceResult(contents=[
            types.TextResourceContents(uri=params.uri, mime_type=_mime(path), text=text)
        ])  # fmt: skip

    async def _subscribe(
        self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        path_of(params.uri)
        self.changes.subscribe(ctx.session, params.uri)
        return types.EmptyResult()

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        self.changes.unsubscribe(ctx.session, params.uri)
        return types.EmptyResult()

    # -- the prompt ------------------------------------------------------------------------

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        prompts = []
        if self.has_prompt:
            prompts.append(types.Prompt(
                name=PROMPT_NAME, title="What IronClaw tells the agent",
                description="The system prompt IronClaw builds from this memory (.prompt)",
            ))  # fmt: skip
        return types.ListPromptsResult(prompts=prompts)

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        if params.name != PROMPT_NAME or not self.has_prompt:
            raise MCPError(code=types.INVALID_PARAMS, message=f"no prompt named {params.name!r}")
        text = (await self.ops.read(PROMPT_FILE)).decode("utf-8", errors="replace")
        return types.GetPromptResult(
            description="What IronClaw tells the agent",
            messages=[types.PromptMessage(role="user", content=types.TextContent(text=text))],
        )
