"""Graph files: CostGraphDef text (``.pbtxt``, ``.pbtx``, ``.txt``), networkx node-link JSON
(``.json``: the Checkmate, layered and gsched flavours) and the native dataset format
(``.npz``), chosen by extension.

A file with another extension is sniffed: a zip archive is native, text starting with ``{`` is
node-link JSON, anything else is tried as CostGraphDef text.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from gsched.core.graph import Graph, GraphError
from gsched.formats._common import FormatError
from gsched.formats.native import FORMAT_VERSION, load_dataset, save_dataset
from gsched.formats.nodelink import read_nodelink, write_nodelink
from gsched.formats.pbtxt import parse_text, read_pbtxt, write_pbtxt

__all__ = [
    "EXTENSIONS", "FORMAT_VERSION", "FormatError", "load_dataset", "load_graph", "load_graphs",
    "parse_text", "read_nodelink", "read_pbtxt", "save_dataset", "save_graph",
    "write_nodelink", "write_pbtxt",
]

EXTENSIONS = {".pbtxt": "pbtxt", ".pbtx": "pbtxt", ".txt": "pbtxt", ".json": "nodelink",
              ".npz": "native"}
_READERS = {"pbtxt": read_pbtxt, "nodelink": read_nodelink}
_DESCRIPTIONS = {"pbtxt": "CostGraphDef text", "nodelink": "node-link JSON"}


def _sniff(path: Path, data: bytes) -> str:
    if data.startswith(b"PK\x03\x04"):
        return "native"
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise FormatError(f"{path}: unknown extension {path.suffix!r} and the content is "
                          "neither an .npz archive nor UTF-8 text") from None
    return "nodelink" if text.lstrip().startswith("{") else "pbtxt"


def load_graph(path: str | os.PathLike) -> Graph:
    """Reads one graph, named after the file stem.

    Raises :class:`FormatError` naming ``path`` for an unreadable, malformed or invalid file
    (an invalid graph's message still names the offending op), or a native file that does
    not hold exactly one graph.
    """
    path = Path(path)
    data = path.read_bytes()
    kind = EXTENSIONS.get(path.suffix.lower())
    if not data.strip():
        raise FormatError(f"{path}: empty file")
    context = ""
    if kind is None:
        kind = _sniff(path, data)
        context = f"unknown extension {path.suffix!r}, read as {_DESCRIPTIONS.get(kind)}: "
    if kind == "native":
        graphs = load_dataset(path)
        if len(graphs) != 1:
            raise FormatError(f"{path}: holds {len(graphs)} graphs, expected exactly one "
                              "(use load_dataset)")
        return graphs[0].replace(name=path.stem)
    try:
        return _READERS[kind](data.decode(), name=path.stem)
    except UnicodeDecodeError as err:
        raise FormatError(f"{path}: not UTF-8 text ({err})") from None
    except (FormatError, GraphError) as err:
        raise FormatError(f"{path}: {context}{err}") from err


def save_graph(graph: Graph, path: str | os.PathLike) -> None:
    """Writes ``graph`` in the format of ``path``'s extension (``.npz``: a dataset of one;
    ``.json``: the Checkmate node-link flavour when it holds the graph exactly, else the
    gsched flavour, see :mod:`gsched.formats.nodelink`)."""
    path = Path(path)
    kind = EXTENSIONS.get(path.suffix.lower())
    if kind is None:
        raise FormatError(f"{path}: unknown extension {path.suffix!r} "
                          f"(known: {', '.join(EXTENSIONS)})")
    if kind == "native":
        save_dataset([graph], path)
    else:
        path.write_text(write_pbtxt(graph) if kind == "pbtxt"
                        else write_nodelink(graph, flavour="auto"))


def load_graphs(paths: str | os.PathLike | Iterable[str | os.PathLike]
                ) -> list[tuple[str, Graph]]:
    """``(path, graph)`` for each file, in input order; a folder stands for its files with a
    known extension, sorted by name (not recursive)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = []
    for path in map(Path, paths):
        if path.is_dir():
            files = sorted(p for p in path.iterdir()
                           if p.is_file() and p.suffix.lower() in EXTENSIONS)
            if not files:
                raise FormatError(f"{path}: folder holds no graph files "
                                  f"({', '.join(EXTENSIONS)})")
        else:
            files = [path]
        out += [(str(f), load_graph(f)) for f in files]
    return out
