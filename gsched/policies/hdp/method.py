"""HDP as a budgeted search: REINFORCE of a grouper and a placer on each graph alone.

HDP (Mirhoseini et al., ICLR 2018) is the device placer GDP compares with (GDP Table 1): it
learns nothing across graphs, so here it is a search method like BRKGA — the ``hdp`` method of
the registry trains fresh networks (:mod:`gsched.policies.hdp.network`) on every graph of the
batch (a ``vmap`` over graphs, one ``lax.scan`` over iterations, one XLA computation) and
returns the best placement any iteration sampled.

**One iteration** (HDP §3 and TF's ``hierarchical_controller``, its code): ``samples``
placements (HDP's "children"; default 1) are drawn — a grouping of the ops, the group
embeddings of that grouping, a device per group — and scored by the cost model (SPEC §3 /
§8; placement only: the schedule is the run's scheduler with every priority 0.5, fusion keys 1
when it fuses, as for GDP). Reward ``r = √(value / reference)`` (HDP: ``√runtime``; the
reference, the first iteration's mean finite value, makes the units irrelevant), ``r = √100``
where infeasible or not finite (HDP's failing signal of 100 s). Loss: the mean over the
samples of ``(r − b) · (log p(placement) + log p(grouping))`` (``r`` is a cost; its
gradient is pulled back through the sampling pass, ``jax.vjp``: one forward pass), minimized
with Adam (``learning_rate``, HDP's 0.1 by default, × 0.95 per 50 iterations after the
400th), the gradient clipped to global norm 1; then the baseline ``b ← 0.9 b + 0.1 · mean
r``, starting at the failing signal (HDP's ``start_with_failing_signal``). The networks'
exploration noise stops after 750 iterations.

**Budget.** ``ceil(budget / samples)`` iterations; surplus samples of the last iteration are
not counted and cannot be the result (value ``+inf``), so ``evals_used == budget``.
``groups`` defaults to HDP's ``min(256, 20 · D)``, ``hidden`` to its 512.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import optax

from gsched.costmodel.params import CostParams, is_int
from gsched.policies.go import actions as act
from gsched.policies.hdp import network
from gsched.policies.hdp.features import (
    OP_FEATURES,
    group_embeddings,
    group_features,
    op_embeddings,
)
from gsched.registry import Method, Option
from gsched.search.common import SearchResult, no_best, scored_batch, track_best

FAILING_VALUE = 100.0  # value / reference of an infeasible placement (HDP: 100 s)
BASELINE_DECAY = 0.9
LEARNING_RATE = 0.1
GRADIENT_BOUND = 1.0


def default_groups(num_devices: int) -> int:
    """HDP's number of groups, ``min(256, 20 · D)``."""
    return min(256, 20 * num_devices)


def _optimizer(learning_rate) -> optax.GradientTransformation:
    schedule = optax.exponential_decay(learning_rate, transition_steps=50, decay_rate=0.95,
                                       transition_begin=400, staircase=True)
    return optax.chain(optax.clip_by_global_norm(GRADIENT_BOUND), optax.adam(schedule))


def check_settings(samples, hidden, groups, learning_rate) -> None:
    """One-line errors for bad ``samples`` / ``hidden`` / ``groups`` (``None``: default) /
    ``learning_rate``."""
    for name, value, low in (("samples", samples, 1), ("hidden", hidden, 2)):
        if not is_int(value) or value < low:
            raise ValueError(f"method hdp: {name} must be an int >= {low}, got {value!r}")
    if hidden % 2:
        raise ValueError(f"method hdp: hidden must be even (two LSTM directions), got {hidden}")
    if groups is not None and (not is_int(groups) or groups < 1):
        raise ValueError(f"method hdp: groups must be an int >= 1, got {groups!r}")
    if isinstance(learning_rate, bool) or not isinstance(learning_rate, (int, float)) \
            or not 0 < learning_rate < float("inf"):
        raise ValueError(f"method hdp: learning_rate must be a number > 0, "
                         f"got {learning_rate!r}")


def hdp_search(key: jax.Array, graphs, cost_params: CostParams, **settings) -> SearchResult:
    """HDP on ``graphs [B]`` (module docstring); a :class:`SearchResult` with leading ``[B]``.
    Keyword settings as :func:`hdp_search_trace`."""
    return hdp_search_trace(key, graphs, cost_params, **settings)[0]


def hdp_search_trace(key: jax.Array, graphs, cost_params: CostParams, *, num_devices: int,
                     budget: int, objective: str, scheduler: str = "list", fusion: bool = False,
                     samples: int = 1, hidden: int = 512, groups: int | None = None,
                     learning_rate: float = LEARNING_RATE) -> tuple[SearchResult, jnp.ndarray]:
    """:func:`hdp_search` and its learning curve ``[B, iterations]`` float32: each
    iteration's mean counted finite value (NaN if none), what REINFORCE lowers."""
    check_settings(samples, hidden, groups, learning_rate)
    if not is_int(budget) or budget < 1:
        raise ValueError(f"method hdp: budget must be an int >= 1, got {budget!r}")
    if num_devices < 2:
        raise ValueError("method hdp places ops on devices: it needs num_devices >= 2")
    groups = default_groups(num_devices) if groups is None else groups
    space = act.ActionSpace(("placement",), num_devices)
    iterations = -(-budget // samples)
    optimizer = _optimizer(learning_rate)
    cost_params = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), cost_params)
    failing = jnp.sqrt(jnp.float32(FAILING_VALUE))
    length = graphs.bucket.chromosome_length(num_devices, fusion)

    def one(graph, key):
        batch = jax.tree.map(lambda x: x[None], graph)  # the cost model's batch of one
        features = op_embeddings(graph)
        k_init, k_run = jax.random.split(key)
        params = network.init_params(k_init, OP_FEATURES, group_features(groups),
                                     num_groups=groups, num_devices=num_devices,
                                     hidden=hidden)

        def draw(p, k, step):
            """``samples`` placements: ``(log-probs [S], (groupings [S, N], devices per group
            [S, G]))``."""
            def single(k):
                k_group, k_place = jax.random.split(k)
                grouping, logp_group = network.group(p, features, graph.op_mask, k_group, step)
                embedding = group_embeddings(graph, grouping, groups, features)
                devices, logp_place = network.place(p, embedding, k_place, step)
                return logp_group + logp_place, (grouping, devices)
            return jax.vmap(single)(jax.random.split(k, samples))

        def evaluate(x):
            return scored_batch(batch, x, cost_params, num_devices=num_devices,
                                objective=objective, scheduler=scheduler, fusion=fusion)

        def iterate(carry, step):
            p, opt_state, baseline, reference, best = carry
            k = jax.random.fold_in(k_run, step)
            _, backward, (grouping, devices) = jax.vjp(lambda q: draw(q, k, step), p,
                                                       has_aux=True)
            op_devices = jnp.take_along_axis(devices, grouping, axis=1)  # [S, N]
            keys = jax.vmap(lambda d: act.to_keys((d,), graph, space, num_devices=num_devices,
                                                  fusion=fusion))(op_devices)
            evaluation, values = evaluate(keys[None])
            counted = step * samples + jnp.arange(samples) < budget
            values = jnp.where(counted[None], values, jnp.inf)
            best = track_best(best, values, keys[None], evaluation)
            finite = jnp.isfinite(values[0])
            mean = jnp.sum(jnp.where(finite, values[0], 0.0)) / jnp.sum(finite)  # NaN if none
            reference = jnp.where(step == 0, jnp.where(mean > 0, mean, 1.0), reference)
            ratio = values[0] / reference
            rewards = jnp.where(jnp.isfinite(ratio), jnp.sqrt(jnp.maximum(ratio, 0.0)),
                                failing)

            # the gradient of mean((r - b) · logp): r is a cost, lower is better
            (gradient,) = backward((rewards - baseline) / samples)
            updates, opt_state = optimizer.update(gradient, opt_state, p)
            p = optax.apply_updates(p, updates)
            baseline = BASELINE_DECAY * baseline + (1 - BASELINE_DECAY) * jnp.mean(rewards)
            return (p, opt_state, baseline, reference, best), mean

        best = no_best(evaluate, 1, length)
        carry = (params, optimizer.init(params), failing, jnp.float32(1.0), best)
        (_, _, _, _, best), curve = jax.lax.scan(iterate, carry, jnp.arange(iterations))
        return jax.tree.map(lambda x: x[0], best), curve

    count = graphs.op_mask.shape[0]
    best, curve = jax.vmap(one)(graphs, jax.random.split(key, count))
    return SearchResult(best.value, best.keys, best.evaluation,
                        jnp.full(count, budget, jnp.int32)), curve


@dataclasses.dataclass(frozen=True)
class HDPRunner:
    """The ``hdp`` method's runner (``gsched.methods`` search kind)."""

    samples: int = 1
    hidden: int = 512
    groups: int | None = None
    learning_rate: float = LEARNING_RATE

    def __call__(self, key, graphs, cost_params, *, num_devices, budget, objective,
                 scheduler="list", fusion=False):
        return hdp_search(key, graphs, cost_params, num_devices=num_devices, budget=budget,
                          objective=objective, scheduler=scheduler, fusion=fusion,
                          samples=self.samples, hidden=self.hidden, groups=self.groups,
                          learning_rate=self.learning_rate)

    def info(self, objective: str) -> dict[str, Any]:
        """JSON fields added to every result row."""
        return {"hdp_samples": self.samples, "hdp_hidden": self.hidden,
                "hdp_groups": self.groups if self.groups is not None else "default",
                "hdp_learning_rate": self.learning_rate}


def build_hdp(samples: int = 1, hidden: int = 512, groups: int | None = None,
              learning_rate: float = LEARNING_RATE) -> HDPRunner:
    check_settings(samples, hidden, groups, learning_rate)
    return HDPRunner(samples, hidden, groups, float(learning_rate))


SAMPLES = Option("samples", int, "hdp: placements sampled per REINFORCE iteration (default 1)")
HIDDEN = Option("hidden", int, "hdp: the placer's LSTM size (default 512, HDP's)")
GROUPS = Option("groups", int, "hdp: number of op groups (default min(256, 20 D), HDP's)")
LEARNING_RATE_OPTION = Option("learning_rate", float, "hdp: Adam's learning rate (default 0.1, "
                                                      "HDP's)")

METHODS = {
    "hdp": Method("HDP: a feed-forward grouper and a seq2seq LSTM placer trained with "
                  "REINFORCE on each graph (GDP's baseline)", "search", build_hdp,
                  options=(SAMPLES, HIDDEN, GROUPS, LEARNING_RATE_OPTION), exec_model=True),
}
