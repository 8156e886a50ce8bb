"""Batch-merging ``vmap`` for functions already written over a leading batch axis.

The cost model's hot paths (the schedule loop's step, the fused decode kernel's call) are
written for a batch ``[B, ...]`` of chromosomes. Under ``jax.vmap`` JAX would batch their bodies
again, turning every gather and scatter into a batched one and every ``lax.switch`` on a batch
property into a select of all branches. :func:`flat_batch` instead flattens the new axis into
the existing one and calls the function once on ``[A·B, ...]``.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp


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
