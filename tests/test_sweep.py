"""The evaluation sweep (``gsched.harness``, CLI ``eval/sweep.py``): config validation, tidy
rows, resume, sharding.

The runs use ``eval/configs/smoke.toml`` cut down to one budget and two methods, so the whole
file compiles random search twice (one per objective).
"""

import copy
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from eval import sweep
from gsched.harness import config as harness_config
from gsched.harness import run as harness_run
from gsched.harness.config import ConfigError, load_config, parse_config
from gsched.harness.results import IDENTITY, read_rows
from gsched.harness.run import run_sweep
from gsched.harness.units import units
from gsched.methods import Method
from tests.graphs import subprocess_env

ROOT = Path(__file__).resolve().parents[1]
SMOKE = tomllib.loads((ROOT / "eval/configs/smoke.toml").read_text())


def small(**changes) -> dict:
    raw = copy.deepcopy(SMOKE)
    raw["budgets"] = [32]
    raw["methods"] = [{"name": "random"}, {"name": "gp_dfs"}]
    return raw | changes


def table(rows):
    return sorted((tuple(r[k] for k in IDENTITY), r["value"], r["feasible"]) for r in rows)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A complete small sweep: (config, folder, rows)."""
    config = parse_config(small(), "small")
    out = tmp_path_factory.mktemp("sweep")
    return config, out, run_sweep(config, out, log=lambda m: None)


def _count_calls(monkeypatch):
    calls = []

    def counting(name, graphs, **kwargs):
        calls.append((name, kwargs["objective"], kwargs["budget"]))
        return optimize(name, graphs, **kwargs)
    optimize = harness_run.optimize
    monkeypatch.setattr(harness_run, "optimize", counting)
    return calls


@pytest.mark.parametrize("change, message", [
    # checks of the sweep's own (registry, values, datasets)
    (dict(methods=[{"name": "anneal"}]), "key 'methods[0].name': unknown method 'anneal'"),
    (dict(methods=[{"name": "random", "options": {"checkpoint": "x"}}]),
     "key 'methods[0].options': method random does not take checkpoint"),
    (dict(budgets=[0]), "key 'budgets[0]': must be an integer >= 1, got 0"),
    (dict(methods=[{"name": "random", "budgets": [100, -5]}]),
     "key 'methods[0].budgets[1]': must be an integer >= 1, got -5"),
    (dict(methods=[{"name": "gp_dfs", "budgets": [5]}]),
     "key 'methods[0].budgets': heuristic gp_dfs has no budget"),
    (dict(datasets=[{"name": "none", "source": "files", "path": "/nonexistent/*.json"}]),
     "key 'datasets[0].path': '/nonexistent/*.json' matches no file"),
    (dict(datasets=[dict(SMOKE["datasets"][0], max_ops=3)]),
     "key 'datasets[0]': dataset 'tiny' is empty"),
    (dict(objectives=[{"name": "speed"}]), "key 'objectives[0].name': unknown objective 'speed'"),
    (dict(objectives=[{"name": "runtime", "capacity": 1.0, "capacity_fraction": 0.5}]),
     "key 'objectives[0]': give capacity or capacity_fraction"),
    (dict(objectives=[{"name": "runtime", "bandwidth": 0}]),
     "key 'objectives[0].bandwidth': must be > 0"),
    (dict(seeds=[]), "key 'seeds': expected a non-empty list"),
    (dict(batch_size=0), "key 'batch_size': expected an integer >= 1, got 0"),
    (dict(methods=[{"name": "random"}, {"name": "random"}]),
     "key 'methods': repeated label(s) random"),
    # keys and types, checked by gsched.infra.config's typed loader
    (dict(datasets=[dict(SMOKE["datasets"][0], sizes=[1])]),
     "unknown key 'datasets[0].sizes' (known keys: graphs, kind,"),
    (dict(colour="red"), "unknown key 'colour'"),
    (dict(seeds=[0, "1"]), "key 'seeds[1]': expected int, got str '1'"),
    (dict(datasets=[dict(SMOKE["datasets"][0], split="validation")]),
     "key 'datasets[0].split': expected one of ['train', 'valid', 'test', 'all']"),
    (dict(methods=[{"name": "random", "optional": "yes"}]),
     "key 'methods[0].optional': expected bool, got str 'yes'"),
])
def test_config_errors_name_the_key(change, message):
    with pytest.raises(ConfigError) as error:
        parse_config(small(**change), "small")
    assert str(error.value).startswith("small: ") and message in str(error.value)


def test_config_errors_name_the_file(tmp_path):
    raw = small()
    del raw["seeds"]
    path = tmp_path / "broken.toml"
    path.write_text(_toml(raw))
    with pytest.raises(ConfigError, match=f"^{path}: missing required key 'seeds'"):
        load_config(path)
    path.write_text(_toml(small(methods=[{"name": "anneal"}])))
    with pytest.raises(ConfigError, match=f"^{path}: key 'methods\\[0\\].name': unknown method"):
        load_config(path)
    path.write_text("seeds = [0\n")
    with pytest.raises(ConfigError, match=f"^{path}: invalid TOML"):
        load_config(path)


def test_optional_methods_that_cannot_run_are_skipped_with_a_note(monkeypatch):
    def missing_extra():
        raise ImportError("needs pip install -e .[extra]")
    monkeypatch.setitem(harness_config.METHODS, "extra",
                        Method("test", "heuristic", missing_extra))
    config = parse_config(small(methods=[{"name": "random"},
                                         {"name": "not_a_method", "optional": True},
                                         {"name": "extra", "optional": True}]))
    assert [m.label for m in config.methods] == ["random"]
    assert config.skipped == (
        "method not_a_method is not registered (optional): skipped",
        "method extra cannot be built (optional): skipped (needs pip install -e .[extra])")
    with pytest.raises(ConfigError, match="key 'methods': none of the methods can run"):
        parse_config(small(methods=[{"name": "extra", "optional": True}]))


def test_units_respect_device_and_objective_limits(monkeypatch):
    monkeypatch.setitem(harness_config.METHODS, "memory_only", Method(
        "test", "heuristic", lambda: None, max_devices=1, objectives=("peak_memory",)))
    config = parse_config(small(devices=[1, 2], methods=[
        {"name": "memory_only"}, {"name": "gp_dfs", "devices": [2]}]))
    cells = {(u.run.label, u.objective.name, u.devices) for u in units(config)}
    assert cells == {("memory_only", "peak_memory", 1), ("gp_dfs", "peak_memory", 2),
                     ("gp_dfs", "runtime", 2)}


def test_rows_are_tidy_and_complete(finished):
    config, out, rows = finished
    graphs = config.datasets[0].graphs
    # 2 objectives × (random at 32 + gp_dfs at its 1 evaluation) × 4 graphs, one seed, D = 2
    assert len(rows) == 2 * 2 * len(graphs) == len({tuple(r[k] for k in IDENTITY)
                                                     for r in rows})
    for r in rows:
        assert r["evals_used"] == r["budget"] == (32 if r["method"] == "random" else 1)
        assert r["value"] == r[r["objective"]] and r["wall_seconds"] > 0
        assert "placement" not in r and "order" not in r
    runtime = [r for r in rows if r["objective"] == "runtime"]
    batches = [graphs[:2], graphs[2:]]  # capacity: 0.6 × the batch's smallest total size
    for r in runtime:
        batch = next(b for b in batches if r["graph"] in {g.name for g in b})
        assert r["capacity"] == pytest.approx(0.6 * min(g.tensor_size.sum() for g in batch))
    assert all(r["capacity"] is None for r in rows if r["objective"] == "peak_memory")


def test_resume_after_interruption_redoes_only_missing_cells(finished, tmp_path, monkeypatch):
    config, out, rows = finished
    lines = (out / "results.jsonl").read_text().splitlines(keepends=True)
    # killed while writing the 2nd batch: its first row complete, the second half written
    (tmp_path / "results.jsonl").write_text("".join(lines[:3]) + lines[3][:25])
    warnings = []
    calls = _count_calls(monkeypatch)
    again = run_sweep(config, tmp_path, resume=True, log=warnings.append)
    assert table(again) == table(rows)
    assert any("partial last line" in w for w in warnings)
    # the 1st batch (rows 1-2) is kept; the 2nd batch re-runs (row 3 is rewritten, once)
    assert len(calls) == len(rows) // 2 - 1
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == len(rows) + 1
    calls.clear()
    assert table(run_sweep(config, tmp_path, resume=True, log=warnings.append)) == table(rows)
    assert calls == []  # nothing left to do; the repeated row is compacted away
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == len(rows)


def test_changed_config_reruns_only_changed_cells(finished, tmp_path, monkeypatch):
    config, out, rows = finished
    (tmp_path / "results.jsonl").write_text((out / "results.jsonl").read_text())
    raw = small()
    raw["objectives"][1]["latency"] = 1.5
    calls = _count_calls(monkeypatch)
    new = run_sweep(parse_config(raw, "small"), tmp_path, resume=True, log=lambda m: None)
    assert {c[1] for c in calls} == {"runtime"} and len(calls) == 4  # 2 methods × 2 batches
    stale = read_rows(tmp_path / "stale.jsonl")
    assert len(stale) == len(rows) // 2 and {r["objective"] for r in stale} == {"runtime"}
    old = {tuple(r[k] for k in IDENTITY): r for r in rows}
    for r in new:
        if r["objective"] == "peak_memory":
            assert r == old[tuple(r[k] for k in IDENTITY)]


def test_existing_results_need_resume(finished):
    config, out, _ = finished
    with pytest.raises(ValueError, match="pass --resume"):
        run_sweep(config, out, log=lambda m: None)


def test_corrupt_middle_line_is_an_error(tmp_path):
    (tmp_path / "results.jsonl").write_text('{"a": 1}\nnot json\n{"b": 2}\n')
    with pytest.raises(ValueError, match="results.jsonl:2: not a JSON line"):
        read_rows(tmp_path)


def test_cli_progress_and_resume(finished, tmp_path, capsys):
    _, out, rows = finished
    config_path = tmp_path / "small.toml"
    config_path.write_text(_toml(small()))
    target = tmp_path / "out"
    target.mkdir()
    (target / "results.jsonl").write_text((out / "results.jsonl").read_text())
    assert sweep.main(["--config", str(config_path), "--out", str(target)]) == 2
    assert "pass --resume" in capsys.readouterr().err
    (target / "results.jsonl").write_text(
        "".join((out / "results.jsonl").read_text().splitlines(keepends=True)[:-2]))
    assert sweep.main(["--config", str(config_path), "--out", str(target), "--resume"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"results": str(target), "rows": len(rows)}
    # one progress line per batch rerun: cells done / total, evaluations done / total (the
    # steps of gsched.infra.progress.Progress), the cell's mean best value, ETA
    assert f"cells, {len(rows) - 2} done before" in captured.err
    evaluations = sum(r["budget"] for r in rows)
    assert f"[{len(rows)}/{len(rows)} cells]" in captured.err
    assert f"| step {evaluations}/{evaluations} | mean best value " in captured.err
    assert "steps/s" in captured.err and "ETA" in captured.err
    assert sweep.main(["--config", str(tmp_path / "missing.toml")]) == 2


def _toml(raw: dict) -> str:
    """Just enough TOML for the smoke config's shapes."""
    def value(v):
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + "}"
        return json.dumps(v)
    lines = [f"{k} = {value(v)}" for k, v in raw.items() if not isinstance(v, list)
             or not v or not isinstance(v[0], dict)]
    for k, v in raw.items():
        if isinstance(v, list) and v and isinstance(v[0], dict):
            for table_ in v:
                lines += [f"[[{k}]]"] + [f"{a} = {value(b)}" for a, b in table_.items()]
    return "\n".join(lines) + "\n"


SHARDED = """
import jax, json, sys, tomllib
sys.path.insert(0, sys.argv[2])
from test_sweep import small
from gsched.harness.config import parse_config
from gsched.harness.run import run_sweep
assert len(jax.local_devices()) == 2, jax.local_devices()
config = parse_config(small(methods=[{"name": "random"}], objectives=small()["objectives"][:1]))
log = []
rows = run_sweep(config, sys.argv[1], log=log.append)
assert any("split over 2 devices" in m for m in log), log
print("ROWS=" + json.dumps(rows))
"""


@pytest.mark.subprocess
def test_sharded_sweep_matches_unsharded(finished, tmp_path):
    """The fixture's unsharded random-search rows, again with each batch of 2 graphs split
    over 2 forced CPU devices (a subprocess: the device count is fixed when JAX starts)."""
    env = subprocess_env(2, JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", SHARDED, str(tmp_path), str(ROOT / "tests")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    lines = [line for line in out.stdout.splitlines() if line.startswith("ROWS=")]
    assert lines, out.stderr[-3000:]
    sharded = json.loads(lines[0][len("ROWS="):])
    unsharded = [r for r in finished[2] if r["method"] == "random"
                 and r["objective"] == "peak_memory"]
    fields = ("value", "peak_memory", "runtime", "device_peaks", "feasible", "cell_hash")
    assert len(sharded) == len(unsharded) == len(finished[0].datasets[0].graphs)
    assert (sorted(tuple(r[k] for k in IDENTITY + fields) for r in sharded)
            == sorted(tuple(r[k] for k in IDENTITY + fields) for r in unsharded))
