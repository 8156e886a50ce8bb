"""BRKGA (gsched.search.brkga): exact evaluation budget, bookkeeping against re-evaluation, batching,
islands, seeding, determinism and the recompilation guard.

Compilation dominates the cost, so every test shares one bucket, ``D = 2`` and a handful of
jitted variants: a single-graph run and a batched run (runtime objective, budget 999/1012 —
the same scan length, so one compilation each), the batched random search, and one island
run (peak-memory objective, seeds, pinning).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched.core.padding import batch_graphs, bucket_for, pad_graph
from gsched.costmodel.evaluate import evaluate_population, score
from gsched.costmodel.params import CostParams
from gsched.generators import RandomGraphParams, random_computation_graph
from gsched.search import brkga
from gsched.search.brkga import BRKGAConfig, BRKGAParams, BRKGAState, uniform_params

D = 2
CONFIG = BRKGAConfig(population_size=20, num_elites=4, num_children=12)  # 4 mutants, 16/gen
RANDOM_SEARCH = BRKGAConfig(population_size=1000, num_elites=1, num_children=0)
COST = CostParams(np.float32(0.0), np.float32(np.inf), np.float32(np.inf))
# Moderate tensor-size spread, so that the objectives have room for improvement.
GRAPH_PARAMS = RandomGraphParams(size_log_std=0.5)
SIZES = (24, 28, 32, 32, 36, 40)


@pytest.fixture(scope="module")
def graphs():
    gs = [random_computation_graph(n, 100 + i, params=GRAPH_PARAMS) for i, n in enumerate(SIZES)]
    bucket = bucket_for(gs)
    return gs, bucket, [pad_graph(g, bucket) for g in gs], batch_graphs(gs, bucket)


def reevaluate(padded, keys, objective, cost=COST):
    """Scores of ``keys [R, L]`` (R ≤ 48, padded to 48 rows so this compiles once)."""
    keys = jnp.asarray(keys)
    rows = keys.shape[0]
    full = jnp.concatenate([keys, jnp.broadcast_to(keys[:1], (48 - rows, keys.shape[1]))])
    ev = evaluate_population(padded, full, cost, num_devices=D)
    ev = jax.tree.map(lambda x: x[:rows], ev)
    return ev, np.asarray(score(ev, objective, cost))


@pytest.fixture(scope="module")
def single_runs(graphs):
    _, _, padded, _ = graphs
    return {budget: brkga.run(jax.random.key(7), padded[2], CONFIG, num_devices=D,
                              budget=budget, objective="runtime", cost_params=COST)
            for budget in (999, 1012)}


@pytest.fixture(scope="module")
def batch_run(graphs):
    return brkga.run_batch(jax.random.key(3), graphs[3], CONFIG, num_devices=D, budget=999,
                           objective="runtime", cost_params=COST)


# --- Configuration and argument checks (no compilation) ----------------------------------


@pytest.mark.parametrize("kwargs, message", [
    (dict(population_size=10, num_elites=5, num_children=6), "smaller than num_elites"),
    (dict(population_size=10, num_elites=10, num_children=0), "num_elites"),
    (dict(num_elites=0), "num_elites"),
    (dict(population_size=0), "population_size"),
    (dict(num_children=-1), "num_children"),
    (dict(num_populations=0), "num_populations"),
    (dict(exchange_interval=0), "exchange_interval"),
    (dict(num_exchanged=-1), "num_exchanged"),
    (dict(population_size=10, num_elites=5, num_children=3, num_populations=4,
          num_exchanged=2), "immigrants"),
])
def test_config_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BRKGAConfig(**kwargs)


def test_config_types_and_sizes():
    with pytest.raises(TypeError, match="int"):
        BRKGAConfig(population_size=10.0)
    with pytest.raises(TypeError, match="int"):
        BRKGAConfig(num_populations=True)
    c = BRKGAConfig()
    assert (c.population_size, c.num_elites, c.num_children, c.num_mutants) == (100, 10, 80, 10)
    assert c.evals_per_generation == 90 and c.initial_evals == 100
    assert c.num_generations(5000) == 55 and c.num_generations(100) == 0
    assert hash(c) == hash(BRKGAConfig(population_size=np.int64(100)))
    p = uniform_params(12)
    assert all(x.shape == (12,) for x in p)
    assert np.allclose(p.elite_bias, 0.7) and np.all(p.alpha == 1) and np.all(p.beta == 1)


def test_run_argument_errors(graphs):
    _, bucket, padded, batched = graphs
    length = bucket.chromosome_length(D)
    g = padded[0]
    key = jax.random.key(0)
    for budget in (0, -3):
        with pytest.raises(ValueError, match="budget"):
            brkga.run(key, g, CONFIG, num_devices=D, budget=budget)
    with pytest.raises(TypeError, match="budget"):
        brkga.run(key, g, CONFIG, num_devices=D, budget=10.5)
    with pytest.raises(ValueError, match="objective"):
        brkga.run(key, g, CONFIG, num_devices=D, budget=10, objective="energy")
    with pytest.raises(ValueError, match="shape"):
        brkga.run(key, g, CONFIG, uniform_params(length + 1), num_devices=D, budget=10)
    bad = uniform_params(length)._replace(elite_bias=jnp.full((length,), 1.5))
    with pytest.raises(ValueError, match="elite_bias"):
        brkga.run(key, g, CONFIG, bad, num_devices=D, budget=10)
    bad = uniform_params(length)._replace(alpha=jnp.zeros((length,)))
    with pytest.raises(ValueError, match="alpha"):
        brkga.run(key, g, CONFIG, bad, num_devices=D, budget=10)
    with pytest.raises(ValueError, match="seeds"):
        brkga.run(key, g, CONFIG, num_devices=D, budget=5, seeds=np.zeros((6, length)))
    with pytest.raises(ValueError, match="seed"):
        brkga.run(key, g, CONFIG, num_devices=D, budget=50, seeds=np.full((1, length), 2.0))
    with pytest.raises(ValueError, match="run_batch"):
        brkga.run(key, batched, CONFIG, num_devices=D, budget=10)
    with pytest.raises(ValueError, match="leading"):
        brkga.run_batch(key, g, CONFIG, num_devices=D, budget=10)
    with pytest.raises(TypeError, match="PaddedGraph"):
        brkga.run(key, graphs[0][0], CONFIG, num_devices=D, budget=10)
    with pytest.raises(ValueError, match="pinned"):
        brkga.run(key, g, CONFIG, num_devices=D, budget=10, pinned=np.zeros(3, np.int32))


# --- init / ask / tell / exchange ---------------------------------------------------------


def test_tell_keeps_elites_and_exchange_migrates():
    config = BRKGAConfig(population_size=5, num_elites=2, num_children=2, num_populations=3,
                         exchange_interval=2, num_exchanged=1)
    population = jnp.arange(3 * 5, dtype=jnp.float32).reshape(3, 5, 1)
    fitness = jnp.array([[5., 1., 4., jnp.nan, 2.], [9., 8., 7., 6., 5.], [0., 3., 3., 3., 3.]])
    state = BRKGAState(population, fitness, jnp.zeros((), jnp.int32))
    offspring = jnp.full((3, 3, 1), 0.9)
    new_fitness = jnp.array([[3., 3., jnp.nan], [1., 2., 3.], [9., 9., 9.]])
    out = brkga.tell(state, offspring, new_fitness, config)  # generation 1: no migration
    assert int(out.generation) == 1
    np.testing.assert_array_equal(out.fitness, [[1., 2., 3., 3., np.inf], [5., 6., 1., 2., 3.],
                                                [0., 3., 9., 9., 9.]])
    np.testing.assert_array_equal(out.population[0, :2, 0], [1, 4])  # elites, in order
    np.testing.assert_array_equal(out.population[1, :2, 0], [9, 8])
    out = brkga.tell(out, offspring, new_fitness, config)  # generation 2: migration
    assert int(out.generation) == 2
    # Before migration: island 0 [1,2,3,3,inf], island 1 [1,2,1,2,3], island 2 [0,3,9,9,9].
    # Each island's best replaces the worst of the two others (worst two slots).
    np.testing.assert_array_equal(np.sort(out.fitness, axis=1),
                                  [[0., 1., 1., 2., 3.], [0., 1., 1., 1., 2.],
                                   [0., 1., 1., 3., 9.]])
    assert float(jnp.min(out.fitness[2])) == 0.0 and int(jnp.sum(out.fitness[2] == 1.0)) == 2


def test_init_and_ask_shapes_and_ranges():
    config = BRKGAConfig(population_size=8, num_elites=2, num_children=4, num_populations=2)
    params = BRKGAParams(jnp.full((6,), 1.0), jnp.full((6,), 0.5), jnp.full((6,), 2.0))
    seeds = jnp.full((3, 6), 0.25)
    state = jax.jit(brkga.init, static_argnums=1)(jax.random.key(0), config, params, seeds)
    assert state.population.shape == (2, 8, 6) and np.all(np.isinf(state.fitness))
    np.testing.assert_array_equal(state.population[0, :3], seeds)
    pop = np.asarray(state.population)
    assert np.all((pop >= 0) & (pop <= 1))
    state = state._replace(fitness=jnp.arange(16.0).reshape(2, 8))
    new = jax.jit(brkga.ask, static_argnums=2)(jax.random.key(1), state, config, params)
    assert new.shape == (2, 6, 6)
    # ρ = 1: every child is a copy of one of its island's two elites.
    for island in range(2):
        elites = np.asarray(state.population[island, :2])
        for child in np.asarray(new[island, :4]):
            assert any(np.array_equal(child, e) for e in elites)
    assert np.all((np.asarray(new) >= 0) & (np.asarray(new) <= 1))


def test_sample_beta_moments():
    alpha = jnp.array([2.0, 0.3, 1.0, 20.0])
    beta = jnp.array([5.0, 0.3, 1.0, 2.0])
    sample = jax.jit(brkga.sample_beta, static_argnums=3)
    x = np.asarray(sample(jax.random.key(0), alpha, beta, (20000, 4)), np.float64)
    a, b = np.asarray(alpha, np.float64), np.asarray(beta, np.float64)
    mean = a / (a + b)
    var = a * b / ((a + b) ** 2 * (a + b + 1))
    assert np.all((x >= 0) & (x <= 1)) and not np.isnan(x).any()
    assert np.all(np.abs(x.mean(0) - mean) < 5 * np.sqrt(var / 20000))
    np.testing.assert_allclose(x.var(0), var, rtol=0.06)


# --- The budgeted search ------------------------------------------------------------------


@pytest.mark.parametrize("budget", [999, 1012])  # (1012 − 20) / 16 is whole, (999 − 20) not
def test_budget_is_exact_and_bookkeeping_matches_cost_model(graphs, single_runs, budget):
    _, bucket, padded, _ = graphs
    r = single_runs[budget]
    curve = np.asarray(r.best_so_far)
    assert curve.shape == (budget,) and int(r.evals_used) == budget
    assert np.all(np.diff(curve) <= 0) and np.all(np.isfinite(curve))
    assert curve[-1] == float(r.best_value)
    assert r.best_keys.shape == (bucket.chromosome_length(D),)
    assert r.population.shape == (1, 20, bucket.chromosome_length(D))
    # The last generation is cut to its first (budget − 20) mod 16 new chromosomes; the rest
    # of it has fitness +inf (evaluated by the fixed-shape step but not counted).
    uncounted = (-(budget - 20)) % 16
    fitness = np.asarray(r.fitness).ravel()
    assert np.isinf(fitness).sum() == uncounted
    assert np.isinf(fitness[20 - uncounted:]).all()
    # Elites are preserved: the best ever found is in the final population.
    assert fitness.min() == float(r.best_value)
    # Everything agrees with re-evaluating the chromosomes.
    rows = jnp.concatenate([r.best_keys[None], r.population[0]])
    ev, scores = reevaluate(padded[2], rows, "runtime")
    assert scores[0] == float(r.best_value)
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(a[0], b), ev, r.best_evaluation)
    finite = np.isfinite(fitness)
    np.testing.assert_array_equal(scores[1:][finite], fitness[finite])


def test_determinism_and_no_recompile(graphs, single_runs):
    _, bucket, padded, _ = graphs
    length = bucket.chromosome_length(D)
    ref = single_runs[1012]
    size = brkga._search_jit._cache_size()
    again = brkga.run(jax.random.key(7), padded[2], CONFIG, num_devices=D, budget=1012,
                      objective="runtime", cost_params=COST)
    jax.tree.map(np.testing.assert_array_equal, again, ref)
    # New dynamic values (ρ, Beta shapes, cost parameters) and budgets with the same scan
    # length reuse the compiled search.
    params = BRKGAParams(jnp.full((length,), 0.6), jnp.full((length,), 2.0),
                         jnp.full((length,), 5.0))
    other = brkga.run(jax.random.key(8), padded[2], CONFIG, params, num_devices=D, budget=1000,
                      objective="runtime",
                      cost_params=COST._replace(latency=np.float32(0.5)))
    assert brkga._search_jit._cache_size() == size
    assert other.best_so_far.shape == (1000,) and np.isfinite(float(other.best_value))
    assert not np.array_equal(other.best_keys, ref.best_keys)
    _, scores = reevaluate(padded[2], other.best_keys[None], "runtime",
                           COST._replace(latency=np.float32(0.5)))
    assert scores[0] == float(other.best_value)


def test_batch_matches_single_runs(graphs, batch_run):
    _, _, padded, _ = graphs
    keys = jax.random.split(jax.random.key(3), len(padded))
    assert batch_run.best_so_far.shape == (len(padded), 999)
    for b in (1, 4):  # two graphs suffice (each single run reuses the compiled search)
        single = brkga.run(keys[b], padded[b], CONFIG, num_devices=D, budget=999,
                           objective="runtime", cost_params=COST)
        jax.tree.map(np.testing.assert_array_equal, single,
                     jax.tree.map(lambda x: x[b], batch_run))


def test_beats_random_search(graphs, batch_run):
    _, _, _, batched = graphs
    # Random search = the initial population alone: budget 999 < K·P = 1000.
    random = brkga.run_batch(jax.random.key(4), batched, RANDOM_SEARCH, num_devices=D,
                             budget=999, objective="runtime", cost_params=COST)
    assert random.best_so_far.shape == (len(SIZES), 999)
    assert np.all(np.asarray(random.evals_used) == 999)
    assert np.all(np.isinf(random.fitness[:, 0, 999:])) and np.all(
        np.isfinite(random.fitness[:, 0, :999]))
    ratio = np.asarray(batch_run.best_value) / np.asarray(random.best_value)
    # Typically 0.8–0.95 per graph; demand a clear win on average and no big loss anywhere.
    assert ratio.mean() < 0.97, ratio
    assert ratio.max() < 1.02, ratio


def test_islands_seeds_and_pinning(graphs, single_runs):
    _, bucket, padded, _ = graphs
    length = bucket.chromosome_length(D)
    config = BRKGAConfig(population_size=20, num_elites=4, num_children=12, num_populations=2,
                         exchange_interval=2, num_exchanged=2)
    pinned = np.full(bucket.num_ops, -1, np.int32)
    pinned[0] = 1
    # A good seed (the runtime search's best) that already puts op 0 on device 1, so its
    # pinned and unpinned evaluations agree.
    seed = jnp.asarray(single_runs[1012].best_keys).at[0].set(0.0).at[1].set(1.0)
    seeds = jnp.stack([seed, jnp.full((length,), 0.5)])
    seed_ev, seed_scores = reevaluate(padded[2], seeds, "peak_memory")
    assert int(seed_ev.placement[0, 0]) == 1
    budget = 268  # 40 initial + 8 generations of 32, the last cut to 4; migration after it
    r = brkga.run(jax.random.key(5), padded[2], config, num_devices=D, budget=budget,
                  objective="peak_memory", cost_params=COST, pinned=pinned, seeds=seeds)
    curve = np.asarray(r.best_so_far)
    assert curve.shape == (budget,) and np.all(np.diff(curve) <= 0)
    assert curve[-1] == float(r.best_value) and int(r.evals_used) == budget
    assert r.population.shape == (2, 20, length)
    assert int(r.best_evaluation.placement[0]) == 1  # pinned
    assert float(r.best_value) == float(score(r.best_evaluation, "peak_memory", COST))
    assert curve[0] == seed_scores[0]  # the seed is evaluation #1
    assert curve[1] == min(seed_scores)
    assert float(r.best_value) <= seed_scores[0]
    # Migration after the last generation: both islands hold the overall best.
    fitness = np.asarray(r.fitness)
    assert fitness[0].min() == fitness[1].min() == float(r.best_value)


def test_run_is_a_scan_of_init_ask_evaluate_tell(graphs):
    """The scanned search draws exactly what the public init / ask draw (same keys), so the
    two cannot drift: one generation of ``run`` equals init → evaluate → ask → evaluate →
    tell by hand, the island populations and fitness included. (Uniform genes, whose
    draws are bit-exact in any XLA fusion; Beta genes agree to float32 rounding, below.)"""
    _, _, padded, _ = graphs
    graph = padded[0]
    length = graph.bucket.chromosome_length(D)
    config = BRKGAConfig(population_size=10, num_elites=2, num_children=5, num_populations=2)
    params = uniform_params(length, elite_bias=0.6)
    key = jax.random.key(7)
    initial, n = config.initial_evals, config.evals_per_generation
    chunks = -(-initial // n)

    def fitness(keys):
        flat = keys.reshape(-1, keys.shape[-1])
        ev = evaluate_population(graph, flat, COST, num_devices=D)
        value = score(ev, "runtime", COST)
        return jnp.where(jnp.isnan(value), jnp.inf, value).reshape(keys.shape[:-1])

    only_initial = brkga.run(key, graph, config, params, num_devices=D, budget=initial,
                             objective="runtime", cost_params=COST)
    state = brkga.init(key, config, params)
    np.testing.assert_array_equal(only_initial.population, state.population)
    state = state._replace(fitness=fitness(state.population))
    np.testing.assert_array_equal(only_initial.fitness, state.fitness)

    one_generation = brkga.run(key, graph, config, params, num_devices=D, budget=initial + n,
                               objective="runtime", cost_params=COST)
    step_key = jax.random.split(key, chunks + 1)[chunks]
    new = brkga.ask(step_key, state, config, params)
    state = brkga.tell(state, new, fitness(new), config)
    np.testing.assert_array_equal(one_generation.population, state.population)
    np.testing.assert_array_equal(one_generation.fitness, state.fitness)

    beta = BRKGAParams(jnp.full((length,), 0.6), jnp.full((length,), 0.8),
                       jnp.full((length,), 1.7))
    run_beta = brkga.run(key, graph, config, beta, num_devices=D, budget=initial,
                         objective="runtime", cost_params=COST)
    np.testing.assert_allclose(run_beta.population, brkga.init(key, config, beta).population,
                               rtol=1e-5, atol=1e-6)
