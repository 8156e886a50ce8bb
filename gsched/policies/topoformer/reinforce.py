"""REINFORCE with a greedy-rollout baseline for Topoformer (NTO §4.3, appendices C.1, C.4).

One training step on a batch of ``B`` padded graphs:

1. the policy's priorities (Laplacian encodings sign-flipped at random per graph, see
   ``gsched.policies.topoformer.features``) are decoded into ``samples`` sampled orders per graph;
2. the *baseline policy* (a frozen copy of an earlier policy) decodes one greedy order per
   graph, with the deterministic sign convention: its peak memory is ``b(G)`` (eq. 10);
3. the loss ``mean[(C(σ) − b) / b · log p(σ)]`` (eq. 9, with the advantage divided by ``b`` —
   our choice — so that graphs of different memory scale weigh alike) is minimized with Adam,
   learning rate ``lr · decay^epoch`` (staircase per epoch).

Costs are the decoder's exact peak memory, which equals the cost model's for the same order
(``gsched.policies.topoformer.decode``, tested), so no second evaluation pass is needed.

**Baseline replacement** (C.4, as in Kool et al.): at the end of each epoch the policy's and
the baseline's greedy peaks are compared on a fixed validation set, paired per graph: with
``d_i = (policy_i − baseline_i) / baseline_i``, the baseline takes the policy's weights when
``mean(d) < 0`` and the one-sided paired t statistic ``mean(d) / (std(d) / √V)`` is below
``−baseline_t`` (1.645: the 5 % level of the normal approximation to the t distribution).
The baseline's validation peaks are kept in the state, so only the policy is re-decoded.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from gsched.core.padding import PaddedGraph
from gsched.policies.topoformer.decode import decode, order_log_prob
from gsched.policies.topoformer.features import random_sign_flip
from gsched.policies.topoformer.model import (
    GraphInputs,
    Topoformer,
    TopoformerConfig,
    graph_inputs,
)


@dataclasses.dataclass(frozen=True)
class ReinforceConfig:
    """Optimization settings (defaults: the paper's, C.1)."""

    learning_rate: float = 1e-4
    lr_decay: float = 0.996  # per epoch
    steps_per_epoch: int = 125  # 1000 graphs per epoch at batch 8
    samples: int = 1  # sampled orders per graph and step
    baseline_t: float = 1.645  # one-sided paired-t threshold for replacing the baseline

    def __post_init__(self):
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}")
        if not 0 < self.lr_decay <= 1:
            raise ValueError(f"lr_decay must be in (0, 1], got {self.lr_decay!r}")
        for name in ("steps_per_epoch", "samples"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")


class TrainState(NamedTuple):
    policy: Topoformer
    baseline: Topoformer
    opt_state: Any
    baseline_val: jnp.ndarray  # [V] the baseline's greedy peaks on the validation graphs
    key: jax.Array
    step: jnp.ndarray  # [] int32 completed steps


class Batch(NamedTuple):
    graphs: PaddedGraph  # leading [B]
    inputs: GraphInputs  # leading [B]


def make_batch(graphs: PaddedGraph, config: TopoformerConfig) -> Batch:
    """Encoder inputs for padded graphs with a leading ``[B]`` axis (jitted per bucket)."""
    return Batch(graphs, _inputs(graphs, config))


@functools.partial(jax.jit, static_argnames="config")
def _inputs(graphs: PaddedGraph, config: TopoformerConfig) -> GraphInputs:
    return jax.vmap(lambda g: graph_inputs(g, config))(graphs)


def optimizer(config: ReinforceConfig) -> optax.GradientTransformation:
    schedule = optax.exponential_decay(config.learning_rate, config.steps_per_epoch,
                                       config.lr_decay, staircase=True)
    return optax.adam(schedule)


def greedy_peaks(model: Topoformer, batch: Batch) -> jnp.ndarray:
    """``[B]`` peak memory of the model's greedy order on each graph (traceable)."""
    priorities = jax.vmap(model)(batch.inputs)
    decoded = jax.vmap(lambda g, p: decode(g, p, jax.random.key(0), mode="greedy"))(
        batch.graphs, priorities)
    return decoded.peak_memory[:, 0]


_greedy_peaks = eqx.filter_jit(greedy_peaks)


def init_state(model: Topoformer, config: ReinforceConfig, key: jax.Array,
               validation: Batch) -> TrainState:
    """The initial state: the baseline is a copy of the policy (Kool et al.)."""
    params = eqx.filter(model, eqx.is_array)
    return TrainState(model, model, optimizer(config).init(params),
                      _greedy_peaks(model, validation), key, jnp.int32(0))


def _loss(policy: Topoformer, batch: Batch, key: jax.Array, baseline_peak: jnp.ndarray,
          samples: int):
    flip_key, sample_key = jax.random.split(key)
    inputs = batch.inputs._replace(features=random_sign_flip(flip_key, batch.inputs.features))
    priorities = jax.vmap(policy)(inputs)  # [B, N]
    keys = jax.random.split(sample_key, priorities.shape[0])
    decoded = jax.vmap(lambda g, p, k: decode(g, p, k, mode="sample", width=samples))(
        batch.graphs, jax.lax.stop_gradient(priorities), keys)
    log_prob = jax.vmap(jax.vmap(order_log_prob, in_axes=(None, None, 0)))(
        batch.graphs, priorities, decoded.order)  # [B, S]
    advantage = (decoded.peak_memory - baseline_peak[:, None]) / baseline_peak[:, None]
    loss = jnp.mean(jax.lax.stop_gradient(advantage) * log_prob)
    return loss, {"cost_ratio": jnp.mean(decoded.peak_memory / baseline_peak[:, None]),
                  "log_prob": jnp.mean(log_prob)}


def make_train_step(config: ReinforceConfig):
    """``train_step(state, batch) -> (state, metrics)``, jitted (compiles once per bucket)."""
    opt = optimizer(config)

    @eqx.filter_jit
    def train_step(state: TrainState, batch: Batch):
        key, step_key = jax.random.split(state.key)
        baseline_peak = greedy_peaks(state.baseline, batch)
        (loss, metrics), grads = eqx.filter_value_and_grad(_loss, has_aux=True)(
            state.policy, batch, step_key, baseline_peak, config.samples)
        params = eqx.filter(state.policy, eqx.is_array)
        updates, opt_state = opt.update(grads, state.opt_state, params)
        policy = eqx.apply_updates(state.policy, updates)
        metrics = {**metrics, "loss": loss, "grad_norm": optax.tree.norm(grads)}
        return state._replace(policy=policy, opt_state=opt_state, key=key,
                              step=state.step + 1), metrics

    return train_step


@functools.partial(eqx.filter_jit, donate="none")
def epoch_end(state: TrainState, validation: Batch, threshold: float):
    """The baseline update of C.4 (see the module docstring): ``(state, metrics)``."""
    peaks = greedy_peaks(state.policy, validation)
    ratio = (peaks - state.baseline_val) / state.baseline_val
    count = ratio.shape[0]
    mean = jnp.mean(ratio)
    std = jnp.sqrt(jnp.sum((ratio - mean) ** 2) / max(count - 1, 1))
    t = mean / jnp.maximum(std / jnp.sqrt(count), 1e-12)
    replace = (mean < 0) & (t < -threshold)
    baseline = jax.tree.map(lambda new, old: jnp.where(replace, new, old),
                            eqx.filter(state.policy, eqx.is_array),
                            eqx.filter(state.baseline, eqx.is_array))
    baseline = eqx.combine(baseline, eqx.filter(state.baseline, eqx.is_array, inverse=True))
    state = state._replace(baseline=baseline,
                           baseline_val=jnp.where(replace, peaks, state.baseline_val))
    return state, {"baseline_replaced": replace.astype(jnp.float32), "baseline_t": t}
