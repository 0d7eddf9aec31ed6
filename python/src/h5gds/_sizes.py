"""Sizes written as text, in the syntax of the gds driver's configuration
(src/vfd/gds_config.c, parse_size): whole bytes ("4096"), or a whole number
and a unit: B; K, M, G, T and KiB, MiB, GiB, TiB (powers of 1024); KB, MB,
GB, TB (powers of 1000). Units are case-insensitive except that a final
lowercase "b" is refused, since "Mb" can mean megabits. No sign, fraction,
space or exponent; at most 2**64 - 1 bytes.

This module has no dependencies (the scripts in tools/ load it by path).
"""
from __future__ import annotations

__all__ = ["SizeError", "parse_size", "parse_size_list", "SIZE_SYNTAX"]

SIZE_SYNTAX = "e.g. 4096, 64KiB, 8MiB, 1GiB, 1G, 500MB"

_KIB, _MIB, _GIB, _TIB = 1 << 10, 1 << 20, 1 << 30, 1 << 40
_UNITS = {"b": 1, "k": _KIB, "kib": _KIB, "kb": 1000, "m": _MIB, "mib": _MIB, "mb": 1000**2,
          "g": _GIB, "gib": _GIB, "gb": 1000**3, "t": _TIB, "tib": _TIB, "tb": 1000**4}
_MAX = (1 << 64) - 1


class SizeError(ValueError):
    """A text that is not a size; str() is the one-line reason."""


def parse_size(text: str, what: str = "size") -> int:
    """The number of bytes `text` means; SizeError (a ValueError) saying
    what is wrong otherwise. `what` names the value in the message."""
    if not isinstance(text, str):
        raise SizeError(f"{what}: {text!r} is not a size (a string, {SIZE_SYNTAX})")
    digits = len(text) - len(text.lstrip("0123456789"))
    # ASCII digits only ("٣" is a digit to str.isdigit, not to the C parser)
    if digits == 0:
        raise SizeError(f"{what} {text!r} is not a size ({SIZE_SYNTAX})")
    number, unit = int(text[:digits]), text[digits:]
    mult = 1
    if unit:
        if unit.lower() not in _UNITS:
            raise SizeError(f"{what} {text!r} is not a size ({SIZE_SYNTAX})")
        if unit.endswith("b"):
            raise SizeError(f"{what} {text!r} has a unit with a lowercase b, which can mean bits: "
                            "write KB (1000 bytes) or KiB (1024)")
        mult = _UNITS[unit.lower()]
    if number > _MAX // mult:
        raise SizeError(f"{what} {text!r} is too large (at most 2**64 - 1 bytes)")
    return number * mult


def parse_size_list(text: str, what: str = "size") -> list[int]:
    """A comma-separated list of sizes (at least one)."""
    if not isinstance(text, str) or not text:
        raise SizeError(f"{what}: no size given ({SIZE_SYNTAX})")
    return [parse_size(item, what) for item in text.split(",")]
