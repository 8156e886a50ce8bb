"""Parameter grids whose full product is too slow for ``make test`` (Pallas' interpreter runs a
kernel in a minute or so on the 2-core CI machine): a diagonal of a product, or chosen values,
run by default and the rest is marked slow (``make test-slow`` runs it)."""

from __future__ import annotations

import itertools

import pytest


def diagonal_then_slow(*axes):
    """Every combination of ``axes`` (sequences of values) as ``pytest.param``s: the ``i``-th
    value of every axis, cycled, for ``i < max(len(axis))`` (so every value of every axis runs
    at least once) by default; every other combination marked ``slow``."""
    longest = max(len(axis) for axis in axes)
    diagonal = {tuple(axis[i % len(axis)] for axis in axes) for i in range(longest)}
    return [pytest.param(*combo, marks=() if combo in diagonal else pytest.mark.slow)
            for combo in itertools.product(*axes)]


def slow_except(values, *keep):
    """``values`` (each a value, or a tuple of a test's values) as ``pytest.param``s: those in
    ``keep`` by default, the others marked ``slow``."""
    return [pytest.param(*(value if isinstance(value, tuple) else (value,)),
                         marks=() if value in keep else pytest.mark.slow) for value in values]
