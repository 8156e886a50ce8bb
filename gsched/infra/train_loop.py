"""The training loop shared by the trainers (REGAL, Topoformer): exact resume, periodic and
best-on-validation checkpoints, a metrics log and a progress line.

**The loop.** :func:`run_training` runs ``state, metrics = train_step(state, make_batch(s))``
for ``s = start … steps − 1``. The training state (model, optimizer state, RNG key, …) is one
pytree and the batch of step ``s`` is a pure function of ``s``, so a checkpoint after ``k``
steps (state + ``k``) resumes bit-identically: running 6 steps and resuming for 4 gives the
same state as 10 steps in one go. ``train_step`` is jitted by the caller (``eqx.filter_jit``
for equinox states); metrics stay on the device until a log line needs them. A "step" is one
``train_step`` call: it may run a chunk of updates in a ``lax.scan`` (with ``make_batch``
returning the chunk's batches), which keeps the host out of the inner loop.

**Run directory**::

    run_dir/config.json          the config (config_to_dict), written when a run starts
    run_dir/metrics.jsonl        one JSON object per log line (see below)
    run_dir/checkpoints/<step>/  the last ``keep`` checkpoints, <step> = completed steps
    run_dir/best/<n>/            the checkpoint with the best validation value
                                 (n counts improvements, so no name is ever reused)

Checkpoints (what they hold, how a bad one is reported): :mod:`gsched.infra.checkpoint`.

**Metrics log.** A line ``{"step", "time" (Unix), "elapsed", <train metrics>, <validation>}``
(validation: ``"val"`` for a scalar result, ``"val/<name>"`` for each entry of a dict) is
written at every multiple of ``log_every``, at every validation and checkpoint step, at the
end, and when the loop is interrupted. Training metrics on a line are the means over the steps
since the previous line, so every step enters exactly one line; because every checkpoint step
also ends a line, resuming from step ``k`` (which drops the lines with ``step > k``, written by
a session that died after its last checkpoint) gives the same lines as an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import sys
import time
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import jax
import numpy as np
from jax.sharding import Mesh

from gsched.infra.checkpoint import (
    BEST_DIR,
    CHECKPOINT_DIR,
    Checkpointer,
    CheckpointError,
)
from gsched.infra.config import config_to_dict
from gsched.infra.distributed import replicate, shard_batch
from gsched.infra.progress import MetricsLog, Progress

State = TypeVar("State")

METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.json"


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _scalars(metrics: Mapping[str, Any], what: str) -> dict[str, float]:
    out = {}
    for name, value in metrics.items():
        if np.ndim(value) != 0:
            raise ValueError(f"{what} '{name}' must be a scalar, got shape {np.shape(value)}")
        out[str(name)] = float(value)
    return out


def _means(pending: list[Mapping[str, Any]]) -> dict[str, float]:
    """Per-name means of the metrics of several steps (one host transfer)."""
    pending = jax.device_get(pending)
    names = list(dict.fromkeys(name for m in pending for name in m))
    means = {}
    for name in names:
        values = [m[name] for m in pending if name in m]
        means.update(_scalars({name: np.mean(np.asarray(values, np.float64))}, "metric"))
    return means


def run_training(state: State, train_step: Callable[[State, Any], tuple[State, Mapping]],
                 make_batch: Callable[[int], Any], *, steps: int, run_dir: str | Path,
                 checkpoint_every: int, validate: Callable[[State], Any] | None = None,
                 validate_every: int | None = None, higher_is_better: bool = True,
                 best_key: str | None = None, resume: bool = False, overwrite: bool = False,
                 progress: bool | typing.TextIO = True, log_every: int | None = None,
                 keep: int = 3, config: Any = None, mesh: Mesh | None = None) -> State:
    """Trains ``state`` up to ``steps`` completed steps; returns the final state.

    * ``train_step(state, batch) -> (state, metrics)``: jitted by the caller; ``metrics`` is
      a dict of scalars. ``make_batch(step)`` must be a pure function of ``step`` (derive any
      randomness from ``(seed, step)``), which makes resuming exact.
    * ``validate(state)`` returns a scalar or a dict of scalars (then ``best_key`` names the
      entry that ranks checkpoints; it may be omitted for a one-entry dict); it must not
      depend on anything that changes between runs. It runs every ``validate_every`` steps
      (default ``checkpoint_every``) and at the end; a new best value (``higher_is_better``;
      NaN never is) is saved to ``run_dir/best``. Checkpoints record ``best_key``: resuming
      with another one says so and ranks the best afresh (values of different keys are not
      compared).
    * A checkpoint is written every ``checkpoint_every`` steps, at the end, and when the loop
      stops on an exception or ``KeyboardInterrupt`` (which is then re-raised); the last
      ``keep`` are kept.
    * ``resume=True`` restores the latest checkpoint of ``run_dir`` into ``state`` (used as
      the template) and continues from its step; without a checkpoint it raises
      :class:`CheckpointError` (it never silently starts afresh). ``resume=False`` refuses a
      run directory that holds a previous run unless ``overwrite=True``, which deletes that
      run's checkpoints, best checkpoint, metrics and config (nothing else in ``run_dir``).
    * ``progress``: ``True`` prints to stdout, a stream prints there, ``False`` is quiet.
      ``log_every`` (default ``max(1, steps // 100)``) spaces log lines (module docstring).
    * ``config`` (a dataclass) is stored in ``config.json`` and every checkpoint's metadata.
    * ``mesh``: replicate the state and shard every batch over it (:func:`shard_batch`); the
      steps and validations run under ``jax.set_mesh(mesh)`` (:mod:`gsched.infra.distributed`).
    """
    steps = _positive("steps", steps)
    checkpoint_every = _positive("checkpoint_every", checkpoint_every)
    validate_every = _positive("validate_every", checkpoint_every if validate_every is None
                               else validate_every)
    log_every = _positive("log_every", max(1, steps // 100) if log_every is None else log_every)
    run_dir = Path(run_dir).absolute()
    config_dict = config_to_dict(config) if config is not None else None
    owned = [run_dir / CHECKPOINT_DIR, run_dir / BEST_DIR, run_dir / METRICS_FILE,
             run_dir / CONFIG_FILE]
    previous = (run_dir / METRICS_FILE).exists() or any(
        p.name.isdigit() for d in owned[:2] if d.is_dir() for p in d.iterdir())
    if not resume and previous:
        if not overwrite:
            raise CheckpointError(f"{run_dir}: holds a previous run; pass resume=True to "
                                  f"continue it or overwrite=True to start afresh")
        for p in owned:
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
    run_dir.mkdir(parents=True, exist_ok=True)

    if mesh is not None:
        state = replicate(state, mesh)
    ckpt = Checkpointer(run_dir, keep=keep)
    try:
        start, best, elapsed = 0, None, 0.0
        if resume:
            if ckpt.latest_step() is None:
                raise CheckpointError(f"{run_dir}: resume=True but there is no checkpoint to "
                                      f"resume")
            state, meta = ckpt.restore(state)
            start, elapsed = meta["step"], meta["elapsed"]
            if meta["best_step"] is not None:
                best = (meta["best_value"], meta["best_step"])
                ranked_by = meta.get("best_key", best_key)  # older checkpoints: not recorded
                if ranked_by != best_key:
                    print(f"{run_dir}: the best checkpoint was ranked by {ranked_by!r}, this run "
                          f"ranks by {best_key!r}: the best is chosen afresh from the next "
                          f"validation on (until then {run_dir / BEST_DIR} keeps the old one)",
                          file=sys.stderr)
                    best = None
            if start > steps:
                raise ValueError(f"{run_dir}: the checkpoint is at step {start}, past "
                                 f"steps={steps}")
        if config_dict is not None:
            (run_dir / CONFIG_FILE).write_text(json.dumps(config_dict, indent=2) + "\n")
        log = MetricsLog(run_dir / METRICS_FILE, resume_step=start if resume else None)
        stream = sys.stdout if progress is True else (progress or None)
        bar = Progress(steps, start_step=start, elapsed=elapsed, stream=stream)
        with contextlib.nullcontext() if mesh is None else jax.set_mesh(mesh):
            state = _loop(state, train_step, make_batch, start, steps, ckpt, log, bar, best,
                          elapsed, checkpoint_every=checkpoint_every, validate=validate,
                          validate_every=validate_every, higher_is_better=higher_is_better,
                          best_key=best_key, log_every=log_every, config=config_dict,
                          mesh=mesh)
    finally:
        ckpt.close()
    return state


def _loop(state, train_step, make_batch, start, steps, ckpt, log, bar, best, elapsed, *,
          checkpoint_every, validate, validate_every, higher_is_better, best_key, log_every,
          config, mesh):
    """The body of :func:`run_training` once the run directory is set up."""
    t0 = time.perf_counter()
    step, saved, pending = start, start, []

    def metadata():
        return {"best_value": None if best is None else best[0],
                "best_step": None if best is None else best[1], "best_key": best_key,
                "elapsed": elapsed + time.perf_counter() - t0, "config": config}

    def write_line(extra):
        record = _means(pending)
        pending.clear()
        record.update(extra)
        log.write({"step": step, "time": time.time(),
                   "elapsed": elapsed + time.perf_counter() - t0, **record})
        return record

    try:
        while step < steps:
            batch = make_batch(step)
            if mesh is not None:
                batch = shard_batch(batch, mesh)
            state, metrics = train_step(state, batch)
            step += 1
            pending.append(metrics)
            val = {}
            if validate is not None and (step % validate_every == 0 or step == steps):
                val, value = _validation(validate(state), best_key)
                if not math.isnan(value) and (best is None or (
                        value > best[0] if higher_is_better else value < best[0])):
                    best = (value, step)
                    ckpt.save_best(step, state, metadata())
            to_save = step % checkpoint_every == 0 or step == steps
            if step % log_every == 0 or val or to_save:
                record = write_line(val)
                if step % log_every == 0 or val or step == steps:
                    bar.report(step, record, best)
            if to_save:
                ckpt.save(step, state, metadata())
                saved = step
    except BaseException:
        if step > saved:
            try:
                if pending:
                    write_line({})
                ckpt.save(step, state, metadata())
                print(f"training stopped; checkpoint saved at step {step}", file=sys.stderr)
            except Exception as err:                  # report, then raise the original error
                print(f"training stopped at step {step}; saving a checkpoint failed too: "
                      f"{type(err).__name__}: {err}", file=sys.stderr)
        raise
    return state


def _validation(result: Any, best_key: str | None) -> tuple[dict[str, float], float]:
    """The ``val/…`` log entries of a validation result and the value that ranks it."""
    if isinstance(result, Mapping):
        values = _scalars(result, "validation value")
        if best_key is None:
            if len(values) != 1:
                raise ValueError(f"validate returned {sorted(values)}; pass best_key to say "
                                 f"which one ranks checkpoints")
            best_key = next(iter(values))
        if best_key not in values:
            raise ValueError(f"best_key '{best_key}' is not among the validation values "
                             f"{sorted(values)}")
        return {f"val/{k}": v for k, v in values.items()}, values[best_key]
    value = _scalars({"val": result}, "validation value")["val"]
    return {"val": value}, value
