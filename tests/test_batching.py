"""gsched.core.batching.flat_batch: vmaps merge into the function's own batch axis."""

import jax
import jax.numpy as jnp
import numpy as np

from gsched.core.batching import flat_batch


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
