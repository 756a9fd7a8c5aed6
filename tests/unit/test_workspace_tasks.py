"""Workspace commands without a mount: status, seed, reindex, export/import, log."""

from __future__ import annotations

import pytest

from memfs.config import redacted


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://alice:s3cret@db.example/mem",
        "postgresql://alice@db.example/mem?password=s3cret",
        "postgresql://alice@db.example/mem?sslpassword=s3cret&password=s3cret",
        "host=db.example user=alice password=s3cret dbname=mem",
        "host=db.example user=alice password='s3cret with spaces' dbname=mem",
    ],
)
def test_status_redacts_secrets_in_every_form(dsn: str) -> None:
    shown = redacted(dsn)
    assert "s3cret" not in shown
    assert "password=***" in shown and "db.example" in shown and "alice" in shown
