"""Sharding over several (forced) CPU host devices gives the same evaluations: a population
(``evaluate_population_sharded``), and a batch of graphs (``evaluate_batch`` traced under a mesh,
as ``optimize(..., mesh=)`` traces a search: one ``shard_map``ped schedule loop per device),
split by graphs or, when they do not divide evenly, by each graph's chromosomes.

Runs in a subprocess: the host device count must be set before JAX starts.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.graphs import subprocess_env

SCRIPT = """
import jax, numpy as np
from jax.sharding import Mesh
from gsched import evaluate_population, pad_graph, random_computation_graph
from gsched.costmodel.evaluate import evaluate_population_sharded
assert len(jax.devices()) == 2, jax.devices()
g = random_computation_graph(40, 0)
padded = pad_graph(g)
keys = np.random.default_rng(0).random((8, padded.bucket.chromosome_length(2)), np.float32)
mesh = Mesh(np.array(jax.devices()), ("population",))
a = evaluate_population(padded, keys, num_devices=2)
b = evaluate_population_sharded(padded, keys, num_devices=2, mesh=mesh)
for x, y in zip(a, b):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
try:
    evaluate_population_sharded(padded, keys[:3], num_devices=2, mesh=mesh)
except ValueError as err:
    assert "not divisible" in str(err), err
    print("SHARDED_OK")

from gsched import batch_graphs, evaluate_batch, optimize
graphs = [random_computation_graph(n, n) for n in (30, 45, 50, 60)]
batch = batch_graphs(graphs)
keys = np.random.default_rng(1).random((4, 6, batch.bucket.chromosome_length(2)), np.float32)
one = evaluate_batch(batch, keys, num_devices=2)
fn = jax.jit(lambda g, k: evaluate_batch(g, k, num_devices=2))
with jax.set_mesh(Mesh(np.array(jax.devices()), ("graphs",))):
    assert "shard_map" in str(fn.trace(batch, keys).jaxpr)
    two = fn(batch, keys)
for x, y in zip(one, two):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
mesh = Mesh(np.array(jax.devices()), ("graphs",))
for options in (None, {"seed_from": "metis"}):  # the seeds split with their graphs
    runs = [optimize("brkga", graphs, num_devices=2, budget=300, seed=3, mesh=m,
                     options=options) for m in (None, mesh)]
    assert runs[0].results == runs[1].results
print("BATCH_SHARDED_OK")

# Graphs that do not divide over the devices (one, three): each call's chromosomes do, on
# buckets of POPULATION_SPLIT_MIN_OPS ops or more
from gsched.costmodel.evaluate import POPULATION_SPLIT_MIN_OPS
assert batch.bucket.num_ops < POPULATION_SPLIT_MIN_OPS
few = batch_graphs(graphs[:1])
keys = np.random.default_rng(2).random((1, 6, few.bucket.chromosome_length(2)), np.float32)
with jax.set_mesh(mesh):
    assert "shard_map" not in str(fn.trace(few, keys).jaxpr)
graphs = [random_computation_graph(n, n) for n in (200, 210, 220)]
for count in (1, 3):
    few = batch_graphs(graphs[:count])
    assert few.bucket.num_ops >= POPULATION_SPLIT_MIN_OPS
    for population, split in ((6, True), (5, False)):
        keys = np.random.default_rng(2).random(
            (count, population, few.bucket.chromosome_length(2)), np.float32)
        with jax.set_mesh(mesh):
            jaxpr = str(fn.trace(few, keys).jaxpr)
            assert ("shard_map" in jaxpr) == split, (count, population)
            assert ("P(None, 'graphs')" in jaxpr) == split, jaxpr
            sharded = fn(few, keys)
        for x, y in zip(evaluate_batch(few, keys, num_devices=2), sharded):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    runs = [optimize("brkga", graphs[:count], num_devices=2, budget=300, seed=3, mesh=m)
            for m in (None, mesh)]
    assert runs[0].results == runs[1].results
print("POPULATION_SPLIT_OK")
"""


@pytest.mark.subprocess
def test_sharded_population_matches_unsharded():
    env = subprocess_env(2, JAX_PLATFORMS="cpu")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=root, env=env,
                         capture_output=True, text=True, timeout=300)
    assert all(f"{part}_OK" in out.stdout for part in ("SHARDED", "BATCH_SHARDED",
                                                      "POPULATION_SPLIT")), out.stderr[-2000:]

