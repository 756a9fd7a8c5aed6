"""The child of ``memfs.db.libsql.engine_process``: IronClaw's libSQL engine answering
one statement at a time on one connection (stdlib and ``libsql`` only: it is run as a
script, ``python engine_child.py FILE OPTIONS_JSON``, and imports nothing of memfs's).

Messages are pickles behind a 4-byte length; the child's first one says it is ready.
libSQL raises ``ValueError`` for every SQLite error: the answer carries its kind (a lock,
a refused row, anything else) for the parent to raise as stdlib ``sqlite3``'s.

The ``libsql`` package (0.1.11) binds a Python int beyond 32 bits as a REAL: a file's
mtime in nanoseconds came back rounded to 256 ns, and 2**53 + 1 as 2**53.  Such an int
is sent as its decimal text instead, which SQLite's INTEGER affinity stores as the exact
integer and compares as one; memfs binds these only into INTEGER columns or against them.
"""

from __future__ import annotations

import json
import pickle
import signal
import struct
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any

_HEADER = struct.Struct(">I")


def send(stream: IO[bytes], message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read_exact(stream: IO[bytes], size: int) -> bytes:
    data = b""
    while len(data) < size:
        piece = stream.read(size - len(data))
        if not piece:
            raise EOFError
        data += piece
    return data


def receive(stream: IO[bytes]) -> Any:
    (size,) = _HEADER.unpack(_read_exact(stream, _HEADER.size))
    return pickle.loads(_read_exact(stream, size))


_INT32 = range(-(2**31), 2**31)


def bindable(params: Sequence[Any]) -> tuple[Any, ...]:
    """``params`` as libSQL binds them exactly (see the module docstring)."""
    return tuple(str(v) if type(v) is int and v not in _INT32 else v for v in params)


def _kind(message: str) -> str:
    """libSQL raises ``ValueError`` for every SQLite error: its kind from the message."""
    text = message.lower()
    if "database is locked" in text or "database table is locked" in text or "busy" in text:
        return "locked"
    if "constraint failed" in text or "dimensions are different" in text:
        return "refused"
    return "error"


def serve(path: str, options: Mapping[str, Any], inp: IO[bytes], out: IO[bytes]) -> None:
    """Answer the parent's statements on one libSQL connection until the pipe closes."""
    import libsql

    busy_ms = int(options.get("busy_ms", 5000))
    conn = libsql.connect(path, isolation_level=None, timeout=busy_ms / 1000)
    for name, file in dict(options.get("attach", {})).items():
        conn.execute(f"ATTACH DATABASE ? AS {name}", (str(file),))
    if options.get("foreign_keys"):
        conn.execute("PRAGMA foreign_keys = ON")
    send(out, ("ready", getattr(libsql, "__version__", "?")))
    while True:
        try:
            request = receive(inp)
        except EOFError:
            return
        op, sql, params = request
        try:
            if op == "many":
                rowcount = 0
                for one in params:
                    rowcount += max(conn.execute(sql, bindable(one)).rowcount, 0)
                send(out, ("ok", [], rowcount))
                continue
            cursor = conn.execute(sql, bindable(params))
            rows = [tuple(r) for r in cursor.fetchall()] if cursor.description else []
            send(out, ("ok", rows, cursor.rowcount))
        except ValueError as exc:
            send(out, ("error", _kind(str(exc)), str(exc)))


def main(argv: Sequence[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops it by closing the pipe
    path, options = argv[0], json.loads(argv[1])
    serve(path, options, sys.stdin.buffer, sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
