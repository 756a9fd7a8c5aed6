"""A workspace served by a front door, in the steps every front takes.

A front (the FUSE mount in ``memfs.daemon``, ``memfs.webdav``, ``memfs.mcp``) opens the
database from its settings (``open_served``), decides how it hears of other writers
(``choose_watching``), assembles the workspace (``memfs.assembly.assemble``), starts the
change feed before the tree loads (``start_listener``), runs the workspace's background
work beside its own loop (``run_workspace_tasks``) and ends it (``end_workspace``).
Nothing here knows which front it serves.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import trio

from memfs.assembly import MountParts, Opened, assemble
from memfs.config import Settings
from memfs.db import Database, open_database, wake_on_commits
from memfs.db.embedded import restart_embedded, server_running
from memfs.embeddings import EmbeddingSettings
from memfs.feed import ChangeListener
from memfs.kernel import NoKernel
from memfs.recovery import RecoveryArea
from memfs.search import SearchConfig
from memfs.vfs import OtherWriters

log = logging.getLogger(__name__)

#: Change-feed events applied together (one query for their rows).
FEED_BATCH = 500
#: How often a front on the embedded PostgreSQL checks that the server still runs.
SUPERVISE_SECONDS = 1.0

Events = trio.MemoryReceiveChannel[dict[str, object]]


def open_served(settings: Settings) -> Opened:
    """Open the database the settings name; a database that can only be read (a newer
    IronClaw's file, a read-only role) makes the settings read-only, said once."""
    database = open_database(settings)
    forced = database.read_only_reason()
    if forced is not None and not settings.read_only:
        log.warning("%s", forced)
        settings.read_only = True
    try:
        ironclaw_settings = database.ironclaw_settings(settings.user_id)
        return Opened(
            database,
            SearchConfig.resolve(ironclaw_settings),
            EmbeddingSettings.resolve(ironclaw_settings),
        )
    except Exception:
        database.close()
        raise


def serve_opened(settings: Settings, run: Callable[[Opened], Callable[[], Awaitable[int]]]) -> int:
    """Open the settings' database, run the front ``run`` makes over it under trio, and
    close the database whatever happens; return the front's exit code."""
    opened = open_served(settings)
    try:
        return trio.run(run(opened))
    finally:
        opened.database.close()


@dataclass(frozen=True)
class Watching:
    """How a served workspace hears of other writers."""

    #: Through the change-feed trigger (LISTEN/NOTIFY); else by polling.
    use_feed: bool
    #: What ``.status`` says of it.
    description: str


def choose_watching(settings: Settings, database: Database) -> Watching:
    """The change feed where the database has it and can deliver it, else a poll (with
    a watch on a libSQL file's commits); the choice is logged, with its reason."""
    by_design = database.polls_by_design(settings)
    has_trigger = by_design is None and database.has_change_feed()
    use_feed = not settings.no_trigger and has_trigger and database.listen_url is not None
    watched = database.watched_file
    description = (
        "change feed (LISTEN/NOTIFY trigger)" if use_feed
        else f"a watch on {watched.name} and its -wal: other writers' commits show within "
        "about 50 ms (a poll every second as well)" if watched is not None
        else f"polling every second ({by_design or 'no change feed here'})"
    )  # fmt: skip
    if by_design is not None and watched is not None:
        log.info("%s: watching %s and its -wal for other writers' commits", by_design, watched)
    elif by_design is not None:
        log.info("%s: polling for other writers every second", by_design)
    elif use_feed:
        log.info("watching other writers through the change-feed trigger")
    elif has_trigger and not settings.no_trigger:
        log.warning(
            "the database URL is a transaction-mode pooler, where LISTEN cannot work: "
            "polling for other writers' changes every second (--listen-url gives the "
            "change feed a direct connection)"
        )
    else:
        log.warning(
            "no change-feed trigger on this database%s: polling for other writers' "
            "changes every second (`memfs init` installs the trigger)",
            " (--no-trigger)" if settings.no_trigger else "",
        )
    return Watching(use_feed, description)


async def start_listener(
    database: Database, watching: Watching, parts: MountParts
) -> tuple[ChangeListener | None, Events]:
    """Listen before the tree loads (a change made between the load and the LISTEN would
    never be seen; events queue until the tree is ready), or take the poll's baseline.
    The listener (None when polling) and the channel its events arrive on."""
    send, receive = trio.open_memory_channel[dict[str, object]](float("inf"))
    if not watching.use_feed:
        await parts.writers.baseline()
        return None, receive
    assert database.listen_url is not None
    listener = ChangeListener(
        database.listen_url, database.listen_kwargs, send.send_nowait,
        trio.lowlevel.current_trio_token(), origin=parts.store.origin,
    )  # fmt: skip
    listener.start()
    if not await trio.to_thread.run_sync(listener.connected.wait, 10.0):
        log.warning("the change feed is not connected yet; it resyncs when it is")
    return listener, receive


async def run_workspace_tasks(
    nursery: trio.Nursery,
    opened: Opened,
    parts: MountParts,
    listener: ChangeListener | None,
    receive: Events,
) -> None:
    """Start the workspace's background work in ``nursery``: maintenance, the sender of
    deferred changes, re-chunking and embeddings where the store writes, other writers'
    changes (the feed's events, or the poll), and the embedded server's supervision."""
    database = opened.database
    if database.embedded is not None:
        nursery.start_soon(_supervise_embedded, database.embedded)
    nursery.start_soon(parts.maintenance.run)
    if parts.writes:
        await nursery.start(parts.fs.send_changes)
        nursery.start_soon(parts.writers.resync_when_diverged)
    if parts.reindexer is not None:
        await nursery.start(parts.reindexer.run)
    if listener is not None:
        nursery.start_soon(apply_changes, parts.writers, receive)
    else:
        nursery.start_soon(parts.writers.poll_changes)
        if database.watched_file is not None:  # a libSQL file
            nursery.start_soon(wake_on_commits, database.watched_file, parts.writers.wake)
    if parts.embeddings is not None:
        nursery.start_soon(parts.embeddings.run)


async def end_workspace(parts: MountParts, listener: ChangeListener | None) -> list[str]:
    """Once the front's loop has ended: stop hearing of other writers, commit every save
    still open (``Filesystem.shutdown``), close the embedding provider.  The paths that
    could not be saved (they are in the recovery area)."""
    if listener is not None:
        await trio.to_thread.run_sync(listener.stop)
    kept = await parts.fs.shutdown()
    if parts.embedder is not None:
        await parts.embedder.aclose()
    return kept


@dataclass(frozen=True)
class LoadedWorkspace:
    """A workspace a front without a kernel serves (WebDAV, MCP): assembled, listening
    for other writers, its tree loaded."""

    opened: Opened
    parts: MountParts
    listener: ChangeListener | None
    receive: Events

    async def run_tasks(self, nursery: trio.Nursery) -> None:
        await run_workspace_tasks(nursery, self.opened, self.parts, self.listener, self.receive)

    async def end(self) -> int:
        """``end_workspace``, said in the log; the front's exit code (1: something could
        not be saved and is in the recovery area)."""
        kept = await end_workspace(self.parts, self.listener)
        if kept:
            log.error("could not save %d file(s): %s; they are in the recovery area",
                      len(kept), ", ".join(kept))  # fmt: skip
        return 1 if kept or self.parts.fs.unkept() else 0


async def load_workspace(settings: Settings, opened: Opened) -> LoadedWorkspace:
    """The steps of a front without a kernel, up to serving: watch, assemble, listen,
    load."""
    watching = choose_watching(settings, opened.database)
    parts = assemble(
        settings, opened, kernel=NoKernel(), recovery=RecoveryArea(settings.recovery_dir),
        watching=watching.description,
    )  # fmt: skip
    listener, receive = await start_listener(opened.database, watching, parts)
    await parts.fs.load()
    return LoadedWorkspace(opened, parts, listener, receive)


async def apply_changes(writers: OtherWriters, receive: Events) -> None:
    """Apply change-feed events in order, as many at a time as have arrived; if a batch
    cannot be applied, resync everything."""
    async for event in receive:
        batch = [event]
        while len(batch) < FEED_BATCH:
            try:
                batch.append(receive.receive_nowait())
            except trio.WouldBlock:
                break
        try:
            await writers.apply_changes(batch)
        except Exception as exc:  # a database hiccup or a bug: never lose the feed
            log.warning("could not apply a change (%s); resynchronising", exc)
            while True:
                try:
                    await writers.resync()
                    break
                except Exception as again:
                    log.warning("resync failed (%s); retrying in 1s", again)
                    await trio.sleep(1)


async def _supervise_embedded(server: object) -> None:
    """Restart the embedded server if it stops (killed, crashed): the fronts that use it
    are its supervisors, one at a time (``restart_embedded`` takes pgserver's lock), so
    saves waiting on it go through within seconds instead of failing until some other
    ``memfs`` command happens to start it."""
    while True:
        await trio.sleep(SUPERVISE_SECONDS)
        if await trio.to_thread.run_sync(server_running, server):
            continue
        log.warning("the embedded PostgreSQL is not running: restarting it")
        try:
            await trio.to_thread.run_sync(restart_embedded, server)
        except Exception as exc:  # keep supervising: the next round tries again
            log.error("could not restart the embedded PostgreSQL: %s", exc)
