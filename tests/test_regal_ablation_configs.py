"""The REGAL ablation and transfer sweep configs (``eval/configs/regal_ablation.toml``,
``eval/configs/synthetic_large.toml``): they parse, compare on the intended graphs and share
the BRKGA 5K reference cells with ``synthetic.toml``."""

import tomllib
from pathlib import Path

from gsched.harness.config import load_config, parse_config
from gsched.harness.units import cell_hash, units

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "eval" / "configs"
TRAIN_MAX_OPS = 40  # train/configs/regal_small.toml data.max_ops


def _reference_cells(name: str) -> dict:
    """BRKGA 5K peak-memory cells of a config: identity → cell_hash (other methods dropped, so
    that no checkpoint is loaded)."""
    raw = tomllib.loads((CONFIGS / name).read_text())
    raw["methods"] = [{"name": "brkga", "budgets": [5000]}]
    raw["objectives"] = [o for o in raw["objectives"] if o["name"] == "peak_memory"]
    config = parse_config(raw, name)
    return {(u.dataset.name, u.devices, u.seed, g.name): cell_hash(u, config.batch_size)
            for u in units(config) for g in u.graphs}


def test_ablation_shares_the_synthetic_brkga_reference():
    cells = _reference_cells("regal_ablation.toml")
    assert len(cells) == 8
    assert cells.items() <= _reference_cells("synthetic.toml").items()
    ablation = load_config(CONFIGS / "regal_ablation.toml")
    checkpoints = [m.options.get("checkpoint") for m in ablation.methods if m.name == "regal"]
    assert len(set(checkpoints)) == len(checkpoints) > 1  # one policy per row


def test_large_transfer_graphs_are_several_times_the_training_size():
    config = load_config(CONFIGS / "synthetic_large.toml")
    (dataset,) = config.datasets
    sizes = [g.num_ops for g in dataset.graphs]
    assert len(sizes) == config.batch_size == 8  # one batch
    assert min(sizes) >= 3 * TRAIN_MAX_OPS
    assert {m.label for m in config.methods} >= {"brkga", "regal", "idrs"}
