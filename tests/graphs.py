"""Graphs, paths and the subprocess environment the tests share (one definition each;
fixtures in ``conftest.py``)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from gsched import Graph, make_graph
from gsched.harness.benchmarks import mismatches

SHARED = Path(__file__).resolve().parents[2] / "shared"  # ../shared beside the checkout
SHARED_DIAMOND = SHARED / "examples" / "diamond.pbtxt"
MOCCASIN = SHARED / "benchmarks" / "moccasin"  # graphs nobody on this project made
GPU_HLO = Path(__file__).resolve().parent / "data" / "gpu_hlo"  # XLA GPU's modules for an H100


def diamond() -> Graph:
    """SPEC §5's worked example built in code (``examples/diamond.pbtxt`` without ../shared):
    ops a b c d, t0 = a→{b, c} (4 B), t1 = b→d (2 B), t2 = c→d (3 B), t3 = d's output (1 B),
    c with 5 B of temporary memory, costs 2 3 4 1."""
    return make_graph(compute_cost=[2, 3, 4, 1], temporary_memory=[0, 0, 5, 0],
                      tensor_producer=[0, 1, 2, 3], tensor_size=[4, 2, 3, 1],
                      edge_tensor=[0, 0, 1, 2], edge_consumer=[1, 2, 3, 3], op_names="abcd")


def assert_identical(a, b):
    """Every field of two Evaluations equal, floats bit for bit (None where None)."""
    bad = mismatches(a, b)
    assert not bad, bad


def with_inputs(graph, rng, fraction=0.5):
    """``graph`` with some of its source ops marked as program inputs (SPEC §1)."""
    source = np.ones(graph.num_ops, bool)
    source[graph.edge_consumer] = False
    return graph.replace(is_input=source & (rng.random(graph.num_ops) < fraction))


def chain(n: int) -> Graph:
    """``n`` unit ops in a chain, each passing a 4-byte tensor to the next."""
    return make_graph(compute_cost=np.ones(n), temporary_memory=np.zeros(n),
                      tensor_producer=np.arange(n - 1), tensor_size=np.full(n - 1, 4.0),
                      tensor_is_control=np.zeros(n - 1, bool), edge_tensor=np.arange(n - 1),
                      edge_consumer=np.arange(1, n))


def subprocess_env(host_devices: int | None = None, **extra: str) -> dict[str, str]:
    """This process's environment for a Python subprocess, with ``extra`` set: ``XLA_FLAGS``
    keeps the tests' flags (``conftest.py``) but any forced device count, then forces
    ``host_devices`` CPU devices if given (one device per process if not)."""
    flags = [flag for flag in os.environ.get("XLA_FLAGS", "").split() if "device_count" not in flag]
    if host_devices is not None:
        flags.append(f"--xla_force_host_platform_device_count={host_devices}")
    return dict(os.environ, XLA_FLAGS=" ".join(flags), **extra)
