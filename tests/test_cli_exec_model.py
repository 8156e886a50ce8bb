"""The command line under SPEC §8: --scheduler / --fusion / --fusion-capacity on evaluate and
optimize (every GO/GDP baseline), the plot command, and one-line errors for bad values. Uses a
graph file written here, so it needs nothing from ../shared."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gsched.cli import main
from gsched.formats import save_graph
from tests.graphs import diamond

KEYS = [.5] * 4 + [.9, .8, .7, .1] + [.5] * 4
FUSE = [0, .9, .6, 0]


@pytest.fixture
def files(tmp_path):
    graph = tmp_path / "diamond.pbtxt"
    save_graph(diamond(), graph)
    keys, fused = tmp_path / "k.npy", tmp_path / "kf.npy"
    np.save(keys, np.array(KEYS))
    np.save(fused, np.array(KEYS + FUSE))
    return graph, keys, fused


def run(capsys, argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else err)


def test_evaluate_with_fusion_and_a_dynamic_scheduler(capsys, files):
    graph, _, fused = files
    code, out = run(capsys, ["evaluate", "--graph", graph, "--devices", 1, "--keys", fused,
                             "--fusion", "--scheduler", "priority", "--hbm-bandwidth", 1])
    assert code == 0
    # SPEC §8.4 row 2: a 0–4, G 4–12.
    assert out["fusion"] == [0, 3, 3, 3] and out["order"] == [["op", 0], ["op", 3]]
    assert out["start"] == [0.0, 4.0] and out["end"] == [4.0, 12.0]
    code, out = run(capsys, ["evaluate", "--graph", graph, "--devices", 1, "--keys", fused,
                             "--fusion", "--fusion-capacity", 4])
    assert code == 0 and out["fusion"] == [0, 3, 2, 3]


@pytest.mark.parametrize("method", ["tf_default", "human_expert", "metis", "xla_default",
                                    "annealing", "brkga", "random", "local_search"])
def test_optimize_every_baseline_with_the_execution_model(capsys, files, method):
    graph, _, _ = files
    code, out = run(capsys, ["optimize", "--graph", graph, "--devices", 2, "--method", method,
                             "--evals", 40, "--objective", "runtime", "--scheduler", "fifo",
                             "--fusion", "--device-preset", "h100"])
    assert code == 0, out
    assert out["scheduler"] == "fifo" and out["fusion_enabled"] is True
    assert len(out["fusion"]) == 4 and len(out["placement"]) == 4  # the root of each op
    assert out["runtime"] > 0 and len(out["start"]) == len(out["order"])


def test_bad_values_are_one_line_errors(capsys, files):
    graph, keys, fused = files
    cases = [
        (["evaluate", "--graph", graph, "--devices", 1, "--keys", keys, "--fusion"],
         "fusion needs N fusion keys"),
        (["evaluate", "--graph", graph, "--devices", 1, "--keys", fused],
         "only allowed with fusion on"),
        (["evaluate", "--graph", graph, "--devices", 1, "--keys", fused, "--fusion",
          "--fusion-capacity", -1], "fusion_capacity must be >= 0"),
        (["evaluate", "--graph", graph, "--devices", 1, "--keys", keys, "--scheduler", "lifo"],
         "invalid choice: 'lifo'"),
        (["optimize", "--graph", graph, "--devices", 1, "--method", "approx_dp", "--evals", 5,
          "--fusion"], "only under the list scheduler without fusion"),
        (["optimize", "--graph", graph, "--devices", 2, "--method", "brkga", "--evals", 5,
          "--genes", "order"], "unknown genes 'order'"),
    ]
    for argv, fragment in cases:
        code, err = run(capsys, argv)
        assert code == 2, argv
        assert fragment in err and err.count("\n") == 1, (argv, err)


def test_plot_command(capsys, files, tmp_path):
    pytest.importorskip("matplotlib")
    graph, _, fused = files
    code, out = run(capsys, ["evaluate", "--graph", graph, "--devices", 1, "--keys", fused,
                             "--fusion", "--scheduler", "fifo"])
    result = tmp_path / "r.json"
    result.write_text(json.dumps(out))
    png = tmp_path / "fig.png"
    code, out = run(capsys, ["plot", "--graph", graph, "--result", result, "--out", png])
    assert code == 0 and out["out"] == str(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, err = run(capsys, ["plot", "--graph", graph, "--result", tmp_path / "none.json",
                             "--out", png])
    assert code == 2 and "none.json" in err
