"""The committed results (``docs/results/**``) against today's harness: every table made from a
committed ``results.jsonl`` regenerates byte-identical, and every committed row carries the
cell hash that the harness computes for its config (so ``--resume`` keeps it)."""

import json
from pathlib import Path

import pytest

from gsched.harness.ablations import regal_table3
from gsched.harness.config import load_config
from gsched.harness.hybrid import parents_summary
from gsched.harness.report import markdown, tables
from gsched.harness.results import identity, read_rows
from gsched.harness.units import cell_hash, units

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
CONFIGS = ROOT / "eval" / "configs"
FIGURES = ["fig4_improvement_hist.png", "fig5_eval_limit.png"]
MOCCASIN = (ROOT / "../shared/benchmarks/moccasin").resolve()

REPORTS = {  # folder: reference entry of its report.md
    "synthetic": ("brkga", 5000), "moccasin": ("brkga", 5000),
    "nto_small": ("approx_dp_10k", 5000), "nto_large": ("approx_dp_1000", 5000),
    "regal_ablation": ("brkga", 5000), "synthetic_large": ("brkga", 5000),
    "topoformer_ablation": ("approx_dp_10k", 5000),
    "hybrid/nto_small": ("approx_dp_10k", 5000), "hybrid/moccasin": ("brkga", 5000),
}
SWEEPS = {  # config: the folders holding its rows (a folder may hold several configs' rows)
    "synthetic": ["synthetic"], "moccasin": ["moccasin"], "nto_small": ["nto_small"],
    "nto_large": ["nto_large"], "nto_large_dp1k": ["nto_large"],
    "nto_large_dp100k": ["nto_large"], "nto_large_dfs_dp": ["nto_large"],
    "regal_ablation": ["regal_ablation"], "synthetic_large": ["synthetic_large"],
    "nto_ablation": ["topoformer_ablation"], "hybrid": ["hybrid/nto_small", "hybrid/moccasin"],
}


@pytest.mark.parametrize("folder", sorted(REPORTS))
def test_committed_report_tables_regenerate_byte_identical(folder):
    rows = read_rows(RESULTS / folder / "results.jsonl")
    text = markdown(tables(rows, REPORTS[folder]), REPORTS[folder], FIGURES)
    assert text == (RESULTS / folder / "report.md").read_text()


def test_committed_ablation_and_hybrid_tables_regenerate():
    text, curves = regal_table3(RESULTS / "regal_ablation")
    assert text == (RESULTS / "regal_ablation" / "table3.md").read_text() and len(curves) == 6
    rows = [r for folder in ("nto_small", "moccasin")
            for r in read_rows(RESULTS / "hybrid" / folder / "results.jsonl")]
    summary = parents_summary(rows).splitlines()
    readme = set((RESULTS / "hybrid" / "README.md").read_text().splitlines())
    assert len([line for line in summary if line]) == 22
    assert all(line in readme for line in summary)


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_committed_rows_carry_the_current_cell_hash(name):
    text = (CONFIGS / f"{name}.toml").read_text()
    if "../shared/benchmarks/moccasin" in text and not MOCCASIN.is_dir():
        pytest.skip(f"{MOCCASIN} (the moccasin graphs) is not in this checkout")
    config = load_config(CONFIGS / f"{name}.toml")
    expected = {u.identity(g): cell_hash(u, config.batch_size)
                for u in units(config) for g in u.graphs}
    rows = [json.loads(line) for folder in SWEEPS[name]
            for line in (RESULTS / folder / "results.jsonl").read_text().splitlines()]
    mine = [r for r in rows if identity(r) in expected]
    assert mine and all(r["cell_hash"] == expected[identity(r)] for r in mine)
    if name not in ("nto_large", "nto_large_dp1k", "nto_large_dp100k",
                    "nto_large_dfs_dp"):  # those share one folder
        assert len(mine) == len(rows) == len(expected)
