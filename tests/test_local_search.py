"""Local search with random restarts: exact budget, consistent results, determinism, the move
set, and that it beats random search at the same budget."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched import batch_graphs, random_computation_graph
from gsched.core.padding import bucket_for, pad_graph
from gsched.costmodel.evaluate import evaluate_population, score
from gsched.costmodel.params import check_cost_params
from gsched.search import random as random_search
from gsched.search.local import neighbours_of, run_batch, run_batch_with_stats

GRAPHS = [random_computation_graph(n, seed) for seed, n in enumerate((12, 25, 30))]
BUCKET = bucket_for(GRAPHS)
PARAMS = check_cost_params(0.5, 2e4, None)


def _check_consistent(out, objective, num_devices, params=PARAMS):
    for b, g in enumerate(GRAPHS):
        ev = evaluate_population(pad_graph(g, BUCKET), out.best_keys[b][None], params,
                                 num_devices=num_devices)
        # Batched and single-graph paths may differ in the last float32 bit (SPEC: 1e-5).
        np.testing.assert_allclose(float(score(ev, objective, params)[0]),
                                   float(out.best_value[b]), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(score(out.best_evaluation, objective, params)),
                               np.asarray(out.best_value), rtol=1e-6)


@pytest.mark.parametrize("budget", [1, 37])
def test_exact_budget_consistent_and_deterministic(budget):
    graphs = batch_graphs(GRAPHS, BUCKET)
    kwargs = dict(num_devices=2, budget=budget, objective="runtime", cost_params=PARAMS,
                  neighbours=16)
    out, stats = run_batch_with_stats(jax.random.key(3), graphs, **kwargs)
    again = run_batch(jax.random.key(3), graphs, **kwargs)
    np.testing.assert_array_equal(out.best_keys, again.best_keys)
    np.testing.assert_array_equal(out.best_value, again.best_value)
    assert out.evals_used.tolist() == [budget] * len(GRAPHS)
    assert stats.steps.tolist() == [-(-budget // 16)] * len(GRAPHS)
    assert np.all(np.asarray(stats.restarts) >= 1)
    assert np.all(np.isfinite(np.asarray(out.best_value)))
    _check_consistent(out, "runtime", 2)
    other = run_batch(jax.random.key(4), graphs, **kwargs)
    assert not np.array_equal(np.asarray(other.best_keys), np.asarray(out.best_keys))


def test_surplus_is_masked():
    # 33 and 48 both take 3 steps of 16 with the same random draws; 33 counts only the
    # first slot of the last step, so it can never beat 48.
    graphs = batch_graphs(GRAPHS, BUCKET)
    kwargs = dict(num_devices=2, objective="runtime", cost_params=PARAMS, neighbours=16)
    small = run_batch(jax.random.key(3), graphs, budget=33, **kwargs)
    large = run_batch(jax.random.key(3), graphs, budget=48, **kwargs)
    assert small.evals_used.tolist() == [33] * 3
    assert np.all(np.asarray(large.best_value) <= np.asarray(small.best_value))
    _check_consistent(small, "runtime", 2)


def test_single_device():
    graphs = batch_graphs(GRAPHS, BUCKET)
    out, stats = run_batch_with_stats(jax.random.key(1), graphs, num_devices=1, budget=100,
                                      objective="peak_memory", neighbours=16)
    assert out.evals_used.tolist() == [100] * 3
    assert np.all(np.asarray(stats.moves) >= 1)  # order moves alone do improve peak memory
    assert np.all(np.asarray(out.best_evaluation.placement)[:, :12] == 0)
    _check_consistent(out, "peak_memory", 1)


@pytest.mark.parametrize("num_devices", [1, 3])
def test_moves_change_one_real_op(num_devices):
    g = pad_graph(GRAPHS[0], BUCKET)  # 12 real ops in a bigger bucket
    n, d = BUCKET.num_ops, num_devices
    length = BUCKET.chromosome_length(d)
    base = jax.random.uniform(jax.random.key(0), (length,))
    moves = np.asarray(jax.jit(neighbours_of, static_argnums=(3, 4))(
        jax.random.key(1), base, jnp.asarray(g.op_mask), d, 256))
    base = np.asarray(base)
    assert moves.shape == (256, length)
    assert np.all((moves >= 0) & (moves <= 1))
    rest = n * (d + 1)  # transfer priorities are never touched
    np.testing.assert_array_equal(moves[:, rest:], np.broadcast_to(base[rest:],
                                                                   moves[:, rest:].shape))
    aff = moves[:, : n * d].reshape(256, n, d)
    prio = moves[:, n * d: n * (d + 1)]
    base_aff, base_prio = base[: n * d].reshape(n, d), base[n * d: n * (d + 1)]
    changed_aff = np.any(aff != base_aff, axis=2)  # [256, n]
    changed_prio = prio != base_prio
    changed = changed_aff | changed_prio
    assert np.all(changed.sum(1) <= 1)  # one op per move (an insertion may be a no-op)
    assert not changed[:, 12:].any()  # never a padded op
    assert not (changed_aff & changed_prio).any()
    if d == 1:
        assert not changed_aff.any()
    else:
        rows, ops = np.nonzero(changed_aff)
        assert rows.size > 50
        new_device = aff[rows, ops].argmax(1)
        assert np.all(new_device != base_aff[ops].argmax(1))
        np.testing.assert_array_equal(aff[rows, ops], np.eye(d)[new_device])
    # Order moves insert op j next to another op k: the new priority lies strictly between
    # two neighbours in the ranking of the other real ops (or beyond the extremes).
    rows, ops = np.nonzero(changed_prio)
    assert rows.size > 50
    real = base_prio[:12]
    for r, j in zip(rows, ops):
        others = np.sort(np.delete(real, j))
        p = prio[r, j]
        assert 0 <= p <= 1 and not np.any(others == p)


def test_beats_random_search_at_same_budget():
    graphs = batch_graphs(GRAPHS, BUCKET)
    kwargs = dict(num_devices=2, budget=600, objective="runtime", cost_params=PARAMS)
    ratios = []
    for seed in range(2):
        ls = run_batch(jax.random.key(seed), graphs, **kwargs)
        rs = random_search.run_batch(jax.random.key(seed), graphs, **kwargs)
        ratios.append(np.asarray(ls.best_value) / np.asarray(rs.best_value))
    assert float(np.mean(ratios)) <= 1.0, ratios


def test_bad_arguments():
    graphs = batch_graphs(GRAPHS, BUCKET)
    for budget in (0, -3):
        with pytest.raises(ValueError, match="budget"):
            run_batch(jax.random.key(0), graphs, num_devices=1, budget=budget)
    with pytest.raises(ValueError, match="neighbours"):
        run_batch(jax.random.key(0), graphs, num_devices=1, budget=10, neighbours=0)
    with pytest.raises(ValueError, match="objective"):
        run_batch(jax.random.key(0), graphs, num_devices=1, budget=10, objective="speed")
    with pytest.raises(ValueError, match="leading"):
        run_batch(jax.random.key(0), pad_graph(GRAPHS[0], BUCKET), num_devices=1, budget=10)


def test_seeds_are_evaluated_first_and_the_best_is_the_start():
    """The first step evaluates every seed (with budget = S: the best seed is the result),
    the search starts from the best and never ends worse than it; bad seeds are refused."""
    graphs = batch_graphs(GRAPHS, BUCKET)
    length = BUCKET.chromosome_length(2)
    seeds = np.random.default_rng(0).random((3, 2, length), np.float32)
    values = np.asarray(score(jax.vmap(lambda g, k: evaluate_population(
        g, k, PARAMS, num_devices=2))(graphs, seeds), "runtime", PARAMS))  # [B, S]
    common = dict(num_devices=2, objective="runtime", cost_params=PARAMS, seeds=seeds)
    first = run_batch(jax.random.key(1), graphs, budget=2, **common)
    np.testing.assert_allclose(np.asarray(first.best_value), values.min(axis=1), rtol=1e-6)
    out, stats = run_batch_with_stats(jax.random.key(1), graphs, budget=256, neighbours=16,
                                      **common)
    assert np.all(np.asarray(out.best_value) <= values.min(axis=1) * (1 + 1e-6))
    assert np.all(np.asarray(stats.moves) >= 1)  # it moved from the seed
    _check_consistent(out, "runtime", 2)
    # A better second seed is the start, and not given up after the first step (its
    # neighbours were the first seed's): no restart at the second step.
    two = np.stack([seeds[:, 0], np.asarray(out.best_keys)], axis=1)
    _, stats = run_batch_with_stats(jax.random.key(2), graphs, budget=32, neighbours=16,
                                    **common | {"seeds": two})
    assert np.asarray(stats.restarts).tolist() == [1, 1, 1]
    with pytest.raises(ValueError, match=r"3 seeds do not fit: at most 2 \(all evaluated"):
        run_batch(jax.random.key(1), graphs, budget=20, neighbours=2,
                  **common | {"seeds": np.zeros((3, length), np.float32)})


def test_only_the_searched_genes_are_moved(monkeypatch):
    """``genes="placement"``: every sampled move is a device move (none is frozen away), and
    fusion keys flip only with ``genes="all"``; D = 1 with placement only is refused."""
    from gsched.search import local

    fusion_moves, all_device_moves = [], []

    def spy(key, keys, op_mask, num_devices, count, device_move_prob=0.5, fusion=False):
        out = neighbours_of(key, keys, op_mask, num_devices, count, device_move_prob, fusion)
        nd = op_mask.shape[0] * num_devices
        moved = jnp.all(jnp.any(out[:, :nd] != keys[:nd], axis=1))
        jax.debug.callback(lambda m: all_device_moves.append(bool(np.all(m))), moved)
        fusion_moves.append(fusion)
        return out

    monkeypatch.setattr(local, "neighbours_of", spy)
    graphs = batch_graphs(GRAPHS[:1], bucket_for(GRAPHS[:1]))
    local._search_jit.clear_cache()  # trace with the spy, and leave no spied executable
    try:
        for genes in ("placement", "placement+schedule", "all"):
            fusion_moves.clear()
            all_device_moves.clear()
            jax.block_until_ready(run_batch(jax.random.key(len(genes)), graphs, num_devices=2,
                                            budget=16, neighbours=8, genes=genes, fusion=True))
            assert fusion_moves and all(f == (genes == "all") for f in fusion_moves), genes
            assert all_device_moves and all(all_device_moves) == (genes == "placement"), genes
    finally:
        local._search_jit.clear_cache()
    with pytest.raises(ValueError, match="nothing to search"):
        run_batch(jax.random.key(0), graphs, num_devices=1, budget=16, genes="placement")
