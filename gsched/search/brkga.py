"""Biased random-key genetic algorithm (BRKGA, REGAL §3.2) on the gsched cost model.

The generalized BRKGA of REGAL: per-gene elite biases ``ρ_i`` and per-gene ``Beta(α_i, β_i)``
distributions for the initial population and the mutants (``α = β = 1`` and ``ρ = 0.7``
everywhere is standard BRKGA, the paper's "BRKGA XK" baseline with ``π = 100``,
``π_e = 10``, ``π_c = 80``).

Split as in evosax:

* :class:`BRKGAConfig` — *static* sizes (population, elites, children, islands, migration);
  hashable, a ``jit`` static argument; validated on construction.
* :class:`BRKGAParams` — *dynamic* per-gene arrays ``[L]`` (``ρ``, ``α``, ``β``), so a sweep or
  a learned policy (REGAL) can change or ``vmap`` them without recompiling.
* :func:`init` / :func:`ask` / :func:`tell` / :func:`exchange` — one graph's GA state,
  pure functions of explicit keys; masks and ``argsort``, no boolean indexing.
* :func:`run` / :func:`run_batch` — the whole search with an exact evaluation budget, one
  jitted call: a ``lax.scan`` of init (chunk by chunk) / ask / evaluate / tell — built from the
  same pieces as the public functions, so it draws what they draw for the same keys (tested)
  — each step evaluating ``[B, K·(P − E)]`` chromosomes with
  ONE :func:`gsched.costmodel.evaluate.evaluate_batch` call (its schedule loop hoisted out of the
  ``vmap`` over graphs and chromosomes).

**One generation** (per island): the ``E`` best chromosomes are kept (elites are never
re-evaluated; NaN fitness counts as ``+inf``); ``C`` children each cross one uniformly drawn
elite with one uniformly drawn non-elite, taking gene ``i`` from the elite with probability
``ρ_i``; ``M = P − E − C`` mutants are drawn from ``Beta(α_i, β_i)``. Each generation thus
costs ``P − E`` evaluations per island. With ``K > 1`` islands, after every
``exchange_interval``-th generation the ``num_exchanged`` best of each island replace the
worst ``num_exchanged·(K − 1)`` of every other island (copied with their fitness, no
evaluation).

**Evaluation budget** (``budget`` = number of cost-model evaluations, counted over all
islands). Evaluations are numbered in a fixed order: first the initial population, flattened
island-major (island 0's ``P`` chromosomes, then island 1's, ...; seeds first), then each
generation's ``K·(P − E)`` new chromosomes, island-major, children before mutants. Exactly the
first ``budget`` of them are *counted*; every other evaluation the fixed-shape computation
happens to perform (the tail of the initial phase, the tail of the last generation) gets
fitness ``+inf`` — it can never become the best, an elite, or appear in ``best_so_far``. So:

* ``budget ≥ K·P``: the whole initial population, then ``ceil((budget − K·P) / (K·(P − E)))``
  generations, the last one truncated to its first ``budget − K·P mod K·(P − E)`` new
  chromosomes (when that is non-zero);
* ``budget < K·P``: only the first ``budget`` chromosomes of the initial population are
  evaluated (the rest keep fitness ``+inf``) and no generation runs — random search;
* ``budget ≤ 0``: :class:`ValueError`.

``best_so_far[e]`` is the best counted value after evaluation ``e + 1``, exact per evaluation;
``evals_used == budget`` always.

Compilation (it dominates small runs, so it is kept to one cost-model instance per run):

* the initial population is evaluated in chunks of ``K·(P − E)`` inside the same scan as the
  generations (``ceil(K·P / (K·(P − E)))`` chunks; e.g. 2 chunks of 90 for 100 chromosomes —
  the 80 surplus slots are computed but not counted; BRKGA 5K evaluates 57·90 = 5130 slots);
* initial chromosomes and mutants come from one Beta-sampler call site (``sample_beta``, an
  exact vectorized Marsaglia–Tsang sampler, several times faster on CPU than
  ``jax.random.beta``), skipped by a ``lax.cond`` when every gene is ``Beta(1, 1)``;
* ``budget`` is a Python int for the caller but only the scan length it implies is static:
  budgets with the same number of steps share one compilation;
* ``params`` and ``cost_params`` are dynamic: new values never recompile.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gsched.core.padding import PaddedGraph
from gsched.costmodel.evaluate import Evaluation
from gsched.costmodel.params import (
    CostParams,
    check_chunk,
    check_fusion,
    check_scheduler,
    check_search_settings,
)
from gsched.search.common import (
    SearchResult,
    batch_seeds,
    check_genes,
    check_seeds,
    concrete,
    freeze_genes,
    no_best,
    scored_batch,
    track_best,
)

__all__ = [
    "BRKGAConfig", "BRKGAParams", "BRKGAResult", "BRKGAState", "ask", "exchange", "init",
    "run", "run_batch", "sample_beta", "tell", "uniform_params",
]


# --- Configuration and parameters -------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BRKGAConfig:
    """Static BRKGA sizes (a ``jit`` static argument; changing one recompiles).

    Attributes:
      population_size: ``P``, chromosomes per island.
      num_elites: ``E``, the best chromosomes kept unchanged each generation (``1 ≤ E < P``).
      num_children: ``C``, crossover children per generation; the remaining
        ``P − E − C ≥ 0`` new chromosomes are mutants.
      num_populations: ``K`` independent islands (all share the evaluation budget).
      exchange_interval: with ``K > 1``, islands exchange elites after every this many
        generations.
      num_exchanged: how many of each island's best replace the worst of every other island
        (``num_exchanged·(K − 1) ≤ P − E``, so no island loses an elite to immigrants);
        0 disables migration.
    """

    population_size: int = 100
    num_elites: int = 10
    num_children: int = 80
    num_populations: int = 1
    exchange_interval: int = 20
    num_exchanged: int = 2

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"BRKGAConfig.{field.name} must be an int, got {value!r}")
            object.__setattr__(self, field.name, int(value))
        p, e, c, k = (self.population_size, self.num_elites, self.num_children,
                      self.num_populations)
        if p < 2:
            raise ValueError(f"population_size must be at least 2 (one elite and one "
                             f"non-elite), got {p}")
        if e < 1:
            raise ValueError(f"num_elites must be at least 1, got {e}")
        if e >= p:
            raise ValueError(f"num_elites ({e}) must be smaller than population_size ({p}): "
                             "each generation needs at least one new chromosome")
        if c < 0:
            raise ValueError(f"num_children must be >= 0, got {c}")
        if e + c > p:
            raise ValueError(f"population_size ({p}) is smaller than num_elites + num_children "
                             f"({e} + {c} = {e + c})")
        if k < 1:
            raise ValueError(f"num_populations must be at least 1, got {k}")
        if self.exchange_interval < 1:
            raise ValueError(f"exchange_interval must be at least 1, got "
                             f"{self.exchange_interval}")
        if self.num_exchanged < 0:
            raise ValueError(f"num_exchanged must be >= 0, got {self.num_exchanged}")
        if self.num_exchanged * (k - 1) > p - e:
            raise ValueError(
                f"num_exchanged * (num_populations - 1) = {self.num_exchanged * (k - 1)} "
                f"immigrants exceed the {p - e} non-elites of an island (population_size - "
                "num_elites)")

    @property
    def num_mutants(self) -> int:
        """``M = P − E − C``."""
        return self.population_size - self.num_elites - self.num_children

    @property
    def num_offspring(self) -> int:
        """New chromosomes per island and generation, ``P − E``."""
        return self.population_size - self.num_elites

    @property
    def evals_per_generation(self) -> int:
        """``K·(P − E)``: evaluations one (untruncated) generation costs."""
        return self.num_populations * self.num_offspring

    @property
    def initial_evals(self) -> int:
        """``K·P``: evaluations of the full initial population."""
        return self.num_populations * self.population_size

    def num_generations(self, budget: int) -> int:
        """Generations run (the last possibly truncated) for an evaluation budget."""
        extra = max(0, int(budget) - self.initial_evals)
        return -(-extra // self.evals_per_generation)


class BRKGAParams(NamedTuple):
    """Dynamic per-gene BRKGA parameters (padded chromosome layout, ``L`` genes).

    A leading batch axis ``[B, L]`` is allowed in :func:`run_batch` (one row per graph).
    Genes of padded ops/tensors are sampled like any other and ignored by the decoder.
    """

    elite_bias: jnp.ndarray  # [L] float32 ρ_i ∈ [0, 1]: P(child gene i comes from the elite)
    alpha: jnp.ndarray  # [L] float32 > 0: Beta α_i of initial/mutant gene i
    beta: jnp.ndarray  # [L] float32 > 0: Beta β_i of initial/mutant gene i


def uniform_params(chromosome_length: int, elite_bias: float = 0.7) -> BRKGAParams:
    """Standard BRKGA: ``ρ_i = elite_bias`` and ``Beta(1, 1)`` (uniform) genes."""
    if chromosome_length < 1:
        raise ValueError(f"chromosome_length must be >= 1, got {chromosome_length}")
    if not 0.0 <= elite_bias <= 1.0:
        raise ValueError(f"elite_bias must be in [0, 1], got {elite_bias!r}")
    ones = jnp.ones((int(chromosome_length),), jnp.float32)
    return BRKGAParams(elite_bias * ones, ones, ones)


class BRKGAState(NamedTuple):
    """The GA state of one graph (no ordering invariant: elites are found by ``argsort``)."""

    population: jnp.ndarray  # [K, P, L] float32 chromosomes
    fitness: jnp.ndarray  # [K, P] float32, lower is better; +inf = not evaluated / not counted
    generation: jnp.ndarray  # [] int32 generations completed


class BRKGAResult(NamedTuple):
    """What :func:`run` returns (:func:`run_batch`: a leading ``[B]`` axis everywhere)."""

    best_value: jnp.ndarray  # [] float32, the objective's ``score`` of best_keys
    best_keys: jnp.ndarray  # [L] float32, padded chromosome layout
    best_evaluation: Evaluation  # the cost model's evaluation of best_keys (unbatched)
    best_so_far: jnp.ndarray  # [budget] float32, best value after each counted evaluation
    evals_used: jnp.ndarray  # [] int32, always == budget
    population: jnp.ndarray  # [K, P, L] final population (e.g. for REGAL's node features)
    fitness: jnp.ndarray  # [K, P] its fitness; +inf = not counted (budget < K·P: never drawn)

    def search_result(self) -> SearchResult:
        """The fields every search returns (what the method registry reads)."""
        return SearchResult(self.best_value, self.best_keys, self.best_evaluation,
                            self.evals_used)


# --- Sampling -----------------------------------------------------------------------------


def _log_gamma(key: jax.Array, a: jnp.ndarray, shape: tuple[int, ...]) -> jnp.ndarray:
    """``log Gamma(a, 1)`` samples: Marsaglia–Tsang rejection, vectorized over the whole array.

    Each round draws a fresh candidate for every gene and keeps the first accepted one, so the
    result is exact; rounds repeat while any gene is still rejected (acceptance ≥ 95 %, so a
    handful of rounds). ``a < 1`` uses ``Gamma(a) = Gamma(a + 1)·U^(1/a)`` in log space.
    Invalid shapes (``a ≤ 0`` or NaN; checked on the host by :func:`run` when concrete) give
    NaN or garbage, never a hang. Much faster on CPU than ``jax.random.gamma`` (a per-element loop with per-element keys).
    """
    a = jnp.broadcast_to(jnp.asarray(a, jnp.float32), shape)
    boost = a < 1.0
    d = jnp.where(boost, a + 1.0, a) - 1.0 / 3.0
    c = jax.lax.rsqrt(9.0 * d)
    tiny = jnp.finfo(jnp.float32).tiny

    def body(carry):
        done, log_value, key = carry
        key, key_normal, key_uniform = jax.random.split(key, 3)
        x = jax.random.normal(key_normal, shape, jnp.float32)
        u = jax.random.uniform(key_uniform, shape, jnp.float32, minval=tiny)
        v = 1.0 + c * x
        positive = v > 0
        v = jnp.where(positive, v * v * v, 1.0)
        log_v = jnp.log(v)
        accept = positive & (jnp.log(u) < 0.5 * x * x + d - d * v + d * log_v) & ~done
        return done | accept, jnp.where(accept, jnp.log(d) + log_v, log_value), key

    key, key_boost = jax.random.split(key)
    valid = d > 0  # False for a NaN or a < −2/3: left NaN instead of looping forever
    carry = (~valid, jnp.full(shape, jnp.nan, jnp.float32), key)
    _, log_value, _ = jax.lax.while_loop(lambda s: ~jnp.all(s[0]), body, carry)
    u = jax.random.uniform(key_boost, shape, jnp.float32, minval=tiny)
    return jnp.where(boost, log_value + jnp.log(u) / a, log_value)


def sample_beta(key: jax.Array, alpha: jnp.ndarray, beta: jnp.ndarray,
                shape: tuple[int, ...]) -> jnp.ndarray:
    """``Beta(α, β)`` samples in ``[0, 1]`` (``α``, ``β`` broadcast to ``shape``), computed
    as ``sigmoid(log X − log Y)`` with ``X ~ Gamma(α)``, ``Y ~ Gamma(β)`` so that tiny ``α`` or
    ``β`` give no NaN. Same distribution as ``jax.random.beta``, several times faster on CPU.
    """
    key_a, key_b = jax.random.split(key)
    return jax.nn.sigmoid(_log_gamma(key_a, alpha, shape) - _log_gamma(key_b, beta, shape))


def _unit_float(bits: jnp.ndarray) -> jnp.ndarray:
    """uint32 words → exactly uniform floats on the grid ``{0, 2⁻²⁴, …, 1 − 2⁻²⁴}``."""
    return (bits >> 8).astype(jnp.float32) * np.float32(2.0 ** -24)


def _is_uniform(params: BRKGAParams) -> jnp.ndarray:
    """[] bool: every gene is Beta(1, 1)."""
    return jnp.all(params.alpha == 1.0) & jnp.all(params.beta == 1.0)


def _sample_genes(key, params: BRKGAParams, shape, use_beta) -> jnp.ndarray:
    """Genes ``shape = (..., L)`` from the per-gene Beta distributions.

    Uniform params give exactly ``uniform(key_u)`` whatever ``use_beta`` says; ``use_beta``
    (a scalar that may be shared by a whole batch of graphs) only lets the Beta sampler be
    skipped when it is false (it must be true whenever these params are not uniform).
    """
    key_u, key_b = jax.random.split(key)
    u = jax.random.uniform(key_u, shape, jnp.float32)
    uniform = _is_uniform(params)
    return jax.lax.cond(
        use_beta,
        lambda: jnp.where(uniform, u, sample_beta(key_b, params.alpha, params.beta, shape)),
        lambda: u)


# --- init / ask / tell / exchange (one graph) --------------------------------------------


def _nan_to_inf(fitness: jnp.ndarray) -> jnp.ndarray:
    fitness = jnp.asarray(fitness, jnp.float32)
    return jnp.where(jnp.isnan(fitness), jnp.inf, fitness)


def _fresh_rows(config: BRKGAConfig) -> int:
    """Genes drawn per sampler trip: one generation's ``K·M`` mutants (its ``K·(P − E)``
    chromosomes when there are no mutants)."""
    return config.num_populations * config.num_mutants or config.evals_per_generation


def _initial_trips(config: BRKGAConfig) -> int:
    """Sampler trips that cover one chunk of ``K·(P − E)`` initial chromosomes."""
    return -(-config.evals_per_generation // _fresh_rows(config))


def _fresh_genes(key: jax.Array, params: BRKGAParams, trips, *, max_trips: int, rows: int,
                 use_beta) -> jnp.ndarray:
    """``[max_trips·rows, L]`` genes from the per-gene Betas: trip ``j < trips`` fills rows
    ``[j·rows, (j + 1)·rows)`` from ``fold_in(key, j)`` (the rest stay 0). ``trips`` may be
    traced: the scanned search draws initial chunks and mutants at this ONE sampler call site."""
    length = params.elite_bias.shape[-1]

    def trip(j, out):
        genes = _sample_genes(jax.random.fold_in(key, j), params, (rows, length), use_beta)
        return jax.lax.dynamic_update_slice_in_dim(out, genes, j * rows, axis=0)

    return jax.lax.fori_loop(0, trips, trip, jnp.zeros((max_trips * rows, length), jnp.float32))


def _initial_chromosomes(fresh: jnp.ndarray, step, size: int,
                         seeds: jnp.ndarray | None) -> jnp.ndarray:
    """Initial chromosomes ``step·size … step·size + size − 1`` (island-major): the first
    ``size`` rows of ``fresh``, with ``seeds [S, L]`` in the slots below ``S``."""
    genes = fresh[:size]
    if seeds is None:
        return genes
    index = step * size + jnp.arange(size)
    seeded = seeds[jnp.minimum(index, seeds.shape[0] - 1)]
    return jnp.where((index < seeds.shape[0])[:, None], seeded, genes)


def _offspring(key_children: jax.Array, state: BRKGAState, config: BRKGAConfig,
               params: BRKGAParams, fresh: jnp.ndarray) -> jnp.ndarray:
    """A generation's new chromosomes ``[K, P − E, L]``: the crossover children, then the
    first ``K·M`` rows of ``fresh`` as the mutants."""
    k, m = config.num_populations, config.num_mutants
    mutants = fresh[: k * m].reshape(k, m, fresh.shape[-1])
    return jnp.concatenate([_children(key_children, state, config, params), mutants], axis=1)


def init(key: jax.Array, config: BRKGAConfig, params: BRKGAParams,
         seeds: jnp.ndarray | None = None) -> BRKGAState:
    """The initial population ``[K, P, L]``, drawn from the per-gene Betas, fitness ``+inf``.

    Drawn in chunks of ``K·(P − E)`` chromosomes (one generation's size), chunk ``i`` from
    ``jax.random.split(key, chunks)[i]`` — exactly as :func:`run` draws and evaluates them, so
    ``run``'s initial population is ``init``'s for the same key. ``seeds [S, L]``
    (``S ≤ K·P``) replace the first ``S`` chromosomes of the island-major flattened
    population (so island 0 first). Evaluate ``state.population`` and store the scores in
    ``state.fitness`` before the first :func:`ask`.
    """
    k, p, n = config.num_populations, config.population_size, config.evals_per_generation
    length = params.elite_bias.shape[-1]
    if seeds is not None:
        seeds = jnp.asarray(seeds, jnp.float32)
        if seeds.ndim != 2 or seeds.shape[1] != length or seeds.shape[0] > k * p:
            raise ValueError(f"seeds must have shape [S, {length}] with S <= {k * p}, "
                             f"got {seeds.shape}")
    chunks = -(-k * p // n)
    trips = _initial_trips(config)
    use_beta = ~_is_uniform(params)
    keys = jax.random.split(key, chunks)
    population = jnp.concatenate([
        _initial_chromosomes(_fresh_genes(jax.random.split(keys[i])[0], params, trips,
                                          max_trips=trips, rows=_fresh_rows(config),
                                          use_beta=use_beta), i, n, seeds)
        for i in range(chunks)])[: k * p]
    return BRKGAState(population.reshape(k, p, length), jnp.full((k, p), jnp.inf, jnp.float32),
                      jnp.zeros((), jnp.int32))


def _children(key: jax.Array, state: BRKGAState, config: BRKGAConfig,
              params: BRKGAParams) -> jnp.ndarray:
    """Crossover children ``[K, C, L]``: each of a uniformly drawn elite (one of the island's
    ``E`` best by fitness, NaN = +inf) and a uniformly drawn non-elite, gene ``i`` taken from
    the elite with probability ``ρ_i``."""
    k, p, e, c = (config.num_populations, config.population_size, config.num_elites,
                  config.num_children)
    length = state.population.shape[-1]
    order = jnp.argsort(_nan_to_inf(state.fitness), axis=-1, stable=True)  # [K, P]
    # One draw of 32-bit words per child: L crossover coins, then the two parents' ranks
    # (``word mod count``: bias below count / 2³², negligible).
    bits = jax.random.bits(key, (k, c, length + 2), jnp.uint32)
    elite = jnp.take_along_axis(order, (bits[..., length] % e).astype(jnp.int32), axis=1)
    other = jnp.take_along_axis(order, e + (bits[..., length + 1] % (p - e)).astype(jnp.int32),
                                axis=1)  # [K, C] population indices of the parents
    from_elite = _unit_float(bits[..., :length]) < params.elite_bias
    rows = jnp.arange(k)[:, None]
    return jnp.where(from_elite, state.population[rows, elite], state.population[rows, other])


def ask(key: jax.Array, state: BRKGAState, config: BRKGAConfig,
        params: BRKGAParams) -> jnp.ndarray:
    """The next generation's new chromosomes ``[K, P − E, L]``: ``C`` crossover children
    (see ``_children``) then ``M`` mutants drawn from the per-gene Betas — the same draws as a
    generation of :func:`run` whose step key is ``key``."""
    key_fresh, key_children = jax.random.split(key)
    fresh = _fresh_genes(key_fresh, params, 1, max_trips=1, rows=_fresh_rows(config),
                         use_beta=~_is_uniform(params))
    return _offspring(key_children, state, config, params, fresh)


def exchange(state: BRKGAState, config: BRKGAConfig) -> BRKGAState:
    """Migration: the ``num_exchanged`` best of each island replace the worst
    ``num_exchanged·(K − 1)`` of every other island (with their fitness)."""
    k, p, m = config.num_populations, config.population_size, config.num_exchanged
    if k == 1 or m == 0:
        return state
    length = state.population.shape[-1]
    fitness = _nan_to_inf(state.fitness)
    order = jnp.argsort(fitness, axis=-1, stable=True)  # [K, P]
    best = order[:, :m]
    best_keys = jnp.take_along_axis(state.population, best[..., None], axis=1)  # [K, m, L]
    best_fitness = jnp.take_along_axis(fitness, best, axis=1)  # [K, m]
    others = np.array([[j for j in range(k) if j != i] for i in range(k)], np.int32)
    immigrants = best_keys[others].reshape(k, (k - 1) * m, length)
    immigrant_fitness = best_fitness[others].reshape(k, (k - 1) * m)
    worst = order[:, p - (k - 1) * m:]
    rows = jnp.arange(k)[:, None]
    return state._replace(population=state.population.at[rows, worst].set(immigrants),
                          fitness=fitness.at[rows, worst].set(immigrant_fitness))


def tell(state: BRKGAState, offspring: jnp.ndarray, fitness: jnp.ndarray,
         config: BRKGAConfig) -> BRKGAState:
    """Keeps each island's ``E`` elites, adds ``offspring [K, P − E, L]`` with
    ``fitness [K, P − E]`` (NaN → +inf), counts the generation and migrates when one is due."""
    old_fitness = _nan_to_inf(state.fitness)
    elites = jnp.argsort(old_fitness, axis=-1, stable=True)[:, : config.num_elites]  # [K, E]
    population = jnp.concatenate(
        [jnp.take_along_axis(state.population, elites[..., None], axis=1), offspring], axis=1)
    new_fitness = jnp.concatenate(
        [jnp.take_along_axis(old_fitness, elites, axis=1), _nan_to_inf(fitness)], axis=1)
    state = BRKGAState(population, new_fitness, state.generation + 1)
    if config.num_populations > 1 and config.num_exchanged > 0:
        due = state.generation % config.exchange_interval == 0
        state = jax.lax.cond(due, lambda s: exchange(s, config), lambda s: s, state)
    return state


# --- The budgeted search -----------------------------------------------------------------


def _schedule(config: BRKGAConfig, budget: int) -> tuple[int, int]:
    """(initial-phase steps, generations) of the scan for ``budget`` evaluations."""
    initial = min(budget, config.initial_evals)
    return -(-initial // config.evals_per_generation), config.num_generations(budget)


def _search(key, graphs: PaddedGraph, params: BRKGAParams, cost_params: CostParams, pinned,
            seeds, budget, *, config: BRKGAConfig, initial_steps: int, generations: int,
            num_devices: int, objective: str, chunk: int, batched: bool,
            scheduler: str = "list", fusion: bool = False, genes: str = "all") -> BRKGAResult:
    """The whole search, batched over graphs (``batched=False``: one graph, a batch of one).

    Static: the sizes and the scan length (``initial_steps + generations``); ``budget`` itself
    is dynamic (it only masks), so budgets with the same scan length share one compilation.
    ``best_so_far`` comes back with ``(initial_steps + generations)·K·(P − E)`` entries, the
    counted ones first; the caller keeps the first ``budget``.
    """
    k, p, e = config.num_populations, config.population_size, config.num_elites
    n = config.evals_per_generation
    num_steps = initial_steps + generations
    graphs, params, cost_params = jax.tree.map(jnp.asarray, (graphs, params, cost_params))
    if batched:
        b = graphs.op_mask.shape[0]
        keys = jax.random.split(key, b)
    else:
        b = 1
        keys = jnp.asarray(key)[None]
        graphs = jax.tree.map(lambda x: x[None], graphs)
        pinned = None if pinned is None else pinned[None]
    length = graphs.bucket.chromosome_length(num_devices, fusion)
    params = jax.tree.map(lambda x: jnp.broadcast_to(x.astype(jnp.float32), (b, length)), params)
    if seeds is not None:
        seeds = batch_seeds(seeds, b)
    budget = jnp.asarray(budget, jnp.int32)

    step_keys = jax.vmap(lambda key: jax.random.split(key, num_steps))(keys)  # [B, S]
    use_beta = ~jnp.all(jax.vmap(_is_uniform)(params))  # shared by the batch

    # Fresh genes (initial chromosomes or mutants) come from ONE sampler call site, so the
    # Beta sampler is compiled once: 1 trip in a generation (the K·M mutants) and
    # ``initial_trips`` in an initial step (its n chromosomes), as init / ask draw them.
    rows, initial_trips = _fresh_rows(config), _initial_trips(config)

    def evaluate(x):  # [B, n, L] → Evaluation [B, n], fitness [B, n]
        return scored_batch(graphs, x, cost_params, num_devices=num_devices,
                            objective=objective, pinned=pinned, chunk=chunk,
                            scheduler=scheduler, fusion=fusion)
    state = BRKGAState(jnp.zeros((b, k, p, length), jnp.float32),
                       jnp.full((b, k, p), jnp.inf, jnp.float32), jnp.zeros((b,), jnp.int32))
    slot = jnp.arange(n)
    flat = jnp.arange(k * p)  # island-major index into the initial population

    def step(carry, xs):
        state, best = carry
        i, keys_i = xs
        initial = i < initial_steps
        key_fresh, key_children = jnp.swapaxes(
            jax.vmap(lambda kk: jax.random.split(kk))(keys_i), 0, 1)
        trips = jnp.where(initial, initial_trips, 1)
        fresh = jax.vmap(lambda kk, prm: _fresh_genes(
            kk, prm, trips, max_trips=initial_trips, rows=rows, use_beta=use_beta))(
                key_fresh, params)  # [B, initial_trips·rows, L]

        def initial_chunk():  # initial chromosomes i·n … i·n + n − 1 (seeds first), as init
            if seeds is None:
                return fresh[:, :n]
            return jax.vmap(lambda f, sd: _initial_chromosomes(f, i, n, sd))(fresh, seeds)

        def offspring():  # as ask
            return jax.vmap(lambda kk, st, prm, f: _offspring(kk, st, config, prm, f))(
                key_children, state, params, fresh).reshape(b, n, length)

        new = freeze_genes(jax.lax.cond(initial, initial_chunk, offspring), graphs.bucket,
                           num_devices, fusion, genes)
        evaluation, fitness = evaluate(new)
        index = jnp.where(initial, i * n + slot, k * p + (i - initial_steps) * n + slot)
        counted = (index < budget) & (~initial | (index < k * p))
        fitness = jnp.where(counted, fitness, jnp.inf)  # [B, n]

        curve = jnp.minimum(best.value[:, None], jax.lax.cummin(fitness, axis=1))
        best = track_best(best, fitness, new, evaluation, force=i == 0)  # slot 0 is counted

        def record_initial():  # population slots [i·n, i·n + n) ∩ [0, K·P)
            offset = flat - i * n
            inside = ((offset >= 0) & (offset < n))[None, :]
            source = jnp.clip(offset, 0, n - 1)
            population = jnp.where(inside[..., None], new[:, source],
                                   state.population.reshape(b, k * p, length))
            fit = jnp.where(inside, fitness[:, source], state.fitness.reshape(b, k * p))
            return state._replace(population=population.reshape(b, k, p, length),
                                  fitness=fit.reshape(b, k, p))

        def advance():
            return jax.vmap(lambda st, x, f: tell(st, x, f, config))(
                state, new.reshape(b, k, p - e, length), fitness.reshape(b, k, p - e))

        state = jax.lax.cond(initial, record_initial, advance)
        return (state, best), curve

    carry = (state, no_best(evaluate, b, length))
    xs = (jnp.arange(num_steps, dtype=jnp.int32), jnp.swapaxes(step_keys, 0, 1))
    (state, best), curves = jax.lax.scan(step, carry, xs)
    # Slot s of the flattened [steps·n] curve holds evaluation s in the initial phase and
    # evaluation K·P + (s − initial_steps·n) afterwards: move the counted ones to the front.
    curves = jnp.swapaxes(curves, 0, 1).reshape(b, num_steps * n)
    initial_evals = jnp.minimum(budget, k * p)
    position = jnp.arange(num_steps * n)
    source = jnp.where(position < initial_evals, position,
                       initial_steps * n + position - initial_evals)
    curves = curves[:, jnp.minimum(source, num_steps * n - 1)]
    result = BRKGAResult(best_value=best.value, best_keys=best.keys,
                         best_evaluation=best.evaluation, best_so_far=curves,
                         evals_used=jnp.full((b,), budget, jnp.int32),
                         population=state.population, fitness=state.fitness)
    return result if batched else jax.tree.map(lambda x: x[0], result)


_search_jit = jax.jit(_search, static_argnames=(
    "config", "initial_steps", "generations", "num_devices", "objective", "chunk", "batched",
    "scheduler", "fusion", "genes"))


# --- Public entry points (host-side validation, then the jitted search) ------------------


def _check_static(config, budget, num_devices, objective, chunk) -> None:
    if not isinstance(config, BRKGAConfig):
        raise TypeError(f"config must be a BRKGAConfig, got {type(config).__name__}")
    check_search_settings(budget, num_devices, objective)
    check_chunk(chunk)


def _check_graph(graph, batched: bool) -> int | None:
    if not isinstance(graph, PaddedGraph):
        raise TypeError("expected a PaddedGraph (see gsched.pad_graph / gsched.batch_graphs), "
                        f"got {type(graph).__name__}")
    ndim = np.ndim(graph.op_mask)
    if ndim != (2 if batched else 1):
        raise ValueError("run_batch expects graphs with a leading [B] axis (gsched.batch_graphs)"
                         if batched else "run expects one graph; use run_batch for a batch")
    return int(np.shape(graph.op_mask)[0]) if batched else None


def _check_params(params, length: int, batch: int | None) -> None:
    """Shapes ``[L]`` (or ``[B, L]`` when ``batch``); values checked when concrete."""
    if not isinstance(params, BRKGAParams):
        raise TypeError(f"params must be BRKGAParams, got {type(params).__name__}")
    for name, value in zip(BRKGAParams._fields, params):
        shape = np.shape(value)
        if shape != (length,) and (batch is None or shape != (batch, length)):
            want = f"[{length}]" + ("" if batch is None else f" or [{batch}, {length}]")
            raise ValueError(f"BRKGAParams.{name} has shape {shape}, expected {want} (the "
                             "padded chromosome length N·D + N + T·D of the graph's bucket)")
        values = concrete(value)
        if values is None:
            continue
        if name == "elite_bias":
            bad, what = ~((values >= 0) & (values <= 1)), "in [0, 1]"
        else:
            bad, what = ~((values > 0) & np.isfinite(values)), "finite and > 0"
        if bad.any():
            i = tuple(int(x) for x in np.argwhere(bad)[0])
            raise ValueError(f"BRKGAParams.{name}{list(i)} = {values[i]} must be {what}")


def _check_seeds(seeds, length: int, budget: int, config: BRKGAConfig,
                 batch: int | None) -> None:
    check_seeds(seeds, length, batch, min(budget, config.initial_evals),
                "min(budget, num_populations * population_size): the initial chromosomes "
                "evaluated")


def _check_pinned(pinned, shape: tuple[int, ...]) -> None:
    if pinned is not None and np.shape(pinned) != shape:
        raise ValueError(f"pinned must have shape {list(shape)} (−1 = free), "
                         f"got {np.shape(pinned)}")


def _check_cost_params(cost_params) -> CostParams:
    if not isinstance(cost_params, CostParams):
        raise TypeError(f"cost_params must be CostParams, got {type(cost_params).__name__}")
    return CostParams(*(_strong(x, np.float32) for x in cost_params))


def _strong(x, dtype):
    """``x`` as a strongly typed ``dtype`` array (weak types would change the jit cache key:
    ``jnp.full((L,), 0.6)`` is weakly typed, ``uniform_params`` is not)."""
    if isinstance(x, (jax.Array, jax.core.Tracer)):
        return jax.lax.convert_element_type(x, dtype)
    return np.asarray(x, dtype)


def _call(key, graphs, config, params, batch, *, num_devices, budget, objective, cost_params,
          pinned, seeds, chunk, scheduler, fusion, genes) -> BRKGAResult:
    _check_static(config, budget, num_devices, objective, chunk)
    scheduler, fusion, genes = check_scheduler(scheduler), check_fusion(fusion), check_genes(genes)
    length = graphs.bucket.chromosome_length(num_devices, fusion)
    params = uniform_params(length) if params is None else params
    _check_params(params, length, batch)
    _check_seeds(seeds, length, int(budget), config, batch)
    _check_pinned(pinned, (graphs.bucket.num_ops,) if batch is None
                  else (batch, graphs.bucket.num_ops))
    params = BRKGAParams(*(_strong(x, np.float32) for x in params))
    pinned = None if pinned is None else _strong(pinned, np.int32)
    seeds = None if seeds is None else _strong(seeds, np.float32)
    initial_steps, generations = _schedule(config, int(budget))
    result = _search_jit(key, graphs, params, _check_cost_params(cost_params), pinned, seeds,
                         np.int32(budget), config=config, initial_steps=initial_steps,
                         generations=generations, num_devices=int(num_devices),
                         objective=objective, chunk=check_chunk(chunk), batched=batch is not None,
                         scheduler=scheduler, fusion=fusion, genes=genes)
    return result._replace(best_so_far=result.best_so_far[..., : int(budget)])


def run(key: jax.Array, graph: PaddedGraph, config: BRKGAConfig = BRKGAConfig(),
        params: BRKGAParams | None = None, *, num_devices: int, budget: int,
        objective: str = "peak_memory", cost_params: CostParams = CostParams(),
        pinned: jnp.ndarray | None = None, seeds: jnp.ndarray | None = None,
        chunk: int | None = None, scheduler: str = "list", fusion: bool = False,
        genes: str = "all") -> BRKGAResult:
    """BRKGA on one padded graph with exactly ``budget`` counted cost-model evaluations.

    Args:
      key: PRNG key; the result is a deterministic function of it and the inputs.
      graph: a :class:`~gsched.core.padding.PaddedGraph` (no batch axis).
      config: static sizes (a new value recompiles).
      params: per-gene :class:`BRKGAParams`, each ``[L]`` with
        ``L = graph.bucket.chromosome_length(num_devices)`` (default :func:`uniform_params`);
        dynamic: new values do not recompile.
      num_devices: ``D`` (static).
      budget: number of cost-model evaluations (a Python int). Compiled code depends only on
        the scan length it implies, so nearby budgets share one compilation.
      objective: ``"peak_memory"`` or ``"runtime"`` (static), minimized through
        :func:`gsched.costmodel.evaluate.score`.
      cost_params: latency / bandwidth / capacity (dynamic).
      pinned: ``[N]`` int32 device per op, −1 = free.
      seeds: ``[S, L]`` known chromosomes in the padded layout (:func:`gsched.pad_keys`), the
        first ``S`` chromosomes of the initial population, evaluated and counted there
        (``S ≤ min(budget, K·P)``); the result is never worse than the best seed.
      chunk: the cost model's successor entries per iteration (static; None: its
        decoder's default).
      scheduler, fusion: the cost model's static settings
        (:func:`gsched.costmodel.evaluate.evaluate_batch`); with ``fusion`` chromosomes (and
        ``params``, ``seeds``) are ``N`` keys longer.
      genes: which parts of the chromosome the search varies
        (:func:`gsched.search.common.freeze_genes`: ``"all"``, ``"placement+schedule"`` or
        ``"placement"``; the others are fixed constants).

    Returns a :class:`BRKGAResult`; the module docstring says how the budget is counted.
    Equals ``run_batch`` on a batch of one graph whose key is ``key`` itself.
    """
    _check_graph(graph, batched=False)
    return _call(key, graph, config, params, None, num_devices=num_devices, budget=budget,
                 objective=objective, cost_params=cost_params, pinned=pinned, seeds=seeds,
                 chunk=chunk, scheduler=scheduler, fusion=fusion, genes=genes)


def run_batch(key: jax.Array, graphs: PaddedGraph, config: BRKGAConfig = BRKGAConfig(),
              params: BRKGAParams | None = None, *, num_devices: int, budget: int,
              objective: str = "peak_memory", cost_params: CostParams = CostParams(),
              pinned: jnp.ndarray | None = None, seeds: jnp.ndarray | None = None,
              chunk: int | None = None, scheduler: str = "list", fusion: bool = False,
              genes: str = "all") -> BRKGAResult:
    """BRKGA on a batch of graphs in one jitted call, each graph with its own ``budget``.

    ``graphs`` has a leading ``[B]`` axis (one bucket: :func:`gsched.batch_graphs`); every
    step evaluates ``[B, K·(P − E)]`` chromosomes with one
    :func:`gsched.costmodel.evaluate.evaluate_batch` call. Graph ``b`` uses the key
    ``jax.random.split(key, B)[b]``: its result equals
    ``run(jax.random.split(key, B)[b], graph_b, ...)`` with ``graph_b`` padded to the same
    bucket. ``params`` fields are ``[L]`` (shared) or ``[B, L]``; ``pinned`` is ``[B, N]``;
    ``seeds`` is ``[S, L]`` (shared) or ``[B, S, L]``. Results have a leading ``[B]`` axis.
    """
    batch = _check_graph(graphs, batched=True)
    return _call(key, graphs, config, params, batch, num_devices=num_devices, budget=budget,
                 objective=objective, cost_params=cost_params, pinned=pinned, seeds=seeds,
                 chunk=chunk, scheduler=scheduler, fusion=fusion, genes=genes)
