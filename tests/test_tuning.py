"""Tuned BRKGA: grid validation, batched grid evaluation, selection, the stored settings."""

import json

import jax
import numpy as np
import pytest

from eval import tune_brkga
from gsched import CostParams, batch_graphs, bucket_for, random_computation_graph
from gsched.core.padding import Bucket
from gsched.methods import optimize
from gsched.search import brkga
from gsched.search.tuned import (
    TUNED_PATH,
    Setting,
    evaluate_grid,
    load_tuned,
    make_grid,
    select,
    tuned_run_batch,
)

SMALL = Setting(population_size=10, num_elites=2, num_mutants=2)


def test_setting_config_and_gene_params():
    s = Setting(population_size=50, num_elites=5, num_mutants=7, num_populations=2,
                elite_bias=0.8, transfer_alpha=2.0, transfer_beta=0.5)
    config = s.config()
    assert (config.population_size, config.num_elites, config.num_children,
            config.num_populations) == (50, 5, 38, 2)
    bucket = Bucket(num_ops=8, num_tensors=16, num_edges=16)
    params = s.params(bucket, num_devices=2)
    length = bucket.chromosome_length(2)
    op_genes = 8 * 3  # N·D affinities + N priorities, then T·D transfer genes
    assert all(np.shape(x) == (length,) for x in params)
    assert np.all(params.elite_bias == np.float32(0.8))
    assert np.all(params.alpha[:op_genes] == 1) and np.all(params.beta[:op_genes] == 1)
    assert np.all(params.alpha[op_genes:] == 2) and np.all(params.beta[op_genes:] == 0.5)
    assert Setting().complexity == 0 and s.complexity == 7


@pytest.mark.parametrize("sizes,rhos,betas,match", [
    ([(10, 5, 6, 1)], [0.7], [(1, 1)],
     r"num_mutants=6.*num_elites \+ num_mutants \(5 \+ 6\) exceeds population_size \(10\)"),
    ([(10, 0, 2, 1)], [0.7], [(1, 1)], "num_elites=0.*num_elites must be at least 1"),
    ([(10, 2, -1, 1)], [0.7], [(1, 1)], "num_mutants must be >= 0"),
    ([(10, 2, 2, 1)], [1.5], [(1, 1)], "elite_bias=1.5.*elite_bias must be in"),
    ([(10, 2, 2, 1)], [0.7], [(0, 1)], "transfer_alpha must be finite and > 0"),
    ([(10, 2, 2, 1)], [0.7, 0.7], [(1, 1)], "lists a setting twice"),
    ([], [0.7], [(1, 1)], "empty BRKGA grid"),
])
def test_infeasible_grid_is_an_error_naming_the_setting(sizes, rhos, betas, match):
    with pytest.raises(ValueError, match=match):
        make_grid(sizes, rhos, betas)


def test_select_mean_ratio_and_ties():
    grid = [Setting(), Setting(elite_bias=0.8), Setting(elite_bias=0.8, transfer_alpha=2.0),
            Setting(elite_bias=0.6)]
    baseline = np.array([10.0, 4.0])
    values = np.array([[10.0, 4.0], [9.0, 4.0], [9.0, 4.0], [11.0, 2.0]])
    best, ratios = select(grid, values, baseline)
    np.testing.assert_allclose(ratios, [1.0, 0.95, 0.95, 0.8])
    assert best == 3
    values[3] = [10.0, 4.0]  # now 1 and 2 tie: the simpler one (fewer changes) wins
    assert select(grid, values, baseline)[0] == 1
    with pytest.raises(ValueError, match="finite"):
        select(grid, values, np.array([0.0, 4.0]))


def test_load_tuned(tmp_path):
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps({"peak_memory": {"setting": SMALL.to_dict()}}))
    assert load_tuned("peak_memory", path) == SMALL
    with pytest.raises(ValueError, match="no tuned BRKGA setting for objective 'runtime'"):
        load_tuned("runtime", path)
    path.write_text(json.dumps({"peak_memory": {"setting": {"population": 3}}}))
    with pytest.raises(ValueError, match="unknown BRKGA setting field"):
        load_tuned("peak_memory", path)
    with pytest.raises(ValueError, match="cannot read"):
        load_tuned("peak_memory", tmp_path / "missing.json")


def test_shipped_settings_cover_both_objectives():
    data = json.loads(TUNED_PATH.read_text())
    fields = Setting().to_dict()
    for objective in ("peak_memory", "runtime"):
        entry = data[objective]
        ratios = {Setting.from_dict({k: row[k] for k in fields}): row["mean_ratio"]
                  for row in entry["table"]}
        assert ratios[load_tuned(objective)] == entry["mean_ratio"] == min(ratios.values())
        assert ratios[Setting()] == 1.0  # standard BRKGA is the baseline of every ratio


def test_evaluate_grid_rows_and_one_compile_per_config():
    graphs = [random_computation_graph(6, 0), random_computation_graph(9, 1)]
    key = jax.random.key(3)
    grid = [SMALL, Setting(10, 2, 2, 1, 0.9, 3.0, 1.0)]
    common = dict(num_devices=2, budget=40, objective="peak_memory")
    before = brkga._search_jit._cache_size()
    values = evaluate_grid(key, graphs, grid, **common)
    assert values.shape == (2, 2) and np.all(np.isfinite(values))
    compiled = brkga._search_jit._cache_size()
    assert compiled - before <= 1  # one configuration, one compilation
    # Row s·G + g of the batch is setting s on graph g.
    bucket = bucket_for(graphs)
    params = [grid[s].params(bucket, 2) for s in (0, 0, 1, 1)]
    direct = brkga.run_batch(jax.random.fold_in(key, 0), batch_graphs(graphs * 2, bucket),
                             SMALL.config(), brkga.BRKGAParams(*map(np.stack, zip(*params))),
                             **common)
    np.testing.assert_array_equal(values.reshape(-1), np.asarray(direct.best_value))
    # New dynamic values (elite bias, Betas) reuse the compilation.
    evaluate_grid(key, graphs, [Setting(10, 2, 2, 1, 0.6, 0.5, 2.0), SMALL], **common)
    assert brkga._search_jit._cache_size() == compiled


def test_tuned_run_batch_uses_the_stored_setting(tmp_path):
    path = tmp_path / "tuned.json"
    chosen = Setting(10, 2, 2, 1, 0.9, 2.0, 1.0)
    path.write_text(json.dumps({"runtime": {"setting": chosen.to_dict()}}))
    graphs = batch_graphs([random_computation_graph(7, 2)])
    common = dict(num_devices=2, budget=40, objective="runtime")
    cost = CostParams(0.5, 100.0, np.inf)
    got = tuned_run_batch(jax.random.key(0), graphs, cost, path=path, **common)
    want = brkga.run_batch(jax.random.key(0), graphs, chosen.config(),
                           chosen.params(graphs.bucket, 2), cost_params=cost, **common)
    np.testing.assert_array_equal(got.best_so_far, want.best_so_far)
    with pytest.raises(ValueError, match="no tuned BRKGA setting for objective 'peak_memory'"):
        tuned_run_batch(jax.random.key(0), graphs, cost, path=path, **{**common,
                        "objective": "peak_memory"})


def test_tuned_brkga_method():
    graphs = [random_computation_graph(8, 5), random_computation_graph(12, 6)]
    outcome = optimize("tuned_brkga", graphs, num_devices=2, budget=64)
    assert [row["evals_used"] for row in outcome.results] == [64, 64]
    assert all(np.isfinite(row["value"]) for row in outcome.results)


def test_tune_script_writes_and_merges(tmp_path, capsys):
    out = tmp_path / "tuned.json"
    out.write_text(json.dumps({"runtime": {"setting": SMALL.to_dict()}}))
    args = ["--objective", "peak_memory", "--graphs", "2", "--budget", "30", "--ops", "8", "12",
            "--sizes", "100,10,10,1", "--elite-biases", "0.7", "0.9",
            "--transfer-betas", "1,1", "--out", str(out)]
    assert tune_brkga.main(args) == 0
    data = json.loads(out.read_text())
    assert data["runtime"]["setting"] == SMALL.to_dict()  # other objectives are kept
    entry = data["peak_memory"]
    assert len(entry["table"]) == 2 and entry["budget"] == 30 and entry["graphs"]["count"] == 2
    assert entry["command"].startswith("python -m eval.tune_brkga --objective peak_memory")
    assert Setting.from_dict(entry["setting"]) in make_grid([(100, 10, 10, 1)], [0.7, 0.9],
                                                            [(1, 1)])
    with pytest.raises(SystemExit):
        tune_brkga.main(args[:-2] + ["--sizes", "10,9,9,1", "--out", str(out)])
    assert "infeasible BRKGA setting" in capsys.readouterr().err
