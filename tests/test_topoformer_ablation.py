"""The Topoformer encoder-ablation table (``gsched.harness.ablations``, CLI
``eval/topoformer_ablation.py``, on a tiny untrained model and hand-made results) and the NTO
sweep configs at CPU scale
(``eval/configs/nto_ablation.toml``, ``nto_large.toml``, ``nto_large_dp1k.toml``)."""

import json
import tomllib
from pathlib import Path

import equinox as eqx
import jax

from eval.topoformer_ablation import main
from gsched.harness.ablations import ablation_entries
from gsched.harness.config import load_config, parse_config
from gsched.harness.units import cell_hash, graph_digest, units
from gsched.policies.topoformer.checkpoint import save_model
from gsched.policies.topoformer.model import Topoformer, TopoformerConfig
from gsched.policies.topoformer.relations import ENCODERS

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "eval" / "configs"


def _row(method, budget, graph, value):
    return {"dataset": "d", "graph": graph, "objective": "peak_memory", "devices": 1,
            "method": method, "seed": 0, "budget": budget, "value": value, "feasible": True,
            "wall_seconds": 0.1, "evals_used": budget}


def _setup(tmp_path):
    run = tmp_path / "runs" / "tiny"
    config = TopoformerConfig(encoder="mlp", num_layers=1, dim=8, heads_per_relation=1,
                              head_dim=4, pe_dim=2)
    save_model(run / "model", Topoformer(config, jax.random.key(0)), config, {"step": 20})
    (run / "metrics.jsonl").write_text(
        json.dumps({"step": 20, "elapsed": 60.0, "val/ratio_to_xla_list": 1.1}) + "\n"
        + json.dumps({"step": 30, "elapsed": 90.0}) + "\n")
    sweep = tmp_path / "ablation.toml"
    sweep.write_text(f"""
budgets = [5000]
seeds = [0]
devices = [1]
[[datasets]]
name = "d"
source = "synthetic"
[[objectives]]
name = "peak_memory"
[[methods]]
name = "approx_dp"
label = "dp"
[[methods]]
name = "topoformer"
label = "tiny_greedy"
options = {{ checkpoint = "{run}", decode = "greedy" }}
budgets = [1]
[[methods]]
name = "topoformer"
label = "tiny_beam"
options = {{ checkpoint = "{run}", decode = "beam" }}
budgets = [16]
""")
    rows = [_row("dp", 5000, "g0", 100.0), _row("dp", 5000, "g1", 200.0),
            _row("tiny_greedy", 1, "g0", 110.0), _row("tiny_greedy", 1, "g1", 220.0),
            _row("tiny_beam", 16, "g0", 105.0), _row("tiny_beam", 16, "g1", 200.0)]
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run, sweep, results, config


def test_table3_gaps_params_and_curve(tmp_path):
    run, sweep, results, config = _setup(tmp_path)
    out = tmp_path / "out"
    assert main(["--config", str(sweep), "--results", str(results), "--out", str(out),
                 "--reference", "dp:5000"]) == 0
    text = (out / "table3.md").read_text()
    line = next(x for x in text.splitlines() if x.startswith(f"| {run} "))
    cells = [c.strip() for c in line.strip("|").split("|")]
    params = sum(x.size for x in jax.tree.leaves(eqx.filter(Topoformer(config, jax.random.key(1)),
                                                  eqx.is_array)))
    # greedy: +10 % on both graphs; beam: +5 % and 0 % (standard error 5 / sqrt(2) / sqrt(2))
    assert cells[1:] == ["mlp", "10.00 ± 0.00", "2.50 ± 2.50", f"{params:,}", "20 / 30",
                         "1.5 min"]
    assert (out / "learning_curves.png").stat().st_size > 0


def test_missing_reference_is_an_error(tmp_path, capsys):
    _, sweep, results, _ = _setup(tmp_path)
    assert main(["--config", str(sweep), "--results", str(results), "--out",
                 str(tmp_path / "out"), "--reference", "brkga:5000"]) == 2
    assert "brkga:5000 has no rows" in capsys.readouterr().err


def test_ablation_config_covers_every_encoder_and_reuses_nto_small_reference():
    entries = ablation_entries(CONFIGS / "nto_ablation.toml")
    rows = {Path(c).name: per for c, per in entries.items() if c}
    assert set(rows) == set(ENCODERS)
    assert all(set(per) == {"greedy", "beam"} for per in entries.values())

    def reference_cells(name):  # the approx DP cells (no checkpoint is loaded)
        raw = tomllib.loads((CONFIGS / name).read_text())
        raw["methods"] = [m for m in raw["methods"] if m["name"] == "approx_dp"]
        config = parse_config(raw, name)
        return {(u.run.label, g.name): cell_hash(u, config.batch_size)
                for u in units(config) for g in u.graphs}

    ablation = reference_cells("nto_ablation.toml")
    assert len(ablation) == 16
    assert ablation == reference_cells("nto_small.toml")


def test_large_configs_sizes_and_shared_graphs():
    def digests(name):
        return {d.name: [graph_digest(g) for g in d.graphs]
                for d in load_config(CONFIGS / name).datasets}

    large = load_config(CONFIGS / "nto_large.toml")
    sizes = {d.name: {g.num_ops for g in d.graphs} for d in large.datasets}
    assert sizes == {"layered_500": {500}, "layered_1000": {1000}, "layered_2000": {2000}}
    assert digests("nto_large_dp1k.toml") == digests("nto_large.toml")  # the same graphs
