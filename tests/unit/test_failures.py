"""``memfs.failures.describe_failure``: the one line a failed command or mount says."""

from __future__ import annotations

import psycopg
import trio

from memfs.errors import EXIT_DATABASE, EXIT_FAILED
from memfs.failures import describe_failure
from memfs.paths import decode_name


async def _nursery_of(task: object) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(task)  # type: ignore[arg-type]


def _failure_of(task: object) -> BaseException:
    try:
        trio.run(_nursery_of, task)
    except BaseException as exc:
        return exc
    raise AssertionError("the task did not fail")


def test_a_task_failing_in_a_nursery_is_said_as_itself() -> None:
    """Was: a mount whose task lost the database said only "internal error:
    ExceptionGroup: Exceptions from Trio nursery (1 sub-exception)"."""

    async def lost() -> None:
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    code, line = describe_failure(_failure_of(lost))
    assert code == EXIT_DATABASE
    assert line.startswith("cannot reach the database: server closed the connection")


def test_an_internal_error_names_where_memfs_raised_it() -> None:
    async def wrong() -> None:
        decode_name(None)  # type: ignore[arg-type]

    code, line = describe_failure(_failure_of(wrong))
    assert code == EXIT_FAILED and line.startswith("internal error: ")
    assert " at memfs/paths.py:" in line and "in decode_name" in line, line
    assert "\n" not in line
