"""Training infrastructure shared by the trainers (REGAL, Topoformer): configs in TOML files,
a progress line, a JSON-lines metrics log, orbax checkpoints, exact resume, data sharding.

**Configs.** :func:`load_config` reads a TOML file into a frozen dataclass (nested dataclasses
for tables), checking every key and type; ``overrides`` such as ``"optim.lr=3e-4"`` come from
the command line. :func:`config_to_dict` / :func:`config_from_dict` round-trip a config through
JSON (it is stored in every checkpoint, so a checkpoint rebuilds its own model).

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
``overwrite=True``, which starts the run directory afresh).

**Metrics log.** A line ``{"step", "time" (Unix), "elapsed", <train metrics>, <validation>}``
(validation: ``"val"`` for a scalar result, ``"val/<name>"`` for each entry of a dict) is
written at every multiple of ``log_every``, at every validation and checkpoint step, at the
end, and when the loop is interrupted. Training metrics on a line are the means over the steps
since the previous line, so every step enters exactly one line; because every checkpoint step
also ends a line, resuming from step ``k`` (which drops the lines with ``step > k``, written by
a session that died after its last checkpoint) gives the same lines as an uninterrupted run.

**Sharding.** :func:`data_mesh` is a 1-D mesh over the local devices (axis ``"data"``);
:func:`shard_batch` splits the leading batch axis over it and :func:`replicate` copies the
state to every device. Given a ``mesh``, :func:`run_training` does both, and the jitted
``train_step`` then runs data-parallel (XLA inserts the cross-device reductions).
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import sys
import time
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import tomllib

T = TypeVar("T")
State = TypeVar("State")

CHECKPOINT_DIR = "checkpoints"
BEST_DIR = "best"
METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.json"
DATA_AXIS = "data"
_FORMAT = 1


class ConfigError(ValueError):
    """A config file or override that does not fit the config dataclass (names key and source)."""


class CheckpointError(ValueError):
    """A checkpoint that is missing, unreadable, or does not match the template (names the path)."""


# --------------------------------------------------------------------------------------------
# Configs
# --------------------------------------------------------------------------------------------

def load_config(path: str | Path, cls: type[T], overrides: Sequence[str] = ()) -> T:
    """Reads the TOML file ``path`` into the frozen dataclass ``cls``.

    Tables fill nested dataclass fields; absent keys keep their defaults. ``overrides`` are
    ``"key=value"`` strings with dotted keys (``"optim.lr=3e-4"``); the value is read as a TOML
    value, or as plain text for a string field (``"name=run1"``). An unknown key, a value of
    the wrong type, a missing required key or invalid TOML raises :class:`ConfigError` naming
    the key and the file (or the override).
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config: {err}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: invalid TOML: {err}") from None
    for item in overrides:
        _apply_override(data, cls, item)
    return config_from_dict(cls, data, source=str(path))


def parse_run_arguments(prog: str, description: str, cls: type[T],
                        argv: Sequence[str] | None = None) -> tuple[Any, T, Path]:
    """The trainers' shared command line: ``--config FILE [--run-dir D] [--resume]
    [--overwrite] [key=value ...]``. Returns ``(args, config, run_dir)``, the run directory
    defaulting to ``runs/<config file stem>``; a bad config exits with status 2 naming the key."""
    import argparse
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, required=True, help="TOML config file")
    parser.add_argument("--run-dir", type=Path, default=None,
                        help="default: runs/<config file stem>")
    parser.add_argument("--resume", action="store_true", help="continue the run in --run-dir")
    parser.add_argument("--overwrite", action="store_true",
                        help="start afresh in a run directory that holds a previous run")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config, cls, args.overrides)
    except ConfigError as err:
        parser.exit(2, f"{prog}: error: {err}\n")
    return args, config, args.run_dir or Path("runs") / args.config.stem


def config_from_dict(cls: type[T], data: Mapping[str, Any], *, source: str = "config") -> T:
    """Builds the dataclass ``cls`` from a (nested) mapping, checking keys and types.

    Accepted values: ``bool``, ``int``, ``float`` (an int is accepted and converted), ``str``,
    ``Literal[...]``, ``X | None``, ``tuple[X, ...]`` / ``tuple[X, Y]`` / ``list[X]`` (from
    lists), ``dict[str, X]`` and nested dataclasses (from tables). Errors name ``source``.
    """
    return _convert(data, cls, "", source)


def config_to_dict(config: Any) -> dict[str, Any]:
    """A config dataclass as a JSON-ready dict (nested dataclasses → dicts, tuples → lists)."""
    if not (dataclasses.is_dataclass(config) and not isinstance(config, type)):
        raise TypeError(f"config_to_dict expects a dataclass instance, got {type(config).__name__}")
    return _to_plain(config)


def _to_plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_to_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _to_plain(v) for k, v in value.items()}
    return value


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _convert(value: Any, tp: Any, key: str, source: str) -> Any:
    """``value`` checked against the annotation ``tp`` (``key`` is the dotted name, for errors)."""
    where = f"{source}: key '{key}'" if key else source
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a table, got {type(value).__name__} {value!r}")
        hints = typing.get_type_hints(tp)
        fields = {f.name: f for f in dataclasses.fields(tp) if f.init}
        kwargs = {}
        for name, item in value.items():
            sub = f"{key}.{name}" if key else str(name)
            if name not in fields:
                raise ConfigError(f"{source}: unknown key '{sub}' (known keys: "
                                  f"{', '.join(sorted(fields))})")
            kwargs[name] = _convert(item, hints[name], sub, source)
        missing = [n for n, f in fields.items() if n not in kwargs
                   and f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING]
        if missing:
            names = ", ".join(f"'{key}.{n}'" if key else f"'{n}'" for n in missing)
            raise ConfigError(f"{source}: missing required key {names}")
        try:
            return tp(**kwargs)
        except (ValueError, TypeError) as err:
            raise ConfigError(f"{where}: {err}") from None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is not type(None):
                try:
                    return _convert(value, arg, key, source)
                except ConfigError:
                    pass
        raise ConfigError(f"{where}: expected {_type_name(tp)}, got "
                          f"{type(value).__name__} {value!r}")
    if origin is typing.Literal:
        if any(value == a and type(value) is type(a) for a in args):
            return value
        raise ConfigError(f"{where}: expected one of {list(args)}, got {value!r}")
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__} {value!r}")
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(args) != len(value):
                raise ConfigError(f"{where}: expected {len(args)} values, got {len(value)}")
            item_types = args
        else:
            item_types = [args[0] if args else Any] * len(value)
        items = [_convert(v, tp_i, f"{key}[{i}]", source)
                 for i, (v, tp_i) in enumerate(zip(value, item_types))]
        return origin(items)
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a table, got {type(value).__name__} {value!r}")
        val_tp = args[1] if args else Any
        return {str(k): _convert(v, val_tp, f"{key}.{k}", source) for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    else:
        raise TypeError(f"config field '{key}' has an unsupported annotation {tp!r}")
    raise ConfigError(f"{where}: expected {_type_name(tp)}, got {type(value).__name__} {value!r}")


def _apply_override(data: dict[str, Any], cls: type, item: str) -> None:
    """Sets the dotted key of ``"key=value"`` in ``data`` (a TOML dict for ``cls``), checked."""
    source = f"override '{item}'"
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"{source}: expected KEY=VALUE")
    names = key.split(".")
    tp, table = cls, data
    for depth, name in enumerate(names):
        if not (dataclasses.is_dataclass(tp) and isinstance(tp, type)):
            raise ConfigError(f"{source}: '{'.'.join(names[:depth])}' is not a table")
        fields = {f.name for f in dataclasses.fields(tp) if f.init}
        if name not in fields:
            raise ConfigError(f"{source}: unknown key '{'.'.join(names[:depth + 1])}' "
                              f"(known keys: {', '.join(sorted(fields))})")
        tp = typing.get_type_hints(tp)[name]
        if depth < len(names) - 1:
            table = table.setdefault(name, {})
            if not isinstance(table, dict):
                raise ConfigError(f"{source}: '{'.'.join(names[:depth + 1])}' is not a table")
    text = text.strip()
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text                                   # plain text, e.g. name=run1
    try:
        _convert(value, tp, key, source)
    except ConfigError:
        if value == text:
            raise
        try:                                           # e.g. name=3 for a str field
            _convert(text, tp, key, source)
            value = text
        except ConfigError:
            _convert(value, tp, key, source)           # re-raise the typed value's error
    table[names[-1]] = value


# --------------------------------------------------------------------------------------------
# Progress and metrics log
# --------------------------------------------------------------------------------------------

def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """One line per report: ``step s/total``, metrics, steps/s, elapsed, ETA, best validation.

    ``stream=None`` prints nothing (quiet, for tests). Steps/s is measured since the previous
    report (host wall time, so it includes validation and checkpoints); ``elapsed`` starts at
    ``elapsed`` (training time of earlier sessions).
    """

    def __init__(self, total: int, *, start_step: int = 0, elapsed: float = 0.0,
                 stream: typing.TextIO | None = sys.stdout):
        self.total, self.stream = total, stream
        self._step, self._time = start_step, time.perf_counter()
        self._elapsed = elapsed

    def report(self, step: int, metrics: Mapping[str, float],
               best: tuple[float, int] | None = None) -> str:
        """Formats (and prints, unless quiet) the line for ``step``; returns it."""
        now = time.perf_counter()
        rate = (step - self._step) / max(now - self._time, 1e-9)
        self._elapsed += now - self._time
        self._step, self._time = step, now
        parts = [f"step {step}/{self.total}"]
        parts += [f"{k} {v:.4g}" for k, v in metrics.items()]
        eta = (self.total - step) / rate if rate > 0 else math.inf
        parts += [f"{rate:.3g} steps/s", f"elapsed {_clock(self._elapsed)}",
                  f"ETA {_clock(eta) if math.isfinite(eta) else '?'}"]
        if best is not None:
            parts.append(f"best {best[0]:.4g} @ {best[1]}")
        line = " | ".join(parts)
        if self.stream is not None:
            print(line, file=self.stream, flush=True)
        return line


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The objects of a ``metrics.jsonl`` file, in order (a bad line → :class:`ValueError`)."""
    path = Path(path)
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}: line {number} is not JSON: {err}") from None
    return records


class MetricsLog:
    """Append-only JSON lines; ``resume_step=k`` first drops the lines with ``step > k``.

    A last line cut short by a crash is dropped too; any other unreadable line is an error.
    The file is rewritten (atomically) only when something is dropped.
    """

    def __init__(self, path: str | Path, *, resume_step: int | None = None):
        self.path = Path(path)
        if resume_step is not None and self.path.exists():
            lines = self.path.read_text(encoding="utf-8").splitlines(keepends=True)
            kept = []
            for number, line in enumerate(lines, 1):
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    if number == len(lines) and not line.endswith("\n"):
                        continue                       # cut short mid-write
                    raise ValueError(f"{self.path}: line {number} is not JSON") from None
                if not isinstance(record, dict) or not isinstance(record.get("step"), int):
                    raise ValueError(f"{self.path}: line {number} has no integer 'step'")
                if record["step"] <= resume_step:
                    kept.append(line)
            if kept != lines:
                tmp = self.path.with_name(self.path.name + ".tmp")
                tmp.write_text("".join(kept), encoding="utf-8")
                tmp.replace(self.path)

    def write(self, record: Mapping[str, Any]) -> None:
        """Appends one object (must contain ``step``) as one line and flushes it."""
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(dict(record)) + "\n")
            f.flush()


# --------------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# Sharding
# --------------------------------------------------------------------------------------------

def data_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A 1-D mesh with axis ``"data"`` over ``devices`` (default: all local devices)."""
    devices = jax.local_devices() if devices is None else list(devices)
    return Mesh(np.asarray(devices), (DATA_AXIS,))


def shard_batch(tree: T, mesh: Mesh) -> T:
    """Puts every array leaf of ``tree`` on ``mesh`` split along its leading (batch) axis.

    The batch size must be divisible by the number of devices on the mesh's ``"data"`` axis
    (:class:`ValueError` naming both otherwise). Non-array leaves are left as they are.
    """
    count = mesh.shape[DATA_AXIS]
    sharding = NamedSharding(mesh, PartitionSpec(DATA_AXIS))

    def put(x):
        if not eqx.is_array(x):
            return x
        if np.ndim(x) == 0:
            raise ValueError("shard_batch: a batch leaf is a scalar; every leaf needs a "
                             "leading batch axis")
        if x.shape[0] % count:
            raise ValueError(f"shard_batch: batch size {x.shape[0]} is not divisible by the "
                             f"{count} devices of mesh axis '{DATA_AXIS}'")
        return jax.device_put(x, sharding)

    return jax.tree.map(put, tree)


def replicate(tree: T, mesh: Mesh) -> T:
    """Every array leaf of ``tree`` copied to all devices of ``mesh`` (non-arrays unchanged)."""
    sharding = NamedSharding(mesh, PartitionSpec())
    return jax.tree.map(lambda x: jax.device_put(x, sharding) if eqx.is_array(x) else x, tree)


# --------------------------------------------------------------------------------------------
# The training loop
# --------------------------------------------------------------------------------------------

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
      NaN never is) is saved to ``run_dir/best``.
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
    * ``mesh``: replicate the state and shard every batch over it (:func:`shard_batch`).
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
            if start > steps:
                raise ValueError(f"{run_dir}: the checkpoint is at step {start}, past "
                                 f"steps={steps}")
        if config_dict is not None:
            (run_dir / CONFIG_FILE).write_text(json.dumps(config_dict, indent=2) + "\n")
        log = MetricsLog(run_dir / METRICS_FILE, resume_step=start if resume else None)
        stream = sys.stdout if progress is True else (progress or None)
        bar = Progress(steps, start_step=start, elapsed=elapsed, stream=stream)
        state = _loop(state, train_step, make_batch, start, steps, ckpt, log, bar, best,
                      elapsed, checkpoint_every=checkpoint_every, validate=validate,
                      validate_every=validate_every, higher_is_better=higher_is_better,
                      best_key=best_key, log_every=log_every, config=config_dict, mesh=mesh)
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
                "best_step": None if best is None else best[1],
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
