"""The history checker catches what it names: faults planted in real daemons
(``tests.history.planted``) each fail a fixed seed, on every engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.engines import Engine
from tests.mount.test_history import run_history

pytestmark = pytest.mark.mount

SEED = 1
OPERATIONS = 600


@pytest.mark.timeout(900)
@pytest.mark.parametrize("fault", ["no-version", "unconditional-delete"])
def test_a_planted_fault_fails_the_checker(
    engine: Engine, database_url: str, mount_factory: Any, work_dir: Path, fault: str
) -> None:
    run, violations = run_history(
        engine, database_url, mount_factory, work_dir, SEED, OPERATIONS, plant=fault
    )
    lost = [v for v in violations if v.startswith("lost:")]
    print(f"{fault} on {engine}: {len(lost)} acknowledged writes lost; {run.history.summary()}")
    assert lost, f"the checker missed the planted fault {fault!r}: {violations}"
