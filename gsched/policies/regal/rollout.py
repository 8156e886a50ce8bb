"""Running a policy: actions → per-gene BRKGA parameters → a budgeted search (all traceable).

* :func:`actions_to_params` — dequantized actions of a batch of graphs, ``BRKGAParams [B, L]``.
* :func:`policy_search` — the search with a policy's parameters: REGAL's BRKGA (REGAL §4.2
  defaults, elite bias and mutants from the policy), or IDRS (zero-shot §3.2: "the same as
  REGAL, but BRKGA is replaced with only random sampling" — a BRKGA with one elite, no
  children and only mutants, i.e. the best of independent draws from the policy's Betas).
* :func:`guided_search` — a whole learned method on graphs ``[B]`` with an exact budget: the
  feature search (``feature_evals`` uniform-BRKGA evaluations, REGAL A.1), the policy, then
  :func:`policy_search` with the remaining ``budget − feature_evals``; the result is the better
  of the two searches' bests (both counted), ``evals_used == budget``. With ``seeds [B, S, L]``
  (``--seed-from``, beyond the paper) the policy search's initial population starts with them,
  devices relabelled so that the pinned op is on device 0 (:func:`pin_seeds`).
* :func:`guided_search_trace` — the same and its best value after every counted evaluation,
  ``[B, budget]`` (the feature search's, then the policy search's), for REGAL's
  generations-to-match (``eval/generations_to_match.py``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gsched.core.padding import PaddedGraph
from gsched.costmodel.params import CostParams
from gsched.costmodel.schedule import key_bits, split_keys
from gsched.policies.regal.actions import ActionSpace, to_brkga_params
from gsched.policies.regal.features import Features, compute_features
from gsched.policies.regal.policy import Policy, mode_actions, sample_actions
from gsched.search import brkga
from gsched.search.common import SearchResult

SEARCHES = ("brkga", "random")
DECODINGS = ("greedy", "sample")
REGAL_BRKGA = brkga.BRKGAConfig()  # π = 100, π_e = 10, π_c = 80 (REGAL §4.2)
RANDOM_SAMPLING = brkga.BRKGAConfig(population_size=100, num_elites=1, num_children=0)
FEATURE_EVALS = 400  # REGAL A.1


def actions_to_params(actions: jnp.ndarray, graphs: PaddedGraph,
                      space: ActionSpace) -> brkga.BRKGAParams:
    """``actions [B, N, V]`` → ``BRKGAParams`` with fields ``[B, L]``."""
    num_tensors = graphs.tensor_mask.shape[-1]
    return jax.vmap(lambda a, m: to_brkga_params(a, m, num_tensors, space))(
        actions, graphs.op_mask)


def policy_search(key: jax.Array, graphs: PaddedGraph, params: brkga.BRKGAParams,
                  pinned: jnp.ndarray, cost_params: CostParams, *, num_devices: int,
                  budget: int, objective: str, search: str = "brkga",
                  seeds: jnp.ndarray | None = None) -> brkga.BRKGAResult:
    """BRKGA (``search="brkga"``) or random sampling (``"random"``) from per-graph params;
    ``seeds [B, S, L]`` (already pinned, :func:`pin_seeds`) start its initial population."""
    if search not in SEARCHES:
        raise ValueError(f"search must be one of {SEARCHES}, got {search!r}")
    config = REGAL_BRKGA if search == "brkga" else RANDOM_SAMPLING
    return brkga.run_batch(key, graphs, config, params, num_devices=num_devices, budget=budget,
                           objective=objective, cost_params=cost_params, pinned=pinned,
                           seeds=seeds)


def pin_seeds(seeds: jnp.ndarray, pinned: jnp.ndarray, num_ops: int,
              num_devices: int) -> jnp.ndarray:
    """Chromosomes ``seeds [B, S, L]`` with devices 0 and ``d`` swapped, where ``d`` is the
    device of the graph's pinned op (``pinned [B, N]``, 0 there, −1 elsewhere; SPEC §2: the
    largest affinity, first on ties): the op affinities' and the transfer priorities' columns
    ``0`` and ``d`` are exchanged. On identical devices the pinned search then evaluates each
    seed as the solution it is, not one with that op moved to device 0."""
    def one(keys, op):  # keys [L]: one chromosome (SPEC §2 layout), op: the pinned op
        affinity, priority, transfer = split_keys(keys, num_ops, num_devices)
        device = jnp.argmax(key_bits(affinity[op]))  # as decode_placement decodes it
        column = jnp.arange(num_devices)
        swap = jnp.where(column == device, 0, jnp.where(column == 0, device, column))
        return jnp.concatenate([affinity[:, swap].ravel(), priority, transfer[:, swap].ravel()])

    ops = jnp.argmax(pinned == 0, axis=-1)  # [B]
    return jax.vmap(jax.vmap(one, in_axes=(0, None)))(seeds, ops)


def better_of(a: SearchResult, b: brkga.BRKGAResult, evals_used: jnp.ndarray) -> SearchResult:
    """Per graph, the result with the smaller best value (``a`` on ties)."""
    take_b = b.best_value < a.best_value

    def pick(x, y):
        return jnp.where(take_b.reshape(take_b.shape + (1,) * (x.ndim - 1)), y, x)

    return SearchResult(pick(a.best_value, b.best_value), pick(a.best_keys, b.best_keys),
                        jax.tree.map(pick, a.best_evaluation, b.best_evaluation), evals_used)


def decode_actions(key: jax.Array, logits: jnp.ndarray, decoding: str) -> jnp.ndarray:
    """Greedy (the mode of every variable) or one sample."""
    if decoding not in DECODINGS:
        raise ValueError(f"decoding must be one of {DECODINGS}, got {decoding!r}")
    return mode_actions(logits) if decoding == "greedy" else sample_actions(key, logits)


def guided_search(key: jax.Array, policy: Policy, graphs: PaddedGraph, cost_params: CostParams,
                  *, num_devices: int, budget: int, objective: str, decoding: str = "greedy",
                  search: str = "brkga", feature_evals: int = FEATURE_EVALS,
                  seeds: jnp.ndarray | None = None) -> SearchResult:
    """A learned method end to end on graphs ``[B]`` (see the module docstring)."""
    return guided_search_trace(key, policy, graphs, cost_params, num_devices=num_devices,
                               budget=budget, objective=objective, decoding=decoding,
                               search=search, feature_evals=feature_evals, seeds=seeds)[0]


def guided_search_trace(key: jax.Array, policy: Policy, graphs: PaddedGraph,
                        cost_params: CostParams, *, num_devices: int, budget: int,
                        objective: str, decoding: str = "greedy", search: str = "brkga",
                        feature_evals: int = FEATURE_EVALS, seeds: jnp.ndarray | None = None
                        ) -> tuple[SearchResult, jnp.ndarray]:
    """:func:`guided_search` and its best-so-far curve ``[B, budget]`` (float32): entry ``e``
    is the best value after counted evaluation ``e + 1``, the feature search's evaluations
    first."""
    if num_devices != policy.space.num_devices:
        raise ValueError(f"the policy was trained for {policy.space.num_devices} devices, "
                         f"got num_devices={num_devices}")
    if budget <= feature_evals:
        raise ValueError(f"budget {budget} must exceed the {feature_evals} evaluations spent "
                         "on the policy's input features (REGAL A.1)")
    key_features, key_actions, key_search = jax.random.split(key, 3)
    features, first = compute_features(key_features, graphs, cost_params,
                                       num_devices=num_devices, objective=objective,
                                       search_evals=feature_evals)
    result, second = finish_search(key_actions, key_search, policy, graphs, features, first,
                                   cost_params, num_devices=num_devices,
                                   budget=budget - feature_evals, objective=objective,
                                   decoding=decoding, search=search, evals_used=budget,
                                   seeds=seeds)
    curve = jnp.concatenate([first.best_so_far, jnp.minimum(second.best_so_far,
                                                            first.best_value[:, None])], axis=1)
    return result, curve


def finish_search(key_actions: jax.Array, key_search: jax.Array, policy: Policy,
                  graphs: PaddedGraph, features: Features, first, cost_params: CostParams, *,
                  num_devices: int, budget: int, objective: str, decoding: str, search: str,
                  evals_used: int, seeds: jnp.ndarray | None = None
                  ) -> tuple[SearchResult, brkga.BRKGAResult]:
    """The policy part of :func:`guided_search` given features and the feature search's best
    (``first``: anything with ``best_value``, ``best_keys``, ``best_evaluation``): the better
    of the two, and the policy search's own result (started from ``seeds``, pinned)."""
    logits = jax.vmap(policy)(graphs, features)
    actions = decode_actions(key_actions, logits, decoding)
    params = actions_to_params(actions, graphs, policy.space)
    if seeds is not None:
        seeds = pin_seeds(jnp.asarray(seeds, jnp.float32), features.pinned,
                          graphs.op_mask.shape[-1], num_devices)
    result = policy_search(key_search, graphs, params, features.pinned, cost_params,
                           num_devices=num_devices, budget=budget, objective=objective,
                           search=search, seeds=seeds)
    used = jnp.full(graphs.op_mask.shape[:1], evals_used, jnp.int32)
    return better_of(SearchResult(first.best_value, first.best_keys, first.best_evaluation,
                                  used), result, used), result
