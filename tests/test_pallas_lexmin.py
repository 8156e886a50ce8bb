"""gsched.costmodel.pallas_lexmin: the lexicographic minimum with carried values, in Pallas'
interpreter against numpy, and its Triton lowering: one multi-operand reduction where the
kernels' steps used to make one per value (lowering only: no GPU here)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl

from gsched.core.padding import pad_graph
from gsched.costmodel import pallas_lexmin
from gsched.costmodel.pallas_decode import lane_widths
from gsched.costmodel.pallas_dynamic import fused_schedule
from gsched.costmodel.pallas_lexmin import AVAILABLE, BIG, lexmin
from gsched.costmodel.params import CostParams
from gsched.costmodel.schedule import decode_placement
from gsched.generators import random_computation_graph
from tests.test_pallas_decode import BUCKET, tie_keys


def _interpreted(keys: np.ndarray, payloads: np.ndarray) -> np.ndarray:
    """``lexmin`` of ``keys [K, W]`` carrying ``payloads [P, W]`` in a kernel, interpreted."""

    def kernel(keys_ref, payloads_ref, out_ref):
        out = lexmin([keys_ref[i] for i in range(keys.shape[0])],
                     [payloads_ref[i] for i in range(payloads.shape[0])])
        for i, value in enumerate(out):
            out_ref[i] = value

    size = keys.shape[0] + payloads.shape[0]
    return np.asarray(pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((size,), jnp.int32),
                                     interpret=True)(jnp.asarray(keys), jnp.asarray(payloads)))


@pytest.mark.parametrize("num_keys", [1, 2, 3])
def test_matches_numpy_with_ties_in_the_leading_keys(num_keys):
    rng = np.random.default_rng(num_keys)
    for _ in range(5):
        width = 64
        keys = rng.integers(0, 3, (num_keys, width)).astype(np.int32)  # many ties...
        keys[-1] = rng.permutation(width)  # ... broken by the last key
        keys[:, rng.random(width) < 0.3] = BIG  # masked lanes
        payloads = rng.integers(-1000, 1000, (2, width)).astype(np.int32)
        lane = np.lexsort(keys[::-1])[0]
        want = np.concatenate([keys[:, lane], payloads[:, lane]])
        assert (_interpreted(keys, payloads) == want).all()


def test_every_lane_masked_gives_big_keys():
    keys = np.full((2, 16), BIG, np.int32)
    assert (_interpreted(keys, np.zeros((1, 16), np.int32))[:2] == BIG).all()


def _reductions_lowered(fn, *args) -> dict[str, list[int]]:
    """Lowers ``fn`` for CUDA, recording each reduction the Triton backend lowers: the
    primitive's name → the number of operands of each."""
    from jax._src.pallas.triton import lowering

    rules = lowering.triton_lowering_rules
    seen: dict[str, list[int]] = {}
    saved = {p: rules[p] for p in (lax.reduce_p, lax.reduce_min_p, lax.reduce_max_p,
                                   lax.reduce_sum_p)}

    def spy(primitive, rule):
        def record(ctx, *operands, **params):
            count = len(operands) // 2 if primitive is lax.reduce_p else len(operands)
            seen.setdefault(primitive.name, []).append(count)
            return rule(ctx, *operands, **params)
        return record

    try:
        rules.update({p: spy(p, rule) for p, rule in saved.items()})
        jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",))
    finally:
        rules.update(saved)
    return seen


@pytest.mark.skipif(not AVAILABLE, reason="this JAX's Pallas Triton backend has no rule table")
@pytest.mark.parametrize("scheduler", ["list", "priority", "fifo"])
def test_each_kernel_step_lowers_to_one_or_two_reductions(scheduler):
    # Per lane width (D = 1: V_p = 32, kernels at 32 and 16 lanes) the list kernel makes one
    # reduction per step (the minimum word with its lane's ready time, 3 operands) and one
    # before the loop; the event-driven kernel one for the next stream (3 keys) per step and
    # before the loop, and one for the candidate (the smallest slot: a plain minimum; fifo:
    # ready hi, lo, slot).
    rng = np.random.default_rng(3)
    graph = random_computation_graph(20, rng)
    padded = jax.tree.map(jnp.asarray, pad_graph(graph, BUCKET))
    keys = jnp.asarray(tie_keys(rng, graph, 2, 1))
    params = jax.tree.map(jnp.asarray, CostParams(latency=0.1, bandwidth=1e3))

    def run(k):
        return jax.vmap(lambda c: fused_schedule(padded, c, decode_placement(padded, c, 1),
                                                 params, 1, scheduler, interpret=False))(k)

    seen = _reductions_lowered(run, keys)
    per_width = {"list": {"reduce": [3, 3]},
                 "priority": {"reduce": [3, 3], "reduce_min": [1]},
                 "fifo": {"reduce": [3, 3, 3]}}[scheduler]
    widths = len(lane_widths(32))
    assert widths == 2
    assert seen == {name: counts * widths for name, counts in per_width.items()}


def test_the_lowering_probe_says_yes_here_and_warns_when_it_fails(monkeypatch):
    assert pallas_lexmin.lowers() is AVAILABLE
    if not AVAILABLE:
        return

    def broken(keys, payloads=()):
        raise NotImplementedError("no such lowering")

    monkeypatch.setattr(pallas_lexmin, "lexmin", broken)
    with pytest.warns(UserWarning, match="fused kernels are off.*no such lowering"):
        assert pallas_lexmin.lowers.__wrapped__() is False
