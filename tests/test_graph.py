"""Graph construction and SPEC §1 validation: each bad input names the offending op."""

import numpy as np
import pytest

from gsched.core.graph import GraphError, make_graph, topological_order


def chain(**overrides):
    fields = dict(compute_cost=[1, 2, 3], temporary_memory=[0, 0, 0],
                  tensor_producer=[0, 0, 1], tensor_size=[4, 5, 6],
                  edge_tensor=[0, 1, 2], edge_consumer=[1, 1, 2], op_names=["in", "mid", "out"])
    fields.update(overrides)
    return make_graph(**fields)


def test_valid_graph_and_gnn_view_keeps_parallel_edges():
    g = chain()
    senders, receivers, sizes, control = g.gnn_edges()
    assert senders.tolist() == [0, 0, 1] and receivers.tolist() == [1, 1, 2]  # parallel 0→1
    assert sizes.tolist() == [4, 5, 6] and not control.any()
    assert g.tensor_port.tolist() == [0, 1, 0]
    assert g.chromosome_length(2) == 3 * 2 + 3 + 3 * 2
    assert topological_order(g).tolist() == [0, 1, 2]


def test_topology_hash_ignores_sizes_but_not_structure():
    g = chain()
    assert g.topology_hash() == chain(tensor_size=[9, 9, 9], compute_cost=[0, 0, 0]).topology_hash()
    assert g.topology_hash() != chain(edge_consumer=[1, 2, 2]).topology_hash()


@pytest.mark.parametrize("overrides, message", [
    (dict(edge_tensor=[0, 1, 2, 2], edge_consumer=[1, 1, 2, 0]), "cycle through op"),
    (dict(compute_cost=[1, float("nan"), 3]), "op 1 \\('mid'\\) has invalid compute_cost nan"),
    (dict(temporary_memory=[0, 0, -1]), "op 2 \\('out'\\) has invalid temporary_memory"),
    (dict(tensor_size=[4, float("inf"), 6]), "op 0 \\('in'\\) produces tensor 1 with invalid size"),
    (dict(tensor_producer=[0, 0, 7]), "missing producer op 7"),
    (dict(edge_consumer=[1, 1, 9]), "missing op 9"),
    (dict(edge_tensor=[0, 1, 5]), "op 2 \\('out'\\) reads missing tensor 5"),
    (dict(edge_tensor=[0, 0, 2], edge_consumer=[1, 1, 2]), "listed twice as a consumer"),
    (dict(tensor_is_control=[False, True, False]), "control tensor 1 .* must have size 0"),
    (dict(op_ids=[3, 4, 3]), "op 2 \\('out'\\) repeats op id 3"),
    (dict(temporary_memory=[0, 0]), "temporary_memory has shape"),
])
def test_bad_graphs_are_rejected_naming_the_problem(overrides, message):
    with pytest.raises(GraphError, match=message):
        chain(**overrides)


def test_cycle_error_names_an_op_on_the_cycle():
    # 0 → 1 → 2 → 1: ops 1 and 2 form the cycle; op 0 is not on it.
    with pytest.raises(GraphError, match="op [12] "):
        make_graph(compute_cost=[1, 1, 1], temporary_memory=[0, 0, 0],
                   tensor_producer=[0, 1, 2], tensor_size=[1, 1, 1],
                   edge_tensor=[0, 1, 2], edge_consumer=[1, 2, 1])


def test_graph_equality_compares_all_fields():
    assert chain() == chain()
    assert chain() != chain(tensor_size=np.array([4, 5, 7]))
