"""Orbax checkpoints of equinox/JAX states (the only module that imports orbax).

                                 (n counts improvements, so no name is ever reused)

A checkpoint is an orbax composite: ``state`` — the array leaves of the state
(``eqx.filter(state, eqx.is_array)``, flattened to a list; PRNG key arrays included), restored
into a *template* state that supplies everything else (static fields, functions, Python
scalars) — and ``meta``, JSON: ``step``, ``best_value``, ``best_step``, ``elapsed`` (training
seconds over all sessions), ``config``, and ``leaves`` (path, shape, dtype of every saved
leaf, checked against the template before anything is read). Saving is synchronous; orbax
writes into a temporary directory and renames it when complete, so a crash mid-save leaves
the previous checkpoints intact. A missing, truncated or corrupt checkpoint, or one whose
leaves do not match the template, raises :class:`CheckpointError` naming the path and the
problem; nothing is deleted or overwritten except by the ``keep`` rotation (and by
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

State = TypeVar("State")

CHECKPOINT_DIR = "checkpoints"
BEST_DIR = "best"
_FORMAT = 1


class CheckpointError(ValueError):
    """A checkpoint that is missing, unreadable, or does not match the template (names the path)."""


def _is_key(x: Any) -> bool:
    return isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _array_leaves(state: Any) -> tuple[list[Any], list[str]]:
    """The array leaves of ``state`` (``eqx.is_array``) and their paths, in tree order."""
    arrays = eqx.filter(state, eqx.is_array)
    with_paths = jax.tree_util.tree_flatten_with_path(arrays)[0]
    return [leaf for _, leaf in with_paths], [jax.tree_util.keystr(p) for p, _ in with_paths]


def _describe(leaves: Sequence[Any], paths: Sequence[str]) -> list[list[Any]]:
    return [[p, list(np.shape(x)), str(x.dtype)] for p, x in zip(paths, leaves)]


def save_checkpoint(path: str | Path, state: Any, metadata: Mapping[str, Any]) -> None:
    """Writes ``state``'s array leaves and the JSON ``metadata`` as a checkpoint at ``path``.

    ``path`` must not exist (a :class:`CheckpointError` otherwise). Used for one-off exports
    (e.g. a pretrained checkpoint); :class:`Checkpointer` manages a run's checkpoints.
    """
    path = Path(path).absolute()
    if path.exists():
        raise CheckpointError(f"{path}: already exists; not overwriting a checkpoint")
    with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as ckptr:
        ckptr.save(path, args=_save_args(state, metadata))


def _save_args(state: Any, metadata: Mapping[str, Any]) -> ocp.args.Composite:
    leaves, paths = _array_leaves(state)
    meta = {**metadata, "format": _FORMAT, "leaves": _describe(leaves, paths)}
    data = [jax.random.key_data(x) if _is_key(x) else x for x in leaves]
    return ocp.args.Composite(state=ocp.args.StandardSave(data), meta=ocp.args.JsonSave(meta))


def shipped_or_path(path: str | Path, shipped: Path) -> Path:
    """``path``, or ``shipped / path`` when ``path`` is a bare name that does not exist here
    but names a checkpoint in the folder ``shipped`` (a policy family's shipped checkpoints)."""
    path = Path(path)
    if not path.exists() and len(path.parts) == 1 and (shipped / path).is_dir():
        return shipped / path
    return path


def _resolve(path: Path) -> Path:
    """A checkpoint directory: ``path`` itself, the latest step of a checkpoint folder, or for a
    run directory its best checkpoint (the latest one when there is no best)."""
    if (path / "meta").is_dir() or (path / "state").is_dir():
        return path
    for folder in (path / BEST_DIR, path / CHECKPOINT_DIR, path):
        steps = sorted(int(p.name) for p in folder.glob("*") if p.name.isdigit() and p.is_dir())
        if steps:
            return folder / str(steps[-1])
    raise CheckpointError(f"{path}: no checkpoint found (expected a checkpoint directory, a "
                          f"folder of numbered checkpoints, or a run directory)")


def read_checkpoint_metadata(path: str | Path) -> dict[str, Any]:
    """The JSON metadata of a checkpoint (``path`` as in :func:`load_checkpoint`)."""
    path = _resolve(Path(path).absolute())
    if not ((path / "meta").is_dir() and (path / "state").is_dir()):
        raise CheckpointError(f"{path}: not a complete gsched checkpoint (it needs the "
                              f"folders state/ and meta/)")
    try:
        with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as ckptr:
            meta = ckptr.restore(path, args=ocp.args.Composite(
                meta=ocp.args.JsonRestore()))["meta"]
    except Exception as err:                           # orbax / OS / JSON errors vary
        raise CheckpointError(f"{path}: unreadable checkpoint metadata: "
                              f"{type(err).__name__}: {err}") from None
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT or "leaves" not in meta:
        raise CheckpointError(f"{path}: the metadata is not that of a gsched checkpoint "
                              f"(format {_FORMAT})")
    return meta


def load_checkpoint(path: str | Path, template: State) -> tuple[State, dict[str, Any]]:
    """Restores a checkpoint into ``template``; returns ``(state, metadata)``.

    ``path`` is a checkpoint directory, a folder of numbered checkpoints (the latest is used)
    or a run directory (its best checkpoint, else its latest). ``template`` is a state of the
    same structure (e.g. a freshly initialised model): its array leaves give shapes, dtypes
    and shardings, everything else is kept from it. Raises :class:`CheckpointError` (naming
    the path) if the checkpoint is incomplete, corrupt, or its leaves differ from the template.
    """
    path = _resolve(Path(path).absolute())
    meta = read_checkpoint_metadata(path)
    leaves, paths = _array_leaves(template)
    saved = meta["leaves"]
    if len(saved) != len(leaves):
        raise CheckpointError(f"{path}: checkpoint has {len(saved)} array leaves, the template "
                              f"{len(leaves)}")
    for (s_path, s_shape, s_dtype), t_path, t_leaf in zip(saved, paths, leaves):
        t_shape, t_dtype = list(np.shape(t_leaf)), str(t_leaf.dtype)
        if (s_path, s_shape, s_dtype) != (t_path, t_shape, t_dtype):
            raise CheckpointError(f"{path}: leaf {s_path} is {s_dtype}{s_shape} in the "
                                  f"checkpoint but the template has {t_path} "
                                  f"{t_dtype}{t_shape}")
    abstract = [_restore_target(x) for x in leaves]
    try:
        with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as ckptr:
            restored = ckptr.restore(path, args=ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract)))["state"]
    except Exception as err:                           # orbax / tensorstore errors vary
        raise CheckpointError(f"{path}: cannot restore the checkpoint's arrays: "
                              f"{type(err).__name__}: {err}") from None
    if len(restored) != len(leaves):
        raise CheckpointError(f"{path}: restored {len(restored)} arrays, expected {len(leaves)}")
    restored = [_like(r, t) for r, t in zip(restored, leaves)]
    arrays, static = eqx.partition(template, eqx.is_array)
    treedef = jax.tree_util.tree_structure(arrays)
    return eqx.combine(jax.tree_util.tree_unflatten(treedef, restored), static), meta


def _restore_target(leaf: Any) -> Any:
    """What orbax restores a template leaf into: committed device arrays (e.g. replicated on a
    mesh) straight onto their devices, anything else into host memory."""
    data = jax.random.key_data(leaf) if _is_key(leaf) else leaf
    if isinstance(leaf, jax.Array) and leaf.committed:
        return jax.ShapeDtypeStruct(data.shape, data.dtype, sharding=leaf.sharding)
    return np.empty(data.shape, data.dtype)


def _like(restored: Any, template: Any) -> Any:
    """A restored leaf placed exactly like its template leaf: NumPy stays NumPy; a device
    array gets the template's key type, weak type (orbax drops it; a weakly typed scalar is
    restored through a Python scalar) and placement (uncommitted stays uncommitted), so a
    jitted step sees the same input types as with a fresh state and does not recompile."""
    if isinstance(template, np.ndarray):
        return np.asarray(restored)
    if getattr(template, "weak_type", False) and template.ndim == 0:
        restored = jnp.asarray(np.asarray(restored).item())
    restored = jnp.asarray(restored)
    if _is_key(template):
        restored = jax.random.wrap_key_data(restored, impl=jax.random.key_impl(template))
    if template.committed:
        restored = jax.device_put(restored, template.sharding)
    return restored


class Checkpointer:
    """A run directory's rotating checkpoints (``keep`` latest) and its best checkpoint.

    ``save(step, state, metadata)`` writes ``checkpoints/<step>``; ``save_best`` writes the
    next ``best/<n>`` and rotates out the previous best once the new one is complete.
    """

    def __init__(self, run_dir: str | Path, *, keep: int = 3):
        if keep < 1:
            raise ValueError(f"keep must be ≥ 1, got {keep}")
        self.run_dir = Path(run_dir).absolute()
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True,
                                               enable_async_checkpointing=False)
        best_options = ocp.CheckpointManagerOptions(max_to_keep=1, create=True,
                                                    enable_async_checkpointing=False)
        self._manager = ocp.CheckpointManager(self.run_dir / CHECKPOINT_DIR, options=options)
        self._best = ocp.CheckpointManager(self.run_dir / BEST_DIR, options=best_options)

    def latest_step(self) -> int | None:
        """The step of the newest complete checkpoint, or ``None``."""
        return self._manager.latest_step()

    def save(self, step: int, state: Any, metadata: Mapping[str, Any]) -> None:
        """Checkpoints ``state`` after ``step`` completed steps (``metadata["step"] = step``)."""
        self._manager.save(step, args=_save_args(state, {**metadata, "step": step}), force=True)
        self._manager.wait_until_finished()

    def save_best(self, step: int, state: Any, metadata: Mapping[str, Any]) -> None:
        """Replaces the best checkpoint by ``state`` (after ``step`` steps)."""
        index = (self._best.latest_step() or 0) + 1
        self._best.save(index, args=_save_args(state, {**metadata, "step": step}), force=True)
        self._best.wait_until_finished()

    def restore(self, template: State, step: int | None = None) -> tuple[State, dict[str, Any]]:
        """Restores ``checkpoints/<step>`` (default: the latest) into ``template``."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise CheckpointError(f"{self.run_dir / CHECKPOINT_DIR}: no checkpoint to restore")
        return load_checkpoint(self.run_dir / CHECKPOINT_DIR / str(step), template)

    def close(self) -> None:
        self._manager.close()
        self._best.close()

