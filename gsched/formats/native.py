"""The native dataset format: many graphs in one ``.npz`` (no pickle).

Every :class:`~gsched.core.graph.Graph` array field is stored once for all graphs, concatenated,
with graph-local indices; ``op_offsets``, ``tensor_offsets`` and ``edge_offsets`` (``[G+1]``,
CSR style) say where each graph's ops, tensors and consumer relations start. Graph names, op
names, op types and op scopes are one UTF-8 JSON object in the uint8 array ``strings``. The
array ``format_version`` holds :data:`FORMAT_VERSION`.

Fields added after version 1 are optional, so older files still load: ``is_input`` (program
inputs; absent = all False), ``op_flops`` (absent = all 0) and the ``op_scopes`` strings
(absent = all ``""``).
"""

from __future__ import annotations

import json
import os
import zipfile
import zlib
from collections.abc import Sequence

import numpy as np

from gsched.core.graph import Graph, GraphError
from gsched.formats._common import FormatError

FORMAT_VERSION = 1

# field -> (stored dtype, group whose offsets index it)
_FIELDS = {
    "compute_cost": (np.float64, "op"),
    "temporary_memory": (np.float64, "op"),
    "op_ids": (np.int64, "op"),
    "tensor_producer": (np.int32, "tensor"),
    "tensor_size": (np.float64, "tensor"),
    "tensor_is_control": (np.bool_, "tensor"),
    "tensor_port": (np.int32, "tensor"),
    "edge_tensor": (np.int32, "edge"),
    "edge_consumer": (np.int32, "edge"),
    "is_input": (np.bool_, "op"),
    "op_flops": (np.float64, "op"),
}
# Absent in files written before these fields existed: all False / all 0.
_OPTIONAL = {"is_input": np.bool_, "op_flops": np.float64}
_LOADED_DTYPE = {np.int32: np.int64}
_GROUPS = {"op": "num_ops", "tensor": "num_tensors", "edge": "num_edges"}


def save_dataset(graphs: Sequence[Graph], path: str | os.PathLike) -> None:
    """Writes ``graphs`` to one ``.npz`` file at ``path`` (exactly that path)."""
    graphs = list(graphs)
    arrays = {f"{group}_offsets": np.cumsum([0] + [getattr(g, count) for g in graphs])
              for group, count in _GROUPS.items()}
    for field, (dtype, _) in _FIELDS.items():
        parts = [getattr(g, field) for g in graphs]
        arrays[field] = np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)
    strings = {"names": [g.name for g in graphs],
               "op_names": [s for g in graphs for s in g.op_names],
               "op_types": [s for g in graphs for s in g.op_types],
               "op_scopes": [s for g in graphs for s in g.op_scopes]}
    arrays["strings"] = np.frombuffer(json.dumps(strings).encode(), np.uint8)
    arrays["format_version"] = np.int64(FORMAT_VERSION)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def load_dataset(path: str | os.PathLike) -> list[Graph]:
    """Reads every graph of a file written by :func:`save_dataset`, validated.

    Raises :class:`FormatError` naming ``path`` if the file is corrupt, truncated, not a
    gsched dataset, of another format version, or holds an invalid graph.
    """
    with open(path, "rb") as f:
        if f.read(4) != b"PK\x03\x04":
            raise FormatError(f"{path}: not an .npz (zip) archive")
        f.seek(0)
        try:
            with np.load(f, allow_pickle=False) as npz:
                arrays = {key: npz[key] for key in npz.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as err:
            raise FormatError(f"{path}: corrupt or truncated .npz archive "
                              f"({type(err).__name__}: {err})") from None
    if "format_version" not in arrays:
        raise FormatError(f"{path}: not a gsched dataset (no 'format_version' array)")
    version = arrays["format_version"]
    if version.shape != () or version.dtype.kind not in "iu" or int(version) != FORMAT_VERSION:
        raise FormatError(f"{path}: format version {version.tolist()!r} is not supported "
                          f"(this gsched reads version {FORMAT_VERSION})")
    try:
        columns, offsets, strings = _unpack(arrays)
    except (KeyError, ValueError, TypeError) as err:
        raise FormatError(f"{path}: corrupt gsched dataset: {err}") from None
    graphs = []
    for i, name in enumerate(strings["names"]):
        span = {group: slice(o[i], o[i + 1]) for group, o in offsets.items()}
        try:
            graphs.append(Graph(
                **{field: columns[field][span[group]] for field, (_, group) in _FIELDS.items()},
                op_names=tuple(strings["op_names"][span["op"]]),
                op_types=tuple(strings["op_types"][span["op"]]),
                op_scopes=tuple(strings["op_scopes"][span["op"]]), name=name))
        except GraphError as err:
            raise FormatError(f"{path}: graph {i} ({name!r}): {err}") from err
    return graphs


def _unpack(arrays: dict) -> tuple[dict, dict, dict]:
    """Checks shapes and offsets; returns (columns, offset lists, strings)."""
    missing = sorted({*_FIELDS, *(f"{g}_offsets" for g in _GROUPS), "strings"} - set(arrays)
                     - set(_OPTIONAL))
    if missing:
        raise KeyError(f"missing arrays {missing}")
    for field, dtype in _OPTIONAL.items():
        if field not in arrays:
            arrays = {**arrays, field: np.zeros(arrays["compute_cost"].shape, dtype)}
    strings = json.loads(arrays["strings"].tobytes().decode())
    if "op_scopes" not in strings:
        strings["op_scopes"] = [""] * len(strings["op_names"])
    names = strings["names"]
    columns = {field: arrays[field].astype(_LOADED_DTYPE.get(dtype, dtype), casting="same_kind")
               for field, (dtype, _) in _FIELDS.items()}
    offsets = {}
    for group in _GROUPS:
        o = arrays[f"{group}_offsets"]
        lengths = {columns[f].shape for f, (_, g) in _FIELDS.items() if g == group}
        if group == "op":
            lengths |= {(len(strings["op_names"]),), (len(strings["op_types"]),),
                        (len(strings["op_scopes"]),)}
        if (o.shape != (len(names) + 1,) or o.dtype.kind not in "iu" or o[0] != 0
                or (np.diff(o) < 0).any() or lengths != {(int(o[-1]),)}):
            raise ValueError(f"inconsistent {group}_offsets")
        offsets[group] = o.tolist()
    return columns, offsets, strings
