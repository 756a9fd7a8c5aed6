"""A mount's background upkeep: tentative files promoted as they fall due, saves retried
once the database is back, planner statistics kept fresh."""

from __future__ import annotations

from collections.abc import Callable

import trio

from memfs.db.calls import DatabaseCalls
from memfs.db.capabilities import StatisticsKeeper
from memfs.errors import FsError
from memfs.vfs.base import log
from memfs.vfs.namespace import NamespaceMixin

#: Seconds between retries of tool-folder writes that failed.
TOOLS_EVERY = 1.0
#: Seconds between retries of saves that failed while the database was down.
RETRY_EVERY = 2.0


class Maintenance:
    """The upkeep loop of one mounted filesystem."""

    def __init__(
        self,
        fs: NamespaceMixin,
        calls: DatabaseCalls,
        statistics: StatisticsKeeper | None = None,
        monotonic: Callable[[], float] | None = None,
    ) -> None:
        self.fs = fs
        self.calls = calls
        #: None: not refreshed (no privilege, or not asked for).
        self.statistics = statistics
        self.monotonic = monotonic or fs.monotonic

    async def run(self, interval: float = 0.5, stats_every: float = 30.0) -> None:
        """Promote tentative files as they fall due; retry unsaved files; keep planner
        statistics fresh so searches never fall back to a pathological plan."""
        await self.refresh_statistics()
        last_stats = last_retry = last_tools = self.monotonic()
        while True:
            await trio.sleep(interval)
            try:
                await self.fs.promote_due()
            except FsError as exc:
                log.error("promoting tentative files failed: %s", exc)
            if self.monotonic() - last_tools >= TOOLS_EVERY:
                last_tools = self.monotonic()
                await self.fs.retry_tools()
            if self.fs.unsaved and self.monotonic() - last_retry >= RETRY_EVERY:
                last_retry = self.monotonic()
                await self.retry_unsaved()
            if self.statistics is not None and self.monotonic() - last_stats >= stats_every:
                last_stats = self.monotonic()
                await self.refresh_statistics()

    async def retry_unsaved(self) -> None:
        """Commit files whose earlier commit failed (the database was down)."""
        fs = self.fs
        for node in list(fs.unsaved.values()):
            try:
                await fs.commit(node)
            except FsError as exc:
                log.debug("still cannot save %s: %s", fs.describe_node(node), exc.reason)
                return
            log.info("saved %s now that the database is back", fs.describe_node(node))

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
