"""The GO / GDP baselines table (gsched/harness/go_baselines.py) on a tiny setting: every row
runs under its dynamic scheduler and under the list scheduler, results resume, the report
renders the cells from the records."""

from __future__ import annotations

from gsched.harness import go_baselines as gb
from gsched.importers import preset
from gsched.infra.progress import read_jsonl
from tests.graphs import diamond


def test_run_resume_and_report(tmp_path, monkeypatch):
    monkeypatch.setattr(gb, "graphs", lambda seed=0: {"diamond": diamond()})
    monkeypatch.setattr(gb, "DEVICE_COUNTS", (2,))
    rows = (gb.ROWS[0], gb.Row("BRKGA pl+sch+fu", "brkga", "priority", True))
    monkeypatch.setattr(gb, "ROWS", rows)
    records = gb.run(tmp_path, budget=20)
    assert len(records) == 4  # 2 rows × (dynamic, list) × 1 graph × 1 D
    by = {(r["row"], r["scheduler"]): r for r in records}
    # One device, FIFO: 2 + 3 + 4 + 1 plus the preset's launch overhead per kernel (the bytes
    # are negligible at H100's HBM bandwidth).
    overhead = preset(gb.PRESET).launch_overhead
    assert by[("TF default (one device)", "fifo")]["runtime"] == 10.0 + 4 * overhead
    assert by[("BRKGA pl+sch+fu", "priority")]["evals"] == 20
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert gb.run(tmp_path, budget=20) and \
        (tmp_path / "results.jsonl").read_text().splitlines() == lines  # resumed: nothing rerun
    text = gb.report(list(read_jsonl(tmp_path / "results.jsonl")), 20)
    assert f"| TF default (one device) | fifo | no | {10 + 4 * overhead:.4g} (+0.0%) |" in text
    assert "python -m eval.go_baselines" in text and "## D = 2" in text
