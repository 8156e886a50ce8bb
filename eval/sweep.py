"""Evaluation sweeps: datasets × objectives × devices × methods × budgets × seeds (issue #3).

    python -m eval.sweep --config eval/configs/NAME.toml [--out DIR] [--resume] [--shards K]

Every method runs through :func:`gsched.methods.optimize`, one batch of ``batch_size`` graphs
at a time. Results are a tidy table, one JSON line per (dataset, graph, objective, devices,
method, seed, budget) — :data:`IDENTITY` — appended and flushed after every batch to
``DIR/results.jsonl`` (default ``DIR = runs/sweeps/<config stem>``), with ``value``,
``feasible``, ``peak_memory``, ``device_peaks``, ``runtime``, ``evals_used``,
``wall_seconds`` (the batch's wall time divided by its graphs), ``compile_seconds`` (the
batch's), ``capacity``, the method's info fields and ``cell_hash``.

**Resume.** ``cell_hash`` is a hash of everything that decides a row's value besides its
identity: the objective's cost parameters, the method's options, the batch size and the
content of every graph of its batch. ``--resume`` skips every batch whose rows are all
present with the current hash; rows that the current config does not produce any more (a changed
cost parameter, a removed method, an edited graph file) move to ``DIR/stale.jsonl`` so the
table always matches the config. A partial last line (a sweep killed mid-write) is dropped
with a warning; a corrupt line elsewhere is an error. Without ``--resume`` an existing,
non-empty results file is an error.

**Batches and sharding.** Each dataset's graphs are sorted by size and cut into batches of
``batch_size``; the last one is filled up with copies of its first graph (their rows are
dropped), so every batch has the same shape (one compilation per bucket) and a graph's result
does not depend on how many devices run it. A search method's batch is split over a
``jax.sharding.Mesh`` of ``K`` local devices (``optimize(..., mesh=)``: the leading graph
axis is sharded, the search runs SPMD and gives the unsharded values); ``K`` defaults to the
largest divisor of ``batch_size`` not above ``len(jax.local_devices())``. Heuristics run on
the host. Under ``jax.distributed`` (several processes), process ``i`` of ``n`` runs every
``n``-th batch and writes ``results.p{i}.jsonl``; readers merge all ``results*.jsonl``
(``docs/harness.md``).

**Capacity.** ``capacity`` is in bytes, or ``capacity_fraction`` of the smallest total tensor
size among the batch's graphs (as ``eval/demo.py`` does for its batch); batches hold graphs
of similar size, and every method sees the same batches. The row records the capacity used.

The config format is documented in ``docs/harness.md``; ``eval/configs/`` holds examples.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import hashlib
import json
import math
import os
import sys
import time
import tomllib
from pathlib import Path
from typing import Callable, Iterator

import jax
import numpy as np

from gsched.cost_model import OBJECTIVES, CostParams
from gsched.formats import load_graphs
from gsched.generators import synthetic_dataset
from gsched.graph import Graph
from gsched.methods import METHODS, Method, optimize

IDENTITY = ("dataset", "graph", "objective", "devices", "method", "seed", "budget")
RESULTS = "results.jsonl"
STALE = "stale.jsonl"
_DROPPED = ("placement", "order")  # per-graph solutions are not kept in the table


class ConfigError(ValueError):
    """The sweep config is invalid; the message names the offending key."""


# --- Config ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Dataset:
    name: str
    graphs: tuple[Graph, ...]  # sorted by size


@dataclasses.dataclass(frozen=True)
class Objective:
    name: str  # "peak_memory" or "runtime"
    spec: dict
    latency: float
    bandwidth: float
    capacity: float | None  # bytes
    capacity_fraction: float | None  # of the batch's smallest total tensor size

    def cost_params(self, graphs) -> CostParams:
        """The cost parameters of a batch (``capacity_fraction`` resolved on its graphs)."""
        capacity = self.capacity
        if self.capacity_fraction is not None:
            capacity = self.capacity_fraction * min(float(g.tensor_size.sum()) for g in graphs)
        return CostParams(latency=self.latency, bandwidth=self.bandwidth,
                          capacity=math.inf if capacity is None else capacity)


@dataclasses.dataclass(frozen=True)
class MethodRun:
    label: str  # the table's "method" column
    name: str  # the registry name
    method: Method
    options: dict
    budgets: tuple[int, ...]  # search: the budgets run; heuristic: (min_evals,)
    devices: tuple[int, ...] | None  # None: every device count of the config


@dataclasses.dataclass(frozen=True)
class Config:
    name: str
    batch_size: int
    seeds: tuple[int, ...]
    devices: tuple[int, ...]
    datasets: tuple[Dataset, ...]
    objectives: tuple[Objective, ...]
    methods: tuple[MethodRun, ...]
    skipped: tuple[str, ...]  # notes: optional methods that cannot run here


def _keys(table: dict, where: str, required: tuple[str, ...], optional: tuple[str, ...]):
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table, got {table!r}")
    for key in required:
        if key not in table:
            raise ConfigError(f"{where}.{key}: missing")
    unknown = sorted(set(table) - set(required) - set(optional))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (allowed: "
                          f"{', '.join(required + optional)})")


def _int_list(value, where: str, minimum: int) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where}: expected a non-empty list of integers, got {value!r}")
    for v in value:
        if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
            raise ConfigError(f"{where}: every entry must be an integer >= {minimum}, got {v!r}")
    if len(set(value)) != len(value):
        raise ConfigError(f"{where}: repeated entries in {value!r}")
    return tuple(value)


def _number(value, where: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ConfigError(f"{where}: expected a number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise ConfigError(f"{where}: must be {'> 0' if positive else '>= 0'}, got {value!r}")
    return float(value)


def _positive_int(table: dict, key: str, where: str, default=None) -> int:
    value = table.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{where}.{key}: expected an integer >= 1, got {value!r}")
    return value


def _load_dataset(entry: dict, where: str) -> Dataset:
    _keys(entry, where, ("name", "source"),
          ("path", "kind", "graphs", "ops", "seed", "split", "limit", "max_ops"))
    source = entry["source"]
    if source == "files":
        if not isinstance(entry.get("path"), str):
            raise ConfigError(f"{where}.path: a folder, file or glob is required for files")
        paths = sorted(glob.glob(entry["path"])) or [entry["path"]]
        if not any(Path(p).exists() for p in paths):
            raise ConfigError(f"{where}.path: {entry['path']!r} matches no file or folder")
        try:
            graphs = [g for _, g in load_graphs(paths)]
        except ValueError as err:
            raise ConfigError(f"{where}.path: {err}") from err
    elif source == "synthetic":
        ops = entry.get("ops")
        if (not isinstance(ops, list) or len(ops) != 2 or
                not all(isinstance(x, int) and x >= 2 for x in ops) or ops[0] > ops[1]):
            raise ConfigError(f"{where}.ops: expected [min, max] op counts >= 2, got {ops!r}")
        split = entry.get("split", "test")
        if split not in ("train", "valid", "test", "all"):
            raise ConfigError(f"{where}.split: one of train, valid, test, all; got {split!r}")
        kind = entry.get("kind", "regal")
        if kind not in ("regal", "layered"):
            raise ConfigError(f"{where}.kind: 'regal' or 'layered', got {kind!r}")
        seed = entry.get("seed", 0)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ConfigError(f"{where}.seed: expected an integer, got {seed!r}")
        data = synthetic_dataset(kind, _positive_int(entry, "graphs", where), tuple(ops), seed)
        graphs = [g for part in ("train", "valid", "test") if split in (part, "all")
                  for g in data[part]]
    else:
        raise ConfigError(f"{where}.source: 'files' or 'synthetic', got {source!r}")
    if "max_ops" in entry:
        graphs = [g for g in graphs if g.num_ops <= _positive_int(entry, "max_ops", where)]
    graphs.sort(key=lambda g: (g.num_ops, g.num_tensors, g.name))
    if "limit" in entry:
        graphs = graphs[: _positive_int(entry, "limit", where)]
    if not graphs:
        raise ConfigError(f"{where}: dataset {entry['name']!r} is empty")
    names = [g.name for g in graphs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"{where}: graph names repeat ({', '.join(repeated)})")
    return Dataset(entry["name"], tuple(graphs))


def _objective(entry: dict, where: str) -> Objective:
    _keys(entry, where, ("name",), ("latency", "bandwidth", "capacity", "capacity_fraction"))
    if entry["name"] not in OBJECTIVES:
        raise ConfigError(f"{where}.name: unknown objective {entry['name']!r} "
                          f"(known: {', '.join(OBJECTIVES)})")
    if "capacity" in entry and "capacity_fraction" in entry:
        raise ConfigError(f"{where}: give capacity or capacity_fraction, not both")
    get = {k: _number(entry[k], f"{where}.{k}", positive=k != "latency")
           for k in ("latency", "bandwidth", "capacity", "capacity_fraction") if k in entry}
    return Objective(entry["name"], dict(entry), get.get("latency", 0.0),
                     get.get("bandwidth", math.inf), get.get("capacity"),
                     get.get("capacity_fraction"))


def _method(entry: dict, where: str, budgets) -> MethodRun | str:
    """The method entry, or (``optional = true``) a note saying why it is skipped."""
    _keys(entry, where, ("name",), ("label", "options", "budgets", "devices", "optional"))
    name, optional = entry["name"], entry.get("optional", False)
    if name not in METHODS:
        if optional:
            return f"method {name} is not registered (optional): skipped"
        raise ConfigError(f"{where}.name: unknown method {name!r} (registered: "
                          f"{', '.join(METHODS)}; mark it optional = true to skip it)")
    method = METHODS[name]
    options = entry.get("options", {})
    if not isinstance(options, dict):
        raise ConfigError(f"{where}.options: expected a table, got {options!r}")
    unknown = sorted(set(options) - set(method.options))
    if unknown:
        raise ConfigError(f"{where}.options: method {name} does not take {', '.join(unknown)} "
                          f"(accepted: {', '.join(method.options) or 'none'})")
    if method.kind == "search":
        if "budgets" in entry:
            budgets = _int_list(entry["budgets"], f"{where}.budgets", 1)
        elif budgets is None:
            raise ConfigError(f"{where}.budgets: search method {name} needs budgets (here or "
                              "at the top level)")
    else:
        if "budgets" in entry:
            raise ConfigError(f"{where}.budgets: heuristic {name} has no budget (it counts "
                              f"{method.min_evals} evaluation(s))")
        budgets = (method.min_evals,)
    devices = (_int_list(entry["devices"], f"{where}.devices", 1) if "devices" in entry
               else None)
    if optional:  # e.g. CP-SAT without OR-Tools: the method exists, its extra does not
        try:
            method.build(**options)
        except ImportError as err:
            return f"method {name} cannot be built (optional): skipped ({err})"
    return MethodRun(entry.get("label", name), name, method, dict(options),
                     tuple(budgets), devices)


def _entries(raw: dict, key: str) -> list:
    value = raw.get(key)
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{key}: expected a non-empty array of tables ([[{key}]])")
    return value


def _unique(names, key: str) -> None:
    names = list(names)
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"{key}: repeated name(s) {', '.join(repeated)}")


def parse_config(raw: dict, name: str = "sweep") -> Config:
    """A validated :class:`Config` from a parsed TOML table; :class:`ConfigError` names the
    key at fault (unknown method or option, budget <= 0, empty dataset, ...)."""
    _keys(raw, "config", ("datasets", "objectives", "methods", "devices", "seeds"),
          ("batch_size", "budgets"))
    budgets = _int_list(raw["budgets"], "budgets", 1) if "budgets" in raw else None
    devices = _int_list(raw["devices"], "devices", 1)
    seeds = _int_list(raw["seeds"], "seeds", 0)
    batch_size = _positive_int(raw, "batch_size", "config", default=8)
    datasets = tuple(_load_dataset(e, f"datasets[{i}]")
                     for i, e in enumerate(_entries(raw, "datasets")))
    objectives = tuple(_objective(e, f"objectives[{i}]")
                       for i, e in enumerate(_entries(raw, "objectives")))
    runs = [_method(e, f"methods[{i}]", budgets) for i, e in enumerate(_entries(raw, "methods"))]
    methods = tuple(r for r in runs if isinstance(r, MethodRun))
    skipped = tuple(r for r in runs if isinstance(r, str))
    if not methods:
        raise ConfigError("methods: none of the methods can run (" + "; ".join(skipped) + ")")
    _unique((d.name for d in datasets), "datasets")
    _unique((o.name for o in objectives), "objectives")
    _unique((m.label for m in methods), "methods (label)")
    return Config(name, batch_size, seeds, devices, datasets, objectives, methods, skipped)


def load_config(path: str | os.PathLike) -> Config:
    """Reads and validates a TOML sweep config."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"{path}: {err}") from err
    return parse_config(raw, path.stem)


# --- Work units -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Unit:
    """One ``optimize`` call: a batch of one dataset for one (objective, D, method, seed,
    budget)."""
    dataset: Dataset
    objective: Objective
    devices: int
    run: MethodRun
    seed: int
    budget: int
    graphs: tuple[Graph, ...]  # the batch's real graphs

    def identity(self, graph: Graph) -> tuple:
        return (self.dataset.name, graph.name, self.objective.name, self.devices,
                self.run.label, self.seed, self.budget)


def graph_digest(graph: Graph) -> str:
    """A hash of a graph's content (arrays and name)."""
    h = hashlib.sha256(graph.name.encode())
    for field in ("compute_cost", "temporary_memory", "tensor_producer", "tensor_size",
                  "tensor_is_control", "edge_tensor", "edge_consumer"):
        h.update(np.ascontiguousarray(getattr(graph, field)).tobytes())
    return h.hexdigest()


def cell_hash(unit: Unit, batch_size: int) -> str:
    """Everything that decides the unit's values besides the identity columns: the objective's
    cost parameters, the method's options, the batch size and the batch's graphs (content)."""
    payload = json.dumps({
        "objective": unit.objective.spec,
        "method": {"name": unit.run.name, "options": unit.run.options},
        "batch_size": batch_size, "graphs": [graph_digest(g) for g in unit.graphs],
    }, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def units(config: Config) -> Iterator[Unit]:
    """Every work unit of the sweep, in run order (datasets, objectives, D, methods, budgets,
    seeds, batches): consecutive units share compiled programs."""
    for dataset in config.datasets:
        batches = [dataset.graphs[i: i + config.batch_size]
                   for i in range(0, len(dataset.graphs), config.batch_size)]
        for objective in config.objectives:
            for devices in config.devices:
                for run in config.methods:
                    if run.devices is not None and devices not in run.devices:
                        continue
                    if run.method.max_devices is not None and devices > run.method.max_devices:
                        continue
                    if objective.name not in run.method.objectives:
                        continue
                    for budget in run.budgets:
                        for seed in config.seeds:
                            for batch in batches:
                                yield Unit(dataset, objective, devices, run, seed, budget,
                                           tuple(batch))


def search_batch(unit: Unit, batch_size: int) -> list[Graph]:
    """The graphs ``optimize`` runs for ``unit``: a search method's batch filled up to
    ``batch_size`` with copies of its first graph (one shape per bucket, results independent
    of the device count; the copies' rows are dropped), a heuristic's batch as it is."""
    graphs = list(unit.graphs)
    if unit.run.method.kind == "search":
        graphs += [graphs[0]] * (batch_size - len(graphs))
    return graphs


# --- Results file -----------------------------------------------------------------------------


def _parse_lines(path: Path, warn: Callable[[str], None]) -> list[dict]:
    text = path.read_text()
    lines = text.split("\n")
    complete, last = lines[:-1], lines[-1]  # ``last`` is "" when the file ends with \n
    rows = []
    for number, line in enumerate(complete, 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{number}: corrupt results line ({err})") from None
    if last.strip():
        warn(f"{path}: dropping a partial last line ({len(last)} characters; the sweep was "
             "interrupted while writing)")
    return rows


def result_files(out: str | os.PathLike) -> list[Path]:
    """The results files of a sweep folder (one per process), or ``[out]`` for a file."""
    out = Path(out)
    if out.is_dir():
        return sorted(out.glob("results*.jsonl"))
    return [out]


def read_rows(out: str | os.PathLike, warn: Callable[[str], None] = lambda m: None
              ) -> list[dict]:
    """All rows of a sweep folder or results file; a partial last line (killed mid-write) is
    dropped with ``warn``; a row repeated by a re-run batch is kept once (the last)."""
    rows: dict[tuple, dict] = {}
    for path in result_files(out):
        for row in _parse_lines(path, warn):
            missing = [k for k in IDENTITY if k not in row]
            if missing:
                raise ValueError(f"{path}: a row lacks {', '.join(missing)}: {row}")
            rows[tuple(row[k] for k in IDENTITY)] = row
    return list(rows.values())


def _compact(path: Path, keep: Callable[[dict], bool], warn) -> int:
    """Rewrites ``path`` with the rows ``keep`` accepts, once each (atomically); the others
    are appended to ``stale.jsonl`` beside it. Returns how many moved."""
    if not path.exists():
        return 0
    rows = list({tuple(r[k] for k in IDENTITY): r for r in _parse_lines(path, warn)}.values())
    kept = [r for r in rows if keep(r)]
    stale = [r for r in rows if not keep(r)]
    if stale:
        with open(path.parent / STALE, "a") as f:
            f.write("".join(json.dumps(r) + "\n" for r in stale))
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in kept))
    os.replace(tmp, path)
    return len(stale)


# --- Running ----------------------------------------------------------------------------------


def mesh_for(batch_size: int, shards: int | None = None) -> jax.sharding.Mesh | None:
    """A ``("graphs",)`` mesh of ``shards`` local devices (default: the largest divisor of
    ``batch_size`` not above the local device count); None for one device."""
    local = jax.local_devices()
    if shards is None:
        shards = max(k for k in range(1, len(local) + 1) if batch_size % k == 0)
    if not 1 <= shards <= len(local) or batch_size % shards:
        raise ValueError(f"--shards {shards}: must divide batch_size {batch_size} and be at "
                         f"most the {len(local)} local device(s)")
    return None if shards == 1 else jax.sharding.Mesh(np.array(local[:shards]), ("graphs",))


def _json_value(value):
    if isinstance(value, (np.generic,)):
        return value.item()
    return value


def _rows(unit: Unit, outcome, digest: str, params: CostParams, size: int) -> list[dict]:
    rows = []
    capacity = float(params.capacity)
    for graph, result in zip(unit.graphs, outcome.results):
        row = dict(zip(IDENTITY, unit.identity(graph)))  # identity first: info cannot clobber it
        row |= {k: _json_value(v) for k, v in result.items()
                if k not in _DROPPED and k not in row}
        row.update(cell_hash=digest, wall_seconds=outcome.wall_seconds / size,
                   compile_seconds=outcome.compile_seconds,
                   capacity=None if math.isinf(capacity) else capacity)
        rows.append(row)
    return rows


class Progress:
    """Cells done / total, graphs per second, ETA and the current cell's mean best value, on
    one updating line (a terminal) or one line per batch (stderr otherwise)."""

    def __init__(self, total_work: float, total_cells: int, stream=None):
        self.total_work, self.total_cells = total_work, total_cells
        self.stream = stream or sys.stderr
        self.done_work = self.cells = self.graphs = 0
        self.start = time.perf_counter()
        self.tty = self.stream.isatty()
        self.current, self.values = None, []

    def skip(self, cells: int, work: float) -> None:
        self.cells += cells
        self.total_work -= work  # resumed cells cost nothing: leave them out of the ETA

    def update(self, unit: Unit, rows: list[dict], work: float) -> None:
        self.done_work += work
        self.cells += len(rows)
        self.graphs += len(rows)
        key = (unit.dataset.name, unit.objective.name, unit.devices, unit.run.label,
               unit.budget, unit.seed)
        if key != self.current:
            self.current, self.values = key, []
        self.values += [r["value"] for r in rows]
        elapsed = time.perf_counter() - self.start
        eta = elapsed * (self.total_work - self.done_work) / max(self.done_work, 1e-9)
        line = (f"[{self.cells}/{self.total_cells} cells] {unit.dataset.name} "
                f"{unit.objective.name} D={unit.devices} {unit.run.label} "
                f"budget={unit.budget} seed={unit.seed} | {self.graphs / elapsed:.2f} graphs/s"
                f" | ETA {_duration(eta)} | mean best value {np.mean(self.values):.6g} "
                f"({len(self.values)} graphs)")
        self.stream.write(("\r\033[K" + line) if self.tty else line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return (f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600
            else f"{seconds // 60}m{seconds % 60:02d}s")


def run_sweep(config: Config, out: str | os.PathLike, *, resume: bool = False,
              shards: int | None = None, log: Callable[[str], None] | None = None
              ) -> list[dict]:
    """Runs every unit of ``config`` not already in ``out`` (with ``resume``); returns all
    rows of the (current) sweep. See the module docstring for files, resume and sharding."""
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    index, count = jax.process_index(), jax.process_count()
    path = out / (RESULTS if count == 1 else f"results.p{index}.jsonl")
    if not resume and any(p.stat().st_size for p in result_files(out)):
        raise ValueError(f"{out} already holds results: pass --resume to continue that sweep, "
                         "or choose another --out")
    all_units = list(units(config))
    hashes = [cell_hash(u, config.batch_size) for u in all_units]
    current = {(u.identity(g), h) for u, h in zip(all_units, hashes) for g in u.graphs}

    def valid(row):
        return (tuple(row[k] for k in IDENTITY), row.get("cell_hash")) in current

    moved = _compact(path, valid, log)
    if moved:
        log(f"{moved} row(s) no longer produced by this config moved to {out / STALE}")
    done = {(tuple(r[k] for k in IDENTITY), r["cell_hash"]) for r in read_rows(out, log)
            if valid(r)}
    for note in config.skipped:
        log(note)
    mesh = mesh_for(config.batch_size, shards)
    mine = [(u, h) for i, (u, h) in enumerate(zip(all_units, hashes)) if i % count == index]
    progress = Progress(sum(u.budget * len(u.graphs) for u, _ in mine),
                        sum(len(u.graphs) for u, _ in mine))
    log(f"sweep {config.name}: {len(all_units)} batches, {len(current)} cells"
        + (f", process {index} of {count}" if count > 1 else "")
        + (f", batches split over {mesh.size} devices" if mesh is not None else ""))
    with open(path, "a") as results:
        for unit, digest in mine:
            if all((unit.identity(g), digest) in done for g in unit.graphs):
                progress.skip(len(unit.graphs), unit.budget * len(unit.graphs))
                continue
            graphs = search_batch(unit, config.batch_size)
            params = unit.objective.cost_params(unit.graphs)
            outcome = optimize(unit.run.name, graphs, num_devices=unit.devices,
                               budget=unit.budget, objective=unit.objective.name,
                               cost_params=params, seed=unit.seed, options=unit.run.options,
                               mesh=mesh)
            rows = _rows(unit, outcome, digest, params, len(graphs))
            results.write("".join(json.dumps(r) + "\n" for r in rows))
            results.flush()
            os.fsync(results.fileno())
            progress.update(unit, rows, unit.budget * len(unit.graphs))
    progress.close()
    return [r for r in read_rows(out, log) if valid(r)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.sweep",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="TOML sweep config")
    parser.add_argument("--out", help="results folder (default runs/sweeps/<config stem>)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the sweep in --out, skipping finished cells")
    parser.add_argument("--shards", type=int,
                        help="local devices each batch is split over (default: as many as "
                             "divide batch_size)")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
        out = Path(args.out or Path("runs/sweeps") / config.name)
        rows = run_sweep(config, out, resume=args.resume, shards=args.shards)
    except ValueError as err:  # ConfigError, FormatError, bad settings, existing results
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps({"results": str(out), "rows": len(rows)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
