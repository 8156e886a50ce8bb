"""A lexicographic minimum over a kernel's lanes, with values carried along, as one reduction.

The fused kernels' steps are latency-bound chains of reductions over their lanes: each
``jnp.min`` / ``jnp.sum`` becomes its own Triton ``tt.reduce`` (warp shuffles, then an exchange
between warps through shared memory behind a barrier). A step that needs the minimum word *and*
the ready time of the lane holding it, or a minimum over three keys, paid one reduction per
value. :func:`lexmin` is one ``lax.reduce`` over all of them, whose combine keeps the
lexicographically smaller tuple: one ``tt.reduce`` with several operands, so one round of
shuffles and one barrier per step instead of three.

Pallas' Triton backend lowers ``reduce_max`` / ``min`` / ``sum`` and ``argmax`` / ``argmin`` but
not the variadic ``lax.reduce``, although its own ``argmin`` is built from the same
multi-operand ``tt.reduce``. :func:`_register` adds that rule to the backend's table (private
JAX API: ``jax._src.pallas.triton.lowering``, the table and helper ``argmin`` uses). The rule
is global, so other Pallas kernels in the process may use it too: a ``lax.reduce`` over one
axis, its init values taken as the identities XLA's contract says they are. Where this JAX
has neither, or they no longer fit (:func:`lowers`), the "auto" decoder keeps to the loops. In
Pallas' interpreter (CPU) ``lax.reduce`` runs as itself, so the tests check the same program.
"""

from __future__ import annotations

import functools
import warnings
from typing import Sequence

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt
from jax.extend.core import jaxpr_as_fun

BIG = (1 << 31) - 1  # the largest int32: a masked-out lane's keys


def _reduce_rule(reduction, ctx, *args, jaxpr, dimensions, **_):
    """Triton lowering of ``lax.reduce_p`` (operands, then as many init values): the init
    values are dropped (``tt.reduce`` has none; :func:`lexmin`'s are identities)."""
    count = len(args) // 2
    combine = jaxpr_as_fun(jaxpr)
    return reduction(lambda left, right: combine(*left, *right),
                     ctx.replace(avals_in=ctx.avals_in[:count]), tuple(args[:count]),
                     tuple(dimensions))


def _register() -> bool:
    """Adds :func:`_reduce_rule` to Pallas' Triton lowering table (kept if JAX has its own);
    False where this JAX's backend lacks the table or its reduction helper."""
    try:
        from jax._src.pallas.triton import lowering
        rules, reduction = lowering.triton_lowering_rules, lowering._reduction_lowering
    except (ImportError, AttributeError):
        return False
    rules.setdefault(lax.reduce_p, functools.partial(_reduce_rule, reduction))
    return True


AVAILABLE = _register()


@functools.cache
def lowers() -> bool:
    """Whether :func:`lexmin` lowers through this JAX's Pallas Triton backend: tried once, on a
    16-lane kernel lowered for CUDA (no GPU needed). A JAX whose private lowering helpers
    changed fails here, with a warning, instead of in the first evaluation."""
    if not AVAILABLE:
        return False

    def kernel(x_ref, out_ref):
        least, payload = lexmin([x_ref[...]], [x_ref[...]])
        out_ref[0] = least
        out_ref[1] = payload

    call = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((2,), jnp.int32),
                          compiler_params=plt.CompilerParams(num_warps=1))
    try:
        jax.jit(call).trace(jnp.zeros(16, jnp.int32)).lower(lowering_platforms=("cuda",))
    except Exception as error:  # noqa: BLE001 — a capability probe: any failure means "no"
        warnings.warn(f"gsched's fused kernels are off: lexmin does not lower for Triton in "
                      f"this JAX ({type(error).__name__}: {error})", stacklevel=2)
        return False
    return True


def lexmin(keys: Sequence[jnp.ndarray], payloads: Sequence[jnp.ndarray] = ()
           ) -> list[jnp.ndarray]:
    """Inside a kernel: over lanes ``[W]`` (int32), the lexicographically smallest tuple of
    ``keys`` and the ``payloads`` of the lane holding it, ``[]`` each, in one reduction.

    Mask a lane out by setting its keys to :data:`BIG`; with every lane out the result is
    ``BIG`` keys and unspecified payloads. Lanes must not tie on every key unless their
    payloads agree (the combine would then depend on the reduction's order): the kernels'
    last key is the slot or lane index, or they carry no payload."""
    keys, payloads = list(keys), list(payloads)
    if len(keys) == 1 and not payloads:
        return [jnp.min(keys[0])]
    count = len(keys)

    def combine(left, right):
        take_left = left[count - 1] <= right[count - 1]
        for i in reversed(range(count - 1)):
            take_left = (left[i] < right[i]) | ((left[i] == right[i]) & take_left)
        return tuple(lax.select(take_left, x, y) for x, y in zip(left, right))

    init = tuple(jnp.int32(BIG) for _ in keys) + tuple(jnp.int32(0) for _ in payloads)
    return list(lax.reduce(tuple(keys + payloads), init, combine, (0,)))
