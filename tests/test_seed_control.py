"""The seeding control of ``eval.seed_control`` on two small layered graphs: the seeded runs
count their seed, so XLA-seeded BRKGA is never worse than XLA's default order and
model-seeded BRKGA never worse than the model's best beam order."""

import jax
import numpy as np

from gsched import layered_graph
from gsched.core.padding import batch_graphs, bucket_for
from gsched.costmodel.host import evaluate_order
from gsched.harness import seed_control
from gsched.policies.topoformer import checkpoint as topo_checkpoint
from gsched.policies.topoformer import method as topo_method


def test_seeded_runs_are_never_worse_than_their_seed():
    graphs = [layered_graph(30, 3), layered_graph(45, 4)]
    model, config = topo_checkpoint.load(None, "beam")
    values = seed_control.run_dataset(graphs, model, config, budget=120, seeds=[0, 1])
    assert set(values) == {"brkga", "xla_seeded_brkga", "model_seeded_brkga", "xla_default"}
    assert all(values[m].shape == (2, 2) for m in values if m != "xla_default")
    assert np.all(values["xla_seeded_brkga"] <= values["xla_default"][None])
    padded = batch_graphs(graphs, bucket_for(graphs))
    orders, best = topo_method.decoded_orders(model, config, "beam", jax.random.key(0),
                                              padded, seed_control.WIDTH)
    for i, g in enumerate(graphs):
        order = [int(j) for j in np.asarray(orders[i, int(best[i])]) if j < g.num_ops]
        seed_peak = evaluate_order(g, order)["peak_memory"]
        assert np.all(values["model_seeded_brkga"][:, i] <= seed_peak)


def test_padded_order_appends_the_padding_slots():
    np.testing.assert_array_equal(seed_control.padded_order(np.array([2, 0, 1]), 5),
                                  [2, 0, 1, 3, 4])
