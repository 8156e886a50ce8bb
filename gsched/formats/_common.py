"""Shared pieces of the format readers and writers."""

from __future__ import annotations


class FormatError(ValueError):
    """A graph file is unreadable, malformed, or cannot hold the graph being written."""


def as_number(x: float) -> int | float:
    """``x`` as an ``int`` when it is integer-valued (and fits int64), else as a ``float``."""
    x = float(x)
    return int(x) if x.is_integer() and abs(x) < 2**63 else x
