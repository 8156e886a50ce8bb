"""Exact fixed-point arithmetic on pairs of int32 limbs, without JAX's global 64-bit mode.

SPEC §4 asks for peak memory and runtime within 1e-5 of exact arithmetic on graphs whose
sizes reach tens of GB, without turning on ``jax_enable_x64``. Float32 prefix sums of
allocations and frees lose that precision on long schedules (cancellation), so the cost model
works in integer multiples of a per-graph power-of-two ``unit``: a value is ``(hi, lo)`` with
``value / unit = hi · 2**lo_bits + lo`` and ``0 ≤ lo < 2**lo_bits``. Sums, differences and
maxima of such values are exact; only the conversion of each float32 input to a multiple of
``unit`` rounds (relative error ≤ 2**-40 for memory, ≤ 2**-48 for time, on top of the
float32 inputs' own 2**-24).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp


class Fixed(NamedTuple):
    """A fixed-point value (or array of values): ``(hi · 2**lo_bits + lo) · unit``."""

    hi: jnp.ndarray  # int32
    lo: jnp.ndarray  # int32


def ordered_sum(x: jnp.ndarray) -> jnp.ndarray:
    """``[..., n] → [...]`` float32 Σ over the last axis, added pairwise in one fixed order.

    ``jnp.sum``'s order is the compiler's: a batched and an unbatched call, or a constant-folded
    one, may round differently. The bounds that choose a unit (and the reported runtime bound)
    must not, or the same chromosome would score differently depending on how it was compiled.
    """
    n = x.shape[-1]
    width = 1 << max(0, (n - 1).bit_length())
    x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, width - n)])
    while width > 1:
        width //= 2
        x = x[..., :width] + x[..., width:]
    return x[..., 0]


def choose_unit(bound: jnp.ndarray, value_bits: int) -> jnp.ndarray:
    """A power of two ``unit`` such that ``bound / unit < 2**value_bits`` (float32 scalar),
    never below float32's smallest normal number ``2**-126`` (a subnormal unit would be
    flushed to zero on some backends, XLA:CPU's among them; values far below ``bound`` then
    just round) nor above ``2**127``, which an infinite or NaN ``bound`` gets (the callers
    flag that bound; every finite value then rounds to ~0 instead of overflowing the limbs).

    ``bound`` is an upper bound on every value that will be represented (e.g. the sum of all
    sizes). A zero bound gives ``unit = 1``.
    """
    safe = jnp.where(jnp.isnan(bound), jnp.inf, jnp.maximum(bound, jnp.float32(2.0**-126)))
    # +1 guards against log2 rounding just below an integer.
    exponent = jnp.clip(jnp.ceil(jnp.log2(safe)) + 1 - value_bits, -126, 127)
    unit = jnp.ldexp(jnp.float32(1.0), exponent.astype(jnp.int32))
    return jnp.where(bound == 0, jnp.float32(1.0), unit)


def from_float(x: jnp.ndarray, unit: jnp.ndarray, lo_bits: int) -> Fixed:
    """Rounds ``x / unit`` (float32, ≥ 0, < 2**(31 + lo_bits)) to a normalized fixed value."""
    scale = jnp.float32(2.0**lo_bits)
    v = jnp.asarray(x, jnp.float32) / unit  # exact: unit is a power of two
    hi = jnp.floor(v / scale)
    lo = jnp.round(v - hi * scale)  # v - hi·scale is exact in float32
    return normalize(Fixed(hi.astype(jnp.int32), lo.astype(jnp.int32)), lo_bits)


def normalize(x: Fixed, lo_bits: int) -> Fixed:
    """Carries ``lo`` into ``hi`` so that ``0 ≤ lo < 2**lo_bits`` (lo may be any int32)."""
    carry = jnp.right_shift(x.lo, lo_bits)  # arithmetic shift: floor division
    return Fixed(x.hi + carry, x.lo - jnp.left_shift(carry, lo_bits))


def add(a: Fixed, b: Fixed, lo_bits: int) -> Fixed:
    return normalize(Fixed(a.hi + b.hi, a.lo + b.lo), lo_bits)


def subtract(a: Fixed, b: Fixed, lo_bits: int) -> Fixed:
    """``a − b`` for normalized values (the difference normalized; it may be negative)."""
    return normalize(Fixed(a.hi - b.hi, a.lo - b.lo), lo_bits)


def greater(a: Fixed, b: Fixed) -> jnp.ndarray:
    """``a > b`` for normalized values."""
    return (a.hi > b.hi) | ((a.hi == b.hi) & (a.lo > b.lo))


def maximum(a: Fixed, b: Fixed) -> Fixed:
    """Elementwise maximum of normalized values."""
    take_a = greater(a, b)
    return Fixed(jnp.where(take_a, a.hi, b.hi), jnp.where(take_a, a.lo, b.lo))


def where(cond: jnp.ndarray, a: Fixed, b: Fixed) -> Fixed:
    return Fixed(jnp.where(cond, a.hi, b.hi), jnp.where(cond, a.lo, b.lo))


def masked_max(x: Fixed, mask: jnp.ndarray, axis: int = -1) -> Fixed:
    """Maximum of normalized values along ``axis`` over ``mask``; 0 where nothing is masked in."""
    hi = jnp.max(jnp.where(mask, x.hi, 0), axis=axis, keepdims=True)
    lo = jnp.max(jnp.where(mask & (x.hi == hi), x.lo, 0), axis=axis, keepdims=True)
    return Fixed(jnp.squeeze(hi, axis), jnp.squeeze(lo, axis))


def to_int64(x: Fixed, lo_bits: int) -> jnp.ndarray:
    """``hi · 2**lo_bits + lo`` as one int64 integer (call under ``jax.enable_x64(True)``):
    where many values are summed (the memory walks), one integer add replaces two limbs and a
    carry, exactly, while values stay below 2**62."""
    return jnp.left_shift(x.hi.astype(jnp.int64), lo_bits) + x.lo.astype(jnp.int64)


def from_int64(x: jnp.ndarray, lo_bits: int) -> Fixed:
    """The normalized limbs of an int64 integer ``≥ 0`` and ``< 2**(31 + lo_bits)`` (call under
    ``jax.enable_x64(True)``)."""
    return Fixed(jnp.right_shift(x, lo_bits).astype(jnp.int32),
                 (x & ((1 << lo_bits) - 1)).astype(jnp.int32))


def to_float(x: Fixed, unit: jnp.ndarray, lo_bits: int) -> jnp.ndarray:
    """Float32 value of a normalized fixed value (relative error ≤ 2**-23)."""
    return (x.hi.astype(jnp.float32) * jnp.float32(2.0**lo_bits)
            + x.lo.astype(jnp.float32)) * unit
