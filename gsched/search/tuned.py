"""Tuned BRKGA (REGAL §4.2 baseline): a grid of BRKGA settings scored on training graphs.

A :class:`Setting` is one point of the grid: the *static* sizes (population ``P``, elites
``E``, mutants ``M``, islands ``K``; children ``C = P − E − M``) and the *dynamic* per-gene
parameters (elite bias ``ρ`` and the Beta of the transfer genes).

Why only the transfer genes get their own Beta: decoding only *compares* keys (affinities of
one op with each other, priorities of ready items with each other), and crossover copies
genes, so applying one monotone map to every key changes nothing. One ``Beta(α, β)`` shared
by all genes is therefore equivalent in distribution to standard (uniform) BRKGA, and so is a
Beta shared by all affinity genes. What does change the search is a *different* distribution
for genes that are compared with each other: the transfer priorities ``X(t, d)`` compete with
the op priorities in the ready queue, so ``Beta(α_x, β_x)`` on transfer genes (uniform op
genes) biases transfers earlier (``α_x > β_x``) or later. With ``D = 1`` there are no
transfers and that part of the grid is moot.

:func:`evaluate_grid` runs the dynamic part of the grid in one jitted
:func:`gsched.search.brkga.run_batch` call per static configuration (graphs × settings tiled into
the batch axis, per-row ``params [B, L]``), so a configuration compiles once.
:func:`select` picks the setting with the lowest mean over graphs of value / uniform-BRKGA
value (the REGAL reward's ratio); exact ties go to the simpler setting (fewer fields away
from standard BRKGA), then to the earlier grid entry.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from pathlib import Path
from typing import Callable, Mapping, Sequence

import jax
import numpy as np

from gsched.core.graph import Graph
from gsched.core.padding import Bucket, batch_graphs, bucket_for
from gsched.costmodel.params import OBJECTIVES, CostParams
from gsched.search.brkga import BRKGAConfig, BRKGAParams, run_batch

TUNED_PATH = Path(__file__).parent / "tuned_brkga.json"


@dataclasses.dataclass(frozen=True)
class Setting:
    """One BRKGA setting; the defaults are standard BRKGA (REGAL's "BRKGA XK")."""

    population_size: int = 100  # P
    num_elites: int = 10  # E
    num_mutants: int = 10  # M; children C = P − E − M
    num_populations: int = 1  # K islands
    elite_bias: float = 0.7  # ρ of every gene
    transfer_alpha: float = 1.0  # Beta(α, β) of the T·D transfer genes (op genes: uniform)
    transfer_beta: float = 1.0

    def check(self) -> "Setting":
        """Returns ``self``; an infeasible setting raises ``ValueError`` naming it."""
        try:
            self.config()
            if not 0.0 <= self.elite_bias <= 1.0:
                raise ValueError(f"elite_bias must be in [0, 1], got {self.elite_bias!r}")
            for name in ("transfer_alpha", "transfer_beta"):
                value = getattr(self, name)
                if not (math.isfinite(value) and value > 0):
                    raise ValueError(f"{name} must be finite and > 0, got {value!r}")
        except (TypeError, ValueError) as err:
            raise ValueError(f"infeasible BRKGA setting {self}: {err}") from None
        return self

    def config(self) -> BRKGAConfig:
        """The static :class:`BRKGAConfig` (raises if the sizes are inconsistent)."""
        if self.num_mutants < 0:
            raise ValueError(f"num_mutants must be >= 0, got {self.num_mutants}")
        if self.num_elites + self.num_mutants > self.population_size:
            raise ValueError(f"num_elites + num_mutants ({self.num_elites} + {self.num_mutants})"
                             f" exceeds population_size ({self.population_size})")
        return BRKGAConfig(population_size=self.population_size, num_elites=self.num_elites,
                           num_children=self.population_size - self.num_elites - self.num_mutants,
                           num_populations=self.num_populations)

    def params(self, bucket: Bucket, num_devices: int, fusion: bool = False) -> BRKGAParams:
        """Per-gene parameters ``[L]`` in the padded layout of ``bucket`` (fusion keys, with
        ``fusion``, are uniform like the op genes)."""
        n_op_genes = bucket.num_ops * (num_devices + 1)
        length = bucket.chromosome_length(num_devices, fusion)
        position = np.arange(length)
        is_transfer = (position >= n_op_genes) & (position < bucket.chromosome_length(num_devices))
        return BRKGAParams(np.full(length, self.elite_bias, np.float32),
                           np.where(is_transfer, self.transfer_alpha, 1.0).astype(np.float32),
                           np.where(is_transfer, self.transfer_beta, 1.0).astype(np.float32))

    @property
    def complexity(self) -> int:
        """Fields that differ from standard BRKGA (ties in :func:`select` prefer fewer)."""
        default = Setting()
        return sum(getattr(self, f.name) != getattr(default, f.name)
                   for f in dataclasses.fields(self))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping) -> "Setting":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown BRKGA setting field(s) {unknown} (expected {sorted(names)})")
        return cls(**data).check()


def make_grid(sizes: Sequence[tuple[int, int, int, int]], elite_biases: Sequence[float],
              transfer_betas: Sequence[tuple[float, float]]) -> list[Setting]:
    """The product grid: ``sizes`` as ``(P, E, M, K)``, ``ρ`` values, transfer ``(α, β)``
    pairs. Every setting is checked (``ValueError`` naming the first infeasible one);
    duplicates are an error too."""
    grid = [Setting(p, e, m, k, float(rho), float(a), float(b)).check()
            for (p, e, m, k), rho, (a, b) in itertools.product(sizes, elite_biases,
                                                                transfer_betas)]
    if not grid:
        raise ValueError("empty BRKGA grid: sizes, elite_biases and transfer_betas must each "
                         "have at least one value")
    if len(set(grid)) != len(grid):
        raise ValueError("the BRKGA grid lists a setting twice")
    return grid


def evaluate_grid(key: jax.Array, graphs: Sequence[Graph], settings: Sequence[Setting], *,
                  num_devices: int, budget: int, objective: str = "peak_memory",
                  cost_params: CostParams = CostParams(),
                  log: Callable[[str], None] | None = None) -> np.ndarray:
    """Best value ``[S, G]`` that each setting's BRKGA finds on each graph with ``budget``
    evaluations. One :func:`run_batch` call per distinct static configuration, with the
    graphs × that configuration's settings as its batch (row ``s·G + g``)."""
    settings = [s.check() for s in settings]
    if not settings or not graphs:
        raise ValueError("evaluate_grid needs at least one setting and one graph")
    bucket = bucket_for(list(graphs))
    padded = batch_graphs(list(graphs), bucket)
    num_graphs = len(graphs)
    values = np.full((len(settings), num_graphs), np.nan)
    by_config: dict[BRKGAConfig, list[int]] = {}
    for i, s in enumerate(settings):
        by_config.setdefault(s.config(), []).append(i)
    for c, (config, members) in enumerate(by_config.items()):
        tiled = jax.tree.map(lambda x: np.concatenate([x] * len(members)), padded)
        params = BRKGAParams(*(np.repeat(np.stack(field), num_graphs, axis=0) for field in zip(
            *(settings[i].params(bucket, num_devices) for i in members))))
        result = run_batch(jax.random.fold_in(key, c), tiled, config, params,
                           num_devices=num_devices, budget=budget, objective=objective,
                           cost_params=cost_params)
        values[members] = np.asarray(result.best_value, np.float64).reshape(len(members),
                                                                             num_graphs)
        if log is not None:
            log(f"config {c + 1}/{len(by_config)} {config}: {len(members)} setting(s) done")
    return values


def select(settings: Sequence[Setting], values: np.ndarray, baseline: np.ndarray
           ) -> tuple[int, np.ndarray]:
    """(index of the chosen setting, mean ratio ``[S]``): the lowest mean over graphs of
    ``values [S, G] / baseline [G]``; exact ties → lower :attr:`Setting.complexity`, then the
    earlier setting."""
    values, baseline = np.asarray(values, np.float64), np.asarray(baseline, np.float64)
    if values.shape != (len(settings), baseline.shape[-1]):
        raise ValueError(f"values must have shape [{len(settings)}, {baseline.shape[-1]}], "
                         f"got {list(values.shape)}")
    if not (np.all(np.isfinite(values)) and np.all(np.isfinite(baseline))
            and np.all(baseline > 0)):
        raise ValueError("values and baseline must be finite, and the baseline > 0")
    ratios = (values / baseline).mean(axis=1)
    best = min(range(len(settings)), key=lambda i: (ratios[i], settings[i].complexity, i))
    return best, ratios


def load_tuned(objective: str, path: Path | str = TUNED_PATH) -> Setting:
    """The tuned :class:`Setting` for ``objective`` stored by ``python -m eval.tune_brkga``."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; expected one of {OBJECTIVES}")
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read the tuned BRKGA settings {path}: {err}") from None
    if objective not in data:
        raise ValueError(f"{path} has no tuned BRKGA setting for objective {objective!r} "
                         f"(run python -m eval.tune_brkga --objective {objective})")
    return Setting.from_dict(data[objective]["setting"])


def tuned_run_batch(key: jax.Array, graphs, cost_params: CostParams, *, num_devices: int,
                    budget: int, objective: str, path: Path | str = TUNED_PATH,
                    scheduler: str = "list", fusion: bool = False, genes: str = "all",
                    seeds=None):
    """:func:`gsched.search.brkga.run_batch` with the tuned setting of ``objective`` (traceable;
    with ``fusion`` the fusion keys get the setting's gene distribution of op priorities)."""
    setting = load_tuned(objective, path)
    return run_batch(key, graphs, setting.config(),
                     setting.params(graphs.bucket, num_devices, fusion),
                     num_devices=num_devices, budget=budget, objective=objective,
                     cost_params=cost_params, scheduler=scheduler, fusion=fusion, genes=genes,
                     seeds=seeds)
