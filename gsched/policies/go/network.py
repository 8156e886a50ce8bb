"""The GDP / GO policy network (GDP §3, GO §4, Fig. 3–4): one graph in, per-node logits out.

::

    h0 = concat(node_features, Embedding(op_type_ids))            [N, F + type_embed]
    x0 = concat(GraphSAGE(h0), h0)                                [N, gs_dim + F + type_embed]
    — from here on, nodes in topological order (padded nodes last) —
    h  = Linear(concat(x0, previous))                             [N, d_model]
    H0 = segment_recurrent(trf_layers Transformer-XL layers, h)   the decision network
    logits_t = Head_t(H0)                                         without ``multitask``
    H_t = LN(H_{t−1} + P_t(concat(A_{t−1}, H_{t−1})))              with ``multitask`` (GO eq. 5)
    logits_t = Head_t(MHA(H_t)),  A_t = softmax(logits_t)         (GO eq. 6)
    value = MLP(mean of H0 over real ops)

* ``previous [N, A]`` (GO eq. 2's ``y^(t−1)``): the one-hot actions of the previous round,
  concatenated in task order (:func:`encode_actions`), all zeros in the first round.
* ``Head_t`` is GO's FC: ``Linear(d_model, d_inner) → ReLU → Linear(d_inner, K_t)``.
* **Multi-task layers** (GO §4.4): one per task, in ``tasks`` order. The attention ``MHA`` —
  a segment-recurrent post-LN :class:`~.attention.SegmentAttention`, residual and LN included
  — is *shared* by all tasks; the projection ``P_t`` (``K_{t−1} + d_model → d_model``), its LN
  and ``Head_t`` are per task. Eq. 5's ``LN(Concat(A, H))`` would change the width per task,
  so the concat is projected back to ``d_model`` and ``H_{t−1}`` added as a residual. The
  first task has no ``A_0`` (``P_1`` reads ``H0`` alone). ``A_t`` is the softmax of task t's
  logits (a deterministic function of the graph, so the three tasks' log-probabilities
  stay independent given the graph, as PPO's ratio needs).
* **Superposition** (GDP eq. 5): the conditioning ``c`` is one extra segment-recurrent
  Transformer-XL layer over ``Linear(x0)``; each modulated dense input gets the per-node gain
  ``1 + Linear(c)`` (own map each). Modulated: every dense layer of the decision network after
  its input projection — the Transformer-XL layers (q/k/v, output projection, both FFN
  layers), the multi-task attention (gains per task, its weights shared), the ``P_t`` and
  the heads. Not modulated: GraphSAGE, the input projection and the value head.
* Logits are 0 on padded ops; padding never changes real ops' logits or the value.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from gsched.core.padding import PaddedGraph, topological_rank
from gsched.policies.go.attention import (
    Gains,
    SegmentAttention,
    TransformerXLLayer,
    dense,
    segment_recurrent,
)
from gsched.policies.go.features import (
    NUM_NODE_FEATURES,
    OP_TYPE_VOCAB,
    node_features,
    op_type_ids,
)
from gsched.policies.go.graphsage import GraphSAGE

TASKS = ("placement", "schedule", "fusion")


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """Network sizes; defaults = GDP Table 3 (the ``full`` config)."""

    gs_layers: int = 4
    gs_knn: int = 5
    gs_dim: int = 128
    trf_layers: int = 2
    d_model: int = 128
    n_head: int = 5
    d_head: int = 25
    d_inner: int = 256
    segment: int = 128  # nodes per segment (a power of two)
    type_embed: int = 16  # op-type embedding width (0: no op types)
    superposition: bool = True
    multitask: bool = True  # GO's multi-task recurrent attention layers

    def __post_init__(self):
        for name in ("gs_layers", "gs_knn", "gs_dim", "trf_layers", "d_model", "n_head",
                     "d_head", "d_inner", "segment"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if self.segment & (self.segment - 1):
            raise ValueError(f"segment must be a power of two, got {self.segment}")
        if (not isinstance(self.type_embed, int) or isinstance(self.type_embed, bool)
                or self.type_embed < 0):
            raise ValueError(f"type_embed must be an int >= 0, got {self.type_embed!r}")
        for name in ("superposition", "multitask"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")


CPU_CONFIG = NetworkConfig(gs_layers=2, gs_dim=32, trf_layers=1, d_model=32, n_head=2,
                           d_head=16, d_inner=64, segment=32)


def check_tasks(tasks: tuple[str, ...], num_actions: tuple[int, ...]) -> None:
    """Raises ``ValueError`` unless ``tasks`` is a non-empty subsequence of :data:`TASKS` and
    ``num_actions`` gives each an int ≥ 1."""
    if not tasks or tuple(t for t in TASKS if t in tasks) != tuple(tasks):
        raise ValueError(f"tasks must be a non-empty subsequence of {TASKS}, got {tasks!r}")
    if len(num_actions) != len(tasks) or not all(
            isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in num_actions):
        raise ValueError(f"num_actions must give an int >= 1 for each of {tasks}, "
                         f"got {num_actions!r}")


def encode_actions(actions: tuple[jnp.ndarray, ...], num_actions: tuple[int, ...],
                   op_mask: jnp.ndarray) -> jnp.ndarray:
    """``[N, A]`` float32: the one-hot ``actions`` (``[N]`` int32 per task) concatenated in task
    order (``A = Σ num_actions``), zero rows on padded ops (``op_mask [N]``)."""
    one_hot = jnp.concatenate([jax.nn.one_hot(a, k, dtype=jnp.float32)
                               for a, k in zip(actions, num_actions)], axis=-1)
    return jnp.where(op_mask[:, None], one_hot, 0.0)


def embedding_size(config: NetworkConfig) -> int:
    """Width of a node's embedding ``x0``: GraphSAGE's output and, as a skip connection, the
    node's own input features ``h0`` (GraphSAGE's sigmoid max-pool layers shrink the
    differences between nodes — at initialization to ~0.2 of the inputs' relative spread —
    and a non-autoregressive placer needs them to tell parallel ops apart)."""
    return config.gs_dim + NUM_NODE_FEATURES + config.type_embed


class Head(eqx.Module):
    """GO's FC: ``Linear(d, d_inner) → ReLU → Linear(d_inner, K)``, position-wise."""

    hidden: eqx.nn.Linear
    out: eqx.nn.Linear

    def __init__(self, d_model: int, d_inner: int, num_actions: int, key: jax.Array):
        k_hidden, k_out = jax.random.split(key)
        self.hidden = eqx.nn.Linear(d_model, d_inner, key=k_hidden)
        self.out = eqx.nn.Linear(d_inner, num_actions, key=k_out)

    @property
    def gain_sizes(self) -> tuple[int, int]:
        return self.hidden.in_features, self.out.in_features

    def __call__(self, x: jnp.ndarray, gains: Gains | None = None) -> jnp.ndarray:
        """``x [N, d]`` → ``[N, K]``."""
        g = gains if gains is not None else (None, None)
        return dense(self.out, jax.nn.relu(dense(self.hidden, x, g[0])), g[1])


class TaskLayer(eqx.Module):
    """Task t's own parts of GO's recurrent attention layer: ``P_t``, its LN, ``Head_t``."""

    project: eqx.nn.Linear
    norm: eqx.nn.LayerNorm
    head: Head

    def __init__(self, d_model: int, d_inner: int, previous_actions: int, num_actions: int,
                 key: jax.Array):
        k_project, k_head = jax.random.split(key)
        self.project = eqx.nn.Linear(previous_actions + d_model, d_model, key=k_project)
        self.norm = eqx.nn.LayerNorm(d_model)
        self.head = Head(d_model, d_inner, num_actions, k_head)


class Conditioning(eqx.Module):
    """GDP eq. 5's ``c(x0)``: one Transformer-XL layer, then a linear map per modulated input."""

    project: eqx.nn.Linear
    layer: TransformerXLLayer
    maps: tuple[tuple[eqx.nn.Linear, ...], ...]  # per modulated module, per dense input

    def __init__(self, config: NetworkConfig, groups: tuple[tuple[int, ...], ...],
                 key: jax.Array):
        k_project, k_layer, k_maps = jax.random.split(key, 3)
        c = config
        self.project = eqx.nn.Linear(embedding_size(c), c.d_model, key=k_project)
        self.layer = TransformerXLLayer(c.d_model, c.n_head, c.d_head, c.d_inner, key=k_layer)
        keys = iter(jax.random.split(k_maps, sum(len(g) for g in groups)))
        self.maps = tuple(tuple(eqx.nn.Linear(c.d_model, size, key=next(keys)) for size in g)
                          for g in groups)

    def __call__(self, x0: jnp.ndarray, mask: jnp.ndarray, segment: int
                 ) -> tuple[Gains, ...]:
        """``x0 [N, embedding_size]`` in topological order → per module, its gains ``[N, size]``."""
        c = segment_recurrent((self.layer,), dense(self.project, x0), mask, segment)
        return tuple(tuple(1.0 + dense(m, c) for m in group) for group in self.maps)


class Embedded(NamedTuple):
    """One graph's embedding, nodes in topological order."""

    x0: jnp.ndarray  # [N, embedding_size] GraphSAGE output and the node's own features
    op_mask: jnp.ndarray  # [N] bool
    rank: jnp.ndarray  # [N] int32: op j sits at row rank[j]
    order: jnp.ndarray  # [N] int32: row i holds op order[i]


class PolicyNetwork(eqx.Module):
    """GDP's placer (one task, no ``multitask``) or GO's multi-task policy; see the module doc."""

    type_embedding: eqx.nn.Embedding | None
    graphsage: GraphSAGE
    input_projection: eqx.nn.Linear
    layers: tuple[TransformerXLLayer, ...]
    task_attention: SegmentAttention | None  # shared by the tasks (multitask only)
    task_layers: tuple[TaskLayer, ...] | None  # multitask only
    heads: tuple[Head, ...] | None  # without multitask
    conditioning: Conditioning | None
    value_head: tuple[eqx.nn.Linear, eqx.nn.Linear]
    config: NetworkConfig = eqx.field(static=True)
    tasks: tuple[str, ...] = eqx.field(static=True)
    num_actions: tuple[int, ...] = eqx.field(static=True)

    def __init__(self, config: NetworkConfig, *, tasks: tuple[str, ...],
                 num_actions: tuple[int, ...], key: jax.Array):
        tasks, num_actions = tuple(tasks), tuple(num_actions)
        check_tasks(tasks, num_actions)
        c = config
        keys = jax.random.split(key, 9)
        self.config, self.tasks, self.num_actions = config, tasks, num_actions
        self.type_embedding = (eqx.nn.Embedding(OP_TYPE_VOCAB, c.type_embed, key=keys[0])
                               if c.type_embed else None)
        self.graphsage = GraphSAGE(NUM_NODE_FEATURES + c.type_embed, gs_layers=c.gs_layers,
                                   gs_dim=c.gs_dim, gs_knn=c.gs_knn, key=keys[1])
        self.input_projection = eqx.nn.Linear(embedding_size(c) + sum(num_actions), c.d_model,
                                              key=keys[2])
        self.layers = tuple(TransformerXLLayer(c.d_model, c.n_head, c.d_head, c.d_inner, key=k)
                            for k in jax.random.split(keys[3], c.trf_layers))
        task_keys = jax.random.split(keys[4], len(tasks))
        if c.multitask:
            self.task_attention = SegmentAttention(c.d_model, c.n_head, c.d_head, key=keys[5])
            self.task_layers = tuple(TaskLayer(c.d_model, c.d_inner, prev, k, key)
                                     for prev, k, key in zip((0,) + num_actions[:-1],
                                                             num_actions, task_keys))
            self.heads = None
        else:
            self.task_attention = self.task_layers = None
            self.heads = tuple(Head(c.d_model, c.d_inner, k, key)
                               for k, key in zip(num_actions, task_keys))
        self.conditioning = (Conditioning(config, self.gain_groups, keys[6])
                             if c.superposition else None)
        self.value_head = (eqx.nn.Linear(c.d_model, c.d_model, key=keys[7]),
                           eqx.nn.Linear(c.d_model, 1, key=keys[8]))

    @property
    def gain_groups(self) -> tuple[tuple[int, ...], ...]:
        """Input sizes of the modulated dense layers, per module, in the order :meth:`__call__`
        consumes them: each Transformer-XL layer, then per task (attention, ``P_t``, head)
        with ``multitask`` or its head without."""
        groups = [layer.gain_sizes for layer in self.layers]
        if self.task_layers is not None:
            for task in self.task_layers:
                groups += [self.task_attention.gain_sizes, (task.project.in_features,),
                           task.head.gain_sizes]
        else:
            groups += [head.gain_sizes for head in self.heads]
        return tuple(groups)

    def embed(self, graph: PaddedGraph) -> Embedded:
        """GraphSAGE on the node features concatenated with the features themselves
        (:func:`embedding_size`), rows sorted in topological order."""
        h0 = node_features(graph)
        if self.type_embedding is not None:
            types = self.type_embedding.weight[op_type_ids(graph)]
            h0 = jnp.concatenate([h0, jnp.where(graph.op_mask[:, None], types, 0.0)], -1)
        x0 = jnp.concatenate([self.graphsage(graph, h0), h0], -1)  # skip of the inputs
        rank = topological_rank(graph)
        order = jnp.zeros_like(rank).at[rank].set(jnp.arange(rank.shape[0], dtype=jnp.int32))
        return Embedded(x0[order], graph.op_mask[order], rank, order)

    def gains(self, graph: PaddedGraph) -> tuple[Gains, ...] | None:
        """The superposition gains (``[N, size]`` each, rows in topological order), grouped
        as :attr:`gain_groups`; None without ``superposition``."""
        if self.conditioning is None:
            return None
        embedded = self.embed(graph)
        return self.conditioning(embedded.x0, embedded.op_mask, self.config.segment)

    def __call__(self, graph: PaddedGraph, previous: jnp.ndarray
                 ) -> tuple[tuple[jnp.ndarray, ...], jnp.ndarray]:
        """One graph (no batch axis), ``previous [N, A]`` → (per task ``[N, K_t]`` logits,
        0 on padded ops; the value, a float32 scalar)."""
        segment = self.config.segment
        x0, mask, rank, order = self.embed(graph)
        gains = (iter(self.conditioning(x0, mask, segment)) if self.conditioning is not None
                 else None)

        def take(count: int) -> tuple[Gains | None, ...]:
            """The next ``count`` modules' gains (None each without superposition)."""
            return (None,) * count if gains is None else tuple(next(gains) for _ in range(count))

        h = dense(self.input_projection, jnp.concatenate([x0, previous[order]], -1))
        hidden = segment_recurrent(self.layers, h, mask, segment, take(len(self.layers)))
        logits = []
        if self.task_layers is None:
            for head in self.heads:
                logits.append(head(hidden, *take(1)))
        else:
            h = hidden
            for task in self.task_layers:
                attention_gains, project_gains, head_gains = take(3)
                actions = jax.nn.softmax(logits[-1], axis=-1) if logits else h[:, :0]
                mixed = dense(task.project, jnp.concatenate([actions, h], -1),
                              None if project_gains is None else project_gains[0])
                h = jax.vmap(task.norm)(h + mixed)
                attended = segment_recurrent((self.task_attention,), h, mask, segment,
                                             (attention_gains,))
                logits.append(task.head(attended, head_gains))
        weights = mask.astype(hidden.dtype)[:, None]
        pooled = jnp.sum(hidden * weights, 0) / jnp.maximum(jnp.sum(weights), 1.0)
        first, last = self.value_head
        value = dense(last, jax.nn.relu(dense(first, pooled)))[0]
        return (tuple(jnp.where(graph.op_mask[:, None], x[rank], 0.0) for x in logits), value)
