"""The sweep config: datasets × objectives × device counts × methods × budgets × seeds (TOML).

Two layers. :class:`SweepSpec` (with its tables :class:`DatasetSpec`, :class:`ObjectiveSpec`
and :class:`MethodSpec`) is the file as typed data; :mod:`gsched.infra.config`'s loader fills
it and rejects unknown keys, missing keys and wrong types. :func:`parse_config` then checks
what the types cannot say (a registered method and its options, budgets ≥ 1, a glob that
matches something, a non-empty dataset, unique names, ...), loads the graphs and returns the
resolved :class:`Config`. Every problem is a :class:`~gsched.infra.config.ConfigError` naming
the file (or the config's name) and the key. The format is documented in ``docs/harness.md``.
"""

from __future__ import annotations

import dataclasses
import glob
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from gsched.core.graph import Graph
from gsched.costmodel.params import OBJECTIVES, CostParams
from gsched.costmodel.tasks import fraction_capacity, total_tensor_size
from gsched.formats import load_graphs
from gsched.generators import synthetic_dataset
from gsched.infra import config as typed
from gsched.infra.config import ConfigError
from gsched.methods import METHODS, Method

__all__ = ["Config", "ConfigError", "Dataset", "DatasetSpec", "MethodRun", "MethodSpec",
           "Objective", "ObjectiveSpec", "SweepSpec", "load_config", "parse_config",
           "read_spec"]

SPLITS = ("train", "valid", "test")


# --- The file, as typed data --------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """A ``[[datasets]]`` table: graphs generated (``source = "synthetic"``:
    ``gsched.synthetic_dataset(kind, graphs, ops, seed)[split]``) or read from files."""

    name: str
    source: Literal["files", "synthetic"]
    path: str | None = None  # files: a folder, a file or a glob
    kind: Literal["regal", "layered"] = "regal"  # synthetic: the generator
    graphs: int | None = None  # synthetic: graphs drawn before the topology-disjoint split
    ops: tuple[int, ...] | None = None  # synthetic: [min, max] op counts
    seed: int = 0  # synthetic: the generator seed
    split: Literal["train", "valid", "test", "all"] = "test"  # synthetic
    limit: int | None = None  # keep the `limit` smallest graphs
    max_ops: int | None = None  # drop larger graphs


@dataclasses.dataclass(frozen=True)
class ObjectiveSpec:
    """An ``[[objectives]]`` table: the objective and its cost parameters (latency default 0,
    bandwidth default infinite, no capacity by default; ``capacity`` in bytes or
    ``capacity_fraction`` of the batch's smallest total tensor size)."""

    name: str
    latency: float | None = None
    bandwidth: float | None = None
    capacity: float | None = None
    capacity_fraction: float | None = None


@dataclasses.dataclass(frozen=True)
class MethodSpec:
    """A ``[[methods]]`` table: a registered method (``gsched.methods.METHODS``) with its
    options, the label of its rows, and optional budgets and device counts of its own."""

    name: str
    label: str | None = None  # the table's "method" column (default: name)
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    budgets: tuple[int, ...] | None = None  # search methods: overrides the top-level budgets
    devices: tuple[int, ...] | None = None  # only these D (default: every D of the config)
    optional: bool = False  # skip with a note if not registered or its extra is missing


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """A sweep config file."""

    datasets: tuple[DatasetSpec, ...]
    objectives: tuple[ObjectiveSpec, ...]
    methods: tuple[MethodSpec, ...]
    devices: tuple[int, ...]
    seeds: tuple[int, ...]
    batch_size: int = 8
    budgets: tuple[int, ...] | None = None  # default budgets of search methods


def read_spec(path: str | Path) -> SweepSpec:
    """The config file ``path`` as a :class:`SweepSpec` (keys and types checked, nothing
    loaded or looked up)."""
    return typed.load_config(path, SweepSpec)


# --- The resolved config --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Dataset:
    name: str
    graphs: tuple[Graph, ...]  # sorted by size


@dataclasses.dataclass(frozen=True)
class Objective:
    name: str  # "peak_memory" or "runtime"
    spec: dict  # its table as written: part of the cell hash
    latency: float
    bandwidth: float
    capacity: float | None  # bytes
    capacity_fraction: float | None  # of the batch's smallest total tensor size

    def cost_params(self, graphs: Iterable[Graph]) -> CostParams:
        """The cost parameters of a batch (``capacity_fraction`` resolved on its graphs)."""
        capacity = self.capacity
        if self.capacity_fraction is not None:
            capacity = fraction_capacity(self.capacity_fraction, map(total_tensor_size, graphs))
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


def load_config(path: str | Path) -> Config:
    """Reads, checks and resolves a TOML sweep config (errors name the file and the key)."""
    path = Path(path)
    raw = typed.read_toml(path)  # unreadable or invalid TOML
    typed.config_from_dict(SweepSpec, raw, source=str(path))  # keys and types
    return parse_config(raw, path.stem, source=str(path))


def parse_config(raw: Mapping[str, Any], name: str = "sweep", *, source: str | None = None
                 ) -> Config:
    """The resolved :class:`Config` of a parsed TOML table; a :class:`ConfigError` names
    ``source`` (default: ``name``) and the key at fault (unknown method or option, budget
    <= 0, empty dataset, ...)."""
    source = source or name
    spec = typed.config_from_dict(SweepSpec, raw, source=source)
    check = _Checker(source)
    budgets = None if spec.budgets is None else check.ints(spec.budgets, "budgets", 1)
    devices = check.ints(spec.devices, "devices", 1)
    seeds = check.ints(spec.seeds, "seeds", 0)
    batch_size = check.positive(spec.batch_size, "batch_size")
    for key in ("datasets", "objectives", "methods"):
        if not getattr(spec, key):
            raise check.error(key, f"expected a non-empty array of tables ([[{key}]])")
    datasets = tuple(_dataset(d, f"datasets[{i}]", check) for i, d in enumerate(spec.datasets))
    objectives = tuple(_objective(o, raw["objectives"][i], f"objectives[{i}]", check)
                       for i, o in enumerate(spec.objectives))
    runs = [_method(m, f"methods[{i}]", budgets, check) for i, m in enumerate(spec.methods)]
    methods = tuple(r for r in runs if isinstance(r, MethodRun))
    skipped = tuple(r for r in runs if isinstance(r, str))
    if not methods:
        raise check.error("methods", "none of the methods can run (" + "; ".join(skipped) + ")")
    check.unique((d.name for d in datasets), "datasets")
    check.unique((o.name for o in objectives), "objectives")
    check.unique((m.label for m in methods), "methods", "label")
    return Config(name, batch_size, seeds, devices, datasets, objectives, methods, skipped)


class _Checker:
    """The checks that types cannot express; errors name the source and the key."""

    def __init__(self, source: str):
        self.source = source

    def error(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self.source}: key '{key}': {message}")

    def positive(self, value: int | None, key: str) -> int:
        if value is None or value < 1:
            raise self.error(key, f"expected an integer >= 1, got {value!r}")
        return value

    def ints(self, values: tuple[int, ...], key: str, minimum: int) -> tuple[int, ...]:
        if not values:
            raise self.error(key, "expected a non-empty list of integers, got []")
        for i, v in enumerate(values):
            if v < minimum:
                raise self.error(f"{key}[{i}]", f"must be an integer >= {minimum}, got {v!r}")
        if len(set(values)) != len(values):
            raise self.error(key, f"repeated entries in {list(values)!r}")
        return values

    def number(self, value: float, key: str, *, positive: bool) -> float:
        if math.isnan(value) or value < 0 or (positive and value == 0):
            raise self.error(key, f"must be {'> 0' if positive else '>= 0'}, got {value!r}")
        return value

    def unique(self, names: Iterable[str], key: str, field: str = "name") -> None:
        names = list(names)
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise self.error(key, f"repeated {field}(s) {', '.join(repeated)}")


def _dataset(spec: DatasetSpec, key: str, check: _Checker) -> Dataset:
    if spec.source == "files":
        if spec.path is None:
            raise check.error(f"{key}.path", "a folder, file or glob is required for files")
        paths = sorted(glob.glob(spec.path)) or [spec.path]
        if not any(Path(p).exists() for p in paths):
            raise check.error(f"{key}.path", f"{spec.path!r} matches no file or folder")
        try:
            graphs = [g for _, g in load_graphs(paths)]
        except ValueError as err:
            raise check.error(f"{key}.path", str(err)) from err
    else:
        ops = spec.ops
        if ops is None or len(ops) != 2 or min(ops) < 2 or ops[0] > ops[1]:
            raise check.error(f"{key}.ops", "expected [min, max] op counts >= 2, got "
                              f"{None if ops is None else list(ops)!r}")
        count = check.positive(spec.graphs, f"{key}.graphs")
        data = synthetic_dataset(spec.kind, count, (ops[0], ops[1]), spec.seed)
        graphs = [g for part in SPLITS if spec.split in (part, "all") for g in data[part]]
    if spec.max_ops is not None:
        max_ops = check.positive(spec.max_ops, f"{key}.max_ops")
        graphs = [g for g in graphs if g.num_ops <= max_ops]
    graphs.sort(key=lambda g: (g.num_ops, g.num_tensors, g.name))
    if spec.limit is not None:
        graphs = graphs[: check.positive(spec.limit, f"{key}.limit")]
    if not graphs:
        raise check.error(key, f"dataset {spec.name!r} is empty")
    check.unique((g.name for g in graphs), key, "graph name")
    return Dataset(spec.name, tuple(graphs))


def _objective(spec: ObjectiveSpec, table: Mapping[str, Any], key: str, check: _Checker
               ) -> Objective:
    if spec.name not in OBJECTIVES:
        raise check.error(f"{key}.name", f"unknown objective {spec.name!r} "
                          f"(known: {', '.join(OBJECTIVES)})")
    if spec.capacity is not None and spec.capacity_fraction is not None:
        raise check.error(key, "give capacity or capacity_fraction, not both")
    for field in ("latency", "bandwidth", "capacity", "capacity_fraction"):
        if getattr(spec, field) is not None:
            check.number(getattr(spec, field), f"{key}.{field}", positive=field != "latency")
    return Objective(spec.name, dict(table),
                     0.0 if spec.latency is None else spec.latency,
                     math.inf if spec.bandwidth is None else spec.bandwidth,
                     spec.capacity, spec.capacity_fraction)


def _method(spec: MethodSpec, key: str, budgets: tuple[int, ...] | None, check: _Checker
            ) -> MethodRun | str:
    """The method entry, or (``optional = true``) a note saying why it is skipped."""
    name = spec.name
    if name not in METHODS:
        if spec.optional:
            return f"method {name} is not registered (optional): skipped"
        raise check.error(f"{key}.name", f"unknown method {name!r} (registered: "
                          f"{', '.join(METHODS)}; mark it optional = true to skip it)")
    method = METHODS[name]
    unknown = sorted(set(spec.options) - set(method.option_names))
    if unknown:
        raise check.error(f"{key}.options", f"method {name} does not take {', '.join(unknown)} "
                          f"(accepted: {', '.join(method.option_names) or 'none'})")
    if method.kind == "search":
        if spec.budgets is not None:
            budgets = check.ints(spec.budgets, f"{key}.budgets", 1)
        elif budgets is None:
            raise check.error(f"{key}.budgets", f"search method {name} needs budgets (here or "
                              "at the top level)")
    else:
        if spec.budgets is not None:
            raise check.error(f"{key}.budgets", f"heuristic {name} has no budget (it counts "
                              f"{method.min_evals} evaluation(s))")
        budgets = (method.min_evals,)
    devices = None if spec.devices is None else check.ints(spec.devices, f"{key}.devices", 1)
    if spec.optional:  # e.g. CP-SAT without OR-Tools: the method exists, its extra does not
        try:
            method.build(**spec.options)
        except ImportError as err:
            return f"method {name} cannot be built (optional): skipped ({err})"
    return MethodRun(name if spec.label is None else spec.label, name, method,
                     dict(spec.options), tuple(budgets), devices)
