"""Neural Topological Ordering (Gagrani et al.): Topoformer encoder, non-autoregressive
priority decoder with greedy / sampling / beam-search (state collapsing) decoding, for
single-device peak-memory scheduling (SPEC §2 with D = 1).

Modules: ``relations`` (the seven topological attention masks), ``features`` (C.5 inputs),
``model`` (graph inputs, encoder + priority head), ``decode`` (orders and their exact peak
memory), ``reinforce`` (REINFORCE with a greedy-rollout baseline), ``method`` (the
``topoformer`` optimize method and its checkpoints), ``hybrid`` (``topoformer_brkga``).
"""

from gsched.policies.topoformer import hybrid, method

METHODS = {**method.METHODS, **hybrid.METHODS}  # the package's entries of the method registry
