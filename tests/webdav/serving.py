"""The WebDAV tests' server: one ``memfs serve webdav`` process per fixture, on each
engine, and the requests the tests read answers with."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote
from xml.etree import ElementTree

import httpx

from tests.mounting import memfs_env

#: How long a server may take to listen (a libSQL file, an embedded server: seconds).
START_TIMEOUT = 60.0
READY = re.compile(rb"over WebDAV at http://127\.0\.0\.1:(\d+)/")


class Server:
    """One ``memfs serve webdav`` process, stopped (SIGTERM, with a timeout) at the end."""

    def __init__(self, url: str, runtime: Path, *extra: str) -> None:
        runtime.mkdir(parents=True, exist_ok=True)
        self.log = runtime / "serve.log"
        args = [sys.executable, "-m", "memfs", "serve", "webdav", "--listen", "127.0.0.1:0",
                "--database-url", url, "--log-level", "info", *extra]  # fmt: skip
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, env=memfs_env(runtime)
            )
        self.port = self._wait_ready()
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30)

    def _wait_ready(self) -> int:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            found = READY.search(self.log.read_bytes())
            if found:
                return int(found.group(1))
            if self.proc.poll() is not None:
                raise AssertionError(f"memfs serve exited:\n{self.log.read_text()}")
            time.sleep(0.05)
        self.proc.kill()
        raise AssertionError(f"memfs serve did not listen in time:\n{self.log.read_text()}")

    def stop(self) -> int:
        self.http.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"memfs serve did not stop:\n{self.log.read_text()}") from None


def stored(url: str, tmp_path: Path, path: str) -> httpx.Response:
    """``path`` as a second server on the same database serves it (what is stored)."""
    return stored_all(url, tmp_path, path)[0]


def stored_all(url: str, tmp_path: Path, *paths: str) -> list[httpx.Response]:
    other = Server(url, tmp_path / "two")
    try:
        return [other.http.get(path) for path in paths]
    finally:
        other.stop()


def propfind(server: Server, path: str, depth: str) -> httpx.Response:
    return server.http.request("PROPFIND", path, headers={"Depth": depth})


def hrefs(response: httpx.Response) -> list[str]:
    """The resources a multistatus answer names, sorted."""
    root = ElementTree.fromstring(response.content)
    return sorted(unquote(href.text or "") for href in root.iter("{DAV:}href"))


def versions_of(server: Server, path: str) -> int:
    listed = propfind(server, f"/.versions/{path}/", "1")
    assert listed.status_code == 207, listed.text
    return len(hrefs(listed)) - 1  # the folder itself
