"""Synthetic graph generators and dataset utilities.

- :func:`layered_graph`: NTO appendix A layered graphs (:mod:`gsched.generators.layered`).
- :func:`random_computation_graph`: REGAL-style random computation graphs
  (:mod:`gsched.generators.random_graphs`).
- :func:`augment`, :func:`dedup`, :func:`split_by_topology`, :func:`synthetic_dataset`:
  REGAL A.1 datasets (:mod:`gsched.generators.datasets`).
"""

from gsched.generators.datasets import (
    augment,
    dedup,
    split_by_topology,
    synthetic_dataset,
)
from gsched.generators.layered import MOCCASIN_COSTS, as_rng, layered_graph
from gsched.generators.random_graphs import RandomGraphParams, random_computation_graph

__all__ = [
    "MOCCASIN_COSTS",
    "RandomGraphParams",
    "as_rng",
    "augment",
    "dedup",
    "layered_graph",
    "random_computation_graph",
    "split_by_topology",
    "synthetic_dataset",
]
