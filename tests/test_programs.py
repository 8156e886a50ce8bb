"""gsched.optimize_jax: a JAX program → XLA's schedule vs an optimizer's, in one call."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

import gsched
from gsched.importers import ImporterError


def mlp(x, w1, w2, w3):
    h = jnp.tanh(x @ w1)
    g = jnp.maximum(x @ w2, 0.0)
    return (h * g) @ w3


ARGS = (jnp.ones((8, 64)), jnp.ones((64, 128)), jnp.ones((64, 128)), jnp.ones((128, 4)))


def test_report_compares_with_xla_schedule():
    report = gsched.optimize_jax(mlp, *ARGS, method="brkga", devices=1, budget=60)
    assert report["num_ops"] == report["graph"].num_ops > 4
    base, best = report["baseline"], report["optimized"]
    assert base["evals_used"] == 1 and best["evals_used"] == 60
    assert len(best["placement"]) == report["num_ops"]
    assert report["improvement"] == pytest.approx(1 - best["value"] / base["value"])
    # The baseline is XLA's order itself: the program_order method on the imported graph.
    again = gsched.optimize("program_order", [report["graph"]], num_devices=1, budget=1)
    assert again.results[0]["peak_memory"] == base["peak_memory"]


def test_runtime_on_two_devices_with_the_execution_model():
    report = gsched.optimize_jax(mlp, *ARGS, method="random", devices=2, budget=20,
                                 objective="runtime", scheduler="fifo", fusion=True)
    assert report["optimized"]["runtime"] > 0 and "fusion" in report["optimized"]
    assert "start" in report["baseline"]


def test_bad_program_and_settings():
    with pytest.raises(ImporterError):
        gsched.optimize_jax(lambda x: x.undefined_attribute, jnp.ones(3))
    with pytest.raises(ValueError, match="unknown method"):
        gsched.optimize_jax(mlp, *ARGS, method="nope", budget=5)
