"""The history checker catches what it names: faults planted in real daemons
(``tests.history.planted``) fail fixed seeds, on every engine.

A planted race is caught by one 600-operation run 7 times in 8 on the legacy layout and 5
in 8 on Reborn (an unconditional queued removal, measured over seeds 1-8): each fault gets
up to five fixed seeds, so a miss of all five (about 1 in 100 on Reborn) fails the test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.engines import ENGINES, Engine
from tests.mount.test_history import run_history

pytestmark = pytest.mark.mount

SEEDS = (1, 2, 3, 4, 5)
OPERATIONS = 600


@pytest.mark.timeout(900)
@pytest.mark.parametrize("fault", ["no-version", "unconditional-delete"])
def test_a_planted_fault_fails_the_checker(
    engine: Engine, database_url: str, mount_factory: Any, work_dir: Path, fault: str
) -> None:
    for seed in SEEDS:
        _, violations = run_history(
            engine, database_url, mount_factory, work_dir, seed, OPERATIONS, plant=fault
        )
        lost = [v for v in violations if v.startswith("lost:")]
        print(f"{fault} on {engine}, seed {seed}: {len(lost)} acknowledged writes lost")
        if lost:  # (markers carry the seed: a later run cannot find an earlier one's)
            return
    raise AssertionError(f"the checker missed the planted fault {fault!r} (seeds {SEEDS})")


@pytest.mark.timeout(300)
# The driver's and the checker's handling of a hung syscall, not an engine's: one engine
# (the CI budget; 32 s a run).
@pytest.mark.parametrize("engine", [ENGINES[0]], ids=str, indirect=True)
def test_a_syscall_that_never_returns_fails_the_checker_and_the_run_still_ends(
    engine: Engine, database_url: str, mount_factory: Any, work_dir: Path
) -> None:
    """A lock-order deadlock left a rename waiting 22 minutes in the Reborn soak, and the
    soak waited with it: a writer that does not finish by the deadline is a violation, and
    aborting the mounts' FUSE connections lets the stuck processes (and the run) end."""
    started: list[Any] = []

    def mounts(*args: Any, **kwargs: Any) -> Any:
        mount = mount_factory(*args, **kwargs)
        started.append(mount)
        return mount

    with pytest.raises(AssertionError, match=r"hang: \d+ writer"):
        run_history(engine, database_url, mounts, work_dir, 1, 200,
                    plant="hang-rename", deadline=30)  # fmt: skip
    assert started, "the run mounted"
    for mount in started:
        mount.kill()  # hung on purpose: no use waiting out a stop's grace period
