"""Every column of every Reborn row after each of 25 operations through a mount (issue 28).

The expected rows are ``tests/fixtures/reborn_conformance.json``, written from the reborn
facts' rules and conformance examples (never captured from memfs).  Each step runs a real
program in the mount (bash, python, sed, mv, rm, touch) or inserts the agent's own rows as
IronClaw leaves them; then the table under alice's scope must equal the expected rows
exactly, rows no step named unchanged, and rows a step inserts anew must be new rows.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.model.test_reborn_store import CHANGED_BY, A, K, assert_ironclaw_can_read, reborn_schema
from tests.mounting import Mount

pytestmark = pytest.mark.mount

ALICE_KEYS = ("tenant_id", "user_id", "agent_id")
FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "reborn_conformance.json"
SETTLE_SECONDS = 5.0  # a lone truncation commits at the release the kernel sends after close


def text_of(value: str | dict[str, list[int]]) -> str:
    if isinstance(value, str):
        return value
    first, last = value["words"]
    return " ".join(f"w{i}" for i in range(first, last + 1))


def expected_row(spec: dict[str, Any]) -> dict[str, Any]:
    """A fixture row in the table's columns (the shapes the fixture's ``row_shapes`` name)."""
    if "doc" in spec:
        kind, ctype, contents = "memory_document", "application/json", text_of(spec["doc"])
        indexed: dict[str, Any] = dict(K)
    elif "chunk" in spec:
        kind, ctype, contents = "memory_chunk", "application/json", text_of(spec["chunk"])
        indexed = {**K, "content": contents, "chunk_index": spec["index"],
                   "doc_relative_path": spec["of"]}  # fmt: skip
    elif "version_of" in spec:
        old = spec["content"]
        body = {"changed_by": CHANGED_BY, "content": old,
                "content_hash": "sha256:" + hashlib.sha256(old.encode()).hexdigest()}  # fmt: skip
        kind, ctype = "memory_document_version", "application/json"
        contents = json.dumps(body, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        indexed = {**K, "doc_relative_path": spec["version_of"], "version": spec["number"]}
    else:
        kind, ctype, contents, indexed = None, "application/octet-stream", spec["meta"], {}
    return {"kind": kind, "content_type": ctype, "contents": contents, "indexed": indexed,
            "version": spec["version"]}  # fmt: skip


def table(conn: psycopg.Connection[Any]) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """(rows by path relative to alice's scope, their created_at); no row may lie outside it."""
    found, created = {}, {}
    for path, contents, kind, ctype, indexed, version, is_dir, born, updated in conn.execute(
        "SELECT path, contents, kind, content_type, indexed, version, is_dir, created_at, "
        "updated_at FROM root_filesystem_entries ORDER BY path"
    ):
        assert path.startswith(A + "/"), f"a row outside the mounted scope: {path}"
        assert_ironclaw_can_read(path, kind, ctype, indexed)
        assert not is_dir and born <= updated, path
        relative = path.removeprefix(A + "/")
        found[relative] = {"kind": kind, "content_type": ctype,
                           "contents": bytes(contents).decode(), "indexed": indexed,
                           "version": version}  # fmt: skip
        created[relative] = born
    return found, created


def agent_writes(conn: psycopg.Connection[Any], rows: dict[str, dict[str, Any]]) -> None:
    for relative, spec in rows.items():
        row = expected_row(spec)
        conn.execute(
            "INSERT INTO root_filesystem_entries (path, contents, kind, content_type, indexed, "
            "version) VALUES (%s, %s, %s, %s, %s, %s)",
            (f"{A}/{relative}", row["contents"].encode(), row["kind"], row["content_type"],
             Jsonb(row["indexed"]), row["version"]),
        )  # fmt: skip


def differences(found: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    lines = [f"missing {p}: {expected[p]}" for p in sorted(set(expected) - set(found))]
    lines += [f"unexpected {p}: {found[p]}" for p in sorted(set(found) - set(expected))]
    for path in sorted(set(found) & set(expected)):
        for column, want in expected[path].items():
            if found[path][column] != want:
                lines.append(f"{path} {column}: {found[path][column]!r}, expected {want!r}")
    return lines


def test_every_row_after_each_operation_is_ironclaws(
    database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any
) -> None:
    fixture = json.loads(FIXTURE.read_text(encoding="utf-8"))
    scope = fixture["scope"]
    assert (scope["tenant"], scope["user"], scope["agent"]) == tuple(K[k] for k in ALICE_KEYS)
    reborn_schema(database_url)
    mount: Mount = mount_factory(database_url, extra_args=["--user-id", "alice"])
    expected: dict[str, dict[str, Any]] = {}
    for step in fixture["steps"]:
        _, born_before = table(sql_conn)
        if "agent" in step:
            agent_writes(sql_conn, step["agent"])
            expected.update({p: expected_row(s) for p, s in step["agent"].items()})
            deadline = time.monotonic() + SETTLE_SECONDS
            while not all(mount.path(p).exists() for p in step.get("visible", [])):
                assert time.monotonic() < deadline, f"{step['id']}: the mount does not show it"
                time.sleep(0.01)
            continue
        done = subprocess.run(
            ["bash", "-c", step["run"]], cwd=mount.path(), capture_output=True, text=True,
            timeout=30, check=False,
        )  # fmt: skip
        assert done.returncode == step.get("status", 0), (step["id"], done.stderr)
        expected.update({p: expected_row(s) for p, s in step["set"].items()})
        for path in step["gone"]:
            del expected[path]
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            found, born = table(sql_conn)
            wrong = differences(found, expected)
            if not wrong or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert not wrong, f"{step['id']} ({step['say']}; {step['rule']}):\n" + "\n".join(wrong)
        for path in step["fresh"]:
            assert path not in born_before or born[path] > born_before[path], (
                f"{step['id']}: {path} was not inserted anew"
            )
