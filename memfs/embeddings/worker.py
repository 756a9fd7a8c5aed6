"""Background embedder: fills ``memory_chunks.embedding`` after commits, never on a request.

Fed with document ids by the filesystem after each content commit.  It reads the chunks
that still lack an embedding, embeds them in batches, and writes each vector only if the
chunk still exists with the text that was embedded.  At start and after every outage it
drains the whole workspace's backlog.  It never mixes dimensions: if the workspace already
holds embeddings of another dimension, it writes none and says why.
"""

from __future__ import annotations

import logging
import math
from typing import Any, TypeVar
from uuid import UUID

import trio
from pgvector import Vector

from memfs.db.calls import RunDb
from memfs.db.capabilities import EmbeddingKeeper, MissingPage
from memfs.embeddings.client import Embedder
from memfs.embeddings.providers import MAX_INPUT_BYTES, DimensionMismatch, EmbeddingError
from memfs.errors import FsError

log = logging.getLogger(__name__)

T = TypeVar("T")

PAGE = 100


class EmbeddingWorker:
    """One per mount (or per ``memfs`` command that writes)."""

    def __init__(self, store: EmbeddingKeeper, embedder: Embedder, run_db: RunDb) -> None:
        self.store = store
        self.embedder = embedder
        self.run_db = run_db
        self._send, self._receive = trio.open_memory_channel[UUID | None](math.inf)
        self.enabled = True
        self.healthy = True
        self.written = 0
        self.last_error: str | None = None
        self.idle = trio.Event()
        #: Chunks whose text the provider refused: they keep NULL, as IronClaw leaves them.
        self.refused: set[UUID] = set()

    def notify(self, doc_id: UUID) -> None:
        """A document's chunks changed (called by the filesystem after a commit)."""
        if self.enabled:
            self.idle = trio.Event()
            self._send.send_nowait(doc_id)

    async def check_dimensions(self) -> bool:
        present = await self.run_db(self.store.embedding_dimensions)
        foreign = [d for d in present if d != self.embedder.dimension]
        if foreign:
            self._disable(
                f"the workspace already holds {foreign}-dimension embeddings but "
                f"{self.embedder.provider.model} is configured for {self.embedder.dimension}: "
                "memfs will not mix dimensions; new chunks keep NULL embeddings"
            )
            return False
        return True

    def _disable(self, reason: str) -> None:
        self.enabled = False
        self.last_error = reason
        log.error("embeddings off: %s", reason)

    async def drain(self, document_ids: list[UUID] | None) -> int:
        """Embed every chunk still missing one (of these documents, or all); return how many."""
        written = 0
        while self.enabled:
            page = MissingPage(document_ids, PAGE, MAX_INPUT_BYTES, list(self.refused))
            rows = await self.run_db(self.store.chunks_missing_embeddings, page)
            if not rows:
                break
            vectors = await self.embedder.embed_many([text for _, text in rows])
            self.refused.update(c for (c, _), v in zip(rows, vectors, strict=True) if v is None)
            items = [
                (chunk_id, text, Vector(vector))
                for (chunk_id, text), vector in zip(rows, vectors, strict=True)
                if vector is not None
            ]
            count = await self.run_db(self.store.write_embeddings, items)
            written += count
            self.written += count
            if len(rows) < PAGE or count == 0:
                break
        return written

    async def _announced(self) -> set[UUID]:
        """The documents announced since the last batch (waiting for the first)."""
        first = await self._receive.receive()
        batch = {first} if first is not None else set()
        while True:
            try:
                extra = self._receive.receive_nowait()
            except trio.WouldBlock:
                return batch
            if extra is not None:
                batch.add(extra)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Backfill, then embed what commits announce; back off and backfill after outages."""
        task_status.started()
        if not await self.check_dimensions():
            return
        backlog = True
        delay = 1.0
        while self.enabled:
            try:
                if backlog:
                    count = await self.drain(None)
                    if count:
                        log.info("embedded %d chunks that had none", count)
                    backlog = False
                    self.healthy = True
                else:
                    await self.drain(list(await self._announced()))
                delay = 1.0
                if self._receive.statistics().current_buffer_used == 0:
                    self.idle.set()
            except DimensionMismatch as exc:
                self._disable(str(exc))
            except Exception as exc:  # never end the mount over a background task
                self.healthy = False
                self.last_error = str(exc)
                log.warning(
                    "embedding failed (%s); backfilling again in %.0fs",
                    exc,
                    delay,
                    exc_info=not isinstance(exc, EmbeddingError | FsError),
                )
                await trio.sleep(delay)
                delay = min(delay * 2, 60.0)
                backlog = True
