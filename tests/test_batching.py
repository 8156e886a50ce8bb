"""gsched.core.batching: vmaps merge into the function's own batch axis (flat_batch) or pick
one branch for the whole batch (batch_switch)."""

import jax
import jax.numpy as jnp
import numpy as np

from gsched.core.batching import batch_switch, flat_batch


def test_vmaps_flatten_into_one_call_on_the_merged_batch():
    shapes = []

    def fn(x, y):  # x [B, 4], y [B]
        shapes.append((x.shape, y.shape))
        return x * 2 + y[:, None], jnp.sum(x, axis=1)

    f = flat_batch(fn)
    x = jnp.arange(48.0).reshape(2, 2, 3, 4)
    y = jnp.arange(3.0)
    scaled, sums = jax.vmap(jax.vmap(f, in_axes=(0, None)), in_axes=(0, None))(x, y)
    assert shapes[-1] == ((12, 4), (12,))  # one call, both vmapped axes merged, y broadcast
    np.testing.assert_array_equal(scaled, x * 2 + y[None, None, :, None])
    np.testing.assert_array_equal(sums, jnp.sum(x, axis=3))
    assert f(x[0, 0], y)[0].shape == (3, 4)  # unbatched call: fn as written


def test_batch_switch_takes_one_branch_for_the_whole_nested_batch():
    calls = []

    def branch(scale):
        def fn(x, y):  # one element: x [4], y []
            calls.append(x.shape)
            return x * scale + y
        return fn

    f = batch_switch(lambda x, y: jnp.max(x), lambda peaks: (jnp.max(peaks) > 10).astype(int),
                     [branch(2.0), branch(3.0)])
    x = jnp.arange(24.0).reshape(2, 3, 4) / 10  # max 2.3: branch 0 everywhere
    y = jnp.arange(2.0)
    g = jax.vmap(jax.vmap(f, in_axes=(0, None)), in_axes=(0, 0))
    np.testing.assert_allclose(g(x, y), x * 2 + y[:, None, None])
    big = x.at[1, 2, 3].set(11.0)  # one element over 10: branch 1 for all of them
    np.testing.assert_allclose(g(big, y), big * 3 + y[:, None, None])
    assert calls[-1] == (4,)  # each branch written for one element
    # One conditional on an unbatched index (a batched one would select between branches).
    text = jax.jit(g).lower(x, y).as_text()
    assert text.count("stablehlo.case") == 1
    assert float(f(x[0, 0], y[0])[1]) == float(x[0, 0, 1] * 2)  # unbatched call
