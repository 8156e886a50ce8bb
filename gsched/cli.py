"""Command-line interface (SPEC §6): ``python -m gsched COMMAND ...``.

Each command prints one JSON object on stdout and exits 0; bad input gives a one-line
``gsched: error: ...`` on stderr and exit status 2. A command is an entry of ``COMMANDS``:
``name → (help, add_arguments(parser), run(args) -> dict)``.

Commands:

* ``evaluate`` — decode and score one chromosome;
* ``optimize`` — run one optimizer (an entry of :data:`gsched.methods.METHODS`) with an exact
  budget of cost-model evaluations on one graph or a batch of graphs (all padded to one
  bucket, one jitted call);
* ``import`` — a JAX program (``--jax path/file.py:builder``, ``builder()`` returning
  ``(fn, args)``) or a compiled XLA module's text (``--hlo module.txt``) as a graph file
  (docs/importers.md);
* ``plot`` — memory over the schedule per device (several results overlaid) and the Gantt
  chart of an event-driven schedule, as a PNG (:mod:`gsched.plot`).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

from gsched import importers, methods
from gsched.core.graph import Graph, GraphError
from gsched.costmodel.host import evaluate_graph, validate_keys
from gsched.costmodel.params import OBJECTIVES, SCHEDULERS, check_cost_params
from gsched.formats import (
    FormatError,
    load_graph,
    load_graphs,
    save_graph,
    write_nodelink,
)
from gsched.harness.run import mesh_for


class UsageError(Exception):
    """Bad command line or input; reported on one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _load_graph(path: Path) -> Graph:
    try:
        return load_graph(path)
    except OSError as err:
        raise UsageError(f"cannot read graph file {path}: {err.strerror or err}") from None
    except (FormatError, GraphError) as err:
        raise UsageError(str(err)) from None


def _load_keys(path: Path, graph: Graph, num_devices: int, fusion: bool) -> np.ndarray:
    try:
        with open(path, "rb") as f:
            if f.read(len(np.lib.format.MAGIC_PREFIX)) != np.lib.format.MAGIC_PREFIX:
                raise UsageError(f"keys file {path} is not a .npy file")
            f.seek(0)
            keys = np.load(f, allow_pickle=False)
    except OSError as err:
        raise UsageError(f"cannot read keys file {path}: {err.strerror or err}") from None
    except (ValueError, EOFError) as err:
        raise UsageError(f"keys file {path} is not a valid .npy file: {err}") from None
    try:
        return validate_keys(keys, graph, num_devices, fusion)
    except ValueError as err:
        raise UsageError(f"keys file {path}: {err}") from None


def _add_cost_flags(parser: argparse.ArgumentParser) -> None:
    """The cost-model settings both commands take (SPEC §4, §8.1)."""
    parser.add_argument("--latency", type=float, default=0.0, help="transfer latency (default 0)")
    parser.add_argument("--bandwidth", type=float, default=float("inf"),
                        help="transfer bandwidth (default inf)")
    parser.add_argument("--capacity", type=float, default=None,
                        help="per-device memory capacity (default none)")
    parser.add_argument("--hbm-bandwidth", type=float, default=None,
                        help="SPEC §8.1 roofline: bytes per time unit a kernel moves (default "
                             "inf, or the --device-preset's)")
    parser.add_argument("--launch-overhead", type=float, default=None,
                        help="SPEC §8.1: time per kernel (default 0, or the --device-preset's)")
    parser.add_argument("--device-preset", choices=sorted(importers.PRESETS), default=None,
                        help="take --hbm-bandwidth and --launch-overhead from a device preset "
                             "(per microsecond, the importers' time unit; docs/importers.md)")
    parser.add_argument("--scheduler", choices=SCHEDULERS, default="list",
                        help="list (SPEC §2-§4, default) or the event-driven priority / fifo "
                             "schedulers of SPEC §8.2 (which also report start/end times)")
    parser.add_argument("--fusion", action="store_true",
                        help="SPEC §8.3 fusion: chromosomes carry N fusion keys (evaluate), "
                             "searches decide fusion too, heuristics fuse greedily (optimize)")
    parser.add_argument("--fusion-capacity", type=float, default=float("inf"),
                        help="SPEC §8.3: most bytes inside one fused group (default inf)")


def _cost_settings(args: argparse.Namespace) -> dict:
    """The validated cost settings of the command line as keyword arguments (a preset fills
    the roofline values not given explicitly)."""
    preset = importers.preset(args.device_preset) if args.device_preset else None
    hbm = args.hbm_bandwidth if args.hbm_bandwidth is not None else (
        preset.hbm_bandwidth if preset else float("inf"))
    overhead = args.launch_overhead if args.launch_overhead is not None else (
        preset.launch_overhead if preset else 0.0)
    settings = dict(latency=args.latency, bandwidth=args.bandwidth, capacity=args.capacity,
                    hbm_bandwidth=hbm, launch_overhead=overhead,
                    fusion_capacity=args.fusion_capacity)
    with np.errstate(over="ignore"):  # float32 overflow is reported by check_cost_params
        try:
            check_cost_params(**settings)
        except ValueError as err:
            raise UsageError(str(err)) from None
    return settings


def _add_evaluate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--graph", type=Path, required=True, help="graph file")
    parser.add_argument("--devices", type=_positive_int, required=True,
                        help="number of devices D")
    parser.add_argument("--keys", type=Path, required=True,
                        help=".npy chromosome of N·D + N + T·D keys in [0, 1] (+ N fusion keys "
                             "with --fusion)")
    _add_cost_flags(parser)


def _run_evaluate(args: argparse.Namespace) -> dict:
    settings = _cost_settings(args)
    with np.errstate(over="ignore"):  # float32 overflow is reported below
        graph = _load_graph(args.graph)
        keys = _load_keys(args.keys, graph, args.devices, args.fusion)
        try:
            result = evaluate_graph(graph, keys, args.devices, scheduler=args.scheduler,
                                    fusion=args.fusion, **settings)
        except ValueError as err:
            raise UsageError(f"{args.graph}: {err}") from None
    _require_finite(result, str(args.graph))
    return {"graph": str(args.graph), "num_devices": args.devices, "num_ops": graph.num_ops,
            "num_tensors": graph.num_tensors, **result}


def _require_finite(fields: dict, path: str) -> None:
    """Rejects results that overflowed the cost model's float32 range."""
    if not np.all(np.isfinite([fields["runtime"], *fields["device_peaks"]])):
        raise UsageError(f"{path}: runtime or peak memory overflows the cost model's float32 "
                         "range (sizes, costs, latency or 1/bandwidth too large)")


# --- optimize -----------------------------------------------------------------------------


def _method(text: str) -> str:
    try:
        methods.method(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not 0 <= value < 2 ** 32:
        raise argparse.ArgumentTypeError(f"must be in [0, 2**32), got {value}")
    return value


def _add_optimize(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--graph", type=Path, required=True, action="append",
                        help="graph file or folder of graph files (repeatable); several graphs "
                             "are optimized as one batch")
    parser.add_argument("--devices", type=_positive_int, required=True,
                        help="number of devices D")
    parser.add_argument("--method", type=_method, required=True,
                        help=f"optimizer: {', '.join(methods.METHODS)}")
    parser.add_argument("--evals", type=_positive_int, required=True,
                        help="budget K: cost-model evaluations per graph")
    parser.add_argument("--objective", choices=OBJECTIVES, default="peak_memory",
                        help="value to minimize (default peak_memory)")
    parser.add_argument("--seed", type=_seed, default=0, help="random seed (default 0)")
    _add_cost_flags(parser)
    # Method options, as the registry declares them (a method rejects options it does not take).
    for option, users in methods.options().values():
        parser.add_argument("--" + option.name.replace("_", "-"), type=option.type,
                            default=None, help=f"{option.help} [{', '.join(users)}]")


def _load_inputs(paths: list[Path]) -> list[tuple[str, Graph]]:
    try:
        return load_graphs(paths)
    except OSError as err:
        name = err.filename if err.filename is not None else "graph file"
        raise UsageError(f"cannot read graph file {name}: {err.strerror or err}") from None
    except (FormatError, GraphError) as err:
        raise UsageError(str(err)) from None


def _run_optimize(args: argparse.Namespace) -> dict:
    cost_params = check_cost_params(**_cost_settings(args))
    inputs = _load_inputs(args.graph)
    options = {name: getattr(args, name) for name in methods.options()
               if getattr(args, name) is not None}
    # A search's graphs, or one graph's chromosomes, split over the local devices (one per
    # core under `python -m gsched`): one schedule loop per device, the same results
    # (docs/harness.md, "Sharding")
    mesh = mesh_for() if methods.method(args.method).kind == "search" else None
    try:
        outcome = methods.optimize(
            args.method, [graph for _, graph in inputs], num_devices=args.devices,
            budget=args.evals, objective=args.objective, cost_params=cost_params,
            seed=args.seed, options=options, scheduler=args.scheduler, fusion=args.fusion,
            mesh=mesh)
    except (ValueError, TypeError) as err:
        raise UsageError(str(err)) from None
    results = [{"graph": path, "objective": args.objective, **row}
               for (path, _), row in zip(inputs, outcome.results)]
    for row in results:
        _require_finite(row, row["graph"])
    timing = {"wall_seconds": outcome.wall_seconds,
              "compile_seconds": outcome.compile_seconds,
              "shards": 1 if mesh is None else mesh.size}
    common = {"method": args.method, "objective": args.objective, "num_devices": args.devices,
              "scheduler": args.scheduler, "fusion_enabled": args.fusion}
    single = len(args.graph) == 1 and not args.graph[0].is_dir()
    if single:
        return {**common, **results[0], **timing}
    return {**common, "evals_per_graph": args.evals, **timing, "results": results}


# --- import -------------------------------------------------------------------------------


def _add_import(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--jax", metavar="FILE.py:BUILDER",
                        help="a Python file and a function in it returning (fn, args)")
    source.add_argument("--hlo", type=Path, metavar="MODULE.txt",
                        help="HLO text of a compiled module (compile().as_text() or a dump)")
    parser.add_argument("--level", choices=importers.LEVELS, default="jaxpr",
                        help="--jax only: one op per jaxpr equation (default) or per ENTRY "
                             "instruction of the compiled module")
    parser.add_argument("--backend", default=importers.BACKEND,
                        help="--jax --level hlo only: the platform XLA compiles for (default "
                             f"{importers.BACKEND}: the same graph on every machine; gpu, tpu, "
                             "or 'default' for JAX's default backend)")
    parser.add_argument("--device", default="v100",
                        help=f"device preset for compute costs: {', '.join(importers.PRESETS)} "
                             "(default v100)")
    parser.add_argument("--strict", action="store_true",
                        help="an unknown primitive/opcode is an error, not the generic fallback")
    parser.add_argument("--keep-dead", action="store_true",
                        help="--jax --level jaxpr only: keep the equations no output depends "
                             "on (dropped by default, as XLA does)")
    parser.add_argument("--out", type=Path, required=True,
                        help="graph file to write: .json (gsched node-link flavour) or .npz")


def _builder(spec: str):
    """``path/file.py:builder`` → the builder function (loaded as a fresh module)."""
    import importlib.util

    path, sep, attr = spec.rpartition(":")
    if not sep or not path or not attr:
        raise UsageError(f"--jax expects FILE.py:BUILDER, got {spec!r}")
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"--jax: no such file {file}")
    module_spec = importlib.util.spec_from_file_location(f"_gsched_import_{file.stem}", file)
    if module_spec is None or module_spec.loader is None:
        raise UsageError(f"--jax: cannot load {file} as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - any failure of the user's file is bad input
        raise UsageError(f"--jax: running {file} failed: {type(err).__name__}: {err}") from None
    builder = getattr(module, attr, None)
    if not callable(builder):
        raise UsageError(f"--jax: {file} has no function {attr!r}")
    try:
        built = builder()
    except Exception as err:  # noqa: BLE001 - any failure of the user's builder is bad input
        raise UsageError(f"--jax: {attr}() failed: {type(err).__name__}: {err}") from None
    if not (isinstance(built, tuple) and len(built) == 2 and callable(built[0])):
        raise UsageError(f"--jax: {attr}() must return (fn, args), got "
                         f"{type(built).__name__}")
    fn, args = built
    return fn, tuple(args) if isinstance(args, (tuple, list)) else (args,)


def _run_import(args: argparse.Namespace) -> dict:
    if args.out.suffix.lower() not in (".json", ".npz"):
        raise UsageError(f"--out must end in .json or .npz, got {args.out}")
    try:
        importers.preset(args.device)
    except ValueError as err:
        raise UsageError(str(err)) from None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", importers.FallbackWarning)
            if args.jax is not None:
                fn, fn_args = _builder(args.jax)
                source = args.jax
                if args.level != "hlo" and args.backend != importers.BACKEND:
                    raise UsageError("--backend applies to --level hlo only")
                if args.level != "jaxpr" and args.keep_dead:
                    raise UsageError("--keep-dead applies to --level jaxpr only")
                graph = importers.import_jax(
                    fn, *fn_args, level=args.level, device=args.device, strict=args.strict,
                    dce=not args.keep_dead, name=args.jax.rpartition(":")[2],
                    backend=None if args.backend == "default" else args.backend)
            else:
                if args.level != "jaxpr" or args.backend != importers.BACKEND \
                        or args.keep_dead:
                    raise UsageError("--level, --backend and --keep-dead apply to --jax only")
                source = str(args.hlo)
                try:
                    text = args.hlo.read_text()
                except (OSError, UnicodeDecodeError) as err:
                    raise UsageError(f"cannot read HLO file {args.hlo}: "
                                     f"{getattr(err, 'strerror', None) or err}") from None
                graph = importers.import_hlo_text(text, device=args.device,
                                                  strict=args.strict, name=args.hlo.stem)
    except importers.ImporterError as err:
        raise UsageError(str(err)) from None
    except GraphError as err:
        raise UsageError(f"{source}: imported graph is invalid: {err}") from None
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        if args.out.suffix.lower() == ".json":
            args.out.write_text(write_nodelink(graph, flavour="gsched"))
        else:
            save_graph(graph, args.out)
    except OSError as err:
        raise UsageError(f"cannot write {args.out}: {err.strerror or err}") from None
    fallback = [str(w.message) for w in caught
                if issubclass(w.category, importers.FallbackWarning)]
    level = "hlo" if args.hlo is not None else args.level
    return {"source": source, "level": level,
            "backend": args.backend if args.jax is not None and level == "hlo" else None,
            "dead_code": "kept" if args.keep_dead else "dropped",
            "device": importers.preset(args.device).name, "time_unit": importers.TIME_UNIT,
            "num_ops": graph.num_ops, "num_tensors": graph.num_tensors,
            "num_edges": graph.num_edges, "num_inputs": int(graph.is_input.sum()),
            "total_flops": float(graph.op_flops.sum()),
            "total_bytes": float(graph.tensor_size.sum()), "fallback": fallback,
            "out": str(args.out)}


# --- plot ---------------------------------------------------------------------------------


def _add_plot(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--graph", type=Path, required=True, help="graph file")
    parser.add_argument("--result", type=Path, required=True, action="append",
                        help="result JSON of evaluate or optimize (repeatable: overlaid)")
    parser.add_argument("--label", action="append", default=None,
                        help="legend label per --result (default: file names)")
    parser.add_argument("--devices", type=_positive_int, default=None,
                        help="number of devices D (default: from the results)")
    parser.add_argument("--kind", choices=("auto", "memory", "gantt"), default="auto",
                        help="memory over the schedule per device, a Gantt chart (results of "
                             "--scheduler priority/fifo), or auto: both when times exist")
    parser.add_argument("--out", type=Path, required=True, help="PNG file to write")


def _run_plot(args: argparse.Namespace) -> dict:
    from gsched import plot

    try:
        return plot.plot_command(args.graph, args.result, args.out, labels=args.label,
                                 num_devices=args.devices, kind=args.kind)
    except ImportError as err:
        raise UsageError(str(err)) from None
    except ValueError as err:
        raise UsageError(str(err)) from None


COMMANDS = {
    "evaluate": ("decode and score one chromosome", _add_evaluate, _run_evaluate),
    "optimize": ("search for a placement and schedule with a budget of cost-model evaluations",
                 _add_optimize, _run_optimize),
    "import": ("import a JAX program or a compiled XLA module (HLO text) as a graph file",
               _add_import, _run_import),
    "plot": ("draw memory over a schedule and its Gantt chart (PNG; the eval extra)",
             _add_plot, _run_plot),
}


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gsched", description="Placement and scheduling of computation graphs.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, add_arguments, _) in COMMANDS.items():
        add_arguments(commands.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs one command; returns the exit status (0, or 2 for bad input)."""
    try:
        args = _parser().parse_args(argv)
        result = COMMANDS[args.command][2](args)
    except UsageError as err:
        print("gsched: error: " + " ".join(str(err).split()), file=sys.stderr)
        return 2
    print(json.dumps(result, allow_nan=False))
    return 0
