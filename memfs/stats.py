"""A mount's live statistics: one registry that every reader of them shares.

``memfs stats MNT`` asks the daemon's control socket for them, ``--metrics HOST:PORT``
serves them to Prometheus (the maintained ``prometheus_client``), and ``.status`` shows
them.  Counters that only the statistics need live here (FUSE requests, errors by errno,
commits by outcome, database calls); values another part already keeps (the content
cache's hits, the deferred-change queue, the files waiting to be saved) are *watched*:
read from their owner at collection time, never copied.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

Kind = Literal["counter", "gauge"]


@dataclass(frozen=True)
class _Watched:
    name: str
    help: str
    kind: Kind
    read: Callable[[], float]


class _WatchedCollector(Collector):
    """Values read from the parts that own them, each time the registry is collected."""

    def __init__(self) -> None:
        self.watched: list[_Watched] = []

    def collect(self) -> Iterator[Metric]:
        for item in self.watched:
            family = CounterMetricFamily if item.kind == "counter" else GaugeMetricFamily
            yield family(item.name, item.help, value=float(item.read()))


class MountStats:
    """The statistics of one mount (thread-safe: database calls count from worker threads)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._watched = _WatchedCollector()
        self.registry.register(self._watched)
        self.requests = Counter(
            "memfs_requests", "FUSE requests answered, by operation", ["op"],
            registry=self.registry,
        )  # fmt: skip
        self.errors = Counter(
            "memfs_errors", "FUSE requests answered with an error, by operation and errno",
            ["op", "errno"], registry=self.registry,
        )  # fmt: skip
        self.commits = Counter(
            "memfs_commits", "document writes to the database, by outcome", ["outcome"],
            registry=self.registry,
        )  # fmt: skip
        self.database_calls = Histogram(
            "memfs_database_call_seconds",
            "calls to the database (each one transaction or query) and how long they took",
            ["outcome"], registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )  # fmt: skip
        self._server_lock = threading.Lock()
        #: The request counter of each operation (``request``, on every FUSE request).
        self._by_op: dict[str, Any] = {}
        #: When (Unix time) a document write last committed (None: none yet).
        self.last_commit: float | None = None

    # -- counting ------------------------------------------------------------------------

    def request(self, op: str) -> None:
        counter = self._by_op.get(op)
        if counter is None:  # ``labels`` takes a lock and builds a key: once per operation
            counter = self._by_op[op] = self.requests.labels(op)
        counter.inc()

    def error(self, op: str, number: int) -> None:
        self.errors.labels(op, errno.errorcode.get(number, str(number))).inc()

    def committed(self, *, created: bool, changed: bool, conflict: bool) -> None:
        """One document write's outcome: created, updated, unchanged; a concurrent change
        kept beside it counts too."""
        if created:
            outcome = "created"
        elif changed:
            outcome = "updated"
        else:
            outcome = "unchanged"
        self.commits.labels(outcome).inc()
        self.last_commit = time.time()
        if conflict:
            self.commits.labels("kept_concurrent_change").inc()

    def database_call(self, seconds: float, outcome: str) -> None:
        """``outcome``: ok, error, timeout, refused (the breaker was open)."""
        self.database_calls.labels(outcome).observe(seconds)

    def watch(self, name: str, help: str, read: Callable[[], float], kind: Kind = "gauge") -> None:
        """Report ``read()`` as ``name`` (a value its owner keeps)."""
        self._watched.watched.append(_Watched(name, help, kind, read))

    # -- reading -------------------------------------------------------------------------

    def snapshot(self) -> list[dict[str, Any]]:
        """Every sample: ``{"metric", "labels", "value"}``, named as Prometheus names them."""
        samples = []
        for metric in self.registry.collect():
            for sample in metric.samples:
                if sample.name.endswith("_created"):
                    continue  # prometheus_client's creation stamps: not statistics
                samples.append({"metric": sample.name, "labels": dict(sample.labels),
                                "value": sample.value})  # fmt: skip
        return samples

    def serve(self, host: str, port: int) -> None:
        """Serve ``/metrics`` for Prometheus on ``host:port`` (a daemon thread)."""
        with self._server_lock:
            start_http_server(port, addr=host, registry=self.registry)


def requests_by_op(samples: list[dict[str, Any]]) -> dict[str, float]:
    """The FUSE requests answered, by operation, from a ``--json`` report's items."""
    return {
        sample["labels"]["op"]: sample["value"]
        for sample in samples
        if sample["metric"] == "memfs_requests_total"
    }


def sample_name(sample: dict[str, Any]) -> str:
    """``memfs_requests_total{op="lookup"}``: a sample as the Prometheus text format
    writes it."""
    labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample["labels"].items()))
    return f"{sample['metric']}{{{labels}}}" if labels else str(sample["metric"])
