"""Work units of a sweep and their cell hashes.

A :class:`Unit` is one ``optimize`` call: a batch of one dataset's graphs for one (objective,
D, method, seed, budget). Each dataset's graphs (sorted by size) are cut into batches of
``batch_size``; a search method's last batch is filled up with copies of its first graph
(:func:`search_batch`; their rows are dropped), so every batch has one shape (one compilation
per bucket) and a graph's result does not depend on how many devices run it.

:func:`cell_hash` hashes everything that decides a unit's values besides the identity columns
of its rows: the objective's table, the method's name and options, the batch size and the
content of every graph of the batch. ``--resume`` keeps a row only while its hash is current.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator

import numpy as np

from gsched.core.graph import Graph
from gsched.harness.config import Config, Dataset, MethodRun, Objective

GRAPH_FIELDS = ("compute_cost", "temporary_memory", "tensor_producer", "tensor_size",
                "tensor_is_control", "edge_tensor", "edge_consumer")


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
        """The identity columns (:data:`gsched.harness.results.IDENTITY`) of ``graph``'s row."""
        return (self.dataset.name, graph.name, self.objective.name, self.devices,
                self.run.label, self.seed, self.budget)


def graph_digest(graph: Graph) -> str:
    """A hash of a graph's content (arrays and name; the program-input flags only when some
    op is one, so graphs without inputs keep the hashes of committed rows)."""
    h = hashlib.sha256(graph.name.encode())
    for field in GRAPH_FIELDS + (("is_input",) if graph.has_inputs else ()):
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
