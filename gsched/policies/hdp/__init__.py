"""HDP (Mirhoseini et al., "A Hierarchical Model for Device Placement", ICLR 2018), the learned
placer GDP compares with: a grouper puts ops into groups, a seq2seq placer puts groups on
devices, both trained with REINFORCE on one graph at a time.

* :mod:`~gsched.policies.hdp.features` — the op and group embeddings;
* :mod:`~gsched.policies.hdp.network` — the grouper and the placer;
* :mod:`~gsched.policies.hdp.method` — per-graph REINFORCE as a budgeted search, the ``hdp``
  method of the registry.
"""

from gsched.policies.hdp.method import METHODS, hdp_search, hdp_search_trace

__all__ = ["METHODS", "hdp_search", "hdp_search_trace"]
