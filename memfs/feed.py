"""The change feed: LISTEN for ``memfs_changes`` on a dedicated connection in its own thread.

psycopg's async API is asyncio-only, so the listener is a plain thread with its own
autocommit connection (not from the pool), polling ``notifies`` with a short timeout so it
can stop.  Each notification goes to trio through a memory channel.  NOTIFY delivers
nothing while disconnected, so after every reconnect the consumer is told to resync.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import trio

from memfs.db.schema import CHANGE_CHANNEL

log = logging.getLogger(__name__)

#: The longest wait between tries to reconnect the feed: while it is down other writers'
#: changes do not show, so after a server restart it should be back within seconds.
FEED_RETRY_MAX_SECONDS = 2.0


class ChangeListener:
    """Forwards change-feed notifications to ``deliver`` (called on the trio thread)."""

    def __init__(
        self,
        url: str,
        connect_kwargs: dict[str, Any],
        deliver: Callable[[dict[str, Any]], None],
        trio_token: trio.lowlevel.TrioToken,
        origin: str | None = None,
    ) -> None:
        self.url = url
        #: This mount's own writes come back through the feed: they are dropped here,
        #: without waking the trio thread.
        self.origin = origin
        self.connect_kwargs = dict(connect_kwargs, autocommit=True)
        self.deliver = deliver
        self.trio_token = trio_token
        self.connected = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memfs-listen", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _send(self, event: dict[str, Any]) -> bool:
        try:  # queue the delivery without waiting for the trio thread to run it
            self.trio_token.run_sync_soon(self.deliver, event)
        except trio.RunFinishedError:
            self._stop.set()
            return False
        return True

    def _run(self) -> None:
        delay = 0.2
        first = True
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, **self.connect_kwargs) as conn:
                    conn.execute(f"LISTEN {CHANGE_CHANNEL}")
                    if not first:
                        log.info("change feed reconnected: resynchronising")
                        self._send({"op": "RESYNC"})
                    first = False
                    delay = 0.2
                    self.connected.set()
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            try:
                                event = json.loads(note.payload)
                            except ValueError:
                                log.warning("ignoring a malformed change notification")
                                continue
                            if self.origin and event.get("origin") == self.origin:
                                continue
                            if not self._send(event):
                                return
            except psycopg.Error as exc:
                self.connected.clear()
                first = False
                if self._stop.is_set():
                    return
                log.warning("change feed lost its connection (%s); retrying in %.1fs",
                            str(exc).strip(), delay)  # fmt: skip
                time.sleep(delay)
                delay = min(delay * 2, FEED_RETRY_MAX_SECONDS)
