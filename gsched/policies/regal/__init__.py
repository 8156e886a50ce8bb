"""REGAL (Paliwal et al.): a GNN policy that predicts per-node BRKGA distributions, trained
with REINFORCE, and its baselines GAS and IDRS.

* :mod:`~gsched.policies.regal.features` — node / edge features (A.1) on padded graphs;
* :mod:`~gsched.policies.regal.gnn` — the message-passing GNN (eqs. 1–5) and GAS's sequence encoder;
* :mod:`~gsched.policies.regal.actions` — quantized actions and their dequantization (A.2);
* :mod:`~gsched.policies.regal.policy` — the policy (eq. 6) and the baseline (eq. 9);
* :mod:`~gsched.policies.regal.rollout` — actions → BRKGA parameters → budgeted searches;
* :mod:`~gsched.policies.regal.reinforce` — the jitted REINFORCE train step (§3.4);
* :mod:`~gsched.policies.regal.method` — the ``regal`` / ``gas`` / ``idrs`` methods of the registry.

Training lives in ``train/regal.py``.
"""

from gsched.policies.regal.actions import (
           ActionSpace,
           dequantize_beta,
           dequantize_elite_bias,
)
from gsched.policies.regal.features import Features, compute_features
from gsched.policies.regal.method import METHODS
from gsched.policies.regal.policy import Baseline, Policy, PolicyConfig
from gsched.policies.regal.reinforce import ReinforceConfig, TrainState, make_train_step
from gsched.policies.regal.rollout import guided_search

__all__ = ["METHODS", "ActionSpace", "Baseline", "Features", "Policy", "PolicyConfig", "ReinforceConfig",
           "TrainState", "compute_features", "dequantize_beta", "dequantize_elite_bias",
           "guided_search", "make_train_step"]
