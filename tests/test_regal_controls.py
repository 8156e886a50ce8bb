"""REGAL's controls (gsched/harness/regal_controls.py, issue #15 §1) on tiny graphs and budgets:
the uniform-genes variant is exactly REGAL's pipeline with plain BRKGA's genes (feature run and
pin included), the untrained policy loads and runs, and the table is built from the rows (with
resume), its statistics checked by hand."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched.core.padding import batch_graphs, bucket_for
from gsched.costmodel.params import CostParams
from gsched.generators import random_computation_graph
from gsched.harness import regal_controls as rc
from gsched.harness.config import Objective
from gsched.infra.progress import read_jsonl
from gsched.policies.regal.actions import dequantize_beta
from gsched.policies.regal.features import pinned_ops
from gsched.search import brkga

BUDGET, FEATURES = 200, 100  # tiny: 100 + 100 evaluations, one BRKGA scan length (2 steps)
COMMITTED = Path(__file__).resolve().parents[1] / "docs" / "results" / "regal_controls"
PEAK = Objective("peak_memory", {"name": "peak_memory"}, 0.0, math.inf, None, None)


@pytest.fixture(scope="module")
def graphs():
    return [random_computation_graph(12, seed, name=f"g{seed}") for seed in (1, 2)]


def test_no_quantized_action_is_the_identity():
    """Why the variant builds plain BRKGA's parameters directly: with REGAL's k = 2 levels no
    (m, v) dequantizes to Beta(1, 1)."""
    for m, v in itertools.product(range(2), repeat=2):
        alpha, beta = dequantize_beta(m, v, 2)
        assert not (np.isclose(alpha, 1.0) and np.isclose(beta, 1.0))


def test_uniform_genes_is_pinned_brkga_after_the_feature_run(graphs):
    # Runtime with transfers: few ties, so the second search wins on a graph (checked) and
    # the pin and the genes show in its chromosomes (the negative controls below).
    cost = CostParams(latency=0.5, bandwidth=2e4)
    padded = batch_graphs(graphs, bucket_for(graphs))
    key = jax.random.PRNGKey(5)
    got = rc.uniform_genes_search(key, padded, cost, num_devices=2, budget=BUDGET,
                                  objective="runtime", feature_evals=FEATURES)
    # By hand: guided_search's key split, a feature BRKGA and a second BRKGA, both plain
    # (uniform genes, elite bias 0.7) with the largest op pinned, and the better of the two.
    key_features, _, key_search = jax.random.split(key, 3)
    pinned = pinned_ops(padded)

    def plain(k, budget, params=None, pin=pinned):
        return brkga.run_batch(k, padded, brkga.BRKGAConfig(), params, num_devices=2,
                               budget=budget, objective="runtime", cost_params=cost, pinned=pin)

    first, second = plain(key_features, FEATURES), plain(key_search, BUDGET - FEATURES)
    take = second.best_value < first.best_value
    assert take.any()  # the second search decides at least one graph
    np.testing.assert_array_equal(got.best_value,
                                  jnp.where(take, second.best_value, first.best_value))
    np.testing.assert_array_equal(got.best_keys,
                                  jnp.where(take[:, None], second.best_keys, first.best_keys))
    np.testing.assert_array_equal(got.evals_used, [BUDGET, BUDGET])
    # The pinned op (the largest) runs on device 0 in the returned solutions.
    for b in range(len(graphs)):
        op = int(np.argmax(np.asarray(pinned[b]) == 0))
        assert int(got.best_evaluation.placement[b, op]) == 0
    # The comparison can fail: had the variant's second search dropped the pin or used other
    # genes, the better of the two searches would be other chromosomes.
    length = padded.bucket.chromosome_length(2)
    skewed = brkga.BRKGAParams(jnp.full(length, 0.7), jnp.full(length, 2.0), jnp.ones(length))
    for other in (plain(key_search, BUDGET - FEATURES, pin=None),
                  plain(key_search, BUDGET - FEATURES, skewed)):
        wins = other.best_value < first.best_value
        wrong = jnp.where(wins[:, None], other.best_keys, first.best_keys)
        assert not np.array_equal(wrong, got.best_keys)


def test_untrained_policy_loads_and_runs(graphs):
    pol = rc.policies("peak_memory")
    assert pol.feature_evals == 400
    shipped, untrained = jax.tree.leaves(pol.shipped), jax.tree.leaves(pol.untrained)
    assert jax.tree.structure(pol.shipped) == jax.tree.structure(pol.untrained)
    assert any(not np.array_equal(a, b) for a, b in zip(shipped, untrained))
    rows, wall, _ = rc.run_variant("untrained", graphs, CostParams(), seed=0,
                                   objective="peak_memory", budget=BUDGET,
                                   feature_evals=FEATURES)
    assert [r["evals_used"] for r in rows] == [BUDGET, BUDGET] and wall > 0
    assert all(r["feasible"] and r["value"] == r["peak_memory"] > 0 for r in rows)


def test_tiny_run_resumes_and_builds_the_table(tmp_path, graphs):
    task = rc.Task("tiny", PEAK, tuple(graphs), 2)
    path = tmp_path / "rows.jsonl"
    notes = []
    rows = rc.run_controls([task], path, seeds=[0], budget=BUDGET, feature_evals=FEATURES,
                           log=notes.append)
    assert len(rows) == len(rc.VARIANTS) * 2 and len(notes) == len(rc.VARIANTS)
    text = path.read_text()
    again = rc.run_controls([task], path, seeds=[0], budget=BUDGET, feature_evals=FEATURES,
                            log=notes.append)
    assert path.read_text() == text and again == rows  # resumed: nothing rerun
    summary = rc.summarize(rows, bootstrap=200)
    section = summary[("tiny", "peak_memory")]
    assert section["graphs"] == ["g1", "g2"] and section["seeds"] == [0]
    value = {(r["graph"], r["variant"]): r["value"] for r in rows}
    for v in rc.VARIANTS:
        imp = [100 * (value[(g, "brkga")] - value[(g, v)]) / value[(g, "brkga")]
               for g in ("g1", "g2")]
        assert section["stats"][v]["mean"] == pytest.approx(np.mean(imp))
    assert section["stats"]["brkga"]["mean"] == 0 and section["stats"]["brkga"]["at_least"] == 1
    table = rc.markdown(summary, BUDGET)
    assert "## tiny, peak_memory (2 graphs" in table
    assert "| REGAL (shipped policy) − feature run + pinning, uniform genes |" in table


def test_statistics_by_hand():
    """3 graphs × 3 seeds of made-up values: improvements, mean ± std over seeds, the ≥
    fraction, the paired difference and the sign test."""
    rows = []
    ref = {"a": 100.0, "b": 200.0, "c": 50.0}
    better = {("a", 0): 90, ("a", 1): 95, ("a", 2): 100, ("b", 0): 180, ("b", 1): 190,
              ("b", 2): 210, ("c", 0): 45, ("c", 1): 50, ("c", 2): 40}
    for (g, s), v in better.items():
        for variant, value in (("brkga", ref[g]), ("regal", float(v))):
            rows.append({"dataset": "d", "graph": g, "num_ops": ord(g), "objective": "runtime",
                         "variant": variant, "seed": s, "value": value, "feasible": True,
                         "wall_seconds": 1.0})
    s = rc.summarize(rows, comparisons=(("regal", "brkga"),), bootstrap=500)[("d", "runtime")]
    imp = {k: 100 * (ref[k[0]] - v) / ref[k[0]] for k, v in better.items()}
    per_seed = [np.mean([imp[(g, seed)] for g in "abc"]) for seed in range(3)]
    st = s["stats"]["regal"]
    assert st["per_seed"] == pytest.approx(per_seed)
    assert st["mean"] == pytest.approx(np.mean(per_seed))
    assert st["std"] == pytest.approx(np.std(per_seed, ddof=1))
    assert st["at_least"] == pytest.approx(8 / 9)  # only b, seed 2 is worse
    # BRKGA's value is the same for every seed here, so its mean over seeds changes nothing.
    assert st["vs_mean_reference"] == pytest.approx(st["mean"])
    assert st["vs_mean_reference_std"] == pytest.approx(st["std"])
    d = s["diffs"][("regal", "brkga")]
    assert d["mean"] == pytest.approx(np.mean(list(imp.values())))
    assert (d["graph_wins"], d["graph_losses"], d["pair_wins"], d["pair_losses"]) == (3, 0, 6, 1)
    assert d["p_sign"] == pytest.approx(0.25)  # 3 of 3 graphs: 2 · 1/8
    assert d["ci"][0] <= d["mean"] <= d["ci"][1]
    assert rc.sign_test(0, 0) == 1.0 and rc.sign_test(5, 5) == 1.0


def test_missing_files_dataset_is_skipped(tmp_path, monkeypatch):
    config = tmp_path / "gone.toml"
    config.write_text('seeds = [0]\ndevices = [2]\nbudgets = [5000]\n'
                      '[[datasets]]\nname = "gone"\nsource = "files"\n'
                      f'path = "{tmp_path / "nowhere"}"\n'
                      '[[objectives]]\nname = "peak_memory"\n[[methods]]\nname = "brkga"\n')
    monkeypatch.setitem(rc.CONFIGS, "gone", config)
    notes = []
    assert rc.load_tasks(["gone"], log=notes.append) == []
    assert len(notes) == 1 and "not on this machine: skipped" in notes[0]


def test_spaced_and_max_graphs():
    assert rc.spaced(list(range(8)), 4) == [0, 2, 5, 7]
    assert rc.spaced(list(range(3)), None) == [0, 1, 2]
    assert rc.parse_max_graphs("4", ["synthetic", "moccasin"]) == {"synthetic": 4,
                                                                   "moccasin": 4}
    assert rc.parse_max_graphs("moccasin=8", ["synthetic"]) == {"moccasin": 8}


def test_committed_tables_regenerate_byte_identical():
    rows = read_jsonl(COMMITTED / "results.jsonl")
    assert rc.tables_text(rows) == (COMMITTED / "tables.md").read_text()
