"""REGAL's policy ``p(y | G)`` (eq. 6) and its baseline ``b(G)`` (eq. 9).

The policy encodes the graph (:class:`~gsched.policies.regal.gnn.GNN`, or the GAS
:class:`~gsched.policies.regal.gnn.SequenceEncoder`) and a shared head ``MLP_y`` gives every node the
logits of its conditionally independent categorical action variables
(:class:`~gsched.policies.regal.actions.ActionSpace`). The baseline is a *separate* encoder of the same
kind with ``b(G) = MLP_b(mean_v MLP_g(h_v))`` over real nodes. Padded nodes are masked out of
log-probabilities, entropies and the baseline's mean.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp

from gsched.core.padding import PaddedGraph
from gsched.policies.regal.actions import ActionSpace
from gsched.policies.regal.features import (
    NUM_EDGE_FEATURES,
    Features,
    num_node_features,
)
from gsched.policies.regal.gnn import GNN, MLP, SequenceEncoder, mlp

ENCODERS = ("gnn", "lstm")
INITIAL_BASELINE = -1.0  # r = −o_policy / o_BRKGA when the policy matches BRKGA


@dataclasses.dataclass(frozen=True)
class PolicyConfig:
    """Architecture (A.5 defaults: state size 32, 16 propagations, two-layer MLPs, mean
    aggregation) and action space (k levels, learned groups: Table 3's best row).

    ``encoder``: ``"gnn"`` (REGAL) or ``"lstm"`` (GAS, graph-as-sequence).
    """

    num_devices: int = 2
    encoder: str = "gnn"
    hidden: int = 32
    steps: int = 16
    mlp_layers: int = 2
    aggregation: str = "mean"
    levels: int = 2
    learned: tuple[str, ...] = ("placement", "scheduling")

    def __post_init__(self):
        if self.encoder not in ENCODERS:
            raise ValueError(f"encoder must be one of {ENCODERS}, got {self.encoder!r}")
        if self.hidden < 1 or self.mlp_layers < 1:
            raise ValueError("hidden and mlp_layers must be >= 1")
        object.__setattr__(self, "learned", tuple(self.learned))
        self.space  # validates the action space

    @property
    def space(self) -> ActionSpace:
        return ActionSpace(self.num_devices, self.levels, self.learned)


def _encoder(config: PolicyConfig, key: jax.Array):
    features = num_node_features(config.num_devices)
    if config.encoder == "gnn":
        return GNN(features, NUM_EDGE_FEATURES, hidden=config.hidden, steps=config.steps,
                   mlp_layers=config.mlp_layers, aggregation=config.aggregation, key=key)
    return SequenceEncoder(features, hidden=config.hidden, mlp_layers=config.mlp_layers, key=key)


class Policy(eqx.Module):
    """Encoder + shared action head ``MLP_y``."""

    encoder: eqx.Module
    head: MLP
    space: ActionSpace = eqx.field(static=True)

    def __init__(self, config: PolicyConfig, key: jax.Array):
        key_encoder, key_head = jax.random.split(key)
        self.space = config.space
        self.encoder = _encoder(config, key_encoder)
        self.head = mlp(config.hidden, config.hidden, self.space.num_vars * self.space.levels,
                        config.mlp_layers, key_head)

    def __call__(self, graph: PaddedGraph, features: Features) -> jnp.ndarray:
        """One graph → action logits ``[N, num_vars, k]``."""
        h = self.encoder(graph, features.nodes, features.edges)
        return self.head(h).reshape(h.shape[0], self.space.num_vars, self.space.levels)


class Baseline(eqx.Module):
    """``b(G) = MLP_b(mean over real nodes of MLP_g(h_v))`` on its own encoder (eq. 9)."""

    encoder: eqx.Module
    node_head: MLP
    graph_head: MLP

    def __init__(self, config: PolicyConfig, key: jax.Array):
        keys = jax.random.split(key, 3)
        self.encoder = _encoder(config, keys[0])
        self.node_head = mlp(config.hidden, config.hidden, config.hidden, config.mlp_layers,
                             keys[1])
        head = mlp(config.hidden, config.hidden, 1, config.mlp_layers, keys[2])
        # Start at b(G) = −1, the reward of matching uniform BRKGA: with λ = 1e-4 and Adam the
        # baseline moves ~lr per step, so starting at 0 would bias early advantages by +1.
        last = head.layers[-1]
        self.graph_head = eqx.tree_at(lambda m: m.layers[-1].bias, head,
                                      jnp.full_like(last.bias, INITIAL_BASELINE))

    def __call__(self, graph: PaddedGraph, features: Features) -> jnp.ndarray:
        """One graph → ``[]`` predicted reward."""
        h = self.node_head(self.encoder(graph, features.nodes, features.edges))
        mask = graph.op_mask[:, None].astype(jnp.float32)
        pooled = (h * mask).sum(0) / jnp.maximum(mask.sum(), 1.0)
        return self.graph_head(pooled)[0]


def sample_actions(key: jax.Array, logits: jnp.ndarray) -> jnp.ndarray:
    """``logits [..., V, k]`` → sampled levels ``[..., V]`` int32."""
    return jax.random.categorical(key, logits).astype(jnp.int32)


def mode_actions(logits: jnp.ndarray) -> jnp.ndarray:
    """The most likely level of every variable (greedy decoding)."""
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)


def log_prob(logits: jnp.ndarray, actions: jnp.ndarray, op_mask: jnp.ndarray) -> jnp.ndarray:
    """``log p(y | G)`` of one graph: logits ``[N, V, k]``, actions ``[N, V]`` → ``[]``,
    summed over real nodes only."""
    logp = jax.nn.log_softmax(logits, axis=-1)
    chosen = jnp.take_along_axis(logp, actions[..., None], axis=-1)[..., 0]
    return jnp.sum(jnp.where(op_mask[:, None], chosen, 0.0))


def entropy(logits: jnp.ndarray, op_mask: jnp.ndarray) -> jnp.ndarray:
    """Mean entropy per real node variable (a training diagnostic)."""
    logp = jax.nn.log_softmax(logits, axis=-1)
    per_var = -(jnp.exp(logp) * logp).sum(-1)
    mask = jnp.broadcast_to(op_mask[:, None], per_var.shape)
    return jnp.sum(jnp.where(mask, per_var, 0.0)) / jnp.maximum(mask.sum(), 1)
