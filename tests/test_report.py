"""Report arithmetic (``gsched.harness.report``, CLI ``eval/report.py``) on a hand-made results
table with known answers."""

import json
import math
import sys

import pytest

from eval import report
from gsched.harness.report import parse_reference, tables

REF = ("brkga", 5000)


def row(method, budget, graph, value, seed=0, wall=1.0, objective="peak_memory",
        feasible=True):
    return {"dataset": "d", "graph": graph, "objective": objective, "devices": 2,
            "method": method, "seed": seed, "budget": budget, "value": value,
            "wall_seconds": wall, "evals_used": budget, "feasible": feasible}


# reference: g1 = 100, g2 = 200; random: g1 = mean(80, 100) = 90, g2 = 220;
# gp_dfs: g1 = 100, g2 = 100. Best known (any entry, any seed): g1 = 80, g2 = 100.
ROWS = [
    row("brkga", 5000, "g1", 100.0), row("brkga", 5000, "g2", 200.0),
    row("random", 5000, "g1", 80.0, seed=0, wall=0.1),
    row("random", 5000, "g1", 100.0, seed=1, wall=0.3),
    row("random", 5000, "g2", 220.0, wall=0.8),
    row("gp_dfs", 1, "g1", 100.0), row("gp_dfs", 1, "g2", 100.0),
]


def test_table1_and_table2_known_answers():
    stats = tables(ROWS, REF)[("d", "peak_memory", 2)]
    assert list(stats) == [("brkga", 5000), ("gp_dfs", 1), ("random", 5000)]
    rnd = stats[("random", 5000)]
    assert rnd.graphs == 2
    assert rnd.improvement_mean == pytest.approx(0.0, abs=1e-12)  # (+10 − 10) / 2
    assert rnd.improvement_geo == pytest.approx(100 * (1 - math.sqrt(0.9 * 1.1)))  # 0.5013
    assert rnd.gap_mean == pytest.approx((12.5 + 120.0) / 2)  # 90/80, 220/100
    assert rnd.gap_geo == pytest.approx(100 * (math.sqrt(1.125 * 2.2) - 1))  # 57.32
    assert rnd.match_or_beat == 0.5
    assert rnd.feasible == 1.0
    assert rnd.wall_mean == pytest.approx(0.5)  # g1: mean(0.1, 0.3) = 0.2; g2: 0.8
    assert rnd.wall_geo == pytest.approx(0.4)  # sqrt(0.2 · 0.8)
    gp = stats[("gp_dfs", 1)]
    assert gp.improvement_mean == pytest.approx(25.0)  # 0 and 50
    assert gp.improvement_geo == pytest.approx(100 * (1 - math.sqrt(0.5)))  # 29.29
    assert gp.gap_mean == pytest.approx(12.5) and gp.match_or_beat == 1.0
    assert gp.gap_geo == pytest.approx(100 * (math.sqrt(1.25) - 1))
    ref = stats[REF]
    assert ref.improvement_mean == 0 and ref.improvement_geo == pytest.approx(0, abs=1e-12)
    assert ref.match_or_beat == 1.0 and ref.gap_mean == pytest.approx(62.5)
    assert ref.evals_mean == 5000


def test_infeasible_solutions_are_left_out_of_the_means():
    rows = [r | {"feasible": False} if (r["method"], r["graph"]) == ("random", "g2") else r
            for r in ROWS]
    rows.append(row("gp_dfs", 1, "g3", 50.0, feasible=False))
    rows.append(row("brkga", 5000, "g3", 60.0))
    stats = tables(rows, REF)[("d", "peak_memory", 2)]
    rnd, gp = stats[("random", 5000)], stats[("gp_dfs", 1)]
    assert rnd.improvement_mean == pytest.approx(10.0)  # g1 only
    assert rnd.improvement_geo == pytest.approx(10.0)
    assert rnd.gap_mean == pytest.approx(12.5)  # g1 only: 90 / 80
    assert rnd.match_or_beat == 0.5 and rnd.feasible == 0.5
    # gp_dfs on g3 is infeasible (50 < 60 does not count): no match there; best g3 = 60
    assert gp.graphs == 3 and gp.match_or_beat == pytest.approx(2 / 3)
    assert gp.improvement_mean == pytest.approx(25.0)  # g1, g2 as before
    assert stats[REF].gap_mean == pytest.approx((25.0 + 100.0 + 0.0) / 3)  # g2's best: 100


def test_missing_reference_leaves_improvement_undefined():
    stats = tables([r for r in ROWS if r["method"] != "brkga"], REF)[("d", "peak_memory", 2)]
    assert all(math.isnan(s.improvement_mean) and s.graphs == 0 for s in stats.values())
    assert stats[("gp_dfs", 1)].gap_mean == pytest.approx(12.5)  # best known: g1 80, g2 100


def test_sections_are_separate_and_bad_values_rejected():
    rows = ROWS + [row("brkga", 5000, "g1", 7.0, objective="runtime")]
    stats = tables(rows, REF)
    assert set(stats) == {("d", "peak_memory", 2), ("d", "runtime", 2)}
    assert stats[("d", "runtime", 2)][REF].gap_mean == 0
    with pytest.raises(ValueError, match="random on g1 .*positive finite"):
        tables(ROWS + [row("random", 10, "g1", 0.0)], REF)
    with pytest.raises(ValueError, match="METHOD:BUDGET"):
        parse_reference("brkga")
    assert parse_reference("tuned:brkga:5000") == ("tuned:brkga", 5000)


def _write(path, rows, tail=""):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)


def test_cli_writes_tables_and_png_plots(tmp_path):
    pytest.importorskip("matplotlib")
    _write(tmp_path / "results.jsonl", ROWS, tail='{"dataset": "d", "gra')  # killed mid-write
    out = tmp_path / "report"
    assert report.main([str(tmp_path), "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert "## d — peak_memory, D = 2" in text
    assert "| random | 5000 | 2 | 0.00 | 0.50 | 66.25 | 57.32 | 50 % | 100 % |" in text
    assert "| random | 5000 | 0.5 | 0.4 | 5000 |" in text
    for name in ("fig4_improvement_hist.png", "fig5_eval_limit.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"![{name}]({name})" in text


def test_without_matplotlib_tables_are_still_written(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    _write(tmp_path / "r.jsonl", ROWS)
    assert report.main([str(tmp_path / "r.jsonl"), "--out", str(tmp_path / "o"),
                        "--reference", "gp_dfs:1"]) == 0
    assert "pip install -e .[eval]" in capsys.readouterr().err
    text = (tmp_path / "o" / "report.md").read_text()
    assert "Reference: **gp_dfs 1**" in text and "pip install -e .[eval]" in text
    assert not list((tmp_path / "o").glob("*.png"))
    assert report.main([str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
