"""What the contract tests share: the errno a refusal must carry."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import pytest

from memfs.errors import FsError


async def refused(code: int, call: Awaitable[Any]) -> FsError:
    """``call`` fails with errno ``code`` (and nothing else)."""
    with pytest.raises(FsError) as info:
        await call
    assert info.value.errno == code, info.value
    return info.value
