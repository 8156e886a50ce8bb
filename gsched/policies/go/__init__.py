"""GDP (Zhou et al., "GDP: Generalized Device Placement") and GO (Zhou et al., "Transferable
Graph Optimizers for ML Compilers"): a GraphSAGE + segment-recurrent attention policy that
decides every node's placement, scheduling priority and fusion priority in one pass.

* :mod:`~gsched.policies.go.features` — node features and op-type ids on padded graphs;
* :mod:`~gsched.policies.go.graphsage` — the max-pool GraphSAGE embedding with deterministic
  neighbour sampling;
* :mod:`~gsched.policies.go.attention` — Transformer-XL layers and segment-level recurrence;
* :mod:`~gsched.policies.go.network` — the policy network (decision network, superposition,
  GO's multi-task recurrent attention layers, value head) and its configs.

* :mod:`~gsched.policies.go.actions` — per-op actions (device, priority and fusion levels) and
  their chromosome;
* :mod:`~gsched.policies.go.ppo` — rollouts with GO's iterative refinement, rewards, the PPO
  loss and the jitted iteration;
* :mod:`~gsched.policies.go.rollout` — a policy as a budgeted search (zero-shot, fine-tuning,
  sampling);
* :mod:`~gsched.policies.go.checkpoint`, :mod:`~gsched.policies.go.method` — policy exports
  and the ``gdp`` / ``go`` methods of the registry; :mod:`~gsched.policies.go.training` — the
  trainer (``train/gdp.py``, ``train/go.py``).
"""

from gsched.policies.go.attention import (
    SegmentAttention,
    TransformerXLLayer,
    segment_recurrent,
)
from gsched.policies.go.features import (
    NUM_NODE_FEATURES,
    OP_TYPE_VOCAB,
    node_features,
    op_type_ids,
)
from gsched.policies.go.graphsage import GraphSAGE, Neighbours, sample_neighbours
from gsched.policies.go.method import METHODS
from gsched.policies.go.network import (
    CPU_CONFIG,
    TASKS,
    NetworkConfig,
    PolicyNetwork,
    encode_actions,
)

__all__ = ["CPU_CONFIG", "METHODS", "NUM_NODE_FEATURES", "OP_TYPE_VOCAB", "TASKS", "GraphSAGE",
           "Neighbours", "NetworkConfig", "PolicyNetwork", "SegmentAttention",
           "TransformerXLLayer", "encode_actions", "node_features", "op_type_ids",
           "sample_neighbours", "segment_recurrent"]
