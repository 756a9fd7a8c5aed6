"""``.status`` and ``.status.json``: the mount's report (``memfs.mount_status``) as two
read-only files at the mount root.

Each open makes the report anew and serves it whole to that open with direct I/O (no page
cache): a reader gets the bytes made for its own open, never a size that changed between
its ``stat`` and its ``read``, and two readers never mix two reports.  The size ``stat``
shows is the last report's.  Like ``.prompt`` the names are reachable by lookup only,
never listed, so ``find``, ``grep -r`` and sync tools never read them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, Protocol

from memfs.paths import STATUS_FILE, STATUS_JSON_FILE
from memfs.tree import Node, SyntheticFile, Tree
from memfs.vfs.extensions import MountView


class StatusSource(Protocol):
    """What makes the report (``memfs.mount_status.MountStatus``)."""

    async def report(self, fs: MountView) -> dict[str, Any]: ...


class StatusFiles:
    """The two files, made on first lookup and kept (their content is made per open)."""

    NAMES = (STATUS_FILE, STATUS_JSON_FILE)

    def __init__(
        self,
        source: StatusSource,
        render_text: Callable[[dict[str, Any]], str],
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.source = source
        self.render_text = render_text
        self.clock = clock
        self.nodes: dict[str, SyntheticFile] = {}

    async def lookup(self, tree: Tree, name: str) -> SyntheticFile | None:
        if name not in self.NAMES:
            return None
        node = self.nodes.get(name)
        if node is None or node.ino not in tree.inodes:
            node = tree.new_synthetic_file(name, b"", self.clock())
            node.parent = tree.root  # reachable by lookup only, never listed
            self.nodes[name] = node
        return node

    def shows(self, node: Node) -> bool:
        return isinstance(node, SyntheticFile) and self.nodes.get(node.name) is node

    async def content_at_open(self, node: SyntheticFile, fs: MountView) -> bytes | None:
        return await self.generate(node, fs)

    async def generate(self, node: SyntheticFile, fs: MountView) -> bytes:
        """A new report for one open of ``node``."""
        report = await self.source.report(fs)
        if node.name == STATUS_JSON_FILE:
            text = json.dumps(report, indent=2) + "\n"
        else:
            text = self.render_text(report)
        data = text.encode("utf-8")
        node.size = len(data)
        node.mtime_ns = node.ctime_ns = self.clock()
        return data
