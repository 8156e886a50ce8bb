"""Encoders that turn a padded graph's features into node representations ``h_v``.

* :class:`GNN` — REGAL eqs. 1–5: node and edge encoders, forward messages ``MLP_msg`` and
  backward messages ``MLP'_msg`` on every (producer, tensor, consumer) edge, node updates
  ``MLP_node``, ``T`` propagation steps with shared weights (a ``lax.scan``, not unrolled).
  Aggregation ``"sum"`` is eq. 5; ``"mean"`` (A.5's best model) divides by the node's
  number of incident edges. Padded edges send nothing.
* :class:`SequenceEncoder` — the GAS baseline (REGAL §4.2): the node encoder, then an LSTM
  (A.3 eqs. 13–18) over the nodes in a topological order, no graph structure. Padded nodes come
  after every real node, so they cannot reach a real node's state.

Both map one graph (no batch axis; ``vmap`` for batches) to ``[N, hidden]``.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from gsched.core.padding import PaddedGraph, topological_rank


class MLP(eqx.Module):
    """A.3 eq. 10: ``Linear → ReLU → … → Linear`` (no activation after the last layer)."""

    layers: tuple[eqx.nn.Linear, ...]

    def __init__(self, sizes: tuple[int, ...], key: jax.Array):
        keys = jax.random.split(key, len(sizes) - 1)
        self.layers = tuple(eqx.nn.Linear(a, b, key=k)
                            for a, b, k in zip(sizes[:-1], sizes[1:], keys))

    def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
        """``x [..., in]`` → ``[..., out]``."""
        for i, layer in enumerate(self.layers):
            x = x @ layer.weight.T + layer.bias
            if i < len(self.layers) - 1:
                x = jax.nn.relu(x)
        return x


def mlp(in_size: int, hidden: int, out_size: int, layers: int, key: jax.Array) -> MLP:
    """``layers`` linear layers, hidden width ``hidden``."""
    return MLP((in_size,) + (hidden,) * (layers - 1) + (out_size,), key)


class GNN(eqx.Module):
    """REGAL's message-passing network (eqs. 1–5)."""

    node_encoder: MLP
    edge_encoder: MLP
    forward_message: MLP
    backward_message: MLP
    node_update: MLP
    steps: int = eqx.field(static=True)
    aggregation: str = eqx.field(static=True)

    def __init__(self, node_features: int, edge_features: int, *, hidden: int, steps: int,
                 mlp_layers: int, aggregation: str, key: jax.Array):
        if aggregation not in ("sum", "mean"):
            raise ValueError(f"aggregation must be 'sum' or 'mean', got {aggregation!r}")
        if steps < 0:
            raise ValueError(f"steps must be >= 0, got {steps}")
        keys = jax.random.split(key, 5)
        self.node_encoder = mlp(node_features, hidden, hidden, mlp_layers, keys[0])
        self.edge_encoder = mlp(edge_features, hidden, hidden, mlp_layers, keys[1])
        self.forward_message = mlp(3 * hidden, hidden, hidden, mlp_layers, keys[2])
        self.backward_message = mlp(3 * hidden, hidden, hidden, mlp_layers, keys[3])
        self.node_update = mlp(2 * hidden, hidden, hidden, mlp_layers, keys[4])
        self.steps, self.aggregation = steps, aggregation

    def __call__(self, graph: PaddedGraph, nodes: jnp.ndarray, edges: jnp.ndarray
                 ) -> jnp.ndarray:
        """One graph: ``nodes [N, F]``, ``edges [E, 2]`` → ``h [N, hidden]``."""
        n = nodes.shape[0]
        sender = graph.tensor_producer[graph.edge_tensor]
        receiver = graph.edge_consumer
        edge_mask = graph.edge_mask[:, None].astype(jnp.float32)
        h_edge = self.edge_encoder(edges)
        degree = jnp.zeros(n, jnp.float32).at[sender].add(edge_mask[:, 0]).at[receiver].add(
            edge_mask[:, 0])
        norm = 1.0 / jnp.maximum(degree, 1.0) if self.aggregation == "mean" else jnp.ones(n)

        def propagate(h, _):
            inputs = jnp.concatenate([h[sender], h[receiver], h_edge], axis=-1)
            incoming = self.forward_message(inputs) * edge_mask  # to the receiver
            outgoing = self.backward_message(inputs) * edge_mask  # to the sender
            total = jnp.zeros_like(h).at[receiver].add(incoming).at[sender].add(outgoing)
            return self.node_update(jnp.concatenate([h, total * norm[:, None]], -1)), None

        h, _ = jax.lax.scan(propagate, self.node_encoder(nodes), None, length=self.steps)
        return h


class SequenceEncoder(eqx.Module):
    """GAS: node encoder + LSTM over the topologically sorted nodes."""

    node_encoder: MLP
    cell: eqx.nn.LSTMCell

    def __init__(self, node_features: int, *, hidden: int, mlp_layers: int, key: jax.Array):
        key_encoder, key_cell = jax.random.split(key)
        self.node_encoder = mlp(node_features, hidden, hidden, mlp_layers, key_encoder)
        self.cell = eqx.nn.LSTMCell(hidden, hidden, key=key_cell)

    def __call__(self, graph: PaddedGraph, nodes: jnp.ndarray, edges: jnp.ndarray
                 ) -> jnp.ndarray:
        """One graph: ``nodes [N, F]`` (``edges`` unused: a sequence model) → ``[N, hidden]``."""
        del edges
        rank = topological_rank(graph)
        order = jnp.zeros_like(rank).at[rank].set(jnp.arange(rank.shape[0], dtype=jnp.int32))
        x = self.node_encoder(nodes)[order]
        hidden = self.cell.hidden_size
        state = (jnp.zeros(hidden), jnp.zeros(hidden))

        def step(state, x_t):
            state = self.cell(x_t, state)
            return state, state[0]

        _, h = jax.lax.scan(step, state, x)
        return h[rank]
