"""A fake embedding *server* on loopback that speaks OpenAI's and Ollama's real HTTP APIs.

Vectors are deterministic bag-of-words hashes (texts sharing words are close in cosine
distance), so ranking tests can reason about them.  The server can be told to fail:
answer 429 with Retry-After, 500, 401, hang, or return vectors of the wrong dimension.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WORD = re.compile(r"[a-z0-9]+")


def embed_text(text: str, dimension: int) -> list[float]:
    vector = [0.0] * dimension
    for word in WORD.findall(text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[int.from_bytes(digest[:4], "big") % dimension] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def signature_at(credentials: Any, region: str, request: Any, stamp: str) -> str:
    """The SigV4 ``Authorization`` header botocore gives ``request`` signed at ``stamp``.

    botocore's ``add_auth`` always signs at the current second, so a server checking a
    request with it refuses any request whose second ticked over on the way (the CI flake
    of test_bedrock_titan_requests_are_sigv4_signed).  This runs the same steps at the
    request's own ``X-Amz-Date``.
    """
    from botocore.auth import SigV4Auth

    signer = SigV4Auth(credentials, "bedrock", region)
    request.context["timestamp"] = stamp
    signer._modify_request_before_signing(request)
    canonical = signer.canonical_request(request)
    signature = signer.signature(signer.string_to_sign(request, canonical), request)
    signer._inject_signature_to_request(request, signature)
    header = request.headers["Authorization"]
    return header.decode() if isinstance(header, bytes) else str(header)


@dataclass
class Behaviour:
    """What the next requests get.  ``failures`` counts down; then answers are normal."""

    status: int = 200
    failures: int = 0
    retry_after: str | None = None
    hang_seconds: float = 0.0
    wrong_dimension: bool = False
    requests: list[dict[str, Any]] = field(default_factory=list)


class FakeEmbeddingServer:
    def __init__(
        self,
        dimension: int = 32,
        api_key: str | None = "test-key",
        aws: tuple[str, str, str] | None = None,
    ) -> None:
        self.dimension = dimension
        self.api_key = api_key
        #: Bedrock: (access key, secret key, region) whose SigV4 signatures are accepted.
        self.aws = aws
        #: Inputs containing this text are refused with 400, as a provider refuses a text
        #: over its model's token limit.
        self.reject_marker: str | None = None
        self.behaviour = Behaviour()
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                server._handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeEmbeddingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def fail(self, status: int, times: int = 1, retry_after: str | None = None) -> None:
        with self.lock:
            self.behaviour.status = status
            self.behaviour.failures = times
            self.behaviour.retry_after = retry_after

    def hang(self, seconds: float, times: int = 1) -> None:
        with self.lock:
            self.behaviour.hang_seconds = seconds
            self.behaviour.failures = times

    def wrong_dimension(self, on: bool = True) -> None:
        with self.lock:
            self.behaviour.wrong_dimension = on

    def heal(self) -> None:
        with self.lock:
            self.behaviour = Behaviour(requests=self.behaviour.requests)

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.behaviour.requests

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("content-length", "0"))
        raw = request.rfile.read(length)
        body = json.loads(raw or b"{}")
        if request.path.startswith("/model/"):
            return self._bedrock(request, raw, body)
        with self.lock:
            b = self.behaviour
            b.requests.append(
                {"path": request.path, "body": body, "auth": request.headers.get("authorization")}
            )
            failing = b.failures > 0
            if failing:
                b.failures -= 1
            status, retry_after, hang = b.status, b.retry_after, b.hang_seconds
            wrong = b.wrong_dimension
        if failing and hang:
            time.sleep(hang)
        expected = f"Bearer {self.api_key}"
        if (
            request.path == "/v1/embeddings"
            and self.api_key
            and request.headers.get("authorization") != expected
        ):
            return self._reply(request, 401, {"error": "bad key"})
        if failing and status != 200:
            headers = {"Retry-After": retry_after} if retry_after else {}
            return self._reply(request, status, {"error": f"told to fail {status}"}, headers)
        inputs = body.get("input", [])
        if self.reject_marker and any(self.reject_marker in text for text in inputs):
            return self._reply(request, 400, {"error": "input exceeds the model's token limit"})
        dimension = self.dimension + 1 if wrong else self.dimension
        vectors = [embed_text(text, dimension) for text in body.get("input", [])]
        if request.path == "/v1/embeddings":
            data = [
                {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)
            ]
            return self._reply(
                request, 200, {"object": "list", "data": data, "model": body["model"]}
            )
        if request.path == "/api/embed":
            return self._reply(request, 200, {"model": body["model"], "embeddings": vectors})
        return self._reply(request, 404, {"error": "not found"})

    def _bedrock(self, request: BaseHTTPRequestHandler, raw: bytes, body: Any) -> None:
        """Titan v2's InvokeModel, accepting only requests SigV4-signed with ``self.aws``."""
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        with self.lock:
            self.behaviour.requests.append(
                {"path": request.path, "body": body, "auth": request.headers.get("authorization")}
            )
        assert self.aws is not None
        access, secret, region = self.aws
        given = request.headers.get("authorization", "")
        stamp = request.headers.get("x-amz-date", "")
        signed = {k: request.headers[k] for k in ("Content-Type", "Accept") if k in request.headers}
        check = AWSRequest(method="POST", url=self.url + request.path, data=raw, headers=signed)
        expected = signature_at(Credentials(access, secret), region, check, stamp) if stamp else ""
        if not stamp or expected != given:
            return self._reply(request, 403, {"message": "The request signature does not match"})
        text = body.get("inputText", "")
        if self.reject_marker and self.reject_marker in text:
            return self._reply(request, 400, {"message": "ValidationException: too many tokens"})
        dimension = int(body.get("dimensions", self.dimension))
        return self._reply(request, 200, {"embedding": embed_text(text, dimension)})

    @staticmethod
    def _reply(
        request: BaseHTTPRequestHandler,
        status: int,
        payload: Any,
        headers: dict[str, str] | None = None,
    ) -> None:
        data = json.dumps(payload).encode()
        request.send_response(status)
        request.send_header("content-type", "application/json")
        request.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            request.send_header(key, value)
        request.end_headers()
        request.wfile.write(data)
