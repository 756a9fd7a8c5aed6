"""What the contract tests share: the errno a refusal must carry."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import pytest

from memfs.errors import FsError
from tests.contract.fronts import FrontRefusal, KernelRefusal


async def refused(code: int, call: Awaitable[Any]) -> FsError:
    """``call`` fails with errno ``code`` (and nothing else); through the WebDAV front,
    with the HTTP status that errno maps to."""
    with pytest.raises(FsError) as info:
        await call
    assert means(info.value, code), info.value
    return info.value


def means(refusal: FsError, code: int) -> bool:
    """``refusal`` is the front's answer for errno ``code``."""
    if isinstance(refusal, FrontRefusal | KernelRefusal):
        return refusal.means(code)
    return refusal.errno == code
