"""The GDP / GO results harness (gsched.harness.go_gdp): its rows and its tables."""

from __future__ import annotations

import json

from gsched.harness import go_gdp
from gsched.policies.go.checkpoint import load_policy


def test_rows_without_pretraining_build_untrained_policies(tmp_path):
    rows = go_gdp.rows(2, 500)  # D != PRETRAINED_D: nothing is pre-trained
    labels = [r.label for r in rows]
    assert labels[:6] == ["TF default (one device)", "human expert", "METIS", "BRKGA pl",
                          "HDP pl", "HDP pl, learning rate 0.01"]
    assert "GO-one pl+sch+fu" in labels and not any("zero-shot" in x for x in labels)
    assert go_gdp.row_options(rows[5], 2, tmp_path) == {"learning_rate": 0.01}
    one = next(r for r in rows if r.label == "GDP-one pl")
    assert not list(tmp_path.iterdir())  # listing the rows saves nothing
    options = go_gdp.row_options(one, 2, tmp_path)
    assert options["finetune_steps"] == (500 - 2) // 8
    _, spec, meta = load_policy(options["checkpoint"])
    assert spec.space.num_devices == 2 and spec.space.tasks == ("placement",)
    assert meta["untrained"] and spec.scheduler == "fifo" and not spec.fusion


def test_report_lays_out_one_table_per_device_count_and_kind():
    records = [
        {"key": go_gdp._key(g, 2, label), "graph": g, "num_ops": n, "devices": 2, "row": label,
         "table": table, "runtime": rt, "seconds": 1.5}
        for g, n in (("rnnlm", 84), (go_gdp.HELD_OUT, 193))
        for label, table, rt in (("METIS", "gdp", 10.0), ("GDP-one pl", "gdp", 8.0),
                                 ("BRKGA pl+sch+fu", "go", 6.0))]
    text = go_gdp.report(records, 500)
    assert "## D = 2: placement (FIFO, no fusion)" in text
    assert "## D = 2: placement + scheduling + fusion" in text
    assert f"{go_gdp.HELD_OUT} (*) (193 ops)" in text
    assert "| GDP-one pl | 8 (1.5 s) | 8 (1.5 s) |" in text


def test_run_returns_the_records_in_row_order_whatever_the_file_order(tmp_path):
    """Every row is done (D = 2 and the pre-trained rows' D): nothing runs, nothing is
    trained or saved."""
    out, runs, done = tmp_path / "out", tmp_path / "runs", (2, go_gdp.PRETRAINED_D)
    records = [{"key": go_gdp._key(g, d, row.label), "graph": g, "num_ops": 1, "devices": d,
                "row": row.label, "table": "go", "runtime": 1.0, "seconds": 0.0}
               for d in done for row in go_gdp.rows(d, 500) for g in go_gdp.FAMILIES]
    other = dict(records[0], key=go_gdp._key("rnnlm", 8, records[0]["row"]), devices=8)
    out.mkdir()
    with (out / "results.jsonl").open("w") as f:  # rows in reverse order, another D first
        for r in [other, *reversed(records)]:
            f.write(json.dumps(r) + "\n")
    got = go_gdp.run(out, 500, done, runs=runs)
    assert got == [*records, other]
    assert not runs.exists()
