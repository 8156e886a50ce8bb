"""Command-line interface (SPEC §6): ``python -m gsched COMMAND ...``.

Each command prints one JSON object on stdout and exits 0; bad input gives a one-line
``gsched: error: ...`` on stderr and exit status 2. A command is an entry of ``COMMANDS``:
``name → (help, add_arguments(parser), run(args) -> dict)``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from gsched.cost_model import check_cost_params, evaluate_graph, validate_keys
from gsched.formats import FormatError, load_graph
from gsched.graph import Graph, GraphError


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


def _load_keys(path: Path, graph: Graph, num_devices: int) -> np.ndarray:
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
        return validate_keys(keys, graph, num_devices)
    except ValueError as err:
        raise UsageError(f"keys file {path}: {err}") from None


def _add_evaluate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--graph", type=Path, required=True, help="graph file")
    parser.add_argument("--devices", type=_positive_int, required=True,
                        help="number of devices D")
    parser.add_argument("--keys", type=Path, required=True,
                        help=".npy chromosome of N·D + N + T·D keys in [0, 1]")
    parser.add_argument("--latency", type=float, default=0.0, help="transfer latency (default 0)")
    parser.add_argument("--bandwidth", type=float, default=float("inf"),
                        help="transfer bandwidth (default inf)")
    parser.add_argument("--capacity", type=float, default=None,
                        help="per-device memory capacity (default none)")


def _run_evaluate(args: argparse.Namespace) -> dict:
    with np.errstate(over="ignore"):  # float32 overflow is reported below
        try:
            check_cost_params(args.latency, args.bandwidth, args.capacity)
        except ValueError as err:
            raise UsageError(str(err)) from None
        graph = _load_graph(args.graph)
        keys = _load_keys(args.keys, graph, args.devices)
        try:
            result = evaluate_graph(graph, keys, args.devices, latency=args.latency,
                                    bandwidth=args.bandwidth, capacity=args.capacity)
        except ValueError as err:
            raise UsageError(f"{args.graph}: {err}") from None
    if not np.all(np.isfinite([result["runtime"], *result["device_peaks"]])):
        raise UsageError("runtime or peak memory overflows the cost model's float32 range "
                         "(sizes, costs, latency or 1/bandwidth too large)")
    return {"graph": str(args.graph), "num_devices": args.devices, "num_ops": graph.num_ops,
            "num_tensors": graph.num_tensors, **result}


COMMANDS = {
    "evaluate": ("decode and score one chromosome", _add_evaluate, _run_evaluate),
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
