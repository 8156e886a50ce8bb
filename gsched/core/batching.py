"""Batch-merging ``vmap`` for functions already written over a leading batch axis.

The cost model's hot paths (the schedule loop's step, the fused decode kernel's call) are
written for a batch ``[B, ...]`` of chromosomes. Under ``jax.vmap`` JAX would batch their bodies
again, turning every gather and scatter into a batched one and every ``lax.switch`` on a batch
property into a select of all branches. :func:`flat_batch` instead flattens the new axis into
the existing one and calls the function once on ``[A·B, ...]``. :func:`batch_switch` picks one
of several functions by a property of the whole batch, however many vmaps nest around it.
"""

from __future__ import annotations

from typing import Callable, Sequence

import jax
import jax.numpy as jnp
from jax import lax


def flat_batch(fn: Callable) -> Callable:
    """``fn(*args)`` (every leaf with a leading batch axis ``[B, ...]``, every output too) as a
    ``custom_vmap`` function: vmapping it over an axis of size ``A`` calls ``fn`` once on leaves
    reshaped to ``[A·B, ...]`` (unbatched arguments broadcast) and splits the outputs back to
    ``[A, B, ...]``. Nested vmaps flatten all their axes into the one batch."""

    @jax.custom_batching.custom_vmap
    def merged(*args):
        return fn(*args)

    @merged.def_vmap
    def rule(axis_size, in_batched, *args):
        def merge(x, batched):
            x = x if batched else jnp.broadcast_to(x, (axis_size,) + x.shape)
            return x.reshape((-1,) + x.shape[2:])

        out = merged(*jax.tree.map(merge, args, tuple(in_batched)))
        out = jax.tree.map(lambda x: x.reshape((axis_size, -1) + x.shape[1:]), out)
        return out, jax.tree.map(lambda _: True, out)

    return merged


def batch_switch(measure: Callable, choose: Callable, branches: Sequence[Callable]) -> Callable:
    """``branches[choose(measures)](*args)`` as a function of one element (``args`` without a
    batch axis), where ``measures`` holds ``measure(*args)`` (a scalar) of every element of the
    batch: under any number of nested ``jax.vmap`` s, ``choose`` sees all of them at once and
    one ``lax.switch`` on its unbatched result runs that branch over the whole batch (a plain
    vmapped switch would run every branch and select). Each branch is vmapped as written, an
    unbatched argument staying unbatched (unlike :func:`flat_batch`); the branches return the
    same shapes."""

    def at(levels: tuple) -> Callable:
        """The function with ``levels`` of vmaps already applied (outermost first: each a
        tuple of the arguments' batched flags)."""

        def nested(fn: Callable) -> Callable:
            for batched in reversed(levels):
                fn = jax.vmap(fn, in_axes=jax.tree.map(lambda b: 0 if b else None, batched))
            return fn

        @jax.custom_batching.custom_vmap
        def switched(*args):
            index = choose(nested(measure)(*args))
            return lax.switch(index, [nested(branch) for branch in branches], *args)

        @switched.def_vmap
        def rule(axis_size, in_batched, *args):
            del axis_size
            out = at((tuple(in_batched),) + levels)(*args)
            return out, jax.tree.map(lambda _: True, out)

        return switched

    return at(())
