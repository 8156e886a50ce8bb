"""gsched.plot: SPEC §3 memory timelines (cross-checked against the cost model and the §8
oracle), memory / Gantt PNGs, and the plot command."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gsched import layered_graph, random_computation_graph
from gsched.cli import main
from gsched.core.padding import bucket_for
from gsched.costmodel.host import evaluate_graph
from gsched.formats import save_graph
from gsched.plot import memory_timeline, plot, plot_command, plot_gantt, plot_memory
from tests import reference_exec as rx
from tests.graphs import diamond

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# SPEC §5's third row: D = 2, order a b X(t0,1) c X(t2,0) d, peaks [6, 12].
DIAMOND_KEYS_D2 = np.array([.9, .1, .9, .1, .1, .9, .9, .1, .9, .8, .7, .1,
                            .5, .6, .5, .5, .2, .3, .5, .5])


def _graphs():
    return [random_computation_graph(24, seed) for seed in (1, 2)] + \
        [layered_graph(20, 3, name="layered")]


GRAPHS = _graphs()
BUCKET = bucket_for(GRAPHS + [diamond()])


def _check_png(path, min_bytes=5000):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > min_bytes


def _png_height(path) -> int:
    return int.from_bytes(path.read_bytes()[20:24], "big")  # IHDR: width, height


def _peaks(timeline):
    with np.errstate(all="ignore"):
        found = np.where(np.isnan(timeline).all(axis=1), 0.0,
                         np.nanmax(np.where(np.isnan(timeline), -np.inf, timeline), axis=1))
    return found


# --- memory_timeline ------------------------------------------------------------------------


def test_timeline_diamond_worked_example():
    g = diamond()
    r = evaluate_graph(g, DIAMOND_KEYS_D2, 2, bucket=BUCKET)
    assert r["order"] == [["op", 0], ["op", 1], ["xfer", 0, 1], ["op", 2], ["xfer", 2, 0],
                          ["op", 3]]
    tl = memory_timeline(g, r, 2)
    assert tl.shape == (2, 6)
    nan = np.nan
    # a: 4 | b: 4+2 | X(t0,1): 0+4 on dev 1 | c: 4+3+5 | X(t2,0): 2+3 (t0 freed) | d: 5+1
    np.testing.assert_array_equal(tl, [[4, 6, nan, nan, 5, 6], [nan, nan, 4, 12, nan, nan]])
    np.testing.assert_allclose(_peaks(tl), r["device_peaks"])


@pytest.mark.parametrize("scheduler", ["list", "priority"])
@pytest.mark.parametrize("num_devices", [1, 2, 4])
def test_timeline_matches_cost_model_peaks(num_devices, scheduler):
    rng = np.random.default_rng(10 * num_devices + (scheduler == "list"))
    for g in GRAPHS:
        for _ in range(2):
            keys = rng.random(g.chromosome_length(num_devices))
            r = evaluate_graph(g, keys, num_devices, scheduler=scheduler, bucket=BUCKET)
            tl = memory_timeline(g, r, num_devices)
            assert tl.shape == (num_devices, len(r["order"]))
            # every step counts on exactly one device
            assert np.array_equal((~np.isnan(tl)).sum(axis=0), np.ones(len(r["order"])))
            np.testing.assert_allclose(_peaks(tl), r["device_peaks"], rtol=1e-5)
            assert max(_peaks(tl)) == pytest.approx(r["peak_memory"], rel=1e-5)


@pytest.mark.parametrize("num_devices", [1, 2])
def test_timeline_fusion_matches_reference_oracle(num_devices):
    rng = np.random.default_rng(7 + num_devices)
    fused_somewhere = False
    for g in [diamond()] + GRAPHS:
        for scheduler in ("list", "priority"):
            keys = rng.random(g.chromosome_length(num_devices) + g.num_ops)
            keys[-g.num_ops:] = 0.2 + 0.8 * keys[-g.num_ops:]  # most ops want to fuse
            ref = rx.evaluate(g, keys, num_devices, fusion=True, scheduler=scheduler)
            fused_somewhere |= any(r != j for j, r in enumerate(ref["fusion"]))
            result = {"order": [list(i) for i in ref["order"]], "placement": ref["placement"],
                      "fusion": ref["fusion"]}
            tl = memory_timeline(g, result, num_devices)
            np.testing.assert_allclose(_peaks(tl), ref["device_peaks"], rtol=1e-12)
            np.testing.assert_allclose(
                tl[[d for (_, d, _) in ref["step_usage"]], np.arange(tl.shape[1])],
                [float(u) for (_, _, u) in ref["step_usage"]], rtol=1e-12)
    assert fused_somewhere


def test_timeline_fusion_worked_example():
    # SPEC §8.4: D = 1, fusion keys [0, .9, .6, 0] → groups {a}, {b, c, d}: order a G, peak 10.
    g = diamond()
    result = {"order": [["op", 0], ["op", 3]], "placement": [0] * 4, "fusion": [0, 3, 3, 3]}
    np.testing.assert_array_equal(memory_timeline(g, result, 1), [[4, 10]])


def test_timeline_without_fusion_equals_identity_fusion():
    g = GRAPHS[0]
    r = evaluate_graph(g, np.random.default_rng(0).random(g.chromosome_length(2)), 2,
                       bucket=BUCKET)
    np.testing.assert_array_equal(memory_timeline(g, r, 2),
                                  memory_timeline(g, {**r, "fusion": list(range(g.num_ops))},
                                                  2))


@pytest.mark.parametrize("change, match", [
    (lambda r: {**r, "order": r["order"] + [["op", 99]]}, "missing op 99"),
    (lambda r: {**r, "order": r["order"][1:]}, "misses op 0"),
    (lambda r: {**r, "order": r["order"][::-1]}, "before it is there"),
    (lambda r: {**r, "order": r["order"] + [r["order"][0]]}, "repeats"),
    (lambda r: {**r, "order": [["xfer", 9, 1]] + r["order"]}, "missing tensor 9"),
    (lambda r: {**r, "order": [["nop"]] + r["order"]}, "expected"),
    (lambda r: {**r, "placement": [0, 0, 1]}, "placement has shape"),
    (lambda r: {**r, "placement": [0, 0, 5, 0]}, "outside"),
    (lambda r: {**r, "fusion": [0, 3, 3, 2]}, "not its own root"),
    (lambda r: {k: v for k, v in r.items() if k != "order"}, "no placement/order"),
])
def test_timeline_rejects_results_that_do_not_fit(change, match):
    g = diamond()
    r = evaluate_graph(g, DIAMOND_KEYS_D2, 2, bucket=BUCKET)
    with pytest.raises(ValueError, match=match):
        memory_timeline(g, change(r), 2)


# --- pictures -------------------------------------------------------------------------------


def _results(g, num_devices, scheduler, count=2, seed=0):
    rng = np.random.default_rng(seed)
    return [evaluate_graph(g, rng.random(g.chromosome_length(num_devices)), num_devices,
                           scheduler=scheduler, bucket=BUCKET) for _ in range(count)]


@pytest.mark.parametrize("kind", ["memory", "gantt", "auto"])
@pytest.mark.parametrize("which", ["diamond", "random"])
def test_plot_writes_png(tmp_path, kind, which):
    g = diamond() if which == "diamond" else GRAPHS[0]
    d = 2
    results = _results(g, d, "priority")
    out = plot(g, results, ["xla", "brkga"], d, tmp_path / f"{which}_{kind}.png", kind=kind)
    assert out == tmp_path / f"{which}_{kind}.png"
    _check_png(out)


def test_auto_with_gantt_is_taller_than_memory_only(tmp_path):
    g = GRAPHS[1]
    timed = _results(g, 2, "priority", count=1)
    untimed = [{k: v for k, v in timed[0].items() if k not in ("start", "end")}]
    with_gantt = _png_height(plot(g, timed, ["a"], 2, tmp_path / "a.png"))
    memory_only = _png_height(plot(g, untimed, ["a"], 2, tmp_path / "b.png"))
    assert with_gantt > memory_only


def test_gantt_without_times_raises(tmp_path):
    g = diamond()
    (r,) = _results(g, 2, "list", count=1)
    assert "start" not in r
    with pytest.raises(ValueError, match="needs start/end times: evaluate with --scheduler"):
        plot_gantt(g, r, 2)
    with pytest.raises(ValueError, match="needs start/end"):
        plot(g, [r], ["list"], 2, tmp_path / "g.png", kind="gantt")
    # "auto" falls back to the memory plot
    _check_png(plot(g, [r], ["list"], 2, tmp_path / "m.png", kind="auto"))


def test_plot_functions_return_figures_and_accept_axes():
    from matplotlib.figure import Figure

    g = diamond()
    results = _results(g, 2, "priority")
    fig = plot_memory(g, results, ["a", "b"], 2)
    assert len(fig.axes) == 2
    legend = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert legend[0].startswith("a: peak ") and legend[1].startswith("b: peak ")
    own = Figure()
    ax = own.add_subplot()
    assert plot_memory(g, results, None, 2, ax=ax) is own  # both devices in one axes
    assert plot_gantt(g, results[0], 2, ax=ax) is own
    gantt = plot_gantt(g, results[0], 2)
    labels = [t.get_text() for t in gantt.axes[0].texts]
    assert set(labels) <= {"a", "b", "c", "d", "→a", "→c"} and labels
    with pytest.raises(ValueError, match="2 labels for 1 results"):
        plot_memory(g, results[:1], ["a", "b"], 2)
    with pytest.raises(ValueError, match="unknown plot kind"):
        plot(g, results, None, 2, "x.png", kind="pie")


# --- plot command ---------------------------------------------------------------------------


@pytest.fixture
def diamond_files(tmp_path, capsys):
    g = diamond()
    graph_path = tmp_path / "diamond.pbtxt"
    save_graph(g, graph_path)
    keys = tmp_path / "keys.npy"
    np.save(keys, DIAMOND_KEYS_D2)
    paths = {}
    for scheduler in ("list", "priority"):
        assert main(["evaluate", "--graph", str(graph_path), "--devices", "2", "--keys",
                     str(keys), "--scheduler", scheduler]) == 0
        paths[scheduler] = tmp_path / f"{scheduler}.json"
        paths[scheduler].write_text(capsys.readouterr().out)
    evaluated = json.loads(paths["list"].read_text())
    optimized = {"method": "brkga", "num_devices": 2, "wall_seconds": 0.1, "results": [
        {"graph": str(graph_path), "objective": "peak_memory", "value": 12.0,
         "placement": [0, 0, 0, 0], "order": [["op", 0], ["op", 2], ["op", 1], ["op", 3]]},
        {"graph": "other", "placement": [0], "order": [["op", 0]]}]}
    paths["optimize"] = tmp_path / "optimize.json"
    paths["optimize"].write_text(json.dumps(optimized))
    return graph_path, paths, evaluated


def test_plot_command_evaluate_and_optimize_json(tmp_path, diamond_files):
    graph_path, paths, evaluated = diamond_files
    out = tmp_path / "pics" / "cmp.png"
    summary = plot_command(graph_path, [paths["priority"], paths["optimize"]], out)
    assert summary == {"out": str(out), "kind": "auto", "results": 2}
    _check_png(out)
    # D is inferred from the placement and transfers; a plain optimize result uses device 0.
    summary = plot_command(str(graph_path), str(paths["optimize"]), tmp_path / "o.png",
                           labels=["brkga"], kind="memory")
    assert summary["results"] == 1
    _check_png(tmp_path / "o.png")
    summary = plot_command(graph_path, [paths["list"]], tmp_path / "l.png", num_devices=3)
    _check_png(tmp_path / "l.png")
    assert evaluated["device_peaks"] == [6.0, 12.0]


def test_plot_command_bad_input(tmp_path, diamond_files):
    graph_path, paths, evaluated = diamond_files
    out = tmp_path / "x.png"
    with pytest.raises(ValueError, match="graph file .*missing.pbtxt does not exist"):
        plot_command(tmp_path / "missing.pbtxt", [paths["list"]], out)
    with pytest.raises(ValueError, match="result file .*nope.json does not exist"):
        plot_command(graph_path, [tmp_path / "nope.json"], out)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json is not JSON"):
        plot_command(graph_path, [bad], out)
    bad.write_text(json.dumps({"peak_memory": 1}))
    with pytest.raises(ValueError, match="holds no result"):
        plot_command(graph_path, [bad], out)
    bad.write_text(json.dumps({**evaluated, "order": evaluated["order"] + [["op", 7]]}))
    with pytest.raises(ValueError, match="bad.json does not fit .*missing op 7"):
        plot_command(graph_path, [bad], out)
    other = tmp_path / "other.pbtxt"
    save_graph(GRAPHS[0], other)
    with pytest.raises(ValueError, match="mismatched graph"):
        plot_command(other, [paths["list"]], out)
    with pytest.raises(ValueError, match="needs start/end"):
        plot_command(graph_path, [paths["list"]], out, kind="gantt")
    with pytest.raises(ValueError, match="outside"):
        plot_command(graph_path, [paths["list"]], out, num_devices=1)
    assert not out.exists()
