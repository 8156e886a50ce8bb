"""Import the workloads into graph files: ``python -m gsched.workloads build`` (and
``python -m gsched.workloads table DIR...``: the Markdown table of docs/workloads.md).

``build_graphs`` imports each selected program (name × size × mode) at each level with
:func:`gsched.importers.import_jax`, writes ``DIR/<name>_<size>_<mode>_<level>.json`` in the
gsched node-link flavour (``write_nodelink(graph, flavour="gsched")``, what
``python -m gsched import`` writes), prints a progress line per file to stderr and keeps
``DIR/index.json`` (op/tensor counts and seconds per file) up to date after every file, so an
interrupted run leaves a valid index of what it finished.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

from gsched import importers
from gsched.formats import write_nodelink
from gsched.workloads import MODES, SIZES, WORKLOADS, program

INDEX = "index.json"


def file_name(name: str, size: str, mode: str, level: str) -> str:
    return f"{name}_{size}_{mode}_{level}.json"


def _select(kind: str, values, allowed) -> tuple[str, ...]:
    values = tuple(values) if values is not None else tuple(allowed)
    bad = [v for v in values if v not in allowed]
    if bad or not values:
        raise ValueError(f"unknown {kind} {', '.join(map(repr, bad)) or '(none given)'}; "
                         f"expected one or more of {', '.join(allowed)}")
    return values


def _eta(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def build_graphs(out, names=None, sizes=("small",), modes=MODES, levels=("jaxpr",),
                 device: str = "v100", log=None) -> dict:
    """Imports every selected program at every level into ``out`` and returns the index
    (also written to ``out/index.json``): ``{"device", "time_unit", "files": [{"file",
    "name", "family", "size", "mode", "level", "num_ops", "num_tensors", "num_edges",
    "num_inputs", "total_flops", "build_seconds", "import_seconds", "fallback"}, ...]}``.
    ``build_seconds``: building the program (parameters, optimizer state) once per name ×
    size × mode; ``import_seconds``: ``import_jax`` at that level (tracing, and compiling for
    ``hlo``). ``names``: default all. ``log``: a text stream for progress lines (default
    stderr). Raises ``ValueError`` for an unknown name, size, mode, level or device."""
    names = _select("workload", names, tuple(WORKLOADS))
    sizes = _select("size", sizes, SIZES)
    modes = _select("mode", modes, MODES)
    levels = _select("level", levels, importers.LEVELS)
    device_name = importers.preset(device).name
    log = sys.stderr if log is None else log
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    index = {"device": device_name, "time_unit": importers.TIME_UNIT, "files": []}
    total = len(names) * len(sizes) * len(modes) * len(levels)
    done, spent, start = 0, 0.0, time.perf_counter()
    for name in names:
        for size in sizes:
            for mode in modes:
                t0 = time.perf_counter()
                fn, args = program(name, size, mode)
                build_seconds = time.perf_counter() - t0
                for level in levels:
                    t0 = time.perf_counter()
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always", importers.FallbackWarning)
                        graph = importers.import_jax(fn, *args, level=level, device=device,
                                                     name=f"{name}_{size}_{mode}_{level}")
                    import_seconds = time.perf_counter() - t0
                    path = out / file_name(name, size, mode, level)
                    path.write_text(write_nodelink(graph, flavour="gsched"))
                    index["files"].append({
                        "file": path.name, "name": name, "family": WORKLOADS[name].family,
                        "size": size, "mode": mode, "level": level,
                        "num_ops": graph.num_ops, "num_tensors": graph.num_tensors,
                        "num_edges": graph.num_edges, "num_inputs": int(graph.is_input.sum()),
                        "total_flops": float(graph.op_flops.sum()),
                        "build_seconds": round(build_seconds, 3),
                        "import_seconds": round(import_seconds, 3),
                        "fallback": sorted({str(w.message) for w in caught
                                            if issubclass(w.category,
                                                          importers.FallbackWarning)})})
                    (out / INDEX).write_text(json.dumps(index, indent=1) + "\n")
                    done += 1
                    spent = time.perf_counter() - start
                    eta = spent / done * (total - done)
                    print(f"[{done}/{total}] {name} {size} {mode} {level}: "
                          f"{graph.num_ops} ops, {graph.num_tensors} tensors, "
                          f"{import_seconds:.2f}s (build {build_seconds:.2f}s), "
                          f"ETA {_eta(eta)}", file=log, flush=True)
    return index


def markdown_table(indexes) -> str:
    """A Markdown table of one or more indexes (``index.json`` contents): one row per
    workload × size × mode, the op counts and import seconds at each level ("—" where a
    level was not built)."""
    rows: dict[tuple, dict] = {}
    for index in indexes:
        for entry in index["files"]:
            key = (entry["name"], entry["size"], entry["mode"])
            rows.setdefault(key, {})[entry["level"]] = entry
    names, order = list(WORKLOADS), {s: i for i, s in enumerate(SIZES)}

    def rank(key):
        name, size, mode = key
        return (names.index(name) if name in names else len(names), name,
                order.get(size, len(order)), MODES.index(mode) if mode in MODES else 2)

    def cell(levels, level, field, fmt):
        return fmt(levels[level][field]) if level in levels else "—"

    header = ("| workload | size | mode | ops (jaxpr) | ops (hlo) | inputs (jaxpr) "
              "| import s (jaxpr) | import s (hlo) |")
    lines = [header, "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for key in sorted(rows, key=rank):
        levels = rows[key]
        lines.append("| " + " | ".join([
            *key,
            cell(levels, "jaxpr", "num_ops", "{:,}".format),
            cell(levels, "hlo", "num_ops", "{:,}".format),
            cell(levels, "jaxpr", "num_inputs", "{:,}".format),
            cell(levels, "jaxpr", "import_seconds", "{:.2f}".format),
            cell(levels, "hlo", "import_seconds", "{:.2f}".format)]) + " |")
    return "\n".join(lines) + "\n"


def _list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gsched.workloads",
                                description="The papers' workloads as JAX programs.")
    commands = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    b = commands.add_parser("build", help="import the workloads into graph files",
                            description="Import each program at each level into "
                                        "DIR/<name>_<size>_<mode>_<level>.json and "
                                        "DIR/index.json.")
    b.add_argument("--out", type=Path, required=True, metavar="DIR")
    b.add_argument("--names", type=_list, default=None,
                   help=f"comma-separated workloads (default all: {','.join(WORKLOADS)})")
    b.add_argument("--sizes", type=_list, default=["small"],
                   help=f"comma-separated sizes of {','.join(SIZES)} (default small)")
    b.add_argument("--modes", type=_list, default=list(MODES),
                   help=f"comma-separated modes of {','.join(MODES)} (default both)")
    b.add_argument("--levels", type=_list, default=["jaxpr"],
                   help=f"comma-separated import levels of {','.join(importers.LEVELS)} "
                        "(default jaxpr)")
    b.add_argument("--device", default="v100",
                   help=f"device preset: {', '.join(importers.PRESETS)} (default v100)")
    t = commands.add_parser("table", help="print the Markdown table of built indexes",
                            description="Print a Markdown table (op counts and import "
                                        "seconds) of the index.json of each DIR.")
    t.add_argument("dirs", type=Path, nargs="+", metavar="DIR")
    return p


def main(argv: list[str] | None = None) -> int:
    """Runs the command; prints a one-line JSON summary. Exit status 2 for bad input."""
    p = parser()
    args = p.parse_args(argv)
    if args.command == "table":
        try:
            indexes = [json.loads((d / INDEX).read_text()) for d in args.dirs]
        except (OSError, ValueError) as err:
            p.exit(2, f"{p.prog}: error: cannot read an index: {err}\n")
        print(markdown_table(indexes), end="")
        return 0
    start = time.perf_counter()
    try:
        index = build_graphs(args.out, names=args.names, sizes=args.sizes, modes=args.modes,
                             levels=args.levels, device=args.device)
    except ValueError as err:
        p.exit(2, f"{p.prog}: error: {err}\n")
    print(json.dumps({"out": str(args.out), "index": str(args.out / INDEX),
                      "files": len(index["files"]),
                      "num_ops": sum(f["num_ops"] for f in index["files"]),
                      "seconds": round(time.perf_counter() - start, 3)}))
    return 0
