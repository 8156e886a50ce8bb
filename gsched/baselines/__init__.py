"""Classical (non-learned) baselines: XLA's memory schedulers and REGAL's GP + DFS."""

from gsched.baselines.heuristics import (EVALUATIONS, HEURISTICS, default_schedule, dfs_schedule, gp_dfs,
                                         kl_partition, list_schedule, post_order_schedule,
                                         transfer_bytes)

__all__ = ["EVALUATIONS", "HEURISTICS", "default_schedule", "dfs_schedule", "gp_dfs", "kl_partition",
           "list_schedule", "post_order_schedule", "transfer_bytes"]
