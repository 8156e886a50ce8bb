"""REINFORCE for REGAL (§3.4): one jitted train step over a batch of graphs.

For each graph ``G`` of the batch the step samples ``S`` action vectors ``y ~ p(y | G)``,
runs the policy's BRKGA for every (graph, sample) pair as ONE batched
:func:`gsched.search.brkga.run_batch` call (``B·S`` rows, per-row ``BRKGAParams [B·S, L]``), turns the
best values into rewards ``r = −o_policy / o_BRKGA`` (``o_BRKGA``: uniform BRKGA on the same
budget, computed once per graph), and takes one Adam step on

    loss = −mean[(r − sg(b(G))) · log p(y | G)] + λ/2 · mean[(r − b(G))²]

(eq. 8 with the baseline of eq. 9), gradients clipped to global L2 norm ``clip``.

``advantage = "group"`` (not in the paper; issue #15 §2) replaces ``r − sg(b(G))`` by the
sample's reward relative to the other ``S − 1`` samples of the same graph, divided by the
spread of the graph's ``S`` rewards: ``(r − mean of the others) / (std + 1e-3 · |mean|)``. The
rewards of one graph differ by fractions of a percent while ``b(G)`` has to learn every
graph's level from a few visits, so with the learned baseline the per-graph offset ``r − b(G)``
swamps the differences between samples; the group advantage removes the offset exactly. The
baseline is still trained (its loss is a metric), but no longer enters the policy gradient.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from gsched.core.padding import PaddedGraph
from gsched.costmodel.params import CostParams
from gsched.policies.regal.features import Features
from gsched.policies.regal.policy import (
    Baseline,
    Policy,
    PolicyConfig,
    entropy,
    log_prob,
    sample_actions,
)
from gsched.policies.regal.rollout import actions_to_params, policy_search

ADVANTAGES = ("baseline", "group")  # ReinforceConfig.advantage


@dataclasses.dataclass(frozen=True)
class ReinforceConfig:
    """Static training settings (A.5 defaults where the paper gives them).

    Attributes:
      samples: action samples per graph and step (rollouts, run as one batch).
      evals: BRKGA evaluations per rollout (A.5: 1000 for training rewards); the reference
        ``o_BRKGA`` must use the same budget.
      learning_rate, clip, baseline_weight: Adam's step size (A.5: 1e-4), the global-norm
        gradient clip (10) and the baseline loss weight λ (1e-4).
      objective: ``"peak_memory"`` (REGAL) or ``"runtime"`` (zero-shot REGAL).
      search: ``"brkga"`` (REGAL) or ``"random"`` (IDRS).
      advantage: ``"baseline"`` (REGAL eq. 9: ``r − b(G)``) or ``"group"`` (module docstring).
    """

    samples: int = 4
    evals: int = 1000
    learning_rate: float = 1e-4
    clip: float = 10.0
    baseline_weight: float = 1e-4
    objective: str = "peak_memory"
    search: str = "brkga"
    advantage: str = "baseline"

    def __post_init__(self):
        if self.advantage not in ADVANTAGES:
            raise ValueError(f"unknown advantage {self.advantage!r}; expected one of "
                             f"{ADVANTAGES}")
        if self.advantage == "group" and self.samples < 2:
            raise ValueError("advantage = 'group' needs samples >= 2")


def group_advantage(reward: jnp.ndarray) -> jnp.ndarray:
    """``[B, S]`` rewards → each sample's reward minus the mean of its graph's other samples,
    over the spread of its graph's rewards (``std + 1e-3·|mean|``, so that identical rewards
    give 0, not a division by zero)."""
    s = reward.shape[1]
    others = (jnp.sum(reward, axis=1, keepdims=True) - reward) / (s - 1)
    spread = jnp.std(reward, axis=1, keepdims=True)
    scale = spread + 1e-3 * jnp.abs(jnp.mean(reward, axis=1, keepdims=True))
    return (reward - others) / scale


class Batch(NamedTuple):
    """A training batch: graphs ``[B]`` of one bucket, their cached features and reference."""

    graphs: PaddedGraph  # leading [B]
    features: Features  # leading [B]
    reference: jnp.ndarray  # [B] float32, o_BRKGA (uniform BRKGA, same budget)


class TrainState(NamedTuple):
    """Everything a step changes (a pytree of arrays: checkpointable as is)."""

    params: tuple  # (Policy, Baseline) array leaves (``eqx.partition`` with ``eqx.is_array``)
    opt_state: optax.OptState
    key: jax.Array  # the run's PRNG key; step s uses fold_in(key, s)
    step: jnp.ndarray  # [] int32 completed steps


def optimizer(config: ReinforceConfig) -> optax.GradientTransformation:
    return optax.chain(optax.clip_by_global_norm(config.clip),
                       optax.adam(config.learning_rate, b1=0.9, b2=0.999, eps=1e-8))


def init_models(policy_config: PolicyConfig, key: jax.Array) -> tuple[Policy, Baseline]:
    key_policy, key_baseline = jax.random.split(key)
    return Policy(policy_config, key_policy), Baseline(policy_config, key_baseline)


def init_state(models: tuple[Policy, Baseline], config: ReinforceConfig,
               key: jax.Array) -> TrainState:
    params, _ = eqx.partition(models, eqx.is_array)
    return TrainState(params, optimizer(config).init(params), key, jnp.zeros((), jnp.int32))


def models_of(params: tuple, models: tuple[Policy, Baseline]) -> tuple[Policy, Baseline]:
    """The (policy, baseline) with ``params`` (e.g. ``TrainState.params``); ``models``
    supplies the static structure."""
    return eqx.combine(params, eqx.partition(models, eqx.is_array)[1])


def loss(params, static, batch: Batch, actions: jnp.ndarray, reward: jnp.ndarray,
         baseline_weight: float, advantage: str = "baseline"):
    """The REINFORCE loss (module docstring) of rollouts ``actions [B, S, N, V]`` with rewards
    ``[B, S]``; returns ``(loss, (baseline loss, mean entropy, b(G) [B]))``."""
    policy, baseline = eqx.combine(params, static)
    logits = jax.vmap(policy)(batch.graphs, batch.features)
    logp = jax.vmap(jax.vmap(log_prob, in_axes=(None, 0, None)))(
        logits, actions, batch.graphs.op_mask)  # [B, S]
    predicted = jax.vmap(baseline)(batch.graphs, batch.features)  # [B]
    if advantage == "group":
        weight = group_advantage(reward)
    else:
        weight = reward - jax.lax.stop_gradient(predicted)[:, None]
    policy_loss = -jnp.mean(weight * logp)
    baseline_loss = 0.5 * baseline_weight * jnp.mean((reward - predicted[:, None]) ** 2)
    ent = jnp.mean(jax.vmap(entropy)(logits, batch.graphs.op_mask))
    return policy_loss + baseline_loss, (baseline_loss, ent, predicted)


def _repeat(tree, times: int):
    """Each row of a ``[B, ...]`` pytree ``times`` times in a row: ``[B·times, ...]``."""
    return jax.tree.map(lambda x: jnp.repeat(x, times, axis=0), tree)


def make_train_step(models: tuple[Policy, Baseline], config: ReinforceConfig,
                    cost_params: CostParams):
    """``step(state, batch) → (state, metrics)``, jitted (compiles once per bucket and batch
    size); step ``s`` draws from ``fold_in(state.key, s)``. ``models`` supplies the static
    structure (its arrays are not used)."""
    _, static = eqx.partition(models, eqx.is_array)
    tx = optimizer(config)
    cost_params = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), cost_params)
    num_devices = models[0].space.num_devices

    def rollouts(policy: Policy, batch: Batch, key):
        """Samples ``[B, S, N, V]`` actions; returns them and their rewards ``[B, S]``."""
        key_actions, key_search = jax.random.split(key)
        logits = jax.vmap(policy)(batch.graphs, batch.features)  # [B, N, V, k]
        b, s = logits.shape[0], config.samples
        actions = sample_actions(key_actions, jnp.repeat(logits[:, None], s, axis=1))
        graphs = _repeat(batch.graphs, s)
        params = actions_to_params(actions.reshape((b * s,) + actions.shape[2:]), graphs,
                                   policy.space)
        result = policy_search(key_search, graphs, params, _repeat(batch.features.pinned, s),
                               cost_params, num_devices=num_devices, budget=config.evals,
                               objective=config.objective, search=config.search)
        return actions, -result.best_value.reshape(b, s) / batch.reference[:, None]

    @jax.jit
    def step(state: TrainState, batch: Batch):
        policy, _ = eqx.combine(state.params, static)
        actions, reward = rollouts(policy, batch, jax.random.fold_in(state.key, state.step))
        (total, (baseline_loss, ent, predicted)), grads = jax.value_and_grad(
            loss, has_aux=True)(state.params, static, batch, actions, reward,
                                config.baseline_weight, config.advantage)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        metrics = {"loss": total, "baseline_loss": baseline_loss, "reward": jnp.mean(reward),
                   "reward_max": jnp.mean(jnp.max(reward, axis=1)),
                   "baseline": jnp.mean(predicted), "entropy": ent,
                   "grad_norm": optax.tree.norm(grads),
                   "improvement_pct": 100.0 * jnp.mean(1.0 + reward),
                   "evaluations": jnp.asarray(reward.size * config.evals, jnp.int32)}
        return TrainState(params, opt_state, state.key, state.step + 1), metrics

    return step
