"""Population sharding over several (forced) CPU host devices gives the same evaluations.

Runs in a subprocess: the host device count must be set before JAX starts.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

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
"""


@pytest.mark.subprocess
def test_sharded_population_matches_unsharded():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
               JAX_PLATFORMS="cpu")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=root, env=env,
                         capture_output=True, text=True, timeout=300)
    assert "SHARDED_OK" in out.stdout, out.stderr[-2000:]

