"""Which memory a command opens when none is named: IronClaw's local-dev file when its
configuration names one, memfs's embedded server otherwise; both present is a choice the
user makes once."""

from __future__ import annotations

from pathlib import Path

import pytest

from memfs.config import Settings
from memfs.db.libsql.discovery import choose_database
from memfs.options import SettingError
from tests.ironclaw_libsql import reborn_local_dev


def _settings(tmp_path: Path, url: str | None = None) -> Settings:
    return Settings(database_url=url, data_dir=tmp_path / "data")


def _ironclaw(tmp_path: Path) -> tuple[dict[str, str], Path]:
    env = {"HOME": str(tmp_path / "home")}
    db = reborn_local_dev(tmp_path / "home/.ironclaw/reborn/local-dev/reborn-local-dev.db")
    return env, db


def test_nothing_named_nothing_found_is_the_embedded_server(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert choose_database(settings, {"HOME": str(tmp_path / "home")}) is None
    assert settings.database_url is None


def test_ironclaws_local_dev_file_is_found_and_opened(tmp_path: Path) -> None:
    env, db = _ironclaw(tmp_path)
    settings = _settings(tmp_path)
    assert choose_database(settings, env) == db
    assert settings.database_url == f"sqlite:{db}"


def test_both_present_is_one_clear_refusal_and_the_choice_is_remembered(tmp_path: Path) -> None:
    env, db = _ironclaw(tmp_path)
    (tmp_path / "data/pgdata").mkdir(parents=True)  # memfs's own embedded workspace
    with pytest.raises(SettingError) as refused:
        choose_database(_settings(tmp_path), env)
    message = str(refused.value)
    assert str(db) in message and "pgdata" in message and "--database-url" in message
    assert "\n" not in message
    choose_database(_settings(tmp_path, f"sqlite:{db}"), env)  # the user chooses once
    later = _settings(tmp_path)
    assert choose_database(later, env) == db and later.database_url == f"sqlite:{db}"
    chosen = _settings(tmp_path, "embedded")
    assert choose_database(chosen, env) is None and chosen.database_url is None
    again = _settings(tmp_path)
    assert choose_database(again, env) is None and again.database_url is None
    choice = tmp_path / "data/database-choice"
    assert choice.stat().st_mode & 0o777 == 0o600


def test_a_named_database_is_never_second_guessed(tmp_path: Path) -> None:
    env, _ = _ironclaw(tmp_path)
    settings = _settings(tmp_path, "postgresql://u@h/db")
    assert choose_database(settings, env) is None
    assert settings.database_url == "postgresql://u@h/db"
