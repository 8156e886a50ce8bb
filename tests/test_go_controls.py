"""The GDP / GO controls harness (gsched.harness.go_controls) on a tiny config."""

from __future__ import annotations

import numpy as np
import pytest

from gsched.harness import go_controls
from gsched.infra.config import load_config
from gsched.policies.go import training

TINY = """
steps = 1
batch_size = 2
[network]
gs_layers = 1
[space]
tasks = ["placement"]
num_devices = 2
[ppo]
objective = "runtime"
[data]
source = "layered"
num_graphs = 2
valid_graphs = 3
min_ops = 10
max_ops = 14
seed = 3
[cost]
preset = "h100"
scheduler = "fifo"
fusion = false
"""


def test_fresh_graphs_are_neither_training_nor_validation_graphs(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    config = load_config(path, training.TrainConfig)
    train, valid = training.load_graphs(config)
    fresh = training.fresh_graphs(config, 4)
    assert fresh == training.fresh_graphs(config, 4)  # a function of the config
    seen = {(g.num_ops, g.compute_cost.tobytes()) for g in train + valid}
    assert len(fresh) == 4 and not seen & {(g.num_ops, g.compute_cost.tobytes()) for g in fresh}
    workloads = tmp_path / "workloads.toml"
    workloads.write_text(TINY.replace('source = "layered"', 'source = "workloads"\n'
                                      'families = ["rnnlm"]'))
    with pytest.raises(ValueError, match="data.source = 'layered'"):
        training.fresh_graphs(load_config(workloads, training.TrainConfig), 4)


def test_controls_rows_on_fresh_graphs(tmp_path):
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    rows, sizes = go_controls.controls(config, "gdp", count=3, draws=2, samples=8,
                                       search_budget=200, finetune=2, temperature=2.0,
                                       hdp=(None, 0.01))
    assert len(sizes) == 3 and all(10 <= n <= 14 for n in sizes)
    by_label = {label: (evaluations, values) for label, evaluations, values, _ in rows}
    assert list(by_label) == [
        "untrained network, greedy", "untrained network, fine-tuned 2 it., T = 2 (GDP-one)",
        "uniform random chromosome (mean of 2)", "random search, best of 1",
        "random search, best of 9", "random search, best of 18", "random search, best of 200",
        "BRKGA, 9", "BRKGA, 18", "BRKGA, 200", "HDP, 18", "HDP, learning rate 0.01, 18",
        "policy, greedy",
        "policy, greedy + 8 sampled rollouts, T = 2", "policy, fine-tuned 2 it., T = 2"]
    for evaluations, values in by_label.values():
        assert values.shape == (3,) and np.all(np.isfinite(values)) and np.all(values > 0)
    assert by_label["policy, greedy + 8 sampled rollouts, T = 2"][0] == 9
    # the shipped gdp's PPO settings: 1 greedy round, 2 iterations x 8 samples, 1 greedy round
    assert by_label["policy, fine-tuned 2 it., T = 2"][0] == 18
    # sampling and fine-tuning keep the greedy decode's evaluation: never worse than it
    for label in ("policy, greedy + 8 sampled rollouts, T = 2",
                  "policy, fine-tuned 2 it., T = 2"):
        assert np.all(by_label[label][1] <= by_label["policy, greedy"][1] + 1e-6)
    assert np.all(by_label["untrained network, fine-tuned 2 it., T = 2 (GDP-one)"][1]
                  <= by_label["untrained network, greedy"][1] + 1e-6)
    # 200 BRKGA evaluations beat the average uniform chromosome on 10-14-op graphs
    average = by_label["uniform random chromosome (mean of 2)"][1]
    assert np.all(by_label["BRKGA, 200"][1] <= average)
    assert all(seconds > 0 for *_, seconds in rows)
    text = go_controls.markdown(rows, sizes, "tiny")
    assert text.count("\n| ") == 2 + len(rows) and "| BRKGA, 200 | 200 |" in text


def test_search_rows_start_from_random_metis_untrained_and_policy(tmp_path):
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    rows, sizes = go_controls.controls(config, "gdp", count=2, draws=1, samples=8,
                                       search_budget=20, finetune=1,
                                       searches=("local_search", "brkga"))
    by_label = {label: (evaluations, values) for label, evaluations, values, _ in rows}
    searched = [label for label in by_label if "→" in label or "local search" in label
                or "2 it." in label]
    # the fine-tuning budget, 1 + 1 x 8 + 1; that of 2 iterations, 1 + 2 x 8 + 1
    # at the search budget too: random, METIS and policy starts
    assert searched == [
        "local search, 10", "METIS → local search, 10", "untrained network → local search, 10",
        "policy → local search, 10", "policy + METIS → local search, 10",
        "local search, 20", "METIS → local search, 20", "policy → local search, 20",
        "METIS → BRKGA, 10", "untrained network → BRKGA, 10", "policy → BRKGA, 10",
        "policy + METIS → BRKGA, 10", "METIS → BRKGA, 20", "policy → BRKGA, 20",
        "policy, fine-tuned 2 it.",
        "policy, fine-tuned 1 it. → local search, 18", "policy, fine-tuned 1 it. → BRKGA, 18"]
    assert "BRKGA, 10" in by_label and "BRKGA, 20" in by_label  # the unseeded BRKGA rows
    for label in searched:
        evaluations, values = by_label[label]
        budget = 18 if label == "policy, fine-tuned 2 it." else int(label.rsplit(", ", 1)[1])
        assert evaluations == budget
        assert values.shape == (2,) and np.all(np.isfinite(values))
    # a search started from a decode keeps the decode's evaluation
    for search in ("local search", "BRKGA"):
        for budget in (10, 20):
            assert np.all(by_label[f"policy → {search}, {budget}"][1]
                          <= by_label["policy, greedy"][1] + 1e-6)
        assert np.all(by_label[f"untrained network → {search}, 10"][1]
                      <= by_label["untrained network, greedy"][1] + 1e-6)
        assert np.all(by_label[f"policy, fine-tuned 1 it. → {search}, 18"][1]
                      <= by_label["policy, fine-tuned 1 it."][1] + 1e-6)
    with pytest.raises(ValueError, match="searches must be distinct names"):
        go_controls.controls(config, "gdp", draws=1, samples=1, search_budget=100,
                             searches=("local_search", "local_search"))
    with pytest.raises(ValueError, match="searches must be distinct names"):
        go_controls.controls(config, "gdp", draws=1, samples=1, search_budget=100,
                             searches=("tabu",))


def test_controls_reject_a_mismatched_checkpoint_or_a_bad_setting(tmp_path):
    config = tmp_path / "tiny.toml"
    config.write_text(TINY.replace('tasks = ["placement"]', 'tasks = ["placement", "schedule"]'))
    with pytest.raises(ValueError, match="another action space"):
        go_controls.controls(config, "gdp", graphs="valid", draws=1, samples=1,
                             search_budget=100)
    config.write_text(TINY.replace('tasks = ["placement"]', 'tasks = ["placement", "fusion"]')
                      .replace("fusion = false", "fusion = true"))
    with pytest.raises(ValueError, match="cannot be limited to these genes"):
        go_controls.controls(config, "go", draws=1, samples=1, search_budget=100)
    config.write_text(TINY)
    with pytest.raises(ValueError, match="finetune_steps must be an int >= 0"):
        go_controls.controls(config, "gdp", draws=1, samples=1, search_budget=100, finetune=-1)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        go_controls.controls(config, "gdp", draws=1, samples=1, search_budget=100,
                             temperature=0.0)
