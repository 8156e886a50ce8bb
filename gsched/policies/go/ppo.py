"""PPO for GDP and GO (GDP §4.1 and appendix A, GO §4.5): rollouts, rewards and one jitted
iteration.

**Rollouts and rewards.** For each graph of a batch, ``samples`` rollouts of ``rounds`` steps
of GO's iterative refinement (eq. 2): step ``r`` samples every op's actions from
``π(· | G, y⁽ʳ⁻¹⁾)`` (``y⁽⁻¹⁾``: no previous actions, an all-zero input) and the cost model of
SPEC §8 scores the decoded chromosome (:mod:`gsched.policies.go.actions`). Every step is a
complete solution, evaluated and counted; its reward is GO's and GDP's
``−√(value / reference)`` with ``reference`` the best classical baseline of the graph, and
``infeasible_reward`` (−10) when a device exceeds its capacity. A rollout step is treated as
its own decision given its state (the previous step's actions): the advantage is
``reward − V(G, y⁽ʳ⁻¹⁾)`` from the network's value head (no bootstrapping across steps;
``baseline = "value"``, the papers'), or with ``baseline = "samples"`` ``reward −`` the mean
reward of the same graph's other samples in the same round (a leave-one-out baseline, beyond
the papers: it removes each graph's level exactly, where a value head shared by many graphs
predicts it with an error as large as the differences between one graph's samples —
``docs/design.md``); normalized over the iteration's batch when ``normalize_advantages``.

**Loss.** The clipped surrogate of PPO, ``−mean min(ρ·A, clip(ρ, 1 − ε, 1 + ε)·A)``, plus
``value_coef ·`` the value head's squared error, minus ``entropy ·`` the mean per-op entropy.
With ``temperature = T`` (default 1; beyond the papers) the policy is ``softmax(logits / T)``
throughout: the rollouts sample from it, and the ratio and the entropy are taken of it.
``ratio = "joint"`` takes ``ρ`` of the whole non-autoregressive action (GDP appendix A: the
product over ops); ``"per_op"`` sums the clipped terms of every op's own ratio over the real ops
(the same gradient at ρ = 1, but one op leaving the trust region does not silence the others)
— see ``docs/design.md``.

**One iteration** (:func:`make_train_step`, one ``jax.jit``): rollouts of the batch (vmapped
over graphs × samples) → cost model → advantages → ``epochs`` passes of ``minibatches``
shuffled minibatches over the ``B · samples · rounds`` rollout steps (nested ``lax.scan``) →
the updated parameters. :func:`ppo_iteration` is the same iteration as a pure function of
``(params, opt_state, key)``, which the methods reuse to fine-tune inside a search.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from gsched.core.padding import PaddedGraph
from gsched.costmodel.params import OBJECTIVES, CostParams
from gsched.policies.go import actions as act
from gsched.policies.go.network import PolicyNetwork, encode_actions
from gsched.search.common import Best, no_best, scored_batch, track_best

RATIOS = ("joint", "per_op")
BASELINES = ("value", "samples")


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """PPO settings (GDP Table 4 where it gives them: ε 0.2, 5 epochs, entropy 0.05).

    Table 4's learning rate "0.5" cannot be an Adam step size; we use 1e-3 for the small
    configs and 3e-4 for the full ones (``docs/design.md``).
    """

    samples: int = 8  # rollouts per graph and iteration
    rounds: int = 1  # GO eq. 2 refinement steps per rollout (each one evaluated)
    epochs: int = 5
    minibatches: int = 4
    clip_epsilon: float = 0.2
    entropy: float = 0.05
    value_coef: float = 0.5
    learning_rate: float = 1e-3
    max_grad_norm: float = 1.0
    infeasible_reward: float = -10.0
    normalize_advantages: bool = True
    ratio: str = "per_op"
    baseline: str = "value"
    objective: str = "runtime"
    temperature: float = 1.0  # rollouts sample from softmax(logits / temperature)

    def __post_init__(self):
        for name in ("samples", "rounds", "epochs", "minibatches"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ppo.{name} must be an int >= 1, got {value!r}")
        for name in ("clip_epsilon", "learning_rate", "max_grad_norm", "temperature"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ppo.{name} must be > 0, got {getattr(self, name)!r}")
        if self.entropy < 0 or self.value_coef < 0:
            raise ValueError("ppo.entropy and ppo.value_coef must be >= 0")
        if self.ratio not in RATIOS:
            raise ValueError(f"ppo.ratio must be one of {RATIOS}, got {self.ratio!r}")
        if self.baseline not in BASELINES:
            raise ValueError(f"ppo.baseline must be one of {BASELINES}, got {self.baseline!r}")
        if self.baseline == "samples" and self.samples < 2:
            raise ValueError("ppo.baseline = 'samples' compares a graph's samples with each "
                             f"other: it needs ppo.samples >= 2, got {self.samples}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"ppo.objective must be one of {OBJECTIVES}, got "
                             f"{self.objective!r}")


@dataclasses.dataclass(frozen=True)
class ExecModel:
    """The cost model's static settings a policy is trained and run under (SPEC §8)."""

    num_devices: int
    scheduler: str = "priority"
    fusion: bool = False


class Batch(NamedTuple):
    """Graphs ``[B]`` of one bucket and each graph's reference value (best baseline)."""

    graphs: PaddedGraph  # leading [B]
    reference: jnp.ndarray  # [B] float32 > 0


class Steps(NamedTuple):
    """The rollout steps of one iteration, flattened to ``M = B · samples · rounds``."""

    graph: jnp.ndarray  # [M] int32 index into the batch
    previous: jnp.ndarray  # [M, N, A] float32 encoded previous actions (zeros: first step)
    actions: tuple  # per task [M, N] int32
    log_prob: jnp.ndarray  # [M, N] per-op log-probabilities when sampled
    value: jnp.ndarray  # [M] value head when sampled
    reward: jnp.ndarray  # [M]


class TrainState(NamedTuple):
    """Everything an iteration changes (a pytree of arrays: checkpointable as is)."""

    params: PolicyNetwork  # array leaves (``eqx.partition(net, eqx.is_array)[0]``)
    opt_state: optax.OptState
    key: jax.Array  # iteration s draws from fold_in(key, s)
    step: jnp.ndarray  # [] int32 completed iterations


def optimizer(config: PPOConfig) -> optax.GradientTransformation:
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                       optax.adam(config.learning_rate))


def init_state(net: PolicyNetwork, config: PPOConfig, key: jax.Array) -> TrainState:
    params, _ = eqx.partition(net, eqx.is_array)
    return TrainState(params, optimizer(config).init(params), key, jnp.zeros((), jnp.int32))


def reward(values: jnp.ndarray, feasible: jnp.ndarray, reference: jnp.ndarray,
           infeasible_reward: float) -> jnp.ndarray:
    """``−√(value / reference)``, or ``infeasible_reward`` where infeasible."""
    ratio = values / reference
    return jnp.where(feasible & jnp.isfinite(ratio), -jnp.sqrt(jnp.maximum(ratio, 0.0)),
                     infeasible_reward)


def _repeat(tree, times: int):
    return jax.tree.map(lambda x: jnp.repeat(x, times, axis=0), tree)


def rollouts(net: PolicyNetwork, graphs: PaddedGraph, reference: jnp.ndarray, key: jax.Array,
             best: Best | None, cost_params: CostParams, *, space: act.ActionSpace,
             exec_model: ExecModel, samples: int, rounds: int, objective: str,
             infeasible_reward: float = -10.0, greedy: bool = False,
             temperature: float = 1.0) -> tuple[Steps, Best]:
    """``samples`` rollouts of ``rounds`` steps for each graph of ``graphs [B]``; returns the
    steps (flattened, see :class:`Steps`) and ``best`` updated with every evaluated solution
    (``best=None``: a fresh one). ``greedy``: argmax actions instead of samples; else actions
    are drawn from ``softmax(logits / temperature)``, whose log-probabilities ``Steps``
    records."""
    b = graphs.op_mask.shape[0]
    n = graphs.op_mask.shape[1]
    flat = _repeat(graphs, samples)  # [B·S]
    a = sum(space.num_actions)
    previous = jnp.zeros((b * samples, n, a), jnp.float32)

    def evaluate(keys):
        return scored_batch(graphs, keys, cost_params, num_devices=exec_model.num_devices,
                            objective=objective, scheduler=exec_model.scheduler,
                            fusion=exec_model.fusion)

    steps = []
    for r in range(rounds):
        logits, value = jax.vmap(net)(flat, previous)
        logits = tempered(logits, temperature)
        if greedy:
            chosen = jax.vmap(act.greedy)(logits, flat.op_mask)
        else:
            keys = jax.random.split(jax.random.fold_in(key, r), b * samples)
            chosen = jax.vmap(act.sample)(keys, logits, flat.op_mask)
        log_prob = jax.vmap(act.op_log_probs)(logits, chosen, flat.op_mask)
        chromosomes = jax.vmap(lambda c, g: act.to_keys(
            c, g, space, num_devices=exec_model.num_devices, fusion=exec_model.fusion))(
            chosen, flat)
        chromosomes = chromosomes.reshape(b, samples, -1)
        evaluation, values = evaluate(chromosomes)
        if best is None:
            best = no_best(evaluate, b, chromosomes.shape[-1])
        best = track_best(best, values, chromosomes, evaluation)
        rewards = reward(values, evaluation.feasible, reference[:, None], infeasible_reward)
        steps.append(Steps(jnp.repeat(jnp.arange(b, dtype=jnp.int32), samples), previous,
                           chosen, log_prob, value, rewards.reshape(-1)))
        previous = jax.vmap(encode_actions, in_axes=(0, None, 0))(chosen, space.num_actions,
                                                                  flat.op_mask)
    return jax.tree.map(lambda *xs: jnp.concatenate(xs), *steps), best


def tempered(logits: tuple, temperature: float) -> tuple:
    """Each task's logits divided by ``temperature`` (1: unchanged)."""
    if temperature == 1.0:
        return logits
    return tuple(lg / temperature for lg in logits)


def loss(params, static, graphs: PaddedGraph, steps: Steps, advantage: jnp.ndarray,
         config: PPOConfig):
    """The PPO loss (module docstring) of a minibatch of rollout steps, with the policy at
    ``config.temperature`` (the distribution the rollouts sampled); returns
    ``(loss, metrics)``."""
    net = eqx.combine(params, static)
    g = jax.tree.map(lambda x: x[steps.graph], graphs)
    logits, value = jax.vmap(net)(g, steps.previous)
    logits = tempered(logits, config.temperature)
    log_prob = jax.vmap(act.op_log_probs)(logits, steps.actions, g.op_mask)  # [m, N]
    eps = config.clip_epsilon
    adv = advantage[:, None]
    if config.ratio == "joint":
        ratio = jnp.exp(jnp.sum(log_prob - steps.log_prob, axis=1))[:, None]
        weight = jnp.ones_like(ratio)
    else:
        ratio = jnp.exp(log_prob - steps.log_prob)
        weight = g.op_mask.astype(jnp.float32)
    surrogate = jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - eps, 1 + eps) * adv)
    policy_loss = -jnp.mean(jnp.sum(surrogate * weight, axis=1))
    value_loss = jnp.mean((value - steps.reward) ** 2)
    ent = jnp.mean(jax.vmap(act.entropy)(logits, g.op_mask))
    total = policy_loss + config.value_coef * value_loss - config.entropy * ent
    clipped = jnp.sum((jnp.abs(ratio - 1) > eps) * weight) / jnp.sum(weight)
    return total, {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": ent,
                   "clip_fraction": clipped}


def baseline(steps: Steps, config: PPOConfig) -> jnp.ndarray:
    """``[M]`` what each rollout step's reward is compared with (module docstring): the value
    head, or the mean reward of the other samples of its graph and round."""
    if config.baseline == "value":
        return steps.value
    rewards = steps.reward.reshape(config.rounds, -1, config.samples)  # Steps' order
    others = (jnp.sum(rewards, axis=-1, keepdims=True) - rewards) / (config.samples - 1)
    return others.reshape(-1)


def ppo_iteration(params, opt_state, key: jax.Array, static, batch: Batch, best: Best | None,
                  cost_params: CostParams, *, space: act.ActionSpace, exec_model: ExecModel,
                  config: PPOConfig):
    """One PPO iteration as a pure function: ``(params, opt_state, metrics, best)``."""
    net = eqx.combine(params, static)
    key_rollout, key_shuffle = jax.random.split(key)
    steps, best = rollouts(net, batch.graphs, batch.reference, key_rollout, best, cost_params,
                           space=space, exec_model=exec_model, samples=config.samples,
                           rounds=config.rounds, objective=config.objective,
                           infeasible_reward=config.infeasible_reward,
                           temperature=config.temperature)
    count = steps.reward.shape[0]
    if count % config.minibatches:
        raise ValueError(f"{count} rollout steps per iteration (graphs × samples × rounds) are "
                         f"not divisible into ppo.minibatches={config.minibatches}")
    advantage = steps.reward - baseline(steps, config)
    if config.normalize_advantages:
        advantage = (advantage - jnp.mean(advantage)) / (jnp.std(advantage) + 1e-8)
    steps = steps._replace(value=jax.lax.stop_gradient(steps.value),
                           log_prob=jax.lax.stop_gradient(steps.log_prob),
                           previous=jax.lax.stop_gradient(steps.previous))
    tx = optimizer(config)

    def minibatch(carry, index):
        params, opt_state = carry
        part = jax.tree.map(lambda x: x[index], steps)
        (_, metrics), grads = jax.value_and_grad(loss, has_aux=True)(
            params, static, batch.graphs, part, advantage[index], config)
        updates, opt_state = tx.update(grads, opt_state, params)
        metrics["grad_norm"] = optax.tree.norm(grads)
        return (optax.apply_updates(params, updates), opt_state), metrics

    def epoch(carry, key):
        order = jax.random.permutation(key, count).reshape(config.minibatches, -1)
        return jax.lax.scan(minibatch, carry, order)

    (params, opt_state), metrics = jax.lax.scan(
        epoch, (params, opt_state), jax.random.split(key_shuffle, config.epochs))
    metrics = jax.tree.map(jnp.mean, metrics)
    metrics |= {"reward": jnp.mean(steps.reward), "reward_max": jnp.max(steps.reward),
                "value": jnp.mean(steps.value),
                "evaluations": jnp.asarray(count, jnp.int32)}
    return params, opt_state, metrics, best


def make_train_step(net: PolicyNetwork, space: act.ActionSpace, exec_model: ExecModel,
                    config: PPOConfig, cost_params: CostParams):
    """``step(state, batch) → (state, metrics)``, jitted (compiles once per bucket and batch
    size); iteration ``s`` draws from ``fold_in(state.key, s)``. ``net`` supplies the static
    structure (its arrays are not used)."""
    _, static = eqx.partition(net, eqx.is_array)
    space.check_exec_model(exec_model.num_devices, exec_model.fusion)
    cost_params = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), cost_params)

    @jax.jit
    def step(state: TrainState, batch: Batch):
        params, opt_state, metrics, best = ppo_iteration(
            state.params, state.opt_state, jax.random.fold_in(state.key, state.step), static,
            batch, None, cost_params, space=space, exec_model=exec_model, config=config)
        metrics["best_ratio"] = jnp.mean(best.value / batch.reference)
        return TrainState(params, opt_state, state.key, state.step + 1), metrics

    return step
