"""Typed configs in TOML files: a frozen dataclass per config (nested dataclasses for tables).

:func:`load_config` reads a TOML file into the dataclass, checking every key and type;
``overrides`` such as ``"optim.lr=3e-4"`` come from the command line. :func:`config_to_dict` /
:func:`config_from_dict` round-trip a config through JSON (it is stored in every checkpoint, so
a checkpoint rebuilds its own model). :func:`parse_run_arguments` is the trainers' shared
command line.
"""

from __future__ import annotations

import dataclasses
import tomllib
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A config file or override that does not fit the config dataclass (names key and source)."""


def read_toml(path: str | Path) -> dict[str, Any]:
    """The tables of the TOML file ``path``, as written (no types checked); an unreadable file
    or invalid TOML raises :class:`ConfigError` naming the file."""
    path = Path(path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config: {err}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: invalid TOML: {err}") from None


def load_config(path: str | Path, cls: type[T], overrides: Sequence[str] = ()) -> T:
    """Reads the TOML file ``path`` into the frozen dataclass ``cls``.

    Tables fill nested dataclass fields; absent keys keep their defaults. ``overrides`` are
    ``"key=value"`` strings with dotted keys (``"optim.lr=3e-4"``); the value is read as a TOML
    value, or as plain text for a string field (``"name=run1"``). An unknown key, a value of
    the wrong type, a missing required key or invalid TOML raises :class:`ConfigError` naming
    the key and the file (or the override).
    """
    path = Path(path)
    data = read_toml(path)
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

