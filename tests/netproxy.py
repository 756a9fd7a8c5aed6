"""A TCP proxy to PostgreSQL that adds a fixed delay each way and counts round trips.

Used by the round-trip tests (``tests/model/test_round_trips.py``) and by the benchmarks' latency
knob (``benchmarks/bench_peers.py --rtt-ms``).  It listens on 127.0.0.1 and forwards to the
server's TCP port or Unix socket, so a server on this machine looks one network hop away.

A *round trip* is a burst of client bytes sent after the client received something from
the server: a client that must wait for an answer before it can go on starts a new burst;
statements sent without waiting (psycopg's pipeline mode) stay in one.  With a delay the
count is exact, since an answer cannot arrive before the client has sent all it could send
without waiting; the tests use 5 ms each way.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

CHUNK = 65536


@dataclass
class _Link:
    """One proxied connection's round-trip state."""

    round_trips: int = 0
    #: The server's bytes reached the client since the client last sent: its next bytes
    #: start a new round trip.
    answered: bool = True
    lock: threading.Lock = field(default_factory=threading.Lock)


class DelayProxy:
    """Forward 127.0.0.1:``port`` to ``target`` (``(host, port)`` or a Unix socket path),
    delaying every chunk by ``delay`` seconds in each direction.  Stop with ``close()``."""

    def __init__(self, target: tuple[str, int] | Path, delay: float = 0.0) -> None:
        self.target = target
        self.delay = delay
        self.links: list[_Link] = []
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._closed = threading.Event()
        #: Cleared by ``hold()``: the held direction's bytes wait here until ``release()``.
        self._flowing = threading.Event()
        self._flowing.set()
        self._hold_answers = False
        #: Set by ``refuse()``: new connections are closed as soon as they are accepted.
        self._refusing = False
        #: How many chunks of clients' bytes wait at the held gate now.
        self.waiting = 0
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    # -- what tests read -------------------------------------------------------------------

    def url(self, database: str, user: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    @property
    def round_trips(self) -> int:
        return sum(link.round_trips for link in self.links)

    def hold(self, *, answers: bool = False) -> None:
        """Stop delivering clients' bytes to the server (or, with ``answers``, the server's
        to the clients) until ``release``, as behind a stalled network: a statement sent
        from now on waits before it runs (or after, with its answer)."""
        self._hold_answers = answers
        self._flowing.clear()

    def release(self) -> None:
        self._flowing.set()

    def refuse(self) -> None:
        """Behave as a server that went down: cut every connection now, and close each new
        one at once (the client reads end of file before the server's greeting)."""
        self._refusing = True
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def accept_again(self) -> None:
        """The server is back: forward new connections again."""
        self._refusing = False

    def reset(self) -> None:
        for link in self.links:
            with link.lock:
                link.round_trips = 0

    # -- plumbing ----------------------------------------------------------------------------

    def _connect_target(self) -> socket.socket:
        if isinstance(self.target, Path):
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(str(self.target))
            return upstream
        return socket.create_connection(self.target)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._refusing:
                client.close()
                continue
            try:
                upstream = self._connect_target()
            except OSError:
                client.close()
                continue
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link()
            self.links.append(link)
            self._sockets += [client, upstream]
            self._pump(client, upstream, link, from_client=True)
            self._pump(upstream, client, link, from_client=False)

    def _pump(self, source: socket.socket, sink: socket.socket, link: _Link, *,
              from_client: bool) -> None:  # fmt: skip
        """Read ``source``, deliver to ``sink`` ``delay`` later, in order, counting."""
        due: queue.Queue[tuple[float, bytes]] = queue.Queue()

        def read() -> None:
            while True:
                try:
                    data = source.recv(CHUNK)
                except OSError:
                    data = b""
                if from_client and data:
                    with link.lock:
                        if link.answered:
                            link.round_trips += 1
                            link.answered = False
                due.put((time.monotonic() + self.delay, data))
                if not data:
                    return

        def deliver() -> None:
            while True:
                at, data = due.get()
                wait = at - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if from_client != self._hold_answers and not self._flowing.is_set():
                    with link.lock:
                        self.waiting += 1
                    self._flowing.wait()
                    with link.lock:
                        self.waiting -= 1
                if not data:
                    with contextlib.suppress(OSError):
                        sink.shutdown(socket.SHUT_WR)
                    return
                if not from_client:
                    # Before the bytes go: the client may answer them at once, and its
                    # next burst, read before this flag were set, would not be counted.
                    with link.lock:
                        link.answered = True
                try:
                    sink.sendall(data)
                except OSError:
                    return

        threading.Thread(target=read, name="proxy-read", daemon=True).start()
        threading.Thread(target=deliver, name="proxy-deliver", daemon=True).start()

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()
