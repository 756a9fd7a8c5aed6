"""Rust's number parsing and 32-bit float arithmetic, as IronClaw's settings and fusion use.

Python floats are 64-bit; IronClaw computes fusion scores and holds weights in ``f32``.
Parsing a decimal into a double and then narrowing it rounds twice, which can differ from
Rust's correctly rounded ``f32::from_str`` (``0.30000001`` is one such input), so decimals
are rounded to the nearest f32 from their exact value.
"""

from __future__ import annotations

import math
import re
import struct
from fractions import Fraction

_F32_MAX = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]
_RUST_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_RUST_SPECIAL = {"inf": math.inf, "infinity": math.inf, "nan": math.nan}
_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1


def f32(value: float) -> float:
    """Round a double to the nearest 32-bit float (infinities beyond the range)."""
    if math.isnan(value) or math.isinf(value):
        return value
    try:
        result: float = struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)
    return result


def f32_bits(value: float) -> int:
    bits: int = struct.unpack("<I", struct.pack("<f", value))[0]
    return bits


def _from_bits(bits: int) -> float:
    value: float = struct.unpack("<f", struct.pack("<I", bits))[0]
    return value


def f32_div(a: float, b: float) -> float:
    """IEEE division of two f32 values, rounded to f32 (x/0 is ±inf or NaN, as in Rust)."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return f32(a / b)


def _nearest_f32(exact: Fraction) -> float:
    """The f32 nearest to an exact rational, ties to even (IEEE round-to-nearest)."""
    if exact == 0:
        return 0.0
    guess = f32(float(exact))
    if math.isinf(guess):
        # Overflow: Rust rounds to infinity only past the halfway point above f32::MAX.
        limit = Fraction(_F32_MAX) + Fraction(2) ** 103
        return guess if abs(exact) >= limit else math.copysign(_F32_MAX, float(exact))
    bits = f32_bits(guess)
    candidates = [guess]
    for neighbour in (bits - 1, bits + 1):
        if 0 <= neighbour <= 0xFFFFFFFF:
            value = _from_bits(neighbour)
            if math.isfinite(value) and (value >= 0) == (guess >= 0):
                candidates.append(value)
    return min(candidates, key=lambda v: (abs(Fraction(v) - exact), f32_bits(v) & 1))


def parse_f32(text: str) -> float:
    """Rust's ``f32::from_str``: no whitespace or underscores; ``inf``/``NaN`` allowed.

    Raises ValueError with Rust's message for anything else.
    """
    body = text[1:] if text[:1] in "+-" else text
    special = _RUST_SPECIAL.get(body.lower())
    if special is not None:
        return -special if text.startswith("-") else special
    if not _RUST_FLOAT.fullmatch(text):
        raise ValueError("invalid float literal")
    value = _nearest_f32(Fraction(text))
    if value == 0 and text.startswith("-"):
        return -0.0
    return value


def parse_unsigned(text: str, maximum: int = _U32_MAX) -> int:
    """Rust's ``u32::from_str`` (or u64/usize with ``maximum``): optional ``+``, ASCII digits.

    Raises ValueError with Rust's ``ParseIntError`` message.
    """
    digits = text[1:] if text.startswith("+") else text
    if not text:
        raise ValueError("cannot parse integer from empty string")
    if not digits or not all("0" <= c <= "9" for c in digits):
        raise ValueError("invalid digit found in string")
    value = int(digits)
    if value > maximum:
        raise ValueError("number too large to fit in target type")
    return value


USIZE_MAX = _U64_MAX
