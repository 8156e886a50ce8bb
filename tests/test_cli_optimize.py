"""The ``optimize`` command (SPEC §6): one JSON object, exact budgets, deterministic per seed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest

import gsched
from gsched.cli import main
from tests.graphs import SHARED, subprocess_env

REPO = Path(__file__).resolve().parents[1]
DIAMOND = SHARED / "examples" / "diamond.pbtxt"
needs_diamond = pytest.mark.skipif(not DIAMOND.is_file(), reason="shared diamond.pbtxt absent")

TIMING = ("wall_seconds", "compile_seconds", "shards")
SINGLE_FIELDS = {"method", "objective", "num_devices", "graph", "value", "evals_used",
                 "wall_seconds", "compile_seconds", "placement", "order", "peak_memory",
                 "device_peaks", "runtime", "feasible"}
RESULT_FIELDS = SINGLE_FIELDS - {"method", "num_devices", *TIMING}
DIAMOND_ARGS = ["--graph", DIAMOND, "--devices", 1, "--method", "brkga", "--evals", 300]


def optimize(capsys, *argv):
    code = main(["optimize", *map(str, argv)])
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), err
    assert out.count("\n") == 1  # one JSON object
    return json.loads(out)  # strict JSON: NaN / Infinity would fail to parse back


def without_timing(result):
    return {k: v for k, v in result.items() if k not in TIMING}


def check_consistent(result, graph, num_devices):
    """Fields agree with each other; with one device, re-scoring the op order agrees too."""
    assert result["peak_memory"] == max(result["device_peaks"])
    assert len(result["device_peaks"]) == num_devices
    assert result["value"] == result[result["objective"]]
    assert len(result["placement"]) == graph.num_ops
    assert set(result["placement"]) <= set(range(num_devices))
    op_order = [item[1] for item in result["order"] if item[0] == "op"]
    assert sorted(op_order) == list(range(graph.num_ops))
    if num_devices == 1:
        assert len(op_order) == len(result["order"])  # no transfers
        again = gsched.evaluate_order(graph, op_order, result["placement"], num_devices)
        for field in ("peak_memory", "device_peaks", "runtime", "placement", "order"):
            assert again[field] == result[field], field


@needs_diamond
def test_local_search_finds_diamond_optimum(capsys):
    args = [a if a != "brkga" else "local_search" for a in DIAMOND_ARGS]
    result = optimize(capsys, *args)
    assert result["method"] == "local_search" and result["evals_used"] == 300
    assert result["value"] == 12.0  # the optimum: a c b d
    check_consistent(result, gsched.load_graph(DIAMOND), 1)


@needs_diamond
@pytest.mark.subprocess
def test_brkga_finds_diamond_optimum(capsys):
    result = optimize(capsys, *DIAMOND_ARGS)
    assert SINGLE_FIELDS <= result.keys()
    assert (result["method"], result["objective"], result["num_devices"], result["graph"]) \
        == ("brkga", "peak_memory", 1, str(DIAMOND))
    assert result["value"] == result["peak_memory"] == 12.0  # the optimum: a c b d
    assert result["order"] == [["op", 0], ["op", 2], ["op", 1], ["op", 3]]
    assert result["evals_used"] == 300 and result["feasible"] is True
    assert result["wall_seconds"] >= 0 and result["compile_seconds"] >= 0
    check_consistent(result, gsched.load_graph(DIAMOND), 1)

    # Same seed → same output (in process: the cached executable; capacity is not compiled
    # in, so it reuses it too and is reported through ``feasible``).
    assert without_timing(optimize(capsys, *DIAMOND_ARGS)) == without_timing(result)
    tight = optimize(capsys, *DIAMOND_ARGS, "--capacity", 11)
    assert tight["feasible"] is False and tight["value"] == 12.0

    # ... and in a fresh process (a fresh compilation), through ``python -m gsched``.
    proc = subprocess.run([sys.executable, "-m", "gsched", "optimize", *map(str, DIAMOND_ARGS)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert without_timing(json.loads(proc.stdout)) == without_timing(result)


def test_folder_is_one_batch_in_input_order(capsys, tmp_path):
    folder = tmp_path / "graphs"
    folder.mkdir()
    graphs = {}
    for seed, (name, n) in enumerate([("b", 6), ("a", 5), ("c", 7)]):  # sorted: a, b, c
        graphs[name] = gsched.random_computation_graph(n, seed)
        gsched.save_graph(graphs[name], folder / f"{name}.pbtxt")
    result = optimize(capsys, "--graph", folder, "--devices", 2, "--method", "brkga",
                      "--evals", 300, "--objective", "runtime", "--latency", 0.5,
                      "--bandwidth", 100, "--seed", 7)
    assert {k: result[k] for k in ("method", "objective", "num_devices", "evals_per_graph")} \
        == {"method": "brkga", "objective": "runtime", "num_devices": 2, "evals_per_graph": 300}
    assert result["wall_seconds"] >= 0 and result["compile_seconds"] >= 0
    assert [r["graph"] for r in result["results"]] == [str(folder / f"{x}.pbtxt") for x in "abc"]
    for r, name in zip(result["results"], "abc"):
        assert RESULT_FIELDS <= r.keys()
        assert r["evals_used"] == 300 and r["feasible"] is True
        assert r["objective"] == "runtime" and r["value"] == r["runtime"] > 0
        check_consistent(r, graphs[name], 2)


@needs_diamond
def test_random_counts_exactly_k(capsys):
    # runtime objective under a capacity no schedule meets (the optimum peak is 12):
    # the best is infeasible, and its runtime is still reported as the value.
    result = optimize(capsys, "--graph", DIAMOND, "--devices", 1, "--method", "random",
                      "--evals", 1, "--objective", "runtime", "--capacity", 11, "--seed", 3)
    assert SINGLE_FIELDS <= result.keys()
    assert result["method"] == "random" and result["evals_used"] == 1
    assert result["feasible"] is False
    assert result["value"] == result["runtime"] == 10.0
    check_consistent(result, gsched.load_graph(DIAMOND), 1)


@needs_diamond
def test_bad_input(capsys, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    g = ["--graph", str(DIAMOND), "--devices", "1"]
    cases = [
        ([*g, "--method", "tabu", "--evals", "5"],
         "unknown method 'tabu' (available: brkga, "),
        ([*g, "--method", "brkga", "--evals", "0"], "--evals: must be >= 1, got 0"),
        ([*g, "--method", "brkga", "--evals", "-3"], "--evals: must be >= 1"),
        ([*g, "--method", "brkga", "--evals", "5", "--objective", "speed"],
         "invalid choice: 'speed'"),
        (["--graph", str(empty), "--devices", "1", "--method", "brkga", "--evals", "5"],
         "folder holds no graph files"),
        (["--graph", str(tmp_path / "missing.pbtxt"), "--devices", "1", "--method", "brkga",
          "--evals", "5"], "missing.pbtxt: No such file"),
        ([*g, "--method", "brkga", "--evals", "5", "--seed", "-1"], "--seed: must be in"),
        ([*g, "--method", "brkga", "--evals", "5", "--capacity", "-1"], "capacity must be"),
        ([*g, "--method", "brkga", "--evals", "5", "--checkpoint", "x.ckpt"],
         "method brkga does not take option(s) checkpoint"),
        ([*g, "--evals", "5"], "required: --method"),
    ]
    for argv, fragment in cases:
        code = main(["optimize", *argv])
        out, err = capsys.readouterr()
        assert code == 2, argv
        assert out == "", argv
        assert err.count("\n") == 1 and err.startswith("gsched: error: "), err
        assert fragment in err, (fragment, err)


@needs_diamond
@pytest.mark.parametrize("method, peak", [("xla_default", 12.0), ("xla_list", 14.0),
                                          ("xla_dfs", 12.0), ("xla_postorder", 14.0)])
def test_xla_schedulers_on_diamond(capsys, method, peak):
    # Hand-derived in tests/test_heuristics.py: list and post-order give a b c d (14), DFS
    # a c b d (12), and the default keeps the best of the three.
    args = [a if a != "brkga" else method for a in DIAMOND_ARGS]
    result = optimize(capsys, *args)
    assert result["value"] == peak and result["method"] == method
    assert result["evals_used"] == (4 if method == "xla_default" else 1)
    check_consistent(result, gsched.load_graph(DIAMOND), 1)


def test_gp_dfs_on_a_folder_and_too_small_budget(capsys, tmp_path):
    for i in range(2):
        gsched.save_graph(gsched.random_computation_graph(15 + 5 * i, i), tmp_path / f"g{i}.npz")
    out = optimize(capsys, "--graph", tmp_path, "--devices", 2, "--method", "gp_dfs",
                   "--evals", 1)
    assert [r["evals_used"] for r in out["results"]] == [1, 1]
    assert all(set(r["placement"]) <= {0, 1} for r in out["results"])
    code = main(["optimize", "--graph", str(tmp_path), "--devices", "1", "--method",
                            "xla_default", "--evals", "3"])
    assert code == 2 and "needs 4 evaluations" in capsys.readouterr().err


@needs_diamond
def test_topoformer_brkga_with_the_shipped_model_and_a_concentration(capsys):
    """The hybrid from the command line: its options reach it, the budget is exact and the
    answer is the diamond's optimum; a bad concentration is a one-line error."""
    args = [a if a != "brkga" else "topoformer_brkga" for a in DIAMOND_ARGS]
    result = optimize(capsys, *args, "--decode", "greedy", "--concentration", 8)
    assert result["method"] == "topoformer_brkga" and result["evals_used"] == 300
    assert result["value"] == 12.0
    check_consistent(result, gsched.load_graph(DIAMOND), 1)
    assert main(["optimize", *map(str, args), "--concentration", "-1"]) == 2
    assert "concentration must be a finite number > 0" in capsys.readouterr().err


def test_seed_from_on_the_command_line(capsys, tmp_path):
    """``--seed-from``: BRKGA seeded with METIS's solution, METIS's evaluation counted; the
    result row says so and is never worse than METIS alone; a bad name is a one-line error."""
    path = tmp_path / "g.npz"
    gsched.save_graph(gsched.random_computation_graph(20, 4), path)
    args = ["--graph", path, "--devices", 2, "--evals", 60, "--objective", "runtime",
            "--latency", 0.5, "--bandwidth", 100]
    seeded = optimize(capsys, *args, "--method", "brkga", "--seed-from", "metis")
    metis = optimize(capsys, *args, "--method", "metis")
    assert (seeded["evals_used"], seeded["seed_from"]) == (60, "metis")
    assert seeded["value"] <= metis["value"]
    assert main(["optimize", *map(str, args), "--method", "brkga", "--seed-from", "tabu"]) == 2
    assert "seed_from 'tabu' is not a heuristic" in capsys.readouterr().err


@pytest.mark.subprocess
def test_python_m_gsched_splits_a_batch_over_one_device_per_core(capsys, tmp_path):
    # `python -m gsched` asks XLA for one CPU device per core (no device count in XLA_FLAGS
    # here): a search's batch of two graphs runs one schedule loop per device, with the
    # results of this process's run (its devices as the tests have them).
    folder = tmp_path / "graphs"
    folder.mkdir()
    for seed in range(2):
        gsched.save_graph(gsched.random_computation_graph(8, seed), folder / f"g{seed}.pbtxt")
    args = ["--graph", folder, "--devices", 2, "--method", "brkga", "--evals", 200]
    here = optimize(capsys, *args)
    proc = subprocess.run([sys.executable, "-m", "gsched", "optimize", *map(str, args)],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=subprocess_env())
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    split = json.loads(proc.stdout)
    assert here["shards"] == len(jax.local_devices())
    assert split["shards"] == (os.cpu_count() or 1)
    assert without_timing(split) == without_timing(here)
