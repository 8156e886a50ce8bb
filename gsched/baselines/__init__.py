"""Classical (non-learned) baselines: XLA's memory schedulers, REGAL's GP + DFS, and Neural
Topological Ordering's single-device orderings and dynamic programs (§5, C.3)."""

from gsched.baselines.dp import (
                                         ApproxDPResult,
                                         DFSDPResult,
                                         approx_dp,
                                         approx_dp_batch,
                                         beam_orders,
                                         dfs_dp,
                                         exact_order,
)
from gsched.baselines.heuristics import (
                                         EVALUATIONS,
                                         HEURISTICS,
                                         default_schedule,
                                         dfs_schedule,
                                         gp_dfs,
                                         kl_partition,
                                         list_schedule,
                                         post_order_schedule,
                                         transfer_bytes,
)
from gsched.baselines.ordering import (
                                         best_random_order,
                                         bfs_order,
                                         dfs_order,
                                         random_topological_orders,
)

__all__ = ["ApproxDPResult", "DFSDPResult", "approx_dp", "approx_dp_batch", "beam_orders",
           "best_random_order", "bfs_order", "dfs_dp", "dfs_order", "exact_order",
           "random_topological_orders",
           "EVALUATIONS", "HEURISTICS", "default_schedule", "dfs_schedule", "gp_dfs", "kl_partition",
           "list_schedule", "post_order_schedule", "transfer_bytes"]
