"""Running a sweep: every unit through :func:`gsched.methods.optimize`, appended to the table.

:func:`run_sweep` runs the units of a :class:`~gsched.harness.config.Config` that are not in
the results folder yet (with ``resume``), one batch per ``optimize`` call, and appends each
batch's rows (flushed and synced) to the folder's results file.

**Resume.** A row is current while its identity and :func:`~gsched.harness.units.cell_hash`
are produced by the config; ``resume`` skips every batch whose rows are all current, and rows
the config no longer produces move to ``stale.jsonl``. Without ``resume`` a folder that holds
results is an error.

**Sharding.** A search method's batch is split over a ``("graphs",)`` mesh of ``K`` local
devices (:func:`mesh_for`; ``optimize(..., mesh=)`` shards the leading graph axis, or each
evaluation's chromosomes when the graphs do not divide evenly: one schedule loop per device,
the rest SPMD, the unsharded values). Heuristics run on the host.

**Several processes** (``jax.distributed``): process ``i`` of ``n`` runs every ``n``-th unit
on its own local devices and writes ``results.p{i}.jsonl``; every process checks the folder
before any writes, and returns the merged table after all have finished.

**Capacity.** ``capacity_fraction`` is resolved on the batch's graphs; each row records the
capacity used, in bytes (``None``: none).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np

from gsched.costmodel.params import CostParams
from gsched.harness.config import Config
from gsched.harness.results import (
    IDENTITY,
    STALE,
    compact,
    format_rows,
    identity,
    process_file,
    read_rows,
    result_files,
)
from gsched.harness.units import Unit, cell_hash, search_batch, units
from gsched.infra.distributed import barrier
from gsched.infra.progress import Progress
from gsched.infra.progress import log as default_log
from gsched.methods import Outcome, optimize, release_compiled

DROPPED = ("placement", "order")  # per-graph solutions are not kept in the table


def mesh_for(shards: int | None = None) -> jax.sharding.Mesh | None:
    """A ``("graphs",)`` mesh of ``shards`` local devices (default: all of them); None for one
    device. A search splits a batch's graphs over it when their number divides evenly, else
    each evaluation's chromosomes on large enough buckets (:func:`gsched.methods.optimize`)."""
    local = jax.local_devices()
    shards = len(local) if shards is None else shards
    if not 1 <= shards <= len(local):
        raise ValueError(f"--shards {shards}: must be between 1 and the {len(local)} local "
                         "device(s)")
    return None if shards == 1 else jax.sharding.Mesh(np.array(local[:shards]), ("graphs",))


def unit_rows(unit: Unit, outcome: Outcome, digest: str, params: CostParams,
              size: int) -> list[dict]:
    """The table rows of one unit's ``optimize`` outcome on a batch of ``size`` graphs (the
    copies that fill up a search batch have no row)."""
    rows = []
    capacity = float(params.capacity)
    for graph, result in zip(unit.graphs, outcome.results):
        row = dict(zip(IDENTITY, unit.identity(graph)))  # identity first: info cannot clobber it
        row |= {k: _json_value(v) for k, v in result.items()
                if k not in DROPPED and k not in row}
        row.update(cell_hash=digest, wall_seconds=outcome.wall_seconds / size,
                   compile_seconds=outcome.compile_seconds,
                   capacity=None if math.isinf(capacity) else capacity)
        rows.append(row)
    return rows


def _json_value(value):
    return value.item() if isinstance(value, np.generic) else value


def run_sweep(config: Config, out: str | os.PathLike, *, resume: bool = False,
              shards: int | None = None, log: Callable[[str], None] | None = None
              ) -> list[dict]:
    """Runs every unit of ``config`` not already in ``out`` (with ``resume``); returns all
    rows of the (current) sweep. Notes and one progress line per batch go to ``log``
    (default: stderr). See the module docstring for files, resume and sharding."""
    log = log or default_log
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    index, count = jax.process_index(), jax.process_count()
    path = out / process_file(index, count)
    if not resume and any(p.stat().st_size for p in result_files(out)):
        raise ValueError(f"{out} already holds results: pass --resume to continue that sweep, "
                         "or choose another --out")
    all_units = list(units(config))
    hashes = [cell_hash(u, config.batch_size) for u in all_units]
    current = {(u.identity(g), h) for u, h in zip(all_units, hashes) for g in u.graphs}

    def valid(row):
        return (identity(row), row.get("cell_hash")) in current

    moved = compact(path, valid, log)
    if moved:
        log(f"{moved} row(s) no longer produced by this config moved to {out / STALE}")
    barrier("gsched sweep: results checked")  # no process writes before all have looked
    done = {(identity(r), r["cell_hash"]) for r in read_rows(out, log) if valid(r)}
    for note in config.skipped:
        log(note)
    mesh = mesh_for(shards)
    mine = [(u, h) for i, (u, h) in enumerate(zip(all_units, hashes)) if i % count == index]
    todo = [(u, h) for u, h in mine if not all((u.identity(g), h) in done for g in u.graphs)]
    cells = sum(len(u.graphs) for u, _ in mine)
    finished = cells - sum(len(u.graphs) for u, _ in todo)
    log(f"sweep {config.name}: {len(all_units)} batches, {len(current)} cells"
        + (f", process {index} of {count}: {cells} cells" if count > 1 else "")
        + (f", {finished} done before" if finished else "")
        + (f", batches split over {mesh.size} devices" if mesh is not None else ""))
    # Progress steps are evaluations (budget × graphs), so the ETA weighs each batch by them.
    work = sum(u.budget * len(u.graphs) for u, _ in mine)
    done_work = work - sum(u.budget * len(u.graphs) for u, _ in todo)
    progress = Progress(work, start_step=done_work, stream=None)
    cell, values = None, []
    with open(path, "a") as results:
        for unit, digest in todo:
            graphs = search_batch(unit, config.batch_size)
            params = unit.objective.cost_params(unit.graphs)
            outcome = optimize(unit.run.name, graphs, num_devices=unit.devices,
                               budget=unit.budget, objective=unit.objective.name,
                               cost_params=params, seed=unit.seed, options=unit.run.options,
                               mesh=mesh)
            release_compiled(only_if_crowded=True)  # long sweeps: free XLA's mappings
            rows = unit_rows(unit, outcome, digest, params, len(graphs))
            results.write(format_rows(rows))
            results.flush()
            os.fsync(results.fileno())
            finished += len(rows)
            done_work += unit.budget * len(rows)
            key = (unit.dataset.name, unit.objective.name, unit.devices, unit.run.label,
                   unit.budget, unit.seed)
            if key != cell:  # the mean best value of the current cell, over its batches
                cell, values = key, []
            values += [r["value"] for r in rows]
            line = progress.report(done_work, {"mean best value": float(np.mean(values))})
            log(f"[{finished}/{cells} cells] {unit.dataset.name} {unit.objective.name} "
                f"D={unit.devices} {unit.run.label} budget={unit.budget} seed={unit.seed} | "
                f"{line}")
    barrier("gsched sweep: all processes done")
    return [r for r in read_rows(out, log) if valid(r)]
