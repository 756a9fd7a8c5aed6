"""A mount's background upkeep: tentative files promoted as they fall due, saves retried
once the database is back, planner statistics kept fresh."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import trio

from memfs.db.calls import DatabaseCalls
from memfs.db.capabilities import KeptHistory, StatisticsKeeper
from memfs.errors import FsError
from memfs.vfs.base import log
from memfs.vfs.parts import ModelParts

#: Seconds between retries of tool-folder writes that failed.
TOOLS_EVERY = 1.0
#: Seconds between retries of saves that failed while the database was down.
RETRY_EVERY = 2.0
#: Seconds between purges of deleted documents kept past the retention.
PURGE_EVERY = 3600.0


class Maintenance:
    """The upkeep loop of one mounted filesystem."""

    def __init__(
        self,
        fs: ModelParts,
        calls: DatabaseCalls,
        statistics: StatisticsKeeper | None = None,
        *,
        kept: tuple[KeptHistory, timedelta] | None = None,
    ) -> None:
        #: Tentative files promoted, tool folders written, saves retried.
        self.names = fs.names
        self.patterns = fs.patterns
        self.commits = fs.commits
        self.lookups = fs.lookups
        self.calls = calls
        #: Deleted documents and moves memfs keeps, and how long: purged past that (None:
        #: a read-only mount, which purges nothing).
        self.kept: KeptHistory | None = kept[0] if kept is not None else None
        self.retention = kept[1] if kept is not None else timedelta(days=30)
        #: None: not refreshed (no privilege, or not asked for).
        self.statistics = statistics
        self.monotonic = fs.lookups.monotonic

    async def run(self, interval: float = 0.5, stats_every: float = 30.0) -> None:
        """Promote tentative files as they fall due; retry unsaved files; keep planner
        statistics fresh so searches never fall back to a pathological plan."""
        await self.refresh_statistics()
        await self.purge_kept()
        last_stats = last_retry = last_tools = last_purge = self.monotonic()
        while True:
            await trio.sleep(interval)
            if self.monotonic() - last_purge >= PURGE_EVERY:
                last_purge = self.monotonic()
                await self.purge_kept()
            try:
                await self.patterns.promote_due()
            except FsError as exc:
                log.error("promoting tentative files failed: %s", exc)
            if self.monotonic() - last_tools >= TOOLS_EVERY:
                last_tools = self.monotonic()
                await self.names.retry_tools()
            if self.lookups.state.unsaved and self.monotonic() - last_retry >= RETRY_EVERY:
                last_retry = self.monotonic()
                await self.retry_unsaved()
            if self.statistics is not None and self.monotonic() - last_stats >= stats_every:
                last_stats = self.monotonic()
                await self.refresh_statistics()

    async def purge_kept(self) -> None:
        """Drop deleted documents and moves kept past the retention; record, once, since
        when this workspace's are kept (``.at/`` places documents by them from then on)."""
        if self.kept is None:
            return
        try:
            await self.calls(self.kept.start)
            gone = await self.calls(self.kept.purge, datetime.now(UTC) - self.retention)
        except FsError as exc:
            log.warning("deleted documents past their retention not purged yet: %s", exc)
            return
        if gone:
            log.info("purged %d deleted document(s) kept past %s", gone, self.retention)

    async def retry_unsaved(self) -> None:
        """Commit files whose earlier commit failed (the database was down)."""
        lookups = self.lookups
        for node in list(lookups.state.unsaved.values()):
            try:
                await self.commits.commit(node)
            except FsError as exc:
                log.debug("still cannot save %s: %s", lookups.describe_node(node), exc.reason)
                return
            log.info("saved %s now that the database is back", lookups.describe_node(node))

    async def refresh_statistics(self) -> None:
        if self.statistics is None:
            return
        try:
            analyzed = await self.calls(self.statistics.refresh)
        except FsError as exc:
            log.warning("refreshing planner statistics failed: %s", exc)
            return
        if analyzed is None:
            self.statistics = None
            log.info("no privilege to ANALYZE the memory tables; relying on autovacuum")
        elif analyzed:
            log.info("refreshed planner statistics of %s", ", ".join(analyzed))
