"""The reality check of the memory model against XLA and the optimizer table against XLA's
schedule (gsched/harness/xla_check.py, docs/results/xla/)."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched.core.graph import make_graph, topological_order
from gsched.costmodel.host import evaluate_order
from gsched.harness import xla_check as X
from gsched.importers import import_jax


def _mlp(x, w1, w2):
    h = jnp.tanh(x @ w1)
    return (h @ w2).sum(axis=0), h.T  # two outputs, one of them also read


def _mlp_program():
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    return _mlp, (jax.random.normal(k1, (8, 16)), jax.random.normal(k2, (16, 32)),
                  jax.random.normal(k3, (32, 4)))


def _step(w, x):  # a gradient step: several outputs, parameters read late
    loss = lambda w: jnp.sum(jnp.tanh(x @ w) ** 2)
    return w - 0.1 * jax.grad(loss)(w), loss(w)


def _step_program():
    return _step, (jnp.ones((16, 8)), jnp.ones((4, 16)))


PROGRAMS = {"mlp": _mlp_program, "step": _step_program}
CHEAP = (X.MethodRow("program_order", "XLA", "heuristic"),
         X.MethodRow("xla_default", "ours", "heuristic"))


@pytest.fixture(scope="module")
def mlp_row():
    fn, args = _mlp_program()
    return X.reality_row("mlp", fn, args)


def test_reality_row_fields_and_ratios(mlp_row):
    record, graph = mlp_row
    fn, args = _mlp_program()
    assert graph == import_jax(fn, *args, level="hlo", device="h100", name="mlp")
    for field in ("our_peak", "temp_size_in_bytes", "argument_size_in_bytes",
                  "output_size_in_bytes", "alias_size_in_bytes", "ratio_total",
                  "ratio_temp_arg", "ratio_xla_lifetimes"):
        assert field in record
    for field in ("ratio_total", "ratio_temp_arg", "ratio_xla_lifetimes"):
        assert math.isfinite(record[field]) and record[field] > 0
    assert record["num_ops"] == graph.num_ops and record["host_peak_matches"]
    assert record["argument_size_in_bytes"] == 4 * (8 * 16 + 16 * 32 + 32 * 4)
    assert record["facts"]["input_bytes"] == record["argument_size_in_bytes"]
    assert record["facts"]["num_outputs"] == 2
    assert record["facts"]["output_bytes"] == 4 * (4 + 32 * 8)
    p = record["peaks"]  # each XLA convention can only keep more bytes resident
    assert p["spec"] <= p["keep_inputs"] <= p["keep_inputs_outputs"]
    d = X.decomposition(record)
    assert (record["our_peak"] + d["inputs"] + d["outputs"] - d["views"] + d["slack"]
            == pytest.approx(record["xla_total"]))
    ba = record["buffer_assignment"]
    assert ba is None or ba["parameter"]["bytes"] == record["argument_size_in_bytes"]
    assert "inputs kept" in X.explain(record)
    json.dumps(record)  # a results.jsonl line


def test_lifetime_peaks_conventions():
    # input (4 B) -> a (8 B) -> bitcast b (8 B) -> c (2 B), in that order.
    g = make_graph(compute_cost=[0, 1, 1, 1], temporary_memory=[0, 0, 0, 0],
                   tensor_producer=[0, 1, 2, 3], tensor_size=[4, 8, 8, 2],
                   edge_tensor=[0, 1, 2], edge_consumer=[1, 2, 3],
                   op_types=["parameter", "fusion", "bitcast", "fusion"],
                   is_input=[True, False, False, False])
    assert X.lifetime_peaks(g) == 16  # a and b live together at b's step
    assert X.lifetime_peaks(g, views=("bitcast",)) == 12  # b is a view of a: 4 + 8 at a's step
    assert X.lifetime_peaks(g, keep_inputs=True) == 20  # 4 + 8 + 8
    assert X.lifetime_peaks(g, keep=np.array([3]), keep_inputs=True) == 20
    assert X.lifetime_peaks(g, keep=np.array([2]), views=("bitcast",)) == 12  # keeps a alive
    assert X.buffer_assignment_summary(b"\xff") is None
    assert X.buffer_assignment_summary(None) is None


def test_lifetime_peaks_of_another_order(mlp_row):
    _, graph = mlp_row
    for order in (topological_order(graph), np.arange(graph.num_ops)[::-1]):
        order = np.asarray(order)
        if not np.array_equal(np.sort(order), np.arange(graph.num_ops)):
            continue
        try:
            expected = evaluate_order(graph, order)["peak_memory"]
        except ValueError:  # the reversed order is not topological
            continue
        assert X.lifetime_peaks(graph, order) == pytest.approx(expected, rel=1e-6)


def test_optimizer_rows_report_and_resume(tmp_path, monkeypatch):
    records = X.run(tmp_path, budget=8, beam=4, programs=PROGRAMS, methods_=CHEAP)
    by = {r["key"]: r for r in records}
    assert set(by) == {f"{p}|{m}" for p in PROGRAMS
                       for m in (X.REALITY, "program_order", "xla_default")}
    for p in PROGRAMS:
        base = by[f"{p}|program_order"]
        assert base["peak_memory"] == by[f"{p}|{X.REALITY}"]["our_peak"]
        assert base["reduction"] == 0
        ours = by[f"{p}|xla_default"]
        assert ours["peak_memory"] > 0 and math.isfinite(ours["reduction"])
        assert ours["budget"] == 4
        for r in (base, ours):  # re-scored with XLA's lifetimes, the host check passing
            assert r["host_peak_matches"] and r["peak_xla_lifetimes"] >= r["peak_memory"]
        assert base["reduction_xla_lifetimes"] == 0
    text = X.report(records, 8, 4, tmp_path, methods_=CHEAP,
                    info={"cpu": "test CPU", "cores": 2, "load": (1.0, 1.0, 1.0),
                          "jax": jax.__version__, "date": "2025-01-01"})
    assert f"`python -m eval.xla_check --budget 8 --beam 4 --out {tmp_path}`" in text
    assert "| mlp |" in text and "| step |" in text and "**mean reduction**" in text
    assert "our peak" in text and "ours / (temp+arg+out−alias)" in text
    assert "2b. The same orders under XLA's lifetime conventions" in text
    lines = (tmp_path / "results.jsonl").read_text().splitlines()

    def fail(*args, **kwargs):
        raise AssertionError("a done program was imported again")

    monkeypatch.setattr(X, "reality_row", fail)
    again = X.run(tmp_path, budget=8, beam=4, programs=PROGRAMS, methods_=CHEAP)
    assert (tmp_path / "results.jsonl").read_text().splitlines() == lines
    assert {r["key"] for r in again} == set(by)


def test_failing_method_is_recorded(mlp_row):
    record, graph = mlp_row
    rows = X.run_job(X.MethodRow("no_such_method", "?", "search"), ["a", "b"],
                     {"a": graph, "b": graph}, 8, 4, {"a": record["our_peak"]})
    assert [r["program"] for r in rows] == ["a", "b"]
    assert all("unknown method 'no_such_method'" in r["error"] for r in rows)
    text = X.report([record | {"program": "a", "key": f"a|{X.REALITY}"}, *rows], 8, 4,
                    methods_=(X.MethodRow("no_such_method", "broken", "search"),),
                    info={"cpu": "c", "cores": 2, "load": (0, 0, 0), "jax": "x", "date": "d"})
    assert "error" in text and "unknown method" in text


def test_dfs_scheduler_rows_in_a_subprocess():
    from gsched import workloads

    label = "rnnlm/small/inference"
    record, graph = X.reality_row(label, *workloads.program("rnnlm", "small", "inference"))
    rows = X.xla_flag_rows([label, "nope/small/inference"], {label: record}, {label: graph},
                           timeout=300)
    dfs, bad = rows
    assert dfs["key"] == f"{label}|{X.DFS}" and dfs["xla_flags"] == X.DFS_FLAG
    assert dfs["peak_memory"] > 0 and dfs["same_instructions"]
    assert math.isfinite(dfs["reduction"]) and math.isfinite(dfs["reduction_xla_lifetimes"])
    assert dfs["temp_size_in_bytes"] is not None
    assert "error" in bad and "nope" in bad["error"]
    text = X.report([record, dfs], 8, 4, methods_=CHEAP,
                    info={"cpu": "c", "cores": 2, "load": (0, 0, 0), "jax": "x", "date": "d"})
    assert "1b. XLA's two CPU schedulers" in text and "XLA, DFS memory scheduler" in text
