"""A sweep over two ``jax.distributed`` processes (two local CPU processes, a localhost
coordinator): process ``i`` runs every 2nd batch and writes ``results.p{i}.jsonl``; the merged
table equals a one-process run of the same config, and ``--resume`` afterwards reruns nothing.
"""

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gsched.harness.config import load_config
from gsched.harness.results import IDENTITY, read_rows
from gsched.harness.run import run_sweep
from tests.graphs import subprocess_env

ROOT = Path(__file__).resolve().parents[1]
FIELDS = IDENTITY + ("value", "feasible", "peak_memory", "runtime", "device_peaks",
                     "evals_used", "capacity", "cell_hash")

# 4 tiny graphs in 2 batches × 2 objectives × (random search, a heuristic): 8 batches.
CONFIG = """
seeds = [0]
devices = [2]
batch_size = 2
budgets = [32]

[[datasets]]
name = "tiny"
source = "synthetic"
graphs = 20
ops = [10, 24]
limit = 4

[[objectives]]
name = "peak_memory"

[[objectives]]
name = "runtime"
latency = 0.5
bandwidth = 2e4
capacity_fraction = 0.6

[[methods]]
name = "random"

[[methods]]
name = "gp_dfs"
"""

# One process of the sweep: jax.distributed first, then the command line of eval.sweep, with
# gsched.methods.optimize counted (printed as CALLS=n).
WORKER = """
import sys
import jax

port, index, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=2,
                           process_id=index, initialization_timeout=120)
from eval import sweep
from gsched.harness import run

calls = []
optimize = run.optimize
run.optimize = lambda *args, **kwargs: calls.append(args[0]) or optimize(*args, **kwargs)
code = sweep.main(argv)
print(f"CALLS={len(calls)}", flush=True)
jax.distributed.shutdown()
sys.exit(code)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _two_processes(logs: Path, *argv: str) -> list[dict]:
    """Runs ``python -m eval.sweep argv`` as processes 0 and 1 of a ``jax.distributed`` job;
    returns each one's printed result, its ``optimize`` calls and its log (stderr)."""
    port = str(_free_port())
    env = subprocess_env(JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))  # one CPU device each
    logs.mkdir()
    procs = []
    for i in range(2):  # output to files: a full pipe must not block a process at a barrier
        with open(logs / f"{i}.out", "w") as out, open(logs / f"{i}.err", "w") as err:
            procs.append(subprocess.Popen([sys.executable, "-c", WORKER, port, str(i), *argv],
                                          cwd=ROOT, env=env, stdout=out, stderr=err))
    try:
        codes = [proc.wait(timeout=300) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    outs = []
    for i, code in enumerate(codes):
        log = (logs / f"{i}.err").read_text()
        assert code == 0, f"process {i}: {log[-3000:]}"
        lines = (logs / f"{i}.out").read_text().splitlines()
        outs.append({"result": json.loads(lines[-2]),
                     "calls": int(lines[-1].removeprefix("CALLS=")), "log": log})
    return outs


def _table(rows):
    return sorted(tuple(json.dumps(r[k]) for k in FIELDS) for r in rows)


@pytest.mark.subprocess
def test_two_process_sweep_matches_one_process_and_resumes(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(CONFIG)
    config = load_config(path)
    single = run_sweep(config, tmp_path / "single", log=lambda m: None)
    assert len(single) == 16  # 2 objectives × 2 methods × 4 graphs

    out = tmp_path / "distributed"
    first = _two_processes(tmp_path / "run", "--config", str(path), "--out", str(out))
    assert [p["calls"] for p in first] == [4, 4]  # every 2nd of the 8 batches
    for i, p in enumerate(first):
        assert f"sweep tiny: 8 batches, 16 cells, process {i} of 2: 8 cells" in p["log"]
    assert sorted(p.name for p in out.iterdir()) == ["results.p0.jsonl", "results.p1.jsonl"]
    for i in range(2):  # each process writes its own rows: 4 batches of 2 graphs
        assert len(read_rows(out / f"results.p{i}.jsonl")) == 8
    merged = read_rows(out)
    assert _table(merged) == _table(single)
    # the last barrier: each process returns the complete merged table
    assert [p["result"] for p in first] == [{"results": str(out), "rows": 16}] * 2

    files = {p.name: p.read_bytes() for p in out.iterdir()}
    again = _two_processes(tmp_path / "resume", "--config", str(path), "--out", str(out),
                           "--resume")
    assert [p["calls"] for p in again] == [0, 0]
    assert [p["result"]["rows"] for p in again] == [16, 16]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == files
