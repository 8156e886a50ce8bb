"""``program_order``: the graph file's own op order, every op on device 0.

For an imported program the file order *is* the program's order: the jaxpr's equation order
(after inlining) or XLA's schedule of the compiled module's ENTRY computation, with the
program inputs first in both (gsched/importers). Scoring it with the cost model gives the
peak memory and runtime of that order under SPEC §3/§4 — "what XLA (or the program as
written) does" — the baseline every optimizer is compared with. The program inputs come
first in the file, so the cost model's inputs-first rule (SPEC §1) keeps exactly this order.
"""

from __future__ import annotations

import numpy as np

from gsched.core.graph import Graph


def file_order(graph: Graph) -> np.ndarray:
    """``[N]`` ``0..N-1``; ``ValueError`` when that is not a topological order, or when a
    program input comes after an ordinary op (the cost model would then move it first)."""
    n = graph.num_ops
    producer = graph.tensor_producer[graph.edge_tensor]
    late = np.flatnonzero(producer >= graph.edge_consumer)
    if late.size:
        k = int(late[0])
        raise ValueError(
            f"program_order needs a graph file in program order, but op "
            f"{int(graph.edge_consumer[k])} ({graph.op_names[graph.edge_consumer[k]]!r}) reads "
            f"a tensor of the later op {int(producer[k])} ({graph.op_names[producer[k]]!r})")
    inputs = np.flatnonzero(graph.is_input)
    if inputs.size and inputs[-1] >= inputs.size:
        j = int(np.flatnonzero(~graph.is_input)[0])
        raise ValueError(f"program_order needs the program inputs first, but op {j} "
                         f"({graph.op_names[j]!r}) comes before input op {int(inputs[-1])}")
    return np.arange(n, dtype=np.int64)


def program_order(graph: Graph, num_devices: int = 1, seed: int = 0
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(file order, all on device 0)`` (any D, seed unused)."""
    return file_order(graph), np.zeros(graph.num_ops, np.int64)


def build():
    """The registry's ``heuristic`` runner."""
    return program_order
