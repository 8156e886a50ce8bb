"""Dataset utilities of REGAL appendix A.1: augmentation, topology dedup and 3:1:1 splits.

- :func:`augment`: "we make 99 copies of [each graph] and multiply each tensor size with a
  uniform sampled number in the interval (0.5, 1.5) (one sample per tensor size per copy)".
  Sizes stay whole bytes (rounded, and a non-zero size stays ≥ 1); control tensors stay 0.
- :func:`dedup`: "we deduplicate the dataset by graph topology" (:meth:`Graph.topology_hash`).
- :func:`split_by_topology`: "selecting a set of 5 graphs from a list of graphs sorted by number
  of nodes, and splitting them as 3-1-1 across the three sets". Graphs sharing a topology
  (e.g. augmented copies) form one unit, so the splits are topology-disjoint. The paper does
  not say which member of a group of 5 goes where; we assign the roles at random within each
  group (a fixed pattern would make test graphs systematically the largest). A last, partial
  group of ``k < 5`` units gets the first ``k`` roles of (train, train, train, valid, test).
"""

from __future__ import annotations

import numpy as np

from gsched.core.graph import Graph
from gsched.generators.layered import as_rng, layered_graph
from gsched.generators.random_graphs import random_computation_graph

_ROLES = (0, 0, 0, 1, 2)  # train, train, train, valid, test


def augment(graph: Graph, num_copies: int, rng_or_seed=None) -> list[Graph]:
    """``num_copies`` copies of ``graph`` (named ``{name}_aug{k}``), every tensor size times an
    independent ``U(0.5, 1.5)`` factor, rounded to whole bytes; the original is not included."""
    rng = as_rng(rng_or_seed)
    size = graph.tensor_size
    copies = []
    for k in range(num_copies):
        scaled = np.rint(size * rng.uniform(0.5, 1.5, size.shape))
        copies.append(graph.replace(tensor_size=np.where(size > 0, np.maximum(scaled, 1.0), 0.0),
                                    name=f"{graph.name}_aug{k}"))
    return copies


def dedup(graphs: list[Graph]) -> list[Graph]:
    """The first graph of each topology, in input order."""
    seen, out = set(), []
    for g in graphs:
        h = g.topology_hash()
        if h not in seen:
            seen.add(h)
            out.append(g)
    return out


def split_by_topology(graphs: list[Graph], rng_or_seed=0
                      ) -> tuple[list[Graph], list[Graph], list[Graph]]:
    """REGAL's topology-disjoint ``(train, valid, test)`` split, 3:1:1 in topologies.

    Topologies are sorted by op count (stable, first appearance breaks ties) and cut into
    consecutive groups of 5; every graph follows its topology. Within a split, graphs come in
    sorted-topology order, each topology's graphs in input order.
    """
    rng = as_rng(rng_or_seed)
    units: dict[str, list[Graph]] = {}
    for g in graphs:
        units.setdefault(g.topology_hash(), []).append(g)
    ordered = sorted(units.values(), key=lambda members: members[0].num_ops)
    splits: tuple[list[Graph], list[Graph], list[Graph]] = ([], [], [])
    for start in range(0, len(ordered), 5):
        group = ordered[start:start + 5]
        roles = rng.permutation(_ROLES[:len(group)])
        for members, role in zip(group, roles):
            splits[role].extend(members)
    return splits


def synthetic_dataset(kind: str, num_graphs: int, num_ops_range: tuple[int, int], seed: int,
                      augment_copies: int = 0) -> dict[str, list[Graph]]:
    """``{'train', 'valid', 'test'}`` lists of synthetic graphs.

    Draws ``num_graphs`` graphs of ``kind`` ``'regal'`` (:func:`random_computation_graph`) or
    ``'layered'`` (:func:`layered_graph`, paper defaults) with op counts uniform in the
    inclusive ``num_ops_range``, drops repeated topologies, splits them with
    :func:`split_by_topology` and, if ``augment_copies > 0``, follows each graph in its split
    by that many :func:`augment` copies. Graph ``i`` is named ``"{kind}_{i}"``.
    """
    makers = {"regal": random_computation_graph, "layered": layered_graph}
    if kind not in makers:
        raise ValueError(f"kind must be one of {sorted(makers)}, got {kind!r}")
    lo, hi = num_ops_range
    size_seed, split_seed, aug_seed, *graph_seeds = np.random.SeedSequence(seed).spawn(
        num_graphs + 3)
    sizes = as_rng(size_seed).integers(lo, hi + 1, num_graphs)
    graphs = [makers[kind](int(n), as_rng(s), name=f"{kind}_{i}")
              for i, (n, s) in enumerate(zip(sizes, graph_seeds))]
    splits = split_by_topology(dedup(graphs), as_rng(split_seed))
    aug_rng = as_rng(aug_seed)
    return {
        name: [copy for g in split for copy in [g, *augment(g, augment_copies, aug_rng)]]
        for name, split in zip(("train", "valid", "test"), splits)
    }
