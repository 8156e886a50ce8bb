"""The topological relations of a DAG that Topoformer's attention heads are masked by (NTO §4.1).

On a padded graph (one example; ``jax.vmap`` for batches) with ``N`` op slots:

* ``A`` — the DAG: ``A[i, j]`` iff op ``j`` consumes some tensor of op ``i`` (one entry per
  distinct op pair, control dependencies included, padding excluded);
* ``C`` — its transitive closure, by repeated boolean squaring ``C ← C ∨ C·C`` (a
  ``while_loop`` until nothing changes: ⌈log₂ longest path⌉ + 1 matrix products);
* ``TR = A ∧ ¬(A·C)`` — the transitive reduction (an edge is redundant iff a longer path joins
  its ends; a DAG's reduction is unique and a subset of its edges).

The seven relations of the paper partition the ordered pairs ``(i, j), i ≠ j`` of real ops:
``TR``, ``A \\ TR``, ``C \\ A``, the three reversed, and the incomparable pairs. Masks are in
attention layout, ``mask[i, j]`` = op ``i`` receives from (attends to) op ``j``: a *forward*
relation ``R`` lets ``i`` attend to its ``R``-predecessors (``Rᵀ``), a backward one to its
``R``-successors (``R``). Besides the seven, the ablation encoders of Table 3 use ``dag_fwd``
/ ``dag_bwd`` (the DAG's edges), ``dag_undirected`` (both) and ``all`` (every real pair,
self included: a plain Transformer). ``ENCODERS`` names each Table 3 row's relation set.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gsched.core.padding import PaddedGraph

TOPOLOGICAL_RELATIONS = (
    "tr_fwd", "tr_bwd", "dag_minus_tr_fwd", "dag_minus_tr_bwd",
    "closure_minus_dag_fwd", "closure_minus_dag_bwd", "incomparable",
)
RELATIONS = TOPOLOGICAL_RELATIONS + ("dag_fwd", "dag_bwd", "dag_undirected", "all")

# The encoders of NTO Table 3, as the relation groups their attention heads are masked by.
# "gat_*" are dot-product attention restricted to the DAG's edges (one shared head group),
# standing in for the paper's GAT layers; "mlp" has no attention at all.
ENCODERS: dict[str, tuple[str, ...]] = {
    "mlp": (),
    "transformer": ("all",),
    "gat_forward": ("dag_fwd",),
    "gat_forward_backward": ("dag_undirected",),
    "topoformer_forward_backward": ("dag_fwd", "dag_bwd"),
    "topoformer": TOPOLOGICAL_RELATIONS,
}


def check_relations(relations: tuple[str, ...]) -> None:
    """Raises ``ValueError`` for an unknown or repeated relation name."""
    unknown = [r for r in relations if r not in RELATIONS]
    if unknown:
        raise ValueError(f"unknown relation(s) {unknown}; expected names from {RELATIONS}")
    if len(set(relations)) != len(relations):
        raise ValueError(f"relations {relations} repeat a name")


def op_adjacency(graph: PaddedGraph) -> jnp.ndarray:
    """``[N, N]`` bool: ``A[i, j]`` iff op ``j`` consumes a tensor of op ``i`` (real ops only)."""
    n = graph.op_mask.shape[-1]
    return (jnp.zeros((n, n), bool)
            .at[graph.pair_producer, graph.pair_consumer].max(graph.pair_mask))


def _bool_matmul(a: jnp.ndarray, b: jnp.ndarray) -> jnp.ndarray:
    # Path counts are exact in float32 below 2**24 ops; only "> 0" is used.
    return (a.astype(jnp.float32) @ b.astype(jnp.float32)) > 0


def transitive_closure(adjacency: jnp.ndarray) -> jnp.ndarray:
    """``[N, N]`` bool: ``C[i, j]`` iff a non-empty path leads from ``i`` to ``j``."""

    def body(state):
        closure, _ = state
        grown = closure | _bool_matmul(closure, closure)
        return grown, jnp.any(grown != closure)

    closure, _ = jax.lax.while_loop(lambda s: s[1], body, (adjacency, jnp.bool_(True)))
    return closure


def relation_masks(graph: PaddedGraph, relations: tuple[str, ...]) -> jnp.ndarray:
    """``[R, N, N]`` bool attention masks (``mask[r, i, j]``: ``i`` attends to ``j``) for the
    named relations, padding excluded. Only what the names need is computed."""
    check_relations(relations)
    n = graph.op_mask.shape[-1]
    if not relations:
        return jnp.zeros((0, n, n), bool)
    real = graph.op_mask
    pairs = real[:, None] & real[None, :]
    dag = op_adjacency(graph)
    needs_closure = any(r.startswith(("tr", "dag_minus", "closure")) or r == "incomparable"
                        for r in relations)
    closure = transitive_closure(dag) if needs_closure else None
    reduction = dag & ~_bool_matmul(dag, closure) if needs_closure else None
    off_diagonal = pairs & ~jnp.eye(n, dtype=bool)

    def graph_of(name):  # directed "i → j" matrices; forward masks are their transposes
        if name.startswith("tr_"):
            return reduction
        if name.startswith("dag_minus_tr_"):
            return dag & ~reduction
        if name.startswith("closure_minus_dag_"):
            return closure & ~dag
        return dag

    masks = []
    for name in relations:
        if name == "incomparable":
            masks.append(off_diagonal & ~closure & ~closure.T)
        elif name == "all":
            masks.append(pairs)
        elif name == "dag_undirected":
            masks.append(dag | dag.T)
        elif name.endswith("_fwd"):
            masks.append(graph_of(name).T)
        else:
            masks.append(graph_of(name))
    return jnp.stack(masks)
